"""The table models: Qt's model checks, lazy paging on a large store, in-place refresh that keeps the selection."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.demo import generate
from memlens.gui.audit_view import AuditFilter, AuditTableModel
from memlens.gui.memory_model import COLUMN_INDEX, ID_ROLE, STRENGTH_ROLE, MemoryQuery, MemoryTableModel
from memlens.gui.qt import QtCore, QtWidgets
from memlens.gui.sessions_view import SessionTableModel
from memlens.gui.tasks import StoreReader

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def demo_path(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    with MemoryStore.open(path, actor="demo") as store:
        generate(store, now=NOW, days=14, seed=3)
    return path


@pytest.fixture
def reader(qtbot, demo_path: Path) -> Iterator[StoreReader]:
    r = StoreReader(demo_path)
    yield r
    r.stop()


def loaded(qtbot, model) -> None:
    qtbot.waitUntil(lambda: not model.is_loading(), timeout=10000)


def test_memory_model_passes_the_model_tester(qtbot, qtmodeltester, reader):
    model = MemoryTableModel(reader, lambda: NOW)
    qtmodeltester.check(model)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_query(MemoryQuery(layer=None))
    assert model.rowCount() > 0
    qtmodeltester.check(model)
    # Search mode, in-memory sorts and refreshes stay consistent under the tester's watch.
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_query(MemoryQuery(layer=None, text="pnpm"))
    model.sort(COLUMN_INDEX["strength"], QtCore.Qt.SortOrder.DescendingOrder)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.refresh()
    qtmodeltester.check(model)


def test_audit_and_session_models_pass_the_model_tester(qtbot, qtmodeltester, reader):
    audit = AuditTableModel(reader)
    with qtbot.waitSignal(audit.loaded, timeout=10000):
        audit.set_filter(AuditFilter())
    assert audit.rowCount() > 0
    qtmodeltester.check(audit)
    with qtbot.waitSignal(audit.loaded, timeout=10000):
        audit.set_filter(AuditFilter(operation="forget"))
    assert all(audit.entry_at(r).operation == "forget" for r in range(audit.rowCount()))
    qtmodeltester.check(audit)

    sessions = SessionTableModel(reader)
    with qtbot.waitSignal(sessions.loaded, timeout=10000):
        sessions.set_project(None)
    assert sessions.rowCount() > 0
    qtmodeltester.check(sessions)


@pytest.fixture(scope="module")
def big_path(tmp_path_factory) -> Path:
    """A store with 60,000 working memories (enough for many pages; the README's timing is for a million)."""
    path = tmp_path_factory.mktemp("big") / "big.db"
    start = NOW - timedelta(days=60)
    with MemoryStore.open(path) as store:
        store.remember_many(
            (
                {"content": f"Bash: make target-{i} -> ok {i % 97}", "type": "observation", "layer": "working", "project": f"p{i % 5}",
                 "created_at": start + timedelta(seconds=60 * i)}
                for i in range(60_000)
            ),
            batch_size=10_000,
        )
    return path


def test_large_store_counts_every_row_and_loads_only_the_first_block(qtbot, qtmodeltester, big_path):
    reader = StoreReader(big_path)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        counted: list[int] = []
        model.counted.connect(counted.append)
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.set_query(MemoryQuery(layer="working"))
        # The row count is the true total, the scrollbar is real, and only the first block's contents are read.
        assert model.rowCount() == 60_000 and counted == [60_000] and model.total == 60_000
        assert not model.canFetchMore(QtCore.QModelIndex())
        assert model.loaded_row_count() == model.BLOCK and model.cached_blocks() == [0]
        assert model.memory_at(0).content.startswith("Bash: make target-59999")
        assert model.memory_at(model.BLOCK) is None
        # An unloaded row shows a placeholder and asks for its block; its id is known without loading it.
        last = model.index(59_999, COLUMN_INDEX["title"])
        assert last.data(ID_ROLE) is not None
        assert last.data() == "…"
        with qtbot.waitSignal(model.dataChanged, timeout=10000) as changed:
            pass
        first, bottom = changed.args[0], changed.args[1]
        assert first.row() <= 59_999 <= bottom.row()
        assert model.memory_at(59_999).content.startswith("Bash: make target-0 ")
        assert model.cached_blocks() == [0, 59_999 // model.BLOCK]
        # Sorting by a stored column asks the store for the id list in that order.
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.sort(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.AscendingOrder)
        assert model.memory_at(0).content.startswith("Bash: make target-0 ")
        assert model.rowCount() == 60_000
        qtmodeltester.check(model)
    finally:
        reader.stop()


def test_scrolling_to_the_end_loads_only_the_blocks_in_view(qtbot, big_path):
    reader = StoreReader(big_path)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        view = QtWidgets.QTableView()
        qtbot.addWidget(view)
        view.setModel(model)
        view.resize(600, 400)
        view.show()
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.set_query(MemoryQuery(layer="working"))
        view.scrollToBottom()
        last = model.rowCount() - 1
        qtbot.waitUntil(lambda: (view.viewport().repaint(), model.is_row_loaded(last))[1], timeout=10000)
        qtbot.waitUntil(lambda: not model.is_loading(), timeout=10000)
        assert model.index(last, COLUMN_INDEX["title"]).data().startswith("Bash: make target-0 ")
        blocks = set(model.cached_blocks())
        top = view.rowAt(0)
        assert blocks - {0} <= {top // model.BLOCK, last // model.BLOCK}
        assert model.loaded_row_count() <= 3 * model.BLOCK
    finally:
        reader.stop()


def test_the_block_cache_stays_bounded(qtbot, big_path):
    reader = StoreReader(big_path)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        model.MAX_BLOCKS = 3
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.set_query(MemoryQuery(layer="working"))
        for block in range(10, 20):
            row = block * model.BLOCK + 7
            assert model.index(row, COLUMN_INDEX["title"]).data() == "…"
            qtbot.waitUntil(lambda row=row: model.is_row_loaded(row), timeout=10000)
            assert len(model.cached_blocks()) <= 3
            assert model.loaded_row_count() <= 3 * model.BLOCK
        assert model.cached_blocks() == [17, 18, 19]
        # A block dropped from the cache is a placeholder again and is read again when painted.
        row = 10 * model.BLOCK
        assert model.memory_at(row) is None and model.index(row, COLUMN_INDEX["title"]).data() == "…"
        qtbot.waitUntil(lambda: model.is_row_loaded(row), timeout=10000)
        assert model.memory_at(row).id == model.index(row, 0).data(ID_ROLE)
    finally:
        reader.stop()


def test_refresh_of_a_block_loaded_list_keeps_selection_and_positions(qtbot, qtmodeltester, reader, demo_path):
    model = MemoryTableModel(reader, lambda: NOW)
    model.SMALL, model.BLOCK = 20, 16  # the demo's working layer then pages in blocks like a large store
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_query(MemoryQuery(layer="working"))
    total = model.rowCount()
    assert total > model.SMALL and model.loaded_row_count() == model.BLOCK
    selection = QtCore.QItemSelectionModel(model)
    chosen = [model.index(r, 0) for r in (40, 41, 90)]
    chosen_ids = [i.data(ID_ROLE) for i in chosen]
    for index in chosen:
        selection.select(index, QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows)
    selection.setCurrentIndex(chosen[2], QtCore.QItemSelectionModel.SelectionFlag.NoUpdate)
    before = list(model.ids())
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    # Nothing changed: every row keeps its position.
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.refresh()
    assert list(model.ids()) == before and not resets
    with MemoryStore.open(demo_path) as store:
        gone = model.index(70, 0).data(ID_ROLE)
        store.forget(gone, now=NOW)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.refresh()
    assert not resets
    assert model.rowCount() == total - 1 and model.row_of(gone) == -1
    assert list(model.ids()) == [i for i in before if i != gone]
    assert [i.data(ID_ROLE) for i in selection.selectedRows()] == chosen_ids
    assert selection.currentIndex().data(ID_ROLE) == chosen_ids[2] and selection.currentIndex().row() == 89
    qtmodeltester.check(model)


def test_refresh_merges_in_place_and_keeps_the_selection(qtbot, reader, demo_path):
    model = MemoryTableModel(reader, lambda: NOW)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_query(MemoryQuery(layer="semantic"))
    selection = QtCore.QItemSelectionModel(model)
    chosen = model.index(4, 0)
    chosen_id = chosen.data(ID_ROLE)
    selection.setCurrentIndex(chosen, QtCore.QItemSelectionModel.SelectionFlag.ClearAndSelect | QtCore.QItemSelectionModel.SelectionFlag.Rows)
    resets: list[bool] = []
    model.modelReset.connect(lambda: resets.append(True))
    with MemoryStore.open(demo_path) as store:
        newer = store.remember("A brand new fact about the staging cluster in eu-west-3", now=NOW)
        gone = model.index(1, 0).data(ID_ROLE)
        store.forget(gone, now=NOW)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.refresh()
    assert not resets
    assert model.row_of(newer.id) == 0 and model.row_of(gone) == -1
    current = selection.currentIndex()
    assert current.isValid() and current.data(ID_ROLE) == chosen_id
    assert [i.data(ID_ROLE) for i in selection.selectedRows()] == [chosen_id]


def test_strength_sort_is_exact_over_loaded_rows(qtbot, reader):
    model = MemoryTableModel(reader, lambda: NOW)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_query(MemoryQuery(layer="semantic"))
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.sort(COLUMN_INDEX["strength"], QtCore.Qt.SortOrder.DescendingOrder)
    assert model.query.order_by == "last_accessed_at"
    values = [model.index(r, 0).data(STRENGTH_ROLE) for r in range(model.rowCount())]
    assert values == sorted(values, reverse=True)


def test_a_failed_page_is_reported_not_raised(qtbot, tmp_path):
    missing = tmp_path / "nope.db"
    reader = StoreReader(missing)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        with qtbot.waitSignal(model.load_failed, timeout=10000) as blocker:
            model.set_query(MemoryQuery())
        assert "does not exist" in blocker.args[0]
        assert model.rowCount() == 0 and not model.canFetchMore(QtCore.QModelIndex())
    finally:
        reader.stop()


def test_list_ids_matches_list_memories_and_sorts_large_lists_in_the_store(qtbot, big_path, demo_path):
    with MemoryStore.open(demo_path) as store:
        for order in ("created_at", "title", "last_accessed_at", "importance"):
            for descending in (True, False):
                page = store.list_memories(order_by=order, descending=descending, limit=1000, now=NOW)
                assert store.list_ids(order_by=order, descending=descending, now=NOW) == [m.id for m in page]
        by_tags = store.get_many(store.list_ids(order_by="tags", descending=False, now=NOW))
        joined = [", ".join(sorted(m.tags)) for m in by_tags]
        assert joined == sorted(joined)
        by_layer = store.get_many(store.list_ids(order_by="layer", descending=True, now=NOW))
        assert [m.layer for m in by_layer] == sorted((m.layer for m in by_layer), reverse=True)
    reader = StoreReader(big_path)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.set_query(MemoryQuery(layer="working"))
        # Too many to load whole: strength is ordered by last use in the store (the clock strength decays on).
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.sort(COLUMN_INDEX["strength"], QtCore.Qt.SortOrder.DescendingOrder)
        assert model.query.order_by == "last_accessed_at" and model.rowCount() == 60_000
        assert model.memory_at(0).content.startswith("Bash: make target-59999")
        # Selected ranges map to ids without touching row contents.
        assert model.ids_in_rows([(5, 7), (0, 1), (6, 9)]) == list(model.ids()[:2]) + list(model.ids()[5:10])
    finally:
        reader.stop()
