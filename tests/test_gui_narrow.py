"""The memory table at 1024x700 (issue 11, point 3): the empty detail pane gives its width to the table, columns of
low priority are hidden rather than squeezed, and no header is cut mid-word."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.gui.columns import COLUMN_INDEX, COLUMNS
from memlens.gui.main_window import MainWindow
from memlens.gui.qt import QtCore

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
TOPICS = ("adoption agencies", "camping trip", "pottery class", "job interview", "marathon training", "new puppy")


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A store of a few hundred conversation turns across projects, layers and types, like a LoCoMo store."""
    path = tmp_path / "narrow" / "memory.db"
    records = [
        {
            "content": f"Turn {n}: Caroline told Melanie about the {TOPICS[n % len(TOPICS)]} and how it went this week.",
            "layer": ("episodic", "semantic")[n % 2],
            "type": ("message", "observation", "fact")[n % 3],
            "project": f"conv-{n % 7}",
            "ttl_days": 30 if n % 5 == 0 else None,
            "created_at": NOW - timedelta(hours=n),
        }
        for n in range(300)
    ]
    with MemoryStore.open(path) as store:
        store.remember_many(records, now=NOW)
    return path


@pytest.fixture
def window(qtbot, tmp_path: Path, store_path: Path) -> Iterator[MainWindow]:
    """The real window at 1024x700 over the store, searching "adoption agencies" in all memories."""
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    win = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(win)
    win.resize(1024, 700)
    win.show()
    with qtbot.waitSignal(win.store_opened, timeout=15000):
        win.open_store(store_path, create=False)
    qtbot.waitUntil(win.is_idle, timeout=15000)
    win.sidebar.select("all")
    win.search_box.setText("adoption agencies")
    win.apply_query()
    qtbot.waitUntil(lambda: win.is_idle() and win.model.rowCount() > 0, timeout=15000)
    yield win
    win.close()


def _shown(window: MainWindow) -> dict[str, int]:
    header = window.table.horizontalHeader()
    return {c.key: header.sectionSize(i) for i, c in enumerate(COLUMNS) if not header.isSectionHidden(i)}


def _assert_headers_whole(window: MainWindow) -> None:
    header = window.table.horizontalHeader()
    for key in _shown(window):
        i = COLUMN_INDEX[key]
        assert header.sectionSize(i) >= header.sectionSizeFromContents(i).width(), f"the {COLUMNS[i].header!r} header is cut"


def test_with_nothing_selected_the_detail_gives_the_text_its_room(window):
    assert not window.table.selectionModel().hasSelection()
    assert window.memory_splitter.sizes()[1] == 0
    widths = _shown(window)
    assert widths["title"] >= 300
    assert {"id", "title", "score"} <= widths.keys()
    _assert_headers_whole(window)
    assert window.table.horizontalScrollBar().maximum() == 0


def test_selecting_reopens_the_detail_and_low_priority_columns_give_way_whole(qtbot, window):
    shown_before = _shown(window)
    with qtbot.waitSignal(window.detail_shown, timeout=10000):
        window.table.selectRow(0)
    qtbot.waitUntil(window.is_idle, timeout=10000)
    assert window.memory_splitter.sizes()[1] >= window.detail.minimumWidth()
    widths = _shown(window)
    # Columns were hidden, lowest priority first, rather than squeezed under their headers.
    assert {"id", "title", "score"} <= widths.keys() and len(widths) < len(shown_before)
    kept = [COLUMNS[COLUMN_INDEX[k]].priority for k in widths if COLUMNS[COLUMN_INDEX[k]].priority is not None]
    gone = [COLUMNS[COLUMN_INDEX[k]].priority for k in shown_before if k not in widths]
    assert not kept or min(kept) >= max(gone)
    assert widths["title"] == max(widths.values())
    _assert_headers_whole(window)
    assert window.table.horizontalScrollBar().maximum() == 0
    # Nothing selected again: the detail collapses and the hidden columns come back.
    window.table.clearSelection()
    qtbot.waitUntil(lambda: window.memory_splitter.sizes()[1] == 0, timeout=5000)
    assert _shown(window).keys() == shown_before.keys()


def test_the_person_s_detail_width_and_columns_are_what_is_saved(qtbot, window):
    with qtbot.waitSignal(window.detail_shown, timeout=10000):
        window.table.selectRow(0)
    total = sum(window.memory_splitter.sizes())
    window.memory_splitter.moveSplitter(total - 360, 1)
    window.table.clearSelection()
    qtbot.waitUntil(lambda: window.memory_splitter.sizes()[1] == 0, timeout=5000)
    window.save_state()
    saved = QtCore.QSettings(window.settings.fileName(), QtCore.QSettings.Format.IniFormat)
    probe = MainWindow(saved, clock=lambda: NOW)
    qtbot.addWidget(probe)
    try:
        header = probe.table.horizontalHeader()
        # Columns hidden only for room are not saved as hidden by the person.
        assert not any(header.isSectionHidden(COLUMN_INDEX[k]) for k in ("layer", "type", "project", "expires"))
    finally:
        probe.close()
    # And the detail opens again at the width the person dragged it to.
    with qtbot.waitSignal(window.detail_shown, timeout=10000):
        window.table.selectRow(1)
    assert abs(window.memory_splitter.sizes()[1] - 360) <= 8
