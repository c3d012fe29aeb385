"""The sweep in the inspector: a running sweep shows its progress and can be cancelled, and the table marks what
the next sweep would forget, in agreement with the sweep preview."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens import sweep as sweep_engine
from memlens.gui.main_window import MainWindow
from memlens.gui.qt import QtCore

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)
WORDS = ("kestrel", "lantern", "harbour", "walnut", "glacier", "meadow", "copper", "saffron", "thistle", "orchard")


@pytest.fixture
def make_window(qtbot, tmp_path: Path) -> Iterator:
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    windows: list[MainWindow] = []

    def make(path: Path) -> MainWindow:
        window = MainWindow(settings, clock=lambda: NOW)
        qtbot.addWidget(window)
        window.resize(1300, 800)
        window.show()
        windows.append(window)
        with qtbot.waitSignal(window.store_opened, timeout=15000):
            window.open_store(path, create=False)
        qtbot.waitUntil(window.is_idle, timeout=15000)
        return window

    yield make
    for window in windows:
        window.close()
        assert window.reader is None and not window.tasks.is_busy()


@pytest.fixture
def expiring_path(tmp_path: Path) -> Path:
    """Ten facts whose TTL ran out a day before NOW, and two that stay."""
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        for word in WORDS:
            store.remember(f"The {word} deployment token is temporary", ttl_days=1, now=NOW - 2 * DAY)
        store.remember("The API lives at https://api.example.com", now=NOW - DAY)
        store.remember("The user prefers tabs over spaces", type="preference", now=NOW - DAY)
    return path


# --- D: progress and Cancel -----------------------------------------------------------------------------------


def test_a_running_sweep_shows_progress_and_can_be_cancelled(qtbot, make_window, expiring_path: Path, monkeypatch):
    monkeypatch.setattr(sweep_engine, "APPLY_BATCH", 2)
    clicked = threading.Event()
    real_apply = sweep_engine._apply_batch
    batches = []

    def apply_batch(*args):
        batches.append(args[3])
        if len(batches) == 2:
            assert clicked.wait(10)  # the person presses Cancel while this batch waits
        return real_apply(*args)

    monkeypatch.setattr(sweep_engine, "_apply_batch", apply_batch)
    window = make_window(expiring_path)
    with qtbot.waitSignal(window.sweep_finished, timeout=15000) as finished:
        window.act_sweep.trigger()
        assert window.sweep_progress.isVisible() and window.sweep_cancel.isVisible()
        qtbot.waitUntil(lambda: window.sweep_progress.value() == 2 and window.sweep_progress.maximum() == 10, timeout=10000)
        qtbot.mouseClick(window.sweep_cancel, QtCore.Qt.MouseButton.LeftButton)
        clicked.set()
    report = finished.args[0]
    assert report.stopped and report.total == 4  # the batch under way when Cancel was pressed was finished
    qtbot.waitUntil(window.is_idle, timeout=15000)
    assert not window.sweep_progress.isVisible() and not window.sweep_cancel.isVisible()
    assert "cancelled" in window.statusBar().currentMessage()
    with MemoryStore.open(expiring_path, create=False) as store:
        assert store.count_memories(include_expired=True, now=NOW) == 8
        assert store.audit(operation="sweep_run", limit=1)[0].details["stopped"] is True
    assert window.sidebar.count_text("semantic") == "2"
