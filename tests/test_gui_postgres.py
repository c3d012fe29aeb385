"""The app on a PostgreSQL store (issue 17): File > Connect, the password (asked for, never saved or shown), the
recent list, the title and status bar, the live view through LISTEN/NOTIFY, and a failed connection leaving the
open store as it was. The throwaway server trusts any password; the prompt is exercised by an open that refuses
URLs without the right one, as a server asking for a password does."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW, wait_idle

from memlens import MemoryStore
from memlens.errors import StoreEnvironmentError
from memlens.gui.connect_dialog import ConnectDialog, PasswordDialog, server_name, with_password
from memlens.gui.qt import QtWidgets
from memlens.postgres.connection import is_url

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")


def remember(location: str | Path, *contents: str) -> None:
    with MemoryStore.open(location, actor="agent") as store:
        for n, content in enumerate(contents):
            store.remember(content, now=NOW - timedelta(hours=len(contents) - n))


def shown_contents(window) -> list[str]:
    return [window.model.memory_at(r).content for r in range(window.model.rowCount())]


def connect_through_dialog(qtbot, window, url: str) -> None:
    window.act_connect.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, ConnectDialog))
    window.dialog.url_edit.setText(url)
    assert window.dialog.connect_button.isEnabled()
    with qtbot.waitSignal(window.store_opened, timeout=20000):
        window.dialog.connect_button.click()
    wait_idle(qtbot, window)


def test_connect_shows_the_memories_and_never_the_password(qtbot, make_window, pg_url, gui_settings, tmp_path):
    remember(pg_url, "The deploy key lives in the team vault", "Staging runs PostgreSQL 16")
    secret_url = with_password(pg_url, "secret")
    assert ":secret@" in secret_url
    window = make_window(None)
    connect_through_dialog(qtbot, window, secret_url)

    assert sorted(shown_contents(window)) == ["Staging runs PostgreSQL 16", "The deploy key lives in the team vault"]
    title = window.windowTitle()
    assert title == f"memlens — {server_name(pg_url)} (PostgreSQL)" and "secret" not in title
    assert window.status.store_label.text() == f"PostgreSQL · {urlsplit(pg_url).path.strip('/')}"
    assert pg_url in window.status.store_label.toolTip() and "secret" not in window.status.store_label.toolTip() and "secret" not in window.statusBar().currentMessage()
    assert window.path == pg_url  # the store's own name for itself: the URL without the password
    assert window.prefs.recent_files[0] == pg_url
    assert "secret" not in window.recent_menu.actions()[0].text()
    # What is written to disk: the settings file holds the URL, never the password.
    gui_settings.sync()
    saved = Path(gui_settings.fileName()).read_text()
    assert urlsplit(pg_url).path.strip("/") in saved and "secret" not in saved
    window.close()
    assert "secret" not in Path(gui_settings.fileName()).read_text()


def test_the_recent_list_reconnects(qtbot, make_window, pg_url, tmp_path):
    remember(pg_url, "Team memory on the server")
    file_store = tmp_path / "mine.db"
    remember(file_store, "My own memory in a file")
    window = make_window(file_store)
    assert window.windowTitle() == f"memlens — {file_store} (SQLite)"
    assert window.status.store_label.text() == "SQLite · mine.db"
    connect_through_dialog(qtbot, window, with_password(pg_url, "secret"))
    window.open_store(file_store, create=False)
    qtbot.waitUntil(lambda: window.path == file_store, timeout=20000)
    wait_idle(qtbot, window)
    assert window.prefs.recent_files[:2] == [str(file_store.resolve()), pg_url]

    with qtbot.waitSignal(window.store_opened, timeout=20000, check_params_cb=lambda p: p == pg_url):
        window.recent_menu.actions()[1].trigger()
    wait_idle(qtbot, window)
    assert shown_contents(window) == ["Team memory on the server"]
    # The Connect dialog offers the last server used, without its password.
    window.act_connect.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, ConnectDialog))
    assert window.dialog.url() == pg_url
    window.dialog.reject()


def test_a_server_that_wants_a_password_gets_one_from_the_prompt(qtbot, make_window, pg_url, gui_settings, monkeypatch):
    remember(pg_url, "Only for those who know the password")
    real_open = MemoryStore.open

    def open_like_a_server_with_passwords(location=None, **kwargs):
        if is_url(location) and urlsplit(location).password != "hunter2":
            said = "no password supplied" if urlsplit(location).password is None else 'password authentication failed for user "x"'
            raise StoreEnvironmentError(f"cannot connect to {location.split('@')[-1]}: connection failed: {said}")
        return real_open(location, **kwargs)

    monkeypatch.setattr(MemoryStore, "open", staticmethod(open_like_a_server_with_passwords))
    window = make_window(None)
    window.open_store(pg_url, create=False)
    qtbot.waitUntil(lambda: isinstance(window.dialog, PasswordDialog), timeout=20000)
    prompt = window.dialog
    assert prompt.password_edit.echoMode() == QtWidgets.QLineEdit.EchoMode.Password
    assert "asks for a password" in prompt.findChild(QtWidgets.QLabel, "passwordPrompt").text()
    prompt.password_edit.setText("wrong")
    prompt.accept()
    # Refused: asked again, saying so.
    qtbot.waitUntil(lambda: isinstance(window.dialog, PasswordDialog) and window.dialog is not prompt, timeout=20000)
    again = window.dialog
    assert "refused" in again.findChild(QtWidgets.QLabel, "passwordPrompt").text()
    again.password_edit.setText("hunter2")
    with qtbot.waitSignal(window.store_opened, timeout=20000):
        again.accept()
    wait_idle(qtbot, window)
    assert shown_contents(window) == ["Only for those who know the password"]
    assert window.path == pg_url and "hunter2" not in window.windowTitle()
    assert window.prefs.recent_files == [pg_url]
    gui_settings.sync()
    assert "hunter2" not in Path(gui_settings.fileName()).read_text()


def test_cancelling_the_password_prompt_keeps_the_open_store(qtbot, make_window, pg_url, tmp_path, monkeypatch):
    file_store = tmp_path / "mine.db"
    remember(file_store, "My own memory in a file")
    window = make_window(file_store)
    real_open = MemoryStore.open

    def wants_a_password(location=None, **kwargs):
        if is_url(location):
            raise StoreEnvironmentError("cannot connect: connection failed: fe_sendauth: no password supplied")
        return real_open(location, **kwargs)

    monkeypatch.setattr(MemoryStore, "open", staticmethod(wants_a_password))
    window.open_store(pg_url, create=False)
    qtbot.waitUntil(lambda: isinstance(window.dialog, PasswordDialog), timeout=20000)
    window.dialog.reject()
    wait_idle(qtbot, window)
    assert window.path == file_store and shown_contents(window) == ["My own memory in a file"]


def test_another_writer_appears_through_notify_without_polling(qtbot, make_window, pg_url):
    remember(pg_url, "The first memory")
    window = make_window(pg_url)
    assert shown_contents(window) == ["The first memory"]
    qtbot.waitUntil(window.live.is_listening, timeout=10000)
    assert not window.live_timer.isActive()  # nothing polls: the server says when it changed
    window.live_timer.setInterval(60 * 60 * 1000)

    with qtbot.waitSignal(window.refreshed, timeout=15000):
        remember(pg_url, "An agent on another machine learned this")
    qtbot.waitUntil(lambda: len(shown_contents(window)) == 2, timeout=15000)
    wait_idle(qtbot, window)
    assert "An agent on another machine learned this" in shown_contents(window)
    assert window.live_label.text().startswith("updated")
    assert not window.live_timer.isActive()

    # A burst of commits is one refresh, or a few, never one per commit.
    refreshes: list[None] = []
    window.refreshed.connect(lambda: refreshes.append(None))
    facts = [
        "The build cache is pruned every Sunday night",
        "Alice prefers tabs over spaces in Makefiles",
        "Invoices are exported as CSV on the first of the month",
        "The VPN certificate expires in October",
        "Grafana alerts page the on-call phone",
        "Rust toolchain is pinned to 1.78 in CI",
        "Bob owns the billing microservice",
        "Docker images are scanned by Trivy before release",
    ]
    with MemoryStore.open(pg_url, actor="agent") as store:
        for fact in facts:
            store.remember(fact, now=NOW)
    qtbot.waitUntil(lambda: len(shown_contents(window)) == 10, timeout=15000)
    wait_idle(qtbot, window)
    assert 1 <= len(refreshes) <= 5

    listener = window.live.listener
    window.close()
    assert window.live.listener is None and listener is not None and not listener.is_listening()


def test_a_lost_listener_falls_back_to_polling(qtbot, make_window, pg_url):
    import psycopg

    remember(pg_url, "Before the connection was lost")
    window = make_window(pg_url)
    qtbot.waitUntil(window.live.is_listening, timeout=10000)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'memlens-live'")
    qtbot.waitUntil(window.live_timer.isActive, timeout=10000)
    assert "polling" in window.live_label.text() and "cannot listen" in window.statusBar().currentMessage()
    window.live_timer.setInterval(100)
    remember(pg_url, "Seen by the poll")
    qtbot.waitUntil(lambda: "Seen by the poll" in shown_contents(window), timeout=15000)


@pytest.mark.parametrize("where", ["unreachable", "no such database"])
def test_a_failed_connection_says_why_and_keeps_the_open_store(qtbot, make_window, tmp_path, pg_url, where):
    file_store = tmp_path / "mine.db"
    remember(file_store, "My own memory in a file")
    window = make_window(file_store)
    title = window.windowTitle()
    window.act_connect.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, ConnectDialog))
    dialog = window.dialog
    # What is not a URL is not tried, and the dialog says why.
    for typed, why in (("db.example:5432/agents", "begins with postgresql://"), ("postgresql://team:secret@db.example:port/agents", "port")):
        dialog.url_edit.setText(typed)
        assert not dialog.connect_button.isEnabled() and why in dialog.problem.text()
    if where == "unreachable":
        url, said, named = "postgresql://nobody:secret@127.0.0.1:1/nothing", "cannot connect to postgresql://nobody@127.0.0.1:1/nothing", "nobody@127.0.0.1:1/nothing"
    else:
        url = with_password(pg_url.replace(urlsplit(pg_url).path, "/no_such_database"), "secret")
        said, named = 'database "no_such_database" does not exist', server_name(url)
    dialog.url_edit.setText(url)
    assert dialog.connect_button.isEnabled() and not dialog.problem.isVisible()
    with qtbot.waitSignal(window.error_shown, timeout=20000) as shown:
        dialog.connect_button.click()
    message = shown.args[0]
    assert said in message and "secret" not in message
    box = window.findChild(QtWidgets.QMessageBox, "errorMessage")
    assert box is not None and box.windowTitle() == f"Cannot connect to {named}"
    box.close()
    wait_idle(qtbot, window)
    assert window.path == file_store and window.windowTitle() == title
    assert shown_contents(window) == ["My own memory in a file"]
    assert window.prefs.recent_files == [str(file_store.resolve())]


def test_what_needs_a_file_does_something_sensible_on_a_server(qtbot, make_window, pg_url, monkeypatch):
    from memlens.gui import store_session, transfer

    remember(pg_url, "A team memory")
    window = make_window(pg_url)
    offered: list[str] = []
    monkeypatch.setattr(transfer, "choose_save_file", lambda _parent, _caption, start, _filter: offered.append(start) or "")
    monkeypatch.setattr(transfer, "choose_open_file", lambda _parent, _caption, start, _filter: offered.append(start) or "")
    monkeypatch.setattr(store_session, "choose_open_file", lambda _parent, _caption, start, _filter: offered.append(start) or "")
    window.act_export.trigger()
    window.act_import.trigger()
    window.act_open.trigger()
    folder = store_session.store_folder(None)
    assert offered == [str(folder / "memlens-export.jsonl"), str(folder), str(folder)]
    assert "never into the PostgreSQL database" in window.act_demo.toolTip()
