"""The table models: Qt's model checks, lazy paging on a large store, in-place refresh that keeps the selection."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from core import MemoryStore
from core.demo import generate
from gui.audit_view import AuditFilter, AuditTableModel
from gui.memory_model import COLUMN_INDEX, ID_ROLE, STRENGTH_ROLE, MemoryQuery, MemoryTableModel
from gui.qt import QtCore
from gui.sessions_view import SessionTableModel
from gui.tasks import StoreReader

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


def test_large_store_loads_one_page_at_a_time(qtbot, qtmodeltester, big_path):
    reader = StoreReader(big_path)
    try:
        model = MemoryTableModel(reader, lambda: NOW)
        counted: list[int] = []
        model.counted.connect(counted.append)
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.set_query(MemoryQuery(layer="working"))
        assert model.rowCount() == model.PAGE
        assert model.canFetchMore(QtCore.QModelIndex())
        newest = model.memory_at(0)
        assert newest.content.startswith("Bash: make target-59999")
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.fetchMore(QtCore.QModelIndex())
        assert model.rowCount() == 2 * model.PAGE
        qtbot.waitUntil(lambda: counted == [60_000], timeout=10000)
        # Sorting by a stored column asks the store for the right first page.
        with qtbot.waitSignal(model.loaded, timeout=10000):
            model.sort(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.AscendingOrder)
        assert model.memory_at(0).content.startswith("Bash: make target-0 ")
        assert model.rowCount() == model.PAGE
        qtmodeltester.check(model)
    finally:
        reader.stop()


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
