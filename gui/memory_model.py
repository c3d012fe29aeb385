"""The memory table: one layer's memories (or search hits), with the real row count and rows loaded on demand.

Like Anki's browser, the model loads the ordered list of matching ids eagerly - one query on the reader thread,
kept as an ``array('q')`` (a million ids take 8 MB) - so ``rowCount()`` is the true total and the scrollbar is
real. Row contents are loaded in blocks of :attr:`MemoryTableModel.BLOCK` ids around what the view paints, through
the reader thread, and kept in an LRU cache of at most :attr:`MemoryTableModel.MAX_BLOCKS` blocks, so memory stays
bounded however far one scrolls. A row whose block has not arrived shows "…"; when it arrives ``dataChanged`` is
emitted for it.

Sorting happens in the database for every column (``MemoryStore.list_ids(order_by=...)``). Strength is not
stored - it is a function of ``now`` - so the database orders it by *last use*, the clock strength decays on.
A list of at most :attr:`MemoryTableModel.SMALL` memories, and any search (at most :attr:`MemoryTableModel.SEARCH_LIMIT`
hits), is loaded whole with its ids, and every column, strength included, then sorts it exactly in memory.

:meth:`MemoryTableModel.refresh` re-reads the id list in the background and applies the difference with removes,
inserts and a layout change (never a reset), moving persistent indexes by id, so selection and scroll position
survive another process writing to the store; rows keep their positions when their ids do not move.
"""

from __future__ import annotations

import itertools
from array import array
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

import numpy as np

from memlens.decay import DecayConfig, strength
from memlens.gui import format as fmt
from memlens.gui.columns import COLUMN_INDEX, COLUMNS
from memlens.gui.qt import QtCore, QtGui, Signal
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore

MEMORY_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1
ID_ROLE = QtCore.Qt.ItemDataRole.UserRole + 2
STRENGTH_ROLE = QtCore.Qt.ItemDataRole.UserRole + 3
SNIPPET_ROLE = QtCore.Qt.ItemDataRole.UserRole + 4

EXPIRING_SOON = timedelta(days=7)


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


@dataclass(frozen=True)
class MemoryRow:
    """A memory as the table holds it, with its search snippet (matched terms in « ») when it came from a search."""

    memory: Memory
    snippet: str | None = None
    score: float | None = None


def _sort_value(row: MemoryRow, key: str, now: datetime, config: DecayConfig) -> Any:
    return COLUMNS[COLUMN_INDEX[key]].sort_value(row.memory, now, config)


Index = QtCore.QModelIndex | QtCore.QPersistentModelIndex
_keys = itertools.count(1)


@dataclass(frozen=True)
class _Listing:
    """What the reader thread hands back for an id list: ids in order, and the rows too when the list is small."""

    ids: array[int]
    rows: dict[int, MemoryRow] | None
    previous: array[int] | None  # the ids the difference below was worked out against
    removed: list[tuple[int, int]]  # ranges (first, last) of the previous ids that are gone, in ascending order
    added: list[int]  # ids that were not in the previous list, in their new order


def _diff(old: array[int], new: array[int]) -> tuple[list[tuple[int, int]], list[int]]:
    """Ranges of ``old`` whose ids are not in ``new``, and the ids of ``new`` not in ``old`` (numpy, no Python loop per id)."""
    if not len(old):
        return [], list(new)
    a = np.frombuffer(old, dtype=np.int64)
    b = np.frombuffer(new, dtype=np.int64) if len(new) else np.empty(0, dtype=np.int64)
    gone = ~np.isin(a, b)
    ranges: list[tuple[int, int]] = []
    if gone.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], gone.view(np.int8), [0]))))
        ranges = [(int(edges[k]), int(edges[k + 1]) - 1) for k in range(0, len(edges), 2)]
    added = b[~np.isin(b, a)].tolist() if len(b) else []
    return ranges, added


class MemoryTableModel(QtCore.QAbstractTableModel):
    """Memories matching a :class:`MemoryQuery`: every id loaded, row contents in cached blocks; see the module docstring."""

    #: Emitted after an id list (a reload, a refresh) or an in-memory sort has been applied.
    loaded = Signal()
    #: Emitted with a readable message when loading failed; what was shown stays.
    load_failed = Signal(str)
    #: Emitted with the number of matching memories once counted (-1 when unknown).
    counted = Signal(int)

    #: Rows loaded per request.
    BLOCK: ClassVar[int] = 200
    #: Blocks kept in the cache (least recently painted ones are dropped first).
    MAX_BLOCKS: ClassVar[int] = 50
    #: Lists of at most this many memories are loaded whole and sort exactly in memory.
    SMALL: ClassVar[int] = 1000
    SEARCH_LIMIT: ClassVar[int] = 500
    #: Block requests in flight at most; a newer request for the same slot makes an older unstarted one obsolete.
    SLOTS: ClassVar[int] = 8
    #: A refresh removing more separate runs of rows than this resets the view instead (selection is lost).
    MAX_REMOVALS: ClassVar[int] = 2000

    def __init__(self, reader: StoreReader | None, now: Callable[[], datetime], parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._reader = reader
        self._now = now
        self._key = f"{type(self).__name__}#{next(_keys)}"
        self.query = MemoryQuery()
        self.decay_config = DecayConfig()
        self.total: int | None = None
        self._memory_sort: tuple[str, bool] | None = None  # (column key, descending) of an exact in-memory sort
        self._ids: array[int] = array("q")
        self._rows: dict[int, MemoryRow] = {}
        self._stale: dict[int, MemoryRow] = {}  # rows from before a refresh, shown until their block is read again
        self._blocks: OrderedDict[int, None] = OrderedDict()  # loaded block numbers, least recently used first
        self._requested: dict[int, tuple[int, int]] = {}  # slot -> (block, reader token)
        self._complete = False  # every row is in _rows (a small list or a search)
        self._loading = False
        self._generation = 0
        self._palette_dim = QtGui.QColor(128, 128, 128)
        #: Shown before the title of a pinned memory.
        self.pin_icon: QtGui.QIcon | None = None

    # --- state -------------------------------------------------------------------------------------------------

    def set_reader(self, reader: StoreReader | None) -> None:
        """Use another store (or none); clears the rows."""
        self._reader = reader
        self._clear()

    def _clear(self) -> None:
        self._generation += 1
        self.beginResetModel()
        self._ids = array("q")
        self._rows, self._stale = {}, {}
        self._blocks.clear()
        self._requested.clear()
        self._complete = False
        self._loading = False
        self.total = None
        self.endResetModel()

    def set_query(self, query: MemoryQuery) -> None:
        """Show the memories matching ``query`` (loads the id list again)."""
        if query.text != self.query.text:
            self.headerDataChanged.emit(QtCore.Qt.Orientation.Horizontal, 0, len(COLUMNS) - 1)
        self.query = query
        self.reload()

    def reload(self) -> None:
        """Drop every row and load the id list (and the first block) again: filters or order changed."""
        self._clear()
        if self._reader is not None:
            self._request_ids(merge=False)

    def refresh(self) -> None:
        """Re-read the id list and merge it in place, keeping selection and scroll position; visible rows reload."""
        if self._reader is None:
            return
        self._request_ids(merge=True)

    def is_loading(self) -> bool:
        """Whether the id list, or a block the view asked for, is on its way."""
        if self._loading:
            return True
        reader = self._reader
        return reader is not None and any(reader.is_current(self._slot_key(slot), token) for slot, (_b, token) in self._requested.items())

    def canFetchMore(self, parent: Index) -> bool:
        """Never: every id is loaded with the list, so there is nothing to append."""
        return False

    def ids(self) -> array[int]:
        """The ids of every row, in display order (a copy)."""
        return array("q", self._ids)

    def ids_in_rows(self, ranges: Sequence[tuple[int, int]]) -> list[int]:
        """The ids of the rows covered by ``(first, last)`` ranges (overlaps counted once), in display order."""
        rows = len(self._ids)
        spans = sorted((max(0, first), min(last, rows - 1)) for first, last in ranges if first <= last)
        ids: list[int] = []
        end = -1
        for first, last in spans:
            first = max(first, end + 1)
            if first <= last:
                ids.extend(self._ids[first : last + 1])
                end = last
        return ids

    def loaded_row_count(self) -> int:
        """How many rows have their contents in memory (the cache, and rows kept from before a refresh)."""
        return len(self._rows) + len(self._stale)

    def cached_blocks(self) -> list[int]:
        """The block numbers in the cache, least recently used first (empty for a list loaded whole)."""
        return list(self._blocks)

    def is_row_loaded(self, row: int) -> bool:
        """Whether ``row``'s current contents are in memory (not a placeholder, not a row from before a refresh)."""
        if not 0 <= row < len(self._ids):
            return False
        return self._complete or (row // self.BLOCK in self._blocks and self._ids[row] in self._rows)

    def row_at(self, row: int) -> MemoryRow | None:
        """The row at ``row`` if its contents are loaded (None when out of range or not loaded yet)."""
        if not 0 <= row < len(self._ids):
            return None
        memory_id = self._ids[row]
        return self._rows.get(memory_id) or self._stale.get(memory_id)

    def row_of(self, row_id: int) -> int:
        """The position of the memory with this id, or -1 (loaded or not)."""
        try:
            return self._ids.index(row_id) if isinstance(row_id, int) else -1
        except ValueError:
            return -1

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

    def _ids_loader(self, previous: array[int] | None) -> Callable[[MemoryStore], _Listing]:
        now = self._now()
        kwargs = self._filter_kwargs(now)
        q = self.query
        small, block = self.SMALL, self.BLOCK

        def listing(ids: array[int], rows: dict[int, MemoryRow] | None) -> _Listing:
            removed, added = _diff(previous, ids) if previous is not None else ([], [])
            return _Listing(ids, rows, previous, removed, added)

        if q.text.strip():
            text, search_limit = q.text, self.SEARCH_LIMIT

            def search(store: MemoryStore) -> _Listing:
                hits = store.search(
                    text,
                    limit=search_limit,
                    layers=kwargs["layers"],
                    types=kwargs["types"],
                    project=kwargs["project"],
                    tags=kwargs["tags"],
                    include_superseded=not q.latest_only,
                    now=now,
                )
                rows = [MemoryRow(h.memory, h.snippet, h.score) for h in hits]
                if q.pinned_only:
                    rows = [r for r in rows if r.memory.pinned]
                if q.expiring_soon:
                    rows = [r for r in rows if r.memory.forget_after is not None and r.memory.forget_after <= now + EXPIRING_SOON]
                return listing(array("q", [r.memory.id for r in rows]), {r.memory.id: r for r in rows})

            return search
        order_by, descending = q.order_by, q.descending

        def ids(store: MemoryStore) -> _Listing:
            found = array("q", store.list_ids(**kwargs, order_by=order_by, descending=descending))
            wanted = found if len(found) <= small else found[:block]
            return listing(found, {m.id: MemoryRow(m) for m in store.get_many(wanted)})

        return ids

    def _request_ids(self, *, merge: bool) -> None:
        assert self._reader is not None
        self._loading = True
        generation = self._generation
        loader = self._ids_loader(array("q", self._ids) if merge else None)

        def done(result: _Listing) -> None:
            if generation != self._generation:
                return
            self._loading = False
            self._apply(result, merge)
            self.total = len(self._ids)
            self.counted.emit(self.total)
            self.loaded.emit()

        def failed(error: BaseException) -> None:
            if generation != self._generation:
                return
            self._loading = False
            self.load_failed.emit(str(error))
            self.counted.emit(-1)
            self.loaded.emit()

        self._reader.submit(self._key, loader, done, failed)

    def _apply(self, result: _Listing, merge: bool) -> None:
        complete = len(result.ids) <= self.SMALL or bool(self.query.text.strip())
        rows = result.rows or {}
        new_ids = result.ids
        removed, added = result.removed, result.added
        if complete and self._memory_sort is not None:
            new_ids = self._arranged(new_ids, rows)
        if merge and len(self._ids) and (complete or result.previous is None or self._ids != result.previous):
            removed, added = _diff(self._ids, new_ids)  # small, or the list changed since the read began
        if not merge or not len(self._ids):
            self.beginResetModel()
            self._ids, self._complete = new_ids, complete
            self._rows, self._stale = dict(rows), {}
            self._blocks.clear()
            if not complete and rows:
                self._blocks[0] = None
            self.endResetModel()
            return
        # Keep what was shown until the blocks are read again; the cache starts over (positions may have moved).
        # (Bounded: the rows of the cache, plus those kept by the previous refresh while that was no bigger.)
        if complete:
            self._stale = {}
        elif len(self._stale) < self.MAX_BLOCKS * self.BLOCK:
            self._stale = {**self._stale, **self._rows}
        else:
            self._stale = dict(self._rows)
        self._rows = dict(rows)
        self._blocks.clear()
        self._requested.clear()
        self._complete = complete
        if not complete and rows:
            first = set(new_ids[: self.BLOCK])
            self._rows = {i: r for i, r in rows.items() if i in first}
            self._blocks[0] = None
        self._merge(new_ids, removed, added)

    def _merge(self, new_ids: array[int], removed: list[tuple[int, int]], added: list[int]) -> None:
        """Make the ids equal ``new_ids`` with removes, inserts and a layout change, never a reset."""
        root = QtCore.QModelIndex()
        if len(removed) > self.MAX_REMOVALS:
            # Most of the list changed (a mass forget elsewhere): one reset costs less than thousands of removals.
            self.beginResetModel()
            self._ids = array("q", new_ids)
            self.endResetModel()
            return
        for first, last in reversed(removed):
            self.beginRemoveRows(root, first, last)
            del self._ids[first : last + 1]
            self.endRemoveRows()
        if added:
            start = len(self._ids)
            self.beginInsertRows(root, start, start + len(added) - 1)
            self._ids.extend(added)
            self.endInsertRows()
        if self._ids != new_ids:
            self.layoutAboutToBeChanged.emit()
            persistent = self.persistentIndexList()
            wanted = {self._ids[p.row()] for p in persistent if 0 <= p.row() < len(self._ids)}
            position = _positions(new_ids, wanted)
            moved = [
                self.index(position[self._ids[p.row()]], p.column()) if 0 <= p.row() < len(self._ids) and self._ids[p.row()] in position else QtCore.QModelIndex()
                for p in persistent
            ]
            self._ids = array("q", new_ids)
            self.changePersistentIndexList(persistent, moved)
            self.layoutChanged.emit()
        if len(self._ids):
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._ids) - 1, len(COLUMNS) - 1))

    def _slot_key(self, slot: int) -> str:
        return f"{self._key}:block{slot}"

    def _want_block(self, block: int) -> None:
        """Ask the reader for ``block`` unless it is loaded or on its way."""
        reader = self._reader
        if reader is None or self._loading:
            return
        slot = block % self.SLOTS
        pending = self._requested.get(slot)
        if pending is not None and pending[0] == block and reader.is_current(self._slot_key(slot), pending[1]):
            return
        first = block * self.BLOCK
        ids = self._ids[first : first + self.BLOCK].tolist()
        generation = self._generation

        def load(store: MemoryStore) -> list[Memory]:
            return store.get_many(ids)

        def done(memories: list[Memory]) -> None:
            if self._requested.get(slot, (None, 0))[0] == block:
                del self._requested[slot]
            if generation != self._generation or self._ids[first : first + len(ids)].tolist() != ids:
                return  # the list changed meanwhile; the view asks again when it paints
            for m in memories:
                self._rows[m.id] = MemoryRow(m)
                self._stale.pop(m.id, None)
            self._blocks[block] = None
            self._blocks.move_to_end(block)
            while len(self._blocks) > self.MAX_BLOCKS:
                old, _ = self._blocks.popitem(last=False)
                for memory_id in self._ids[old * self.BLOCK : (old + 1) * self.BLOCK]:
                    self._rows.pop(memory_id, None)
            self.dataChanged.emit(self.index(first, 0), self.index(first + len(ids) - 1, len(COLUMNS) - 1))

        def failed(error: BaseException) -> None:
            if self._requested.get(slot, (None, 0))[0] == block:
                del self._requested[slot]
            if generation == self._generation:
                self.load_failed.emit(str(error))

        token = reader.submit(self._slot_key(slot), load, done, failed)
        self._requested[slot] = (block, token)

    def _row(self, row: int) -> MemoryRow | None:
        """The row's contents, asking for its block when it is not loaded (a row from before a refresh meanwhile)."""
        memory_id = self._ids[row]
        if self._complete:
            return self._rows.get(memory_id)
        block = row // self.BLOCK
        if block in self._blocks:
            self._blocks.move_to_end(block)
            found = self._rows.get(memory_id)
            if found is not None:
                return found
            return self._stale.get(memory_id)
        self._want_block(block)
        return self._stale.get(memory_id)

    # --- sorting -----------------------------------------------------------------------------------------------

    def sort(self, column: int, order: QtCore.Qt.SortOrder = QtCore.Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column``: in the database (strength by last use), and exactly in memory for a list loaded whole."""
        if not 0 <= column < len(COLUMNS):
            return
        col = COLUMNS[column]
        descending = order == QtCore.Qt.SortOrder.DescendingOrder
        self._memory_sort = (col.key, descending)
        wanted = replace(self.query, order_by=col.order_by, descending=descending)
        if self.query.text.strip() or (self._complete and not self._loading):
            # Loaded whole: sort exactly in memory; the database order is remembered for the next reload.
            self.query = wanted
            if len(self._ids):
                self._merge(self._arranged(self._ids, self._rows), [], [])
            self.loaded.emit()
            return
        if wanted != self.query:
            self.query = wanted
            self.reload()

    def _arranged(self, ids: array[int], rows: dict[int, MemoryRow]) -> array[int]:
        if self._memory_sort is None:
            return ids
        key, descending = self._memory_sort
        now, config = self._now(), self.decay_config
        present = [rows[i] for i in ids if i in rows]
        ordered = sorted(present, key=lambda r: (_sort_value(r, key, now, config), r.memory.id), reverse=descending)
        return array("q", [r.memory.id for r in ordered])

    # --- Qt model interface ------------------------------------------------------------------------------------

    def rowCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._ids)

    def columnCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

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

    # flags() is QAbstractTableModel's own (enabled, selectable, never has children): selecting a million rows
    # makes Qt ask for the flags of every cell, which must not cost a call into Python each.

    def data(self, index: Index, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._ids) or not 0 <= index.column() < len(COLUMNS):
            return None
        if role == ID_ROLE:
            return self._ids[index.row()]
        row = self._row(index.row())
        if row is None:  # not loaded yet: its id, a light placeholder for the title, nothing else
            if role not in (QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.AccessibleTextRole):
                return None
            column = index.column()
            return str(self._ids[index.row()]) if column == COLUMN_INDEX["id"] else "…" if column == COLUMN_INDEX["title"] else None
        try:
            return self.cell(row, index.column(), role)
        except Exception:  # a row that cannot be shown is a placeholder, never an exception inside paint code
            return "…" if role == QtCore.Qt.ItemDataRole.DisplayRole else None

    # --- changes -----------------------------------------------------------------------------------------------

    def update_memory(self, memory: Memory) -> None:
        """Replace a loaded memory with a fresher copy (after an edit) without reloading."""
        old = self._rows.get(memory.id) or self._stale.get(memory.id)
        if old is None:
            return
        fresh = MemoryRow(memory, old.snippet, old.score)
        if memory.id in self._rows:
            self._rows[memory.id] = fresh
        else:
            self._stale[memory.id] = fresh
        row = self.row_of(memory.id)
        if row >= 0:
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def strengths_changed(self) -> None:
        """Repaint strength and relative times (the clock moved)."""
        if len(self._ids):
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._ids) - 1, len(COLUMNS) - 1))

    def cell(self, row: Any, column: int, role: int) -> Any:
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
            if key == "title":
                text = m.content if len(m.content) <= 600 else m.content[:600] + "…"
                return f"#{m.id} {m.title}\n\n{text}"
            if key in ("created", "used", "expires"):
                value = {"created": m.created_at, "used": m.last_accessed_at, "expires": m.forget_after}[key]
                return f"{fmt.when(value)} ({fmt.relative(value, now)})" if value else None
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
        return COLUMNS[COLUMN_INDEX[key]].show(row.memory, now, self.decay_config)


def _positions(ids: array[int], wanted: set[int]) -> dict[int, int]:
    """Where each of ``wanted`` (a few ids: the selection, the current row) sits in ``ids``."""
    if not wanted or not len(ids):
        return {}
    a = np.frombuffer(ids, dtype=np.int64)
    where = np.flatnonzero(np.isin(a, np.fromiter(wanted, dtype=np.int64, count=len(wanted))))
    return {int(a[i]): int(i) for i in where}
