"""What the GUI tests share: a fixed clock, a demo store, windows that are always closed, and waiting helpers.

The fixtures are made available to every test by tests/conftest.py; Qt is imported only when a GUI fixture runs,
so tests that never open a window do not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memlens import MemoryStore
from memlens.demo import generate

#: The clock every test window runs on (the demo store ends here).
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def gui_settings(tmp_path: Path) -> Any:
    """The app's preferences, in a file of the test's own."""
    from memlens.gui.qt import QtCore

    return QtCore.QSettings(str(tmp_path / "gui.ini"), QtCore.QSettings.Format.IniFormat)


@pytest.fixture
def demo_path(tmp_path: Path) -> Path:
    """A store holding the demo, ending at NOW."""
    path = tmp_path / "demo" / "memory.db"
    with MemoryStore.open(path, actor="demo") as store:
        generate(store, now=NOW, days=21, seed=7)
    return path


@pytest.fixture
def make_window(qtbot: Any, gui_settings: Any) -> Iterator[Callable[..., Any]]:
    """``make(path, *, clock, create, size)``: a shown MainWindow with ``path`` open and idle; every window made is
    closed after the test, and closing must stop every timer and thread it owns."""
    from memlens.gui.main_window import MainWindow

    windows: list[MainWindow] = []

    def make(
        path: Path | None, *, clock: Callable[[], datetime] = lambda: NOW, create: bool = False, size: tuple[int, int] | None = (1300, 800)
    ) -> MainWindow:
        window = MainWindow(gui_settings, clock=clock)
        qtbot.addWidget(window)
        if size is not None:
            window.resize(*size)
        window.show()
        windows.append(window)
        if path is not None:
            with qtbot.waitSignal(window.store_opened, timeout=15000):
                window.open_store(path, create=create)
            wait_idle(qtbot, window)
        return window

    yield make
    for window in windows:
        window.close()
        assert window.reader is None
        assert not window.tasks.is_busy()
        assert not window.scheduler.sweep_timer.isActive() and not window.live_timer.isActive()


def wait_idle(qtbot: Any, window: Any) -> None:
    """Until the window has nothing loading and no task running."""
    qtbot.waitUntil(window.is_idle, timeout=15000)


def select_view(qtbot: Any, window: Any, key: str) -> None:
    """Show a sidebar view and wait for it."""
    window.sidebar.select(key)
    wait_idle(qtbot, window)


def select_memory(qtbot: Any, window: Any, memory_id: int) -> None:
    """Select a memory's row and wait until the detail pane shows it."""
    row = window.model.row_of(memory_id)
    assert row >= 0, f"#{memory_id} is not in the table"
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == memory_id):
        window.table.selectRow(row)
    wait_idle(qtbot, window)
