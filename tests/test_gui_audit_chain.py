"""The audit view shows whether the log's hash chain is intact (and where it was altered)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.gui.main_window import MainWindow
from memlens.gui.qt import QtCore

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def _open(qtbot, tmp_path: Path, path: Path) -> MainWindow:
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(window)
    window.resize(1200, 800)
    window.show()
    with qtbot.waitSignal(window.store_opened, timeout=15000):
        window.open_store(path)
    qtbot.waitUntil(window.is_idle, timeout=15000)
    return window


def test_the_audit_view_shows_an_intact_then_a_broken_chain(qtbot, tmp_path):
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        for i in range(5):
            store.remember(f"memory number {i} about the build", now=NOW)
    window = _open(qtbot, tmp_path, path)
    try:
        view = window.audit_view
        with qtbot.waitSignal(view.chain_checked, timeout=15000) as intact:
            window.sidebar.select("audit")
        assert intact.args[0].ok and "intact: 5 entries" in view.chain_state.text()

        raw = sqlite3.connect(path)  # someone edits the log behind memlens's back
        raw.execute("DROP TRIGGER audit_no_update")
        raw.execute("UPDATE audit SET actor = 'mallory' WHERE id = 3")
        raw.commit()
        raw.close()
        with qtbot.waitSignal(view.chain_checked, timeout=15000) as broken:
            view.verify_button.click()
        assert not broken.args[0].ok and broken.args[0].first_bad_id == 3
        assert "broken: entry 3 was altered" in view.chain_state.text()
    finally:
        window.close()
