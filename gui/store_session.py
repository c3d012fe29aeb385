"""Choosing a store: File > New Store and Open Store, and the Open Recent menu. Opening itself is the window's
:meth:`open_store` (the operations' ``OpHost.open_store``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from memlens.config import default_store_path
from memlens.errors import MemlensError
from memlens.gui.file_dialogs import choose_open_file, choose_save_file
from memlens.gui.operations import OpHost
from memlens.gui.qt import QtWidgets

STORE_FILTER = "memlens stores (*.db);;All files (*)"


def _start_folder(current: Path | None) -> str:
    return str(current.parent if current else default_store_path().parent)


def new_store_dialog(host: OpHost) -> None:
    """Choose where to create a store, then create and open it (an existing file is refused)."""
    name = choose_save_file(host.dialog_parent(), "New store", os.path.join(_start_folder(host.path), "memory.db"), STORE_FILTER)
    if name:
        target = Path(name)
        if target.exists():
            host.show_error("Cannot create store", MemlensError(f"{target} already exists; use File > Open to open it."))
            return
        host.open_store(target, create=True)


def open_store_dialog(host: OpHost) -> None:
    """Choose an existing store and open it."""
    name = choose_open_file(host.dialog_parent(), "Open store", _start_folder(host.path), STORE_FILTER)
    if name:
        host.open_store(name, create=False)


def fill_recent(menu: QtWidgets.QMenu, recent: list[str], open_store: Callable[[str], None]) -> None:
    """List ``recent`` store paths in ``menu`` as "&1 path", … (disabled when there are none)."""
    menu.clear()
    for n, path in enumerate(recent, start=1):
        act = menu.addAction(f"&{n} {path}")
        act.setObjectName(f"recentFile{n}")
        act.triggered.connect(lambda _c=False, p=path: open_store(p))
    menu.setEnabled(bool(recent))
