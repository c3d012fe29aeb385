"""One lazy table mechanism for the memory, audit and sessions tables; search results in the engine's order;
room for the memory text at 1024x700; selection and detail agreeing after a forget."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from gui_support import NOW

from memlens import MemoryStore
from memlens.demo import generate
from memlens.gui.audit_view import AuditFilter, AuditTableModel
from memlens.gui.columns import COLUMN_INDEX
from memlens.gui.lazy_model import LazyTableModel
from memlens.gui.main_window import MainWindow
from memlens.gui.memory_model import ID_ROLE, MemoryTableModel
from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.gui.sessions_view import SessionTableModel
from memlens.gui.tasks import StoreReader

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")



@pytest.fixture
def demo_path(tmp_path: Path) -> Path:
    path = tmp_path / "demo" / "memory.db"
    with MemoryStore.open(path, actor="demo") as store:
        generate(store, now=NOW, days=14, seed=3)
    return path


@pytest.fixture
def reader(qtbot, demo_path: Path) -> Iterator[StoreReader]:
    r = StoreReader(demo_path)
    yield r
    r.stop()


def test_core_lists_audit_and_session_ids_and_reads_rows_for_ids(demo_path):
    with MemoryStore.open(demo_path) as store:
        ids = store.audit_ids()
        assert ids == [e.id for e in store.audit(limit=100_000)]
        assert store.audit_ids(operation="forget") == [e.id for e in store.audit(limit=100_000, operation="forget")]
        picked = [ids[3], ids[0], 10**9, ids[7]]
        assert [e.id for e in store.audit_entries(picked)] == [ids[3], ids[0], ids[7]]
        sessions = store.session_ids()
        assert sessions == [s.id for s in store.sessions(limit=100_000)]
        assert [s.id for s in store.sessions_by_id([sessions[-1], "no-such-session", sessions[0]])] == [sessions[-1], sessions[0]]


@pytest.mark.parametrize("kind", ["audit", "sessions"])
def test_audit_and_sessions_load_every_id_and_rows_in_bounded_blocks(qtbot, qtmodeltester, reader, demo_path, kind):
    model: LazyTableModel = AuditTableModel(reader) if kind == "audit" else SessionTableModel(reader)
    assert isinstance(model, LazyTableModel)
    model.SMALL, model.BLOCK, model.MAX_BLOCKS = 2, 2, 2  # the demo's rows then page in blocks like a large store
    with MemoryStore.open(demo_path) as store:
        expected = store.audit_ids() if kind == "audit" else store.session_ids()
    assert len(expected) > 6
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.reload()
    # The row count is the true total at once; only the first block's rows are read.
    assert model.rowCount() == len(expected) and list(model.ids()) == expected
    assert not model.canFetchMore(QtCore.QModelIndex())
    assert model.cached_blocks() == [0] and model.loaded_row_count() == 2
    last = len(expected) - 1
    model.index(last, 0).data()  # painting a far row asks for its block
    qtbot.waitUntil(lambda: model.is_row_loaded(last), timeout=10000)
    assert model.row_id(model.row_at(last)) == expected[last]
    for row in range(len(expected)):
        model.index(row, 1).data()
        qtbot.waitUntil(lambda row=row: model.is_row_loaded(row), timeout=10000)
        assert len(model.cached_blocks()) <= 2
    qtmodeltester.check(model)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.refresh()
    assert list(model.ids()) == expected
    qtmodeltester.check(model)


def test_every_table_model_is_the_one_lazy_model():
    for model_class in (MemoryTableModel, AuditTableModel, SessionTableModel):
        assert issubclass(model_class, LazyTableModel)
        assert "_want_block" not in vars(model_class) and "_merge" not in vars(model_class)


def test_audit_filter_applies_to_the_id_list(qtbot, reader):
    model = AuditTableModel(reader)
    with qtbot.waitSignal(model.loaded, timeout=10000):
        model.set_filter(AuditFilter(operation="forget"))
    qtbot.waitUntil(lambda: all(model.is_row_loaded(r) for r in range(model.rowCount())), timeout=10000)
    assert model.rowCount() > 0 and all(model.entry_at(r).operation == "forget" for r in range(model.rowCount()))


# --- 2. search results in relevance order ------------------------------------------------------------------------


@pytest.fixture
def adoption_path(tmp_path: Path) -> Path:
    """Memories whose best matches are the oldest: ordering by Created would put them last."""
    path = tmp_path / "adoption" / "memory.db"
    with MemoryStore.open(path) as store:
        for i in range(24):
            strong = max(1, 24 - i) // 4
            text = " ".join(["adoption agencies"] * strong) + f" note {i} about paperwork, visits and the family court in town {i}"
            store.remember(text, title=f"Note {i}: adoption agencies" if i % 3 == 0 else f"Note {i}", layer="episodic",
                           now=NOW - timedelta(days=40 - i))
        for i in range(30):
            store.remember(f"Unrelated fact {i} about the build cache", layer="episodic", now=NOW - timedelta(days=30 - i))
    return path


def _table_ids(window: MainWindow, count: int) -> list[int]:
    return [window.model.index(r, 0).data(ID_ROLE) for r in range(count)]


def _search(qtbot, window: MainWindow, text: str) -> None:
    with qtbot.waitSignal(window.model.loaded, timeout=10000):
        window.search_box.setText(text)
        window.apply_query()
    qtbot.waitUntil(window.is_idle, timeout=10000)


def test_search_results_come_in_the_engines_order_with_a_score_column(qtbot, make_window, adoption_path):
    with MemoryStore.open(adoption_path) as store:
        hits = store.search("adoption agencies", limit=500, now=NOW)
    window = make_window(adoption_path)
    window.sidebar.select("all")
    qtbot.waitUntil(window.is_idle, timeout=10000)
    _search(qtbot, window, "adoption agencies")
    n = window.model.rowCount()
    assert n == len(hits) > 10
    assert _table_ids(window, n) == [h.memory.id for h in hits]
    # The Score column is shown, from the registry, with the engine's explanation as tooltip.
    score = COLUMN_INDEX["score"]
    header = window.table.horizontalHeader()
    assert not header.isSectionHidden(score)
    assert header.sortIndicatorSection() == score and header.sortIndicatorOrder() == QtCore.Qt.SortOrder.DescendingOrder
    top = window.model.index(0, score)
    assert top.data() == f"{hits[0].score:.3f}"
    assert top.data(QtCore.Qt.ItemDataRole.ToolTipRole) == hits[0].explain()
    # A header click re-sorts by any column, and a click on Score goes back to the engine's order.
    window.table.sortByColumn(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.DescendingOrder)
    created = [window.model.memory_at(r).created_at for r in range(n)]
    assert created == sorted(created, reverse=True) and _table_ids(window, n) != [h.memory.id for h in hits]
    window.table.sortByColumn(score, QtCore.Qt.SortOrder.DescendingOrder)
    assert _table_ids(window, n) == [h.memory.id for h in hits]
    # Leaving the search hides Score and brings back the list's own order.
    _search(qtbot, window, "")
    assert header.isSectionHidden(score) and window.model.query.order_by == "created_at"


def test_highlighted_matches_are_painted_whole(qtbot):
    from memlens.gui.delegates import snippet_html
    from memlens.text import SNIPPET_CLOSE, SNIPPET_OPEN

    html = snippet_html(f"…the {SNIPPET_OPEN}adoption{SNIPPET_CLOSE} {SNIPPET_OPEN}agencies{SNIPPET_CLOSE} in town")
    doc = QtGui.QTextDocument()
    doc.setHtml(html)
    assert doc.toPlainText() == "…the adoption agencies in town"


# --- 3. the memory text gets room --------------------------------------------------------------------------------


def _visible_widths(window: MainWindow) -> dict[str, int]:
    header = window.table.horizontalHeader()
    return {key: header.sectionSize(i) for key, i in COLUMN_INDEX.items() if not header.isSectionHidden(i)}


def test_at_1024x700_the_title_is_the_widest_column_and_stays_so(qtbot, make_window, demo_path):
    window = make_window(demo_path, size=(1024, 700))
    assert window.minimumSizeHint().width() <= 1024
    window.sidebar.select("semantic")
    qtbot.waitUntil(window.is_idle, timeout=10000)
    widths = _visible_widths(window)
    assert widths["title"] == max(widths.values()) and widths["title"] > max(w for k, w in widths.items() if k != "title")
    # The detail is collapsed while nothing is selected and opens on the first selection (test_gui_narrow); from
    # then on, more selections must not widen it at the title's expense.
    window.table.selectRow(2)
    qtbot.waitUntil(window.is_idle, timeout=10000)
    widths = _visible_widths(window)
    detail_width = window.detail.width()
    for row in (0, 3, 5, 1):
        window.table.selectRow(row)
        qtbot.waitUntil(window.is_idle, timeout=10000)
    after = _visible_widths(window)
    assert after["title"] >= widths["title"] and after["title"] == max(after.values())
    assert window.detail.width() <= detail_width
    # No horizontal scrolling in the memory table.
    assert window.table.horizontalScrollBar().maximum() == 0
    # Ids of seven digits are shown whole.
    fm = window.table.fontMetrics()
    margin = 2 * (window.table.style().pixelMetric(QtWidgets.QStyle.PixelMetric.PM_FocusFrameHMargin, None, window.table) + 1)
    assert fm.horizontalAdvance("1234567") + margin <= after["id"]
    # Sidebar labels and the search box are not squeezed to "…".
    assert window.sidebar.width() >= window.sidebar.fontMetrics().horizontalAdvance("Procedural") + 40
    assert window.search_box.width() >= window.search_box.fontMetrics().horizontalAdvance("Search memories")
    # Toolbar actions that do not fit are still reachable through the toolbar's overflow button.
    toolbar = window.findChild(QtWidgets.QToolBar, "mainToolbar")
    assert window.act_refresh in toolbar.actions() and window.act_settings in toolbar.actions()
    shown = [toolbar.widgetForAction(a) for a in (window.act_refresh, window.act_settings)]
    if not all(w is not None and w.isVisible() for w in shown):
        extension = toolbar.findChild(QtWidgets.QToolButton, "qt_toolbar_ext_button")
        assert extension is not None and extension.isVisible()


def test_sessions_fit_without_horizontal_scrolling_at_1024(qtbot, make_window, demo_path):
    window = make_window(demo_path, size=(1024, 700))
    window.sidebar.select("sessions")
    qtbot.waitUntil(window.is_idle, timeout=10000)
    table = window.sessions_view.table
    assert table.model().rowCount() > 0
    assert table.horizontalScrollBar().maximum() == 0
    # ...and the session names are whole (they were cut to "shop-w…" at 1024).
    metrics = table.fontMetrics()
    model = table.model()
    names = [str(model.index(r, 0).data()) for r in range(min(model.rowCount(), 30))]
    assert table.columnWidth(0) >= max(metrics.horizontalAdvance(n) for n in names) + 8, (table.columnWidth(0), names[:3])


# --- 4. selection and detail agree -------------------------------------------------------------------------------


def test_after_forget_nothing_is_selected_and_the_detail_says_so(qtbot, make_window, demo_path):
    from memlens.gui.operations.forget import forget_memories

    window = make_window(demo_path)
    window.sidebar.select("semantic")
    qtbot.waitUntil(window.is_idle, timeout=10000)
    row = 2
    memory = window.model.memory_at(row)
    with qtbot.waitSignal(window.detail_shown, timeout=10000, check_params_cb=lambda i: i == memory.id):
        window.table.selectRow(row)
    with qtbot.waitSignal(window.write_finished, timeout=10000):
        forget_memories(window, [memory.id], reason="test", whole_chain=False, now=NOW).run_in_background()
    qtbot.waitUntil(lambda: window.model.row_of(memory.id) == -1, timeout=10000)
    qtbot.waitUntil(window.is_idle, timeout=10000)
    selection = window.table.selectionModel()
    # Either nothing is selected and the detail says so, or the row shown is truly selected: never a focus frame alone.
    assert not selection.hasSelection() and not selection.currentIndex().isValid()
    assert window.selected_ids() == []
    assert "Nothing selected" in window.detail.browser.toPlainText()
    assert window.model.index(row, 0).data(ID_ROLE) != memory.id


def test_a_store_opened_on_a_layer_it_has_nothing_in_shows_all_memories(qtbot, make_window, tmp_path):
    """The view remembered from another store (Semantic) was kept on a store holding only episodes: a search then
    said "0 matches" while the store held thousands."""
    path = tmp_path / "episodes.db"
    with MemoryStore.open(path) as store:
        for i in range(5):
            store.remember(f"Caroline talked about adoption agencies, turn {i}", layer="episodic", type="message", now=NOW)
    window = make_window(path)
    qtbot.waitUntil(lambda: window.sidebar.current_view() == "all", timeout=10000)
    qtbot.waitUntil(window.is_idle, timeout=10000)
    assert window.model.rowCount() == 5
