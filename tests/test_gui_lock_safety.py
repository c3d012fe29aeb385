"""The inspector keeps its SQLite locks through file dialogs and its own tasks, so the live view never freezes on a
deleted WAL and its writes are never lost (the defect: a Pin, or File > Export opening on the store's folder,
dropped the reader's locks; another process then deleted the WAL under the app)."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from lock_probe import deleted_store_files, held_locks

from memlens import MemoryStore
from memlens.demo import generate
from memlens.gui.file_dialogs import make_file_dialog
from memlens.gui.main_window import MainWindow
from memlens.gui.qt import QtCore, QtWidgets

pytestmark = [
    pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)"),
    pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux /proc/locks"),
]

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def test_dialogs_and_a_pin_keep_the_locks_and_the_live_view(qtbot, tmp_path: Path) -> None:
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path, actor="demo") as store:
        generate(store, now=NOW, days=7, seed=3)
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(window)
    window.resize(1300, 800)
    window.show()
    try:
        with qtbot.waitSignal(window.store_opened, timeout=15000):
            window.open_store(path, create=False)
        qtbot.waitUntil(window.is_idle, timeout=15000)
        window.live_timer.setInterval(100)
        assert held_locks(path) > 0

        # The open and save dialogs, listing the store's own folder (store, -wal, -shm), icons and types included.
        for save in (False, True):
            dialog = make_file_dialog(window, "Export memories", str(path.parent), "All files (*)", save=save)
            dialog.show()
            model = dialog.findChild(QtWidgets.QFileSystemModel)
            assert model is not None
            qtbot.waitUntil(lambda m=model: m.rowCount(m.index(str(path.parent))) >= 2, timeout=10000)
            root = model.index(str(path.parent))
            for row in range(model.rowCount(root)):
                for column in range(model.columnCount(root)):
                    model.data(model.index(row, column, root), QtCore.Qt.ItemDataRole.DisplayRole)
                model.fileIcon(model.index(row, 0, root))
            qtbot.wait(300)  # the file-info gatherer thread works on its own; give it time to do its worst
            dialog.close()
            dialog.deleteLater()
        assert held_locks(path) > 0

        # A Pin: a write task that opens its own store in a pool thread.
        memory_id = window.model.memory_at(0).id
        window.table.selectRow(0)
        qtbot.waitUntil(lambda: window.detail.data is not None and window.detail.data.memory.id == memory_id, timeout=10000)
        with qtbot.waitSignal(window.write_finished, timeout=10000):
            window.detail.pin_button.click()
        qtbot.waitUntil(window.is_idle, timeout=15000)
        assert held_locks(path) > 0

        # Another process writes and exits; the app sees it and still holds the live WAL.
        rows_before = window.model.rowCount()
        subprocess.run(
            [sys.executable, "-m", "memlens", "--db", str(path), "remember", "The canary fleet runs in zone lapwing", "--now", NOW.isoformat(), "--yes"],
            check=True,
            capture_output=True,
        )
        qtbot.waitUntil(lambda: window.model.rowCount() == rows_before + 1, timeout=10000)
        assert deleted_store_files(path) == []
        assert held_locks(path) > 0

        # And a write of the app's own after that is in the file another process reads.
        with qtbot.waitSignal(window.write_finished, timeout=10000):
            window.detail.pin_button.click()
        qtbot.waitUntil(window.is_idle, timeout=15000)
        shown = subprocess.run(
            [sys.executable, "-m", "memlens", "--db", str(path), "show", str(memory_id), "--json"], check=True, capture_output=True, text=True
        ).stdout
        assert '"pinned": false' in shown
    finally:
        window.close()
