"""A table model that loads its rows a page at a time on the reader thread, and refreshes in place.

Subclasses say how to load ``limit`` rows from ``offset`` (a function run on the reader thread with its own store),
how to identify a row, and how to show each column. The base class does the Qt bookkeeping:

* ``canFetchMore``/``fetchMore`` ask for the next page only when the view scrolls near the end, so a million-row
  store opens with its first page and never loads everything;
* :meth:`reload` starts over (new filters or sort order);
* :meth:`refresh` reloads the rows already on screen and merges them by id - rows that vanished are removed, new
  ones inserted, moved ones moved with their persistent indexes - so selection and scroll position survive another
  process writing to the store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

from memlens.gui.qt import QtCore, Signal
from memlens.gui.tasks import StoreReader
from memlens.store import MemoryStore

Index = QtCore.QModelIndex | QtCore.QPersistentModelIndex
_ids = itertools.count(1)


class LazyTableModel(QtCore.QAbstractTableModel):
    """Rows loaded lazily in pages through a :class:`StoreReader`; see the module docstring."""

    #: Emitted after a page, a reload or a refresh has been applied (tests and the status bar wait on it).
    loaded = Signal()
    #: Emitted with a readable message when loading failed; the rows already shown stay.
    load_failed = Signal(str)

    PAGE: ClassVar[int] = 200
    #: Upper bound on how many rows a refresh reloads (rows past it are dropped and fetched again on scroll).
    MAX_REFRESH: ClassVar[int] = 5000

    def __init__(self, reader: StoreReader | None = None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._reader = reader
        self._key = f"{type(self).__name__}#{next(_ids)}"
        self._rows: list[Any] = []
        self._exhausted = True
        self._loading = False
        self._generation = 0

    # --- what subclasses provide -------------------------------------------------------------------------------

    def columns(self) -> Sequence[str]:
        """Column headers."""
        raise NotImplementedError

    def page_loader(self, offset: int, limit: int) -> Callable[[MemoryStore], list[Any]]:
        """A function (run on the reader thread) returning up to ``limit`` rows from ``offset`` in display order."""
        raise NotImplementedError

    def row_id(self, row: Any) -> Hashable:
        """A stable identity for a row (a memory id, an audit entry id)."""
        raise NotImplementedError

    def cell(self, row: Any, column: int, role: int) -> Any:
        """What to show for ``role`` in ``column`` of ``row`` (None for nothing)."""
        raise NotImplementedError

    def arrange(self, rows: list[Any]) -> list[Any]:
        """Reorder rows after they were loaded (for sorts done in memory); the default keeps the loaded order."""
        return rows

    # --- state -------------------------------------------------------------------------------------------------

    def set_reader(self, reader: StoreReader | None) -> None:
        """Use another store (or none); clears the rows."""
        self._reader = reader
        self._generation += 1
        self.beginResetModel()
        self._rows = []
        self._exhausted = reader is None
        self._loading = False
        self.endResetModel()

    def rows(self) -> list[Any]:
        """The rows loaded so far, in display order."""
        return list(self._rows)

    def row_at(self, row: int) -> Any:
        """The row object at ``row`` (None when out of range)."""
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def row_of(self, row_id: Hashable) -> int:
        """The position of the row with this id among the loaded rows, or -1."""
        for i, row in enumerate(self._rows):
            if self.row_id(row) == row_id:
                return i
        return -1

    def is_loading(self) -> bool:
        """Whether a page, reload or refresh is on its way."""
        return self._loading

    # --- Qt model interface ------------------------------------------------------------------------------------

    def rowCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: Index = QtCore.QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns())

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == QtCore.Qt.Orientation.Horizontal and role == QtCore.Qt.ItemDataRole.DisplayRole and 0 <= section < len(self.columns()):
            return self.columns()[section]
        return None

    def data(self, index: Index, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows) or not 0 <= index.column() < len(self.columns()):
            return None
        try:
            return self.cell(self._rows[index.row()], index.column(), role)
        except Exception:  # a row that cannot be shown is a placeholder, never an exception inside paint code
            return "…" if role == QtCore.Qt.ItemDataRole.DisplayRole else None

    def flags(self, index: Index) -> QtCore.Qt.ItemFlag:
        if not index.isValid():
            return QtCore.Qt.ItemFlag.NoItemFlags
        return QtCore.Qt.ItemFlag.ItemIsEnabled | QtCore.Qt.ItemFlag.ItemIsSelectable | QtCore.Qt.ItemFlag.ItemNeverHasChildren

    def canFetchMore(self, parent: Index) -> bool:
        return not parent.isValid() and not self._exhausted and self._reader is not None

    def fetchMore(self, parent: Index) -> None:
        if parent.isValid() or self._exhausted or self._loading or self._reader is None:
            return
        self._request(offset=len(self._rows), limit=self.PAGE, mode="append")

    # --- loading -----------------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Drop every row and load the first page again (filters or order changed)."""
        self._generation += 1
        self.beginResetModel()
        self._rows = []
        self._exhausted = self._reader is None
        self._loading = False
        self.endResetModel()
        if self._reader is not None:
            self._request(offset=0, limit=self.PAGE, mode="append")

    def refresh(self) -> None:
        """Reload the rows already loaded and merge them in place, keeping selection and scroll position."""
        if self._reader is None:
            return
        limit = min(max(self.PAGE, len(self._rows) + (self.PAGE if self._loading else 0)), self.MAX_REFRESH)
        self._request(offset=0, limit=limit, mode="merge")

    def _request(self, *, offset: int, limit: int, mode: str) -> None:
        assert self._reader is not None
        self._loading = True
        generation = self._generation
        loader = self.page_loader(offset, limit)

        def done(rows: list[Any]) -> None:
            if generation != self._generation:
                return
            self._loading = False
            if mode == "append":
                self._append(rows, limit)
            else:
                self._merge(rows, limit)
            self.loaded.emit()

        def failed(error: BaseException) -> None:
            if generation != self._generation:
                return
            self._loading = False
            self._exhausted = True
            self.load_failed.emit(str(error))
            self.loaded.emit()

        self._reader.submit(self._key, loader, done, failed)

    def _append(self, rows: list[Any], limit: int) -> None:
        self._exhausted = len(rows) < limit
        known = {self.row_id(r) for r in self._rows}
        fresh = [r for r in rows if self.row_id(r) not in known]
        if not fresh:
            return
        arranged = self.arrange([*self._rows, *fresh])
        if [self.row_id(r) for r in arranged[: len(self._rows)]] == [self.row_id(r) for r in self._rows]:
            start = len(self._rows)
            self.beginInsertRows(QtCore.QModelIndex(), start, start + len(fresh) - 1)
            self._rows = arranged
            self.endInsertRows()
        else:
            self._merge(arranged, None)

    def _merge(self, rows: list[Any], limit: int | None) -> None:
        """Make the loaded rows equal ``rows`` with removes, inserts and a layout change, never a reset."""
        if limit is not None:
            self._exhausted = len(rows) < limit
            rows = self.arrange(rows)
        new_ids = [self.row_id(r) for r in rows]
        wanted = set(new_ids)
        i = len(self._rows) - 1
        while i >= 0:
            if self.row_id(self._rows[i]) in wanted:
                i -= 1
                continue
            j = i
            while j > 0 and self.row_id(self._rows[j - 1]) not in wanted:
                j -= 1
            self.beginRemoveRows(QtCore.QModelIndex(), j, i)
            del self._rows[j : i + 1]
            self.endRemoveRows()
            i = j - 1
        kept = {self.row_id(r) for r in self._rows}
        added = [r for r in rows if self.row_id(r) not in kept]
        if added:
            start = len(self._rows)
            self.beginInsertRows(QtCore.QModelIndex(), start, start + len(added) - 1)
            self._rows.extend(added)
            self.endInsertRows()
        if [self.row_id(r) for r in self._rows] != new_ids:
            self.layoutAboutToBeChanged.emit()
            position = {rid: n for n, rid in enumerate(new_ids)}
            old_ids = [self.row_id(r) for r in self._rows]
            persistent = self.persistentIndexList()
            moved = [self.index(position[old_ids[p.row()]], p.column()) if 0 <= p.row() < len(old_ids) else QtCore.QModelIndex() for p in persistent]
            self._rows = list(rows)
            self.changePersistentIndexList(persistent, moved)
            self.layoutChanged.emit()
        else:
            self._rows = list(rows)
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, self.columnCount() - 1))
