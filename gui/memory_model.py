"""The memory table: one layer's memories (or search hits), with the real row count and rows loaded on demand.

The loading is :class:`memlens.gui.lazy_model.LazyTableModel`'s, shared with the audit and sessions tables: every
matching id eagerly, row contents in cached blocks around what the view paints, refreshes merged in place.

Sorting happens in the database for every column (``MemoryStore.list_ids(order_by=...)``). Strength is not
stored - it is a function of ``now`` - so the database orders it by *last use*, the clock strength decays on.
A list of at most :attr:`MemoryTableModel.SMALL` memories, and any search (at most :attr:`MemoryTableModel.SEARCH_LIMIT`
hits), is loaded whole with its ids, and every column, strength included, then sorts it exactly in memory.

A search starts in the engine's order (by score, as ``MemoryStore.search`` returns it: the Score column sorted
descending); a header click re-sorts by any column and a click on Score goes back. Leaving the search restores the
order the list had before it.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from memlens.decay import DecayConfig, strength
from memlens.gui import format as fmt
from memlens.gui.columns import COLUMN_INDEX, COLUMNS, MemoryRow
from memlens.gui.lazy_model import IdList, LazyTableModel
from memlens.gui.qt import QtCore, QtGui
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore
from memlens.sweep import SweepDecision

if TYPE_CHECKING:
    from memlens.embeddings import Embedder

__all__ = [
    "COLUMNS",
    "COLUMN_INDEX",
    "EXPIRING_SOON",
    "ID_ROLE",
    "MEMORY_ROLE",
    "SNIPPET_ROLE",
    "STRENGTH_ROLE",
    "MemoryQuery",
    "MemoryRow",
    "MemoryTableModel",
]

MEMORY_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
ID_ROLE = QtCore.Qt.ItemDataRole.UserRole + 2
STRENGTH_ROLE = QtCore.Qt.ItemDataRole.UserRole + 3
SNIPPET_ROLE = QtCore.Qt.ItemDataRole.UserRole + 4

EXPIRING_SOON = timedelta(days=7)
#: The order of a search: the engine's (the Score column, best first).
SCORE_ORDER = ("score", True)


@dataclass(frozen=True)
class MemoryQuery:
    """Which memories the table shows and in what order."""

    layer: str | None = "semantic"
    project: str | None = None
    types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    latest_only: bool = True
    pinned_only: bool = False
    expiring_soon: bool = False
    text: str = ""
    order_by: str = "created_at"
    descending: bool = True


def _sort_value(row: MemoryRow, key: str, now: datetime, config: DecayConfig) -> Any:
    return COLUMNS[COLUMN_INDEX[key]].sort_value(row, now, config)


class MemoryTableModel(LazyTableModel):
    """Memories matching a :class:`MemoryQuery`: every id loaded, row contents in cached blocks; see the module docstring."""

    SEARCH_LIMIT: ClassVar[int] = 500
    ID_ROLE: ClassVar[int | None] = ID_ROLE

    def __init__(self, reader: StoreReader | None, now: Callable[[], datetime], parent: QtCore.QObject | None = None) -> None:
        super().__init__(reader, parent)
        self._now = now
        self.query = MemoryQuery()
        self.decay_config = DecayConfig()
        self._memory_sort: tuple[str, bool] | None = None  # (column key, descending) of an exact in-memory sort
        # The list's order (order_by, descending, in-memory sort) from before a search began, restored after it.
        self._list_order: tuple[str, bool, tuple[str, bool] | None] | None = None
        self._palette_dim = QtGui.QColor(128, 128, 128)
        #: Shown before the title of a pinned memory.
        self.pin_icon: QtGui.QIcon | None = None
        #: The next sweep's decisions by memory id (the Sweep column), and the moment they were planned for.
        self.sweep_plan: dict[int, SweepDecision] = {}
        self.sweep_at: datetime | None = None
        #: Searches also rank by this embedder's stored vectors (the local model once memories have them; see
        #: memlens.gui.semantic_search); None: bm25 alone.
        self.embedder: Embedder | None = None

    def set_query(self, query: MemoryQuery) -> None:
        """Show the memories matching ``query`` (loads the id list again); a search starts in score order."""
        searching, was_searching = bool(query.text.strip()), bool(self.query.text.strip())
        if searching and not was_searching:
            self._list_order = (self.query.order_by, self.query.descending, self._memory_sort)
            self._memory_sort = SCORE_ORDER
            query = replace(query, order_by="score", descending=True)
        elif was_searching and not searching:
            order_by, descending, self._memory_sort = self._list_order or ("created_at", True, None)
            self._list_order = None
            query = replace(query, order_by=order_by, descending=descending)
        if query.text != self.query.text:
            self.headerDataChanged.emit(QtCore.Qt.Orientation.Horizontal, 0, len(COLUMNS) - 1)
        self.query = query
        self.reload()

    def sort_column(self) -> tuple[int, QtCore.Qt.SortOrder]:
        """The column and direction the rows are ordered by now (for the header's sort indicator)."""
        key, descending = self._memory_sort or next(
            ((c.key, self.query.descending) for c in COLUMNS if c.order_by == self.query.order_by), ("created", True)
        )
        order = QtCore.Qt.SortOrder.DescendingOrder if descending else QtCore.Qt.SortOrder.AscendingOrder
        return COLUMN_INDEX[key], order

    def memory_at(self, row: int) -> Memory | None:
        """The memory shown in ``row`` (None when its block is not loaded yet)."""
        item = self.row_at(row)
        return item.memory if item is not None else None

    # --- loading -----------------------------------------------------------------------------------------------

    def _filter_kwargs(self, now: datetime) -> dict[str, Any]:
        q = self.query
        return {
            "layers": [q.layer] if q.layer else None,
            "types": list(q.types) or None,
            "project": q.project,
            "tags": list(q.tags) or None,
            "latest_only": q.latest_only,
            "pinned": True if q.pinned_only else None,
            "expiring_before": now + EXPIRING_SOON if q.expiring_soon else None,
            "now": now,
        }

    def ids_reader(self) -> Callable[[MemoryStore], Sequence[Hashable] | IdList]:
        now = self._now()
        kwargs = self._filter_kwargs(now)
        q = self.query
        if q.text.strip():
            text, search_limit, embedder = q.text, self.SEARCH_LIMIT, self.embedder

            def search(store: MemoryStore) -> IdList:
                hits = store.search(
                    text,
                    limit=search_limit,
                    layers=kwargs["layers"],
                    types=kwargs["types"],
                    project=kwargs["project"],
                    tags=kwargs["tags"],
                    include_superseded=not q.latest_only,
                    embedder=embedder,
                    now=now,
                )
                rows = [MemoryRow(h.memory, h.snippet, h.score, h.explain(), rank) for rank, h in enumerate(hits)]
                if q.pinned_only:
                    rows = [r for r in rows if r.memory.pinned]
                if q.expiring_soon:
                    rows = [r for r in rows if r.memory.forget_after is not None and r.memory.forget_after <= now + EXPIRING_SOON]
                return IdList([r.memory.id for r in rows], {r.memory.id: r for r in rows})

            return search
        # "score" only orders a search; a list never keeps it (see set_query), but falls back to newest first.
        order_by, descending = (q.order_by, q.descending) if q.order_by != "score" else ("created_at", True)

        def ids(store: MemoryStore) -> list[int]:
            return store.list_ids(**kwargs, order_by=order_by, descending=descending)

        return ids

    def rows_reader(self) -> Callable[[MemoryStore, list[Hashable]], list[Any]]:
        def rows(store: MemoryStore, ids: list[Hashable]) -> list[Any]:
            return [MemoryRow(m) for m in store.get_many([int(i) for i in ids])]  # type: ignore[call-overload]

        return rows

    def row_id(self, row: Any) -> Hashable:
        return row.memory.id

    def placeholder(self, row_id: Hashable, column: int, role: int) -> Any:
        """An unloaded row: its id, a light placeholder for the title, nothing else."""
        if role not in (QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.AccessibleTextRole):
            return None
        return str(row_id) if column == COLUMN_INDEX["id"] else "…" if column == COLUMN_INDEX["title"] else None

    # --- sorting -----------------------------------------------------------------------------------------------

    def sort(self, column: int, order: QtCore.Qt.SortOrder = QtCore.Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column``: in the database (strength by last use), and exactly in memory for a list loaded whole."""
        if not 0 <= column < len(COLUMNS):
            return
        col = COLUMNS[column]
        descending = order == QtCore.Qt.SortOrder.DescendingOrder
        searching = bool(self.query.text.strip())
        if col.search_only and not searching:
            return  # nothing to order by outside a search
        if not col.order_by and not (searching or self.is_complete()):
            return  # only a list loaded whole can be ordered by it
        self._memory_sort = (col.key, descending)
        wanted = replace(self.query, order_by=col.order_by or self.query.order_by, descending=descending)
        if searching or (self.is_complete() and not self.is_loading()):
            # Loaded whole: sort exactly in memory; the database order is remembered for the next reload.
            self.query = wanted
            self.rearrange()
            self.loaded.emit()
            return
        if wanted != self.query:
            self.query = wanted
            self.reload()

    def arrange(self, ids: Any, rows: Mapping[Hashable, Any]) -> Any:
        if self._memory_sort is None:
            return ids
        key, descending = self._memory_sort
        now, config = self._now(), self.decay_config
        present = [self._planned(rows[i]) for i in ids if i in rows]
        ordered = sorted(present, key=lambda r: (_sort_value(r, key, now, config), r.memory.id), reverse=descending)
        return array("q", [r.memory.id for r in ordered])

    # --- Qt model interface ------------------------------------------------------------------------------------

    def columns(self) -> Sequence[str]:
        """Column headers (the title column reads "Match" in a search)."""
        headers = [c.header for c in COLUMNS]
        if self.query.text.strip():
            headers[COLUMN_INDEX["title"]] = "Match"
        return headers

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != QtCore.Qt.Orientation.Horizontal or not 0 <= section < len(COLUMNS):
            return None
        if role == QtCore.Qt.ItemDataRole.ToolTipRole:
            return COLUMNS[section].tip
        if role == QtCore.Qt.ItemDataRole.DisplayRole:
            return self.columns()[section]
        return None

    # --- changes -----------------------------------------------------------------------------------------------

    def update_memory(self, memory: Memory) -> None:
        """Replace a loaded memory with a fresher copy (after an edit) without reloading."""
        old = self.cached_row(memory.id)
        if old is not None:
            self.replace_row(replace(old, memory=memory))

    def set_sweep_plan(self, decisions: Sequence[SweepDecision], at: datetime) -> None:
        """Mark the memories a sweep at ``at`` would act on (a dry run's decisions) and repaint the Sweep column."""
        self.sweep_plan = {d.memory_id: d for d in decisions}
        self.sweep_at = at
        if self.rowCount():
            column = COLUMN_INDEX["sweep"]
            self.dataChanged.emit(self.index(0, column), self.index(self.rowCount() - 1, column))

    def marked_ids(self) -> list[int]:
        """Ids of the rows the Sweep column marks, in table order."""
        return [int(i) for i in self.ids() if i in self.sweep_plan]

    def _planned(self, row: MemoryRow) -> MemoryRow:
        """``row`` with the next sweep's decision about it."""
        decision = self.sweep_plan.get(row.memory.id)
        return row if decision is row.sweep else replace(row, sweep=decision)

    def strengths_changed(self) -> None:
        """Repaint strength and relative times (the clock moved)."""
        self.repaint_all()

    def cell(self, row: Any, column: int, role: int) -> Any:
        row = self._planned(row)
        m: Memory = row.memory
        key = COLUMNS[column].key
        R = QtCore.Qt.ItemDataRole
        if role == MEMORY_ROLE:
            return m
        if role == ID_ROLE:
            return m.id
        if role == SNIPPET_ROLE:
            return row.snippet
        now = self._now()
        if role == STRENGTH_ROLE or (key == "strength" and role == R.EditRole):
            return strength(m, now, self.decay_config)
        if role == R.DisplayRole:
            return self._display(row, key, now)
        if role == R.ToolTipRole:
            hover = COLUMNS[column].hover
            if hover is not None:
                return hover(row, now, self.decay_config)
            if key == "title":
                text = m.content if len(m.content) <= 600 else m.content[:600] + "…"
                return f"#{m.id} {m.title}\n\n{text}"
            if key in ("created", "used", "expires"):
                value = {"created": m.created_at, "used": m.last_accessed_at, "expires": m.forget_after}[key]
                return f"{fmt.when(value)} ({fmt.relative(value, now)})" if value else None
            if key == "score":
                return row.explanation
            if key == "strength":
                return f"strength {strength(m, now, self.decay_config):.3f} at {fmt.when(now)}"
            return None
        if role == R.TextAlignmentRole:
            if COLUMNS[column].right_aligned:
                return (QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter).value
            return None
        if role == R.DecorationRole and key == "title" and m.pinned:
            return self.pin_icon
        if role == R.ForegroundRole:
            if key == "sweep" and row.sweep is not None:
                return QtGui.QBrush(QtGui.QGuiApplication.palette().color(QtGui.QPalette.ColorRole.BrightText))
            if not m.is_latest or m.is_expired(now):
                return QtGui.QBrush(self._palette_dim)
            return None
        if role == R.FontRole and not m.is_latest:
            font = QtGui.QFont()
            font.setItalic(True)
            return font
        if role == R.AccessibleTextRole:
            return self._display(row, key, now)
        return None

    def _display(self, row: MemoryRow, key: str, now: datetime) -> str:
        if key == "title" and row.snippet and self.query.text.strip():
            return row.snippet
        return COLUMNS[COLUMN_INDEX[key]].show(row, now, self.decay_config)
