"""One lazy table mechanism for every table over the store: ids eagerly, rows on demand in cached blocks.

Like Anki's browser table, a :class:`LazyTableModel` loads the ordered list of matching ids eagerly - one query on
the reader thread; integer ids are kept as an ``array('q')`` (a million ids take 8 MB) - so ``rowCount()`` is the
true total and the scrollbar is real. Row contents are loaded in blocks of :attr:`LazyTableModel.BLOCK` ids around
what the view paints, through the reader thread, and kept in an LRU cache of at most
:attr:`LazyTableModel.MAX_BLOCKS` blocks, so memory stays bounded however far one scrolls. A row whose block has
not arrived shows a placeholder (:meth:`LazyTableModel.placeholder`); when it arrives ``dataChanged`` is emitted.

A list of at most :attr:`LazyTableModel.SMALL` ids, or one whose id query read the rows anyway (a search), is
loaded whole; :meth:`LazyTableModel.arrange` may then reorder it in memory (an exact sort).

:meth:`LazyTableModel.refresh` re-reads the id list in the background and applies the difference with removes,
inserts and a layout change (never a reset), moving persistent indexes by id, so selection and scroll position
survive another process writing to the store; rows keep their positions when their ids do not move.

Subclasses say how to read the ids (:meth:`~LazyTableModel.ids_reader`), how to read rows for some ids
(:meth:`~LazyTableModel.rows_reader`), how to identify a row and how to show each column; both readers run on the
reader thread with its own store, so they capture what they need (the filter) when they are made.
"""

from __future__ import annotations

import itertools
from array import array
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.store import MemoryStore

Index = QtCore.QModelIndex | QtCore.QPersistentModelIndex
#: The ids of a table in display order: an ``array('q')`` for integer ids, a list otherwise.
Ids = Any
_keys = itertools.count(1)


@dataclass(frozen=True)
class IdList:
    """What an ids reader returns: the ids in display order, and every row when the query read them anyway."""

    ids: Sequence[Hashable]
    rows: Mapping[Hashable, Any] | None = None


@dataclass(frozen=True)
class _Listing:
    """What the reader thread hands back for an id list: ids in order, and the rows it read with them."""

    ids: Ids
    rows: dict[Hashable, Any]
    complete: bool  # rows holds every id's row
    previous: Ids | None  # the ids the difference below was worked out against
    removed: list[tuple[int, int]]  # ranges (first, last) of the previous ids that are gone, in ascending order
    added: list[Hashable]  # ids that were not in the previous list, in their new order


def id_diff(old: Ids, new: Ids) -> tuple[list[tuple[int, int]], list[Hashable]]:
    """Ranges of ``old`` whose ids are not in ``new``, and the ids of ``new`` not in ``old``.

    Integer arrays are compared with numpy (no Python loop per id); other ids with sets.
    """
    if not len(old):
        return [], list(new)
    if isinstance(old, array) and isinstance(new, array):
        a = np.frombuffer(old, dtype=np.int64)
        b = np.frombuffer(new, dtype=np.int64) if len(new) else np.empty(0, dtype=np.int64)
        gone = ~np.isin(a, b)
        added = b[~np.isin(b, a)].tolist() if len(b) else []
    else:
        new_set, old_set = set(new), set(old)
        gone = np.fromiter((i not in new_set for i in old), dtype=bool, count=len(old))
        added = [i for i in new if i not in old_set]
    ranges: list[tuple[int, int]] = []
    if gone.any():
        edges = np.flatnonzero(np.diff(np.concatenate(([0], gone.view(np.int8), [0]))))
        ranges = [(int(edges[k]), int(edges[k + 1]) - 1) for k in range(0, len(edges), 2)]
    return ranges, added


def _positions(ids: Ids, wanted: set[Hashable]) -> dict[Hashable, int]:
    """Where each of ``wanted`` (a few ids: the selection, the current row) sits in ``ids``."""
    if not wanted or not len(ids):
        return {}
    if isinstance(ids, array):
        a = np.frombuffer(ids, dtype=np.int64)
        where = np.flatnonzero(np.isin(a, np.fromiter((int(w) for w in wanted), dtype=np.int64, count=len(wanted))))  # type: ignore[call-overload]
        return {int(a[i]): int(i) for i in where}
    return {row_id: n for n, row_id in enumerate(ids) if row_id in wanted}


class LazyTableModel(QtCore.QAbstractTableModel):
    """Rows matching a filter: every id loaded, row contents in cached blocks; see the module docstring."""

    #: Emitted after an id list (a reload, a refresh) or an in-memory sort has been applied.
    loaded = Signal()
    #: Emitted with a readable message when loading failed; what was shown stays.
    load_failed = Signal(str)
    #: Emitted with the number of matching rows once counted (-1 when unknown).
    counted = Signal(int)

    #: Rows loaded per request.
    BLOCK: ClassVar[int] = 200
    #: Blocks kept in the cache (least recently painted ones are dropped first).
    MAX_BLOCKS: ClassVar[int] = 50
    #: Lists of at most this many ids are loaded whole.
    SMALL: ClassVar[int] = 1000
    #: Block requests in flight at most; a newer request for the same slot makes an older unstarted one obsolete.
    SLOTS: ClassVar[int] = 8
    #: A refresh removing more separate runs of rows than this resets the view instead (selection is lost).
    MAX_REMOVALS: ClassVar[int] = 2000
    #: Ids are integers, kept in an ``array('q')``; otherwise (e.g. session names) in a list.
    INT_IDS: ClassVar[bool] = True

    def __init__(self, reader: StoreReader | None = None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._reader = reader
        self._key = f"{type(self).__name__}#{next(_keys)}"
        self.total: int | None = None
        self._ids: Ids = self._make_ids(())
        self._rows: dict[Hashable, Any] = {}
        self._stale: dict[Hashable, Any] = {}  # rows from before a refresh, shown until their block is read again
        self._blocks: OrderedDict[int, None] = OrderedDict()  # loaded block numbers, least recently used first
        self._requested: dict[int, tuple[int, int]] = {}  # slot -> (block, reader token)
        self._complete = False  # every row is in _rows (a small list or a search)
        self._loading = False
        self._generation = 0

    # --- what subclasses provide -------------------------------------------------------------------------------

    #: Column headers (or override :meth:`columns`).
    HEADERS: ClassVar[Sequence[str]] = ()

    def columns(self) -> Sequence[str]:
        """Column headers."""
        return self.HEADERS

    def ids_reader(self) -> Callable[[MemoryStore], Sequence[Hashable] | IdList]:
        """A function (run on the reader thread) returning the ids to show in display order, or an :class:`IdList`."""
        raise NotImplementedError

    def rows_reader(self) -> Callable[[MemoryStore, list[Hashable]], list[Any]]:
        """A function (run on the reader thread) returning the rows for some ids (missing ones left out)."""
        raise NotImplementedError

    def row_id(self, row: Any) -> Hashable:
        """A stable identity for a row (a memory id, an audit entry id, a session id); by default its ``id``."""
        return row.id

    def cell(self, row: Any, column: int, role: int) -> Any:
        """What to show for ``role`` in ``column`` of a loaded ``row`` (None for nothing)."""
        raise NotImplementedError

    def placeholder(self, row_id: Hashable, column: int, role: int) -> Any:
        """What to show for a row whose block has not arrived: its id in the first column, "…" in the second."""
        if role not in (QtCore.Qt.ItemDataRole.DisplayRole, QtCore.Qt.ItemDataRole.AccessibleTextRole):
            return None
        return str(row_id) if column == 0 else "…" if column == 1 else None

    def arrange(self, ids: Ids, rows: Mapping[Hashable, Any]) -> Ids:
        """The ids of a list loaded whole, reordered in memory (an exact sort); the default keeps the read order."""
        return ids

    # --- state -------------------------------------------------------------------------------------------------

    def set_reader(self, reader: StoreReader | None) -> None:
        """Use another store (or none); clears the rows."""
        self._reader = reader
        self._clear()

    @property
    def reader(self) -> StoreReader | None:
        """The reader thread rows are loaded through (None: no store open)."""
        return self._reader

    def _make_ids(self, values: Sequence[Hashable] | Any) -> Ids:
        return array("q", values) if self.INT_IDS else list(values)

    def _clear(self) -> None:
        self._generation += 1
        self.beginResetModel()
        self._ids = self._make_ids(())
        self._rows, self._stale = {}, {}
        self._blocks.clear()
        self._requested.clear()
        self._complete = False
        self._loading = False
        self.total = None
        self.endResetModel()

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

    def is_complete(self) -> bool:
        """Whether every row's contents are in memory (a small list, or one read whole with its ids)."""
        return self._complete

    def canFetchMore(self, parent: Index) -> bool:
        """Never: every id is loaded with the list, so there is nothing to append."""
        return False

    def ids(self) -> Ids:
        """The ids of every row, in display order (a copy)."""
        return self._make_ids(self._ids)

    def ids_in_rows(self, ranges: Sequence[tuple[int, int]]) -> list[Hashable]:
        """The ids of the rows covered by ``(first, last)`` ranges (overlaps counted once), in display order."""
        rows = len(self._ids)
        spans = sorted((max(0, first), min(last, rows - 1)) for first, last in ranges if first <= last)
        ids: list[Hashable] = []
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

    def row_at(self, row: int) -> Any:
        """The row at ``row`` if its contents are loaded (None when out of range or not loaded yet)."""
        if not 0 <= row < len(self._ids):
            return None
        row_id = self._ids[row]
        found = self._rows.get(row_id)
        return found if found is not None else self._stale.get(row_id)

    def row_of(self, row_id: Hashable) -> int:
        """The position of the row with this id, or -1 (loaded or not)."""
        try:
            return self._ids.index(row_id)
        except (ValueError, TypeError):
            return -1

    def replace_row(self, row: Any) -> None:
        """Show a fresher copy of a loaded row (after an edit) without reloading."""
        row_id = self.row_id(row)
        if row_id in self._rows:
            self._rows[row_id] = row
        elif row_id in self._stale:
            self._stale[row_id] = row
        else:
            return
        position = self.row_of(row_id)
        if position >= 0:
            self.dataChanged.emit(self.index(position, 0), self.index(position, self.columnCount() - 1))

    def cached_row(self, row_id: Hashable) -> Any:
        """The loaded row with this id (None when it is not in memory)."""
        found = self._rows.get(row_id)
        return found if found is not None else self._stale.get(row_id)

    def repaint_all(self) -> None:
        """Ask the views to repaint every row (what a cell shows changed, e.g. the clock moved)."""
        if len(self._ids):
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._ids) - 1, self.columnCount() - 1))

    # --- loading -----------------------------------------------------------------------------------------------

    def _ids_loader(self, previous: Ids | None) -> Callable[[MemoryStore], _Listing]:
        read_ids, read_rows = self.ids_reader(), self.rows_reader()
        small, block, row_id, make = self.SMALL, self.BLOCK, self.row_id, self._make_ids

        def load(store: MemoryStore) -> _Listing:
            got = read_ids(store)
            if isinstance(got, IdList):
                ids, rows, complete = make(got.ids), dict(got.rows or {}), got.rows is not None
            else:
                ids = make(got)
                complete = len(ids) <= small
                wanted = ids if complete else ids[:block]
                rows = {row_id(r): r for r in read_rows(store, list(wanted))}
            removed, added = id_diff(previous, ids) if previous is not None else ([], [])
            return _Listing(ids, rows, complete, previous, removed, added)

        return load

    def _request_ids(self, *, merge: bool) -> None:
        assert self._reader is not None
        self._loading = True
        generation = self._generation
        loader = self._ids_loader(self._make_ids(self._ids) if merge else None)

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
        complete, rows = result.complete, result.rows
        new_ids = result.ids
        removed, added = result.removed, result.added
        if complete:
            new_ids = self._make_ids(self.arrange(new_ids, rows))
        if merge and len(self._ids) and (complete or result.previous is None or self._ids != result.previous):
            removed, added = id_diff(self._ids, new_ids)  # small, or the list changed since the read began
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

    def rearrange(self) -> None:
        """Reorder a list loaded whole by :meth:`arrange` (after its sort changed), keeping the selection."""
        if len(self._ids):
            self._merge(self._make_ids(self.arrange(self._ids, self._rows)), [], [])

    def _merge(self, new_ids: Ids, removed: list[tuple[int, int]], added: list[Hashable]) -> None:
        """Make the ids equal ``new_ids`` with removes, inserts and a layout change, never a reset."""
        root = QtCore.QModelIndex()
        if len(removed) > self.MAX_REMOVALS:
            # Most of the list changed (a mass forget elsewhere): one reset costs less than thousands of removals.
            self.beginResetModel()
            self._ids = self._make_ids(new_ids)
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
            self._ids = self._make_ids(new_ids)
            self.changePersistentIndexList(persistent, moved)
            self.layoutChanged.emit()
        self.repaint_all()

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
        ids = list(self._ids[first : first + self.BLOCK])
        generation = self._generation
        read_rows = self.rows_reader()

        def load(store: MemoryStore) -> list[Any]:
            return read_rows(store, ids)

        def done(rows: list[Any]) -> None:
            if self._requested.get(slot, (None, 0))[0] == block:
                del self._requested[slot]
            if generation != self._generation or list(self._ids[first : first + len(ids)]) != ids:
                return  # the list changed meanwhile; the view asks again when it paints
            for r in rows:
                row_id = self.row_id(r)
                self._rows[row_id] = r
                self._stale.pop(row_id, None)
            self._blocks[block] = None
            self._blocks.move_to_end(block)
            while len(self._blocks) > self.MAX_BLOCKS:
                old, _ = self._blocks.popitem(last=False)
                for old_id in self._ids[old * self.BLOCK : (old + 1) * self.BLOCK]:
                    self._rows.pop(old_id, None)
            self.dataChanged.emit(self.index(first, 0), self.index(first + len(ids) - 1, self.columnCount() - 1))

        def failed(error: BaseException) -> None:
            if self._requested.get(slot, (None, 0))[0] == block:
                del self._requested[slot]
            if generation == self._generation:
                self.load_failed.emit(str(error))

        token = reader.submit(self._slot_key(slot), load, done, failed)
        self._requested[slot] = (block, token)

    def _row(self, row: int) -> Any:
        """The row's contents, asking for its block when it is not loaded (a row from before a refresh meanwhile)."""
        row_id = self._ids[row]
        if self._complete:
            return self._rows.get(row_id)
        block = row // self.BLOCK
        if block in self._blocks:
            self._blocks.move_to_end(block)
            found = self._rows.get(row_id)
            if found is not None:
                return found
            return self._stale.get(row_id)
        self._want_block(block)
        return self._stale.get(row_id)

    # --- Qt model interface ------------------------------------------------------------------------------------

    def rowCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._ids)

    def columnCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns())

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == QtCore.Qt.Orientation.Horizontal and role == QtCore.Qt.ItemDataRole.DisplayRole and 0 <= section < self.columnCount():
            return self.columns()[section]
        return None

    # flags() is QAbstractTableModel's own (enabled, selectable, never has children): selecting a million rows
    # makes Qt ask for the flags of every cell, which must not cost a call into Python each.

    #: The role that answers with a row's id without loading it (None: no such role).
    ID_ROLE: ClassVar[int | None] = None

    def data(self, index: Index, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._ids) or not 0 <= index.column() < self.columnCount():
            return None
        if role == self.ID_ROLE:
            return self._ids[index.row()]
        row = self._row(index.row())
        if row is None:
            return self.placeholder(self._ids[index.row()], index.column(), role)
        try:
            return self.cell(row, index.column(), role)
        except Exception:  # a row that cannot be shown is a placeholder, never an exception inside paint code
            return "…" if role == QtCore.Qt.ItemDataRole.DisplayRole else None


def lazy_table_view(model: LazyTableModel, name: str, accessible_name: str, widths: Sequence[int]) -> QtWidgets.QTableView:
    """A read-only table of whole rows, one selectable at a time, over ``model``; the last column stretches."""
    table = QtWidgets.QTableView()
    table.setObjectName(name)
    table.setAccessibleName(accessible_name)
    table.setModel(model)
    table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setWordWrap(False)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(24)
    table.horizontalHeader().setStretchLastSection(True)
    for column, width in enumerate(widths):
        table.setColumnWidth(column, width)
    return table
