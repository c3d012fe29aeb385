"""Choosing a store: File > New Store, Open Store and Connect, and the Open Recent menu; how a store is named in
the title and the status bar. Opening itself is the window's :meth:`open_store` (the operations'
``OpHost.open_store``), which asks :func:`ask_password` when a server wants a password it was not given."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from memlens.config import StoreSettings, default_store_path
from memlens.errors import MemlensError
from memlens.gui.connect_dialog import (
    ConnectDialog,
    PasswordDialog,
    has_password,
    needs_password,
    server_name,
    url_problem,
    with_password,
    with_password_in_netloc,
)
from memlens.gui.file_dialogs import choose_open_file, choose_save_file
from memlens.gui.operations import OpHost, WindowHost
from memlens.gui.qt import QtWidgets
from memlens.gui.tasks import StoreTarget, TaskContext
from memlens.postgres.connection import is_url
from memlens.store import MemoryStore

STORE_FILTER = "memlens stores (*.db);;All files (*)"


def store_folder(location: Path | str | None) -> Path:
    """The folder file dialogs start in: the open store's, or, for none or a store on a server, the default
    store's."""
    return location.parent if isinstance(location, Path) else default_store_path().parent


def store_name(location: Path | str) -> str:
    """A store as a person names it: its file name, or ``user@host:port/database`` for one on a server."""
    return server_name(location) if isinstance(location, str) and is_url(location) else Path(location).name


def store_title(location: Path | str) -> str:
    """A store and its backend, for the window title: "/path/memory.db (SQLite)", "team@db:5432/agents
    (PostgreSQL)". Never a password."""
    return f"{server_name(location)} (PostgreSQL)" if isinstance(location, str) and is_url(location) else f"{location} (SQLite)"


def new_store_dialog(host: OpHost) -> None:
    """Choose where to create a store, then create and open it (an existing file is refused)."""
    name = choose_save_file(host.dialog_parent(), "New store", os.path.join(store_folder(host.path), "memory.db"), STORE_FILTER)
    if name:
        target = Path(name)
        if target.exists():
            host.show_error("Cannot create store", MemlensError(f"{target} already exists; use File > Open to open it."))
            return
        host.open_store(target, create=True)


def open_store_dialog(host: OpHost) -> None:
    """Choose an existing store and open it."""
    name = choose_open_file(host.dialog_parent(), "Open store", str(store_folder(host.path)), STORE_FILTER)
    if name:
        host.open_store(name, create=False)


def connect_dialog(host: OpHost, recent: list[str]) -> None:
    """File > Connect: ask for a PostgreSQL URL (offering the last one used from ``recent``), then open it; an
    empty database gets the memlens tables."""
    last = next((entry for entry in recent if is_url(entry)), "")
    dialog = ConnectDialog(last, host.dialog_parent())
    dialog.accepted.connect(lambda: host.open_store(dialog.url(), create=True))
    host.open_dialog(dialog)


def ask_password(host: OpHost, url: str, retry: Callable[[str], None]) -> None:
    """The server wants a password for ``url``: ask for it, then ``retry`` with the URL carrying it (kept in
    memory only). Cancelling leaves the open store as it was."""
    dialog = PasswordDialog(url, wrong=has_password(url), parent=host.dialog_parent())
    dialog.accepted.connect(lambda: retry(with_password(url, dialog.password())))
    host.open_dialog(dialog)


def start_opening(host: WindowHost, path: str | Path, *, create: bool, activate: Callable[[StoreTarget, StoreSettings], None]) -> None:
    """Open the store at ``path`` (a file, or a PostgreSQL URL) in the background, as every open is, then
    ``activate(target, settings)`` on the UI thread; on failure the open store stays and the person is told why.
    A server that wants a password it was not given gets one from :func:`ask_password`, and the open is tried again."""
    if isinstance(path, str) and is_url(path) and (problem := url_problem(path)):
        host.show_error("Cannot connect", MemlensError(problem))
        return
    target: StoreTarget = with_password_in_netloc(path) if isinstance(path, str) and is_url(path) else Path(path).expanduser()
    on_server = isinstance(target, str)

    def probe(store: MemoryStore, _ctx: TaskContext) -> StoreSettings:
        return store.settings

    def failed(error: BaseException) -> None:
        if isinstance(target, str) and needs_password(error):
            host.say(f"{store_name(target)} asks for a password", 5000)
            ask_password(host, target, lambda url: start_opening(host, url, create=create, activate=activate))
            return
        host.show_error(f"Cannot {'connect to' if on_server else 'open'} {store_name(target)}", error)

    host.say(f"Connecting to {store_name(target)}…" if on_server else f"Opening {target}…", 0)
    host.tasks.start("open", probe, on_done=lambda settings: activate(target, settings), on_error=failed, create=create, path=target)


def fill_recent(menu: QtWidgets.QMenu, recent: list[str], open_store: Callable[[str], None]) -> None:
    """List ``recent`` stores (files and PostgreSQL URLs, without passwords) in ``menu`` as "&1 path", … (disabled
    when there are none)."""
    menu.clear()
    for n, path in enumerate(recent, start=1):
        act = menu.addAction(f"&{n} " + path.replace("&", "&&"))  # a URL's "&" is not a mnemonic
        act.setObjectName(f"recentFile{n}")
        act.triggered.connect(lambda _c=False, p=path: open_store(p))
    menu.setEnabled(bool(recent))
