"""The inspector shows what is in the store: New Memory and Edit wired through the real window, and every view
current when it is shown (after another process writes, an import, a sweep or the strength clock), with the
selection and the scroll position kept."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.demo import generate
from memlens.gui.dialogs import EditDialog
from memlens.gui.main_window import MainWindow
from memlens.gui.memory_model import ID_ROLE
from memlens.gui.new_memory_dialog import NewMemoryDialog
from memlens.gui.qt import QtCore

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


@pytest.fixture
def make_window(qtbot, tmp_path: Path) -> Iterator:
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    windows: list[MainWindow] = []

    def make(path: Path, *, clock=lambda: NOW) -> MainWindow:
        window = MainWindow(settings, clock=clock)
        qtbot.addWidget(window)
        window.resize(1300, 800)
        window.show()
        windows.append(window)
        with qtbot.waitSignal(window.store_opened, timeout=15000):
            window.open_store(path, create=False)
        wait_idle(qtbot, window)
        return window

    yield make
    for window in windows:
        window.close()
        assert window.reader is None and not window.tasks.is_busy()


def wait_idle(qtbot, window: MainWindow) -> None:
    qtbot.waitUntil(window.is_idle, timeout=15000)


def select_view(qtbot, window: MainWindow, key: str) -> None:
    window.sidebar.select(key)
    wait_idle(qtbot, window)


def select_memory(qtbot, window: MainWindow, memory_id: int) -> None:
    row = window.model.row_of(memory_id)
    assert row >= 0, f"#{memory_id} is not in the table"
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == memory_id):
        window.table.selectRow(row)
    wait_idle(qtbot, window)


def table_ids(window: MainWindow) -> list[int]:
    return [window.model.index(r, 0).data(ID_ROLE) for r in range(window.model.rowCount())]


@pytest.fixture
def chain_path(tmp_path: Path) -> Path:
    """A shop-web chain about installing dependencies (two versions), the second with a TTL two days past NOW."""
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The shop-web project installs dependencies with yarn", project="shop-web", now=NOW - 9 * DAY)
        store.remember("The shop-web project installs dependencies with pnpm", project="shop-web", ttl_days=7, now=NOW - 5 * DAY)
    return path


# --- A: New Memory and Edit through the window -------------------------------------------------------------------


def test_save_as_new_version_from_the_window_joins_the_chain(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    window.act_new_memory.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, NewMemoryDialog))
    dialog = window.dialog
    assert isinstance(dialog, NewMemoryDialog)
    text = "The shop-web project installs its dependencies with bun workspaces"
    with qtbot.waitSignal(dialog.previewed, timeout=10000, check_params_cb=lambda p: p is not None):
        qtbot.keyClicks(dialog.text, text)
    preview = dialog.preview
    assert preview is not None and preview.action == "similar" and preview.target is not None
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        dialog.version_button.click()
    wait_idle(qtbot, window)
    with MemoryStore.open(chain_path) as store:
        latest = store.latest_of(preview.target.id)
        assert latest.content == text and latest.parent_id == preview.target.id and latest.project == "shop-web"


def test_edit_dialog_counts_ttl_days_from_the_windows_clock(qtbot, make_window, chain_path: Path):
    window = make_window(chain_path)
    select_view(qtbot, window, "semantic")
    with MemoryStore.open(chain_path) as store:
        memory = store.list_memories(now=NOW)[0]
    select_memory(qtbot, window, memory.id)
    assert "project" in window.act_edit.toolTip() and "TTL" in window.act_edit.toolTip()
    assert "project" in window.detail.edit_button.toolTip() and "TTL" in window.detail.edit_button.toolTip()
    window.act_edit.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, EditDialog))
    dialog = window.dialog
    assert isinstance(dialog, EditDialog)
    assert dialog.ttl.value() == pytest.approx(2.0)  # forget_after is NOW + 2 days on the window's clock
    assert dialog.changes() == {}
    dialog.reject()
