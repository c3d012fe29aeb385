"""The memory table: one layer's memories (or search hits), loaded page by page.

Sorting: every column except Strength and Tags sorts in the database (``list_memories(order_by=...)``), so the
first page of a million memories is the right first page. Strength is not stored - it is a function of ``now`` -
so the Strength column orders the database query by *last use* (the clock strength decays on; most recently used
first) and then sorts the rows loaded so far exactly by computed strength; as more pages arrive they are merged
into that order. Tags sort the loaded rows the same way. Search results (at most :attr:`SEARCH_LIMIT` hits) are
all loaded at once and every column sorts them exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from core.decay import DecayConfig, strength
from core.models import Memory
from core.store import MemoryStore
from core.text import SNIPPET_CLOSE, SNIPPET_OPEN
from gui import format as fmt
from gui.lazy_model import LazyTableModel
from gui.qt import QtCore, QtGui, Signal
from gui.tasks import StoreReader

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


@dataclass(frozen=True)
class Column:
    """A table column: header, the ``order_by`` it sorts on in the database (None: sorted in memory), tooltip."""

    key: str
    header: str
    order_by: str | None
    tip: str


COLUMNS: tuple[Column, ...] = (
    Column("id", "#", "id", "Memory id"),
    Column("title", "Title", "title", "Title (in a search: the matching passage)"),
    Column("layer", "Layer", None, "Working, episodic, semantic or procedural"),
    Column("type", "Type", "type", "fact, preference, decision, workflow, observation, …"),
    Column("project", "Project", "project", "Project the memory belongs to"),
    Column("strength", "Strength", "last_accessed_at", "Strength now (0-1); sorting orders the loaded rows exactly, the store by last use"),
    Column("created", "Created", "created_at", "When this version was stored"),
    Column("used", "Last used", "last_accessed_at", "Last recall (or creation)"),
    Column("version", "Ver.", "version", "Version in its chain"),
    Column("uses", "Uses", "access_count", "How often it was recalled"),
    Column("importance", "Imp.", "importance", "Importance (0-1)"),
    Column("tags", "Tags", None, "Tags"),
    Column("expires", "Expires", "forget_after", "When its TTL runs out"),
)
COLUMN_INDEX = {c.key: i for i, c in enumerate(COLUMNS)}


def _sort_value(row: MemoryRow, key: str, now: datetime, config: DecayConfig) -> Any:
    m = row.memory
    far = datetime.max.replace(tzinfo=timezone.utc)
    return {
        "id": m.id,
        "title": m.title.lower(),
        "layer": m.layer,
        "type": m.type,
        "project": (m.project or "").lower(),
        "strength": strength(m, now, config),
        "created": m.created_at,
        "used": m.last_accessed_at,
        "version": m.version,
        "uses": m.access_count,
        "importance": m.importance,
        "tags": ", ".join(m.tags).lower(),
        "expires": m.forget_after or far,
    }[key]


class MemoryTableModel(LazyTableModel):
    """Memories matching a :class:`MemoryQuery`, lazily paged; a search shows up to SEARCH_LIMIT ranked hits."""

    SEARCH_LIMIT: ClassVar[int] = 500
    #: Emitted with the number of matching memories once counted (-1 when unknown).
    counted = Signal(int)

    def __init__(self, reader: StoreReader | None, now: Callable[[], datetime], parent: QtCore.QObject | None = None) -> None:
        super().__init__(reader, parent)
        self._now = now
        self.query = MemoryQuery()
        self.decay_config = DecayConfig()
        self.total: int | None = None
        self._memory_sort: tuple[str, bool] | None = None  # (column key, descending) sorted in memory
        self._palette_dim = QtGui.QColor(128, 128, 128)
        #: Shown before the title of a pinned memory.
        self.pin_icon: QtGui.QIcon | None = None

    # --- query -------------------------------------------------------------------------------------------------

    def set_query(self, query: MemoryQuery) -> None:
        """Show the memories matching ``query`` (reloads from the first page)."""
        if query.text != self.query.text:
            self.headerDataChanged.emit(QtCore.Qt.Orientation.Horizontal, 0, len(COLUMNS) - 1)
        self.query = query
        self.reload()

    def reload(self) -> None:
        """Start over from the first page and recount."""
        self.total = None
        super().reload()
        self._count()

    def refresh(self) -> None:
        """Reload what is loaded (keeps selection) and recount."""
        super().refresh()
        self._count()

    def _count(self) -> None:
        if self._reader is None:
            return
        if self.query.text.strip():
            return  # a search counts its hits when they arrive
        kwargs = self._filter_kwargs(self._now())

        def count(store: MemoryStore) -> int:
            return store.count_memories(**kwargs)

        def done(n: int) -> None:
            self.total = n
            self.counted.emit(n)

        self._reader.submit(self._key + ":count", count, done, lambda _e: self.counted.emit(-1))

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

    def page_loader(self, offset: int, limit: int) -> Callable[[MemoryStore], list[Any]]:
        now = self._now()
        kwargs = self._filter_kwargs(now)
        q = self.query
        if q.text.strip():
            text = q.text
            search_limit = self.SEARCH_LIMIT

            def search(store: MemoryStore) -> list[Any]:
                if offset > 0:
                    return []
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
                return rows

            return search
        order_by, descending = q.order_by, q.descending

        def page(store: MemoryStore) -> list[Any]:
            memories = store.list_memories(**kwargs, order_by=order_by, descending=descending, offset=offset, limit=limit)
            return [MemoryRow(m) for m in memories]

        return page

    def _append(self, rows: list[Any], limit: int) -> None:
        super()._append(rows, limit)
        if self.query.text.strip():
            self._exhausted = True
            self.total = len(self._rows)
            self.counted.emit(self.total)

    def _merge(self, rows: list[Any], limit: int | None) -> None:
        super()._merge(rows, limit)
        if self.query.text.strip():
            self._exhausted = True
            self.total = len(self._rows)
            self.counted.emit(self.total)

    # --- sorting -----------------------------------------------------------------------------------------------

    def sort(self, column: int, order: QtCore.Qt.SortOrder = QtCore.Qt.SortOrder.AscendingOrder) -> None:
        if not 0 <= column < len(COLUMNS):
            return
        col = COLUMNS[column]
        descending = order == QtCore.Qt.SortOrder.DescendingOrder
        in_memory = col.order_by is None or col.key == "strength" or bool(self.query.text.strip())
        if in_memory:
            self._memory_sort = (col.key, descending)
            if col.key == "strength" and not self.query.text.strip():
                # Strength is not stored: the store orders by last use, then the loaded rows are ordered exactly.
                wanted = replace(self.query, order_by="last_accessed_at", descending=descending)
                if wanted != self.query:
                    self.query = wanted
                    self.reload()
                    return
            self._merge(self.arrange(list(self._rows)), None)
            self.loaded.emit()
            return
        self._memory_sort = None
        assert col.order_by is not None
        wanted = replace(self.query, order_by=col.order_by, descending=descending)
        if wanted != self.query:
            self.query = wanted
            self.reload()

    def arrange(self, rows: list[Any]) -> list[Any]:
        if self._memory_sort is None:
            return rows
        key, descending = self._memory_sort
        now, config = self._now(), self.decay_config
        return sorted(rows, key=lambda r: (_sort_value(r, key, now, config), r.memory.id), reverse=descending)

    def sort_key(self) -> tuple[str, bool] | None:
        """The column key and direction sorted in memory, if any."""
        return self._memory_sort

    # --- display -----------------------------------------------------------------------------------------------

    def columns(self) -> Sequence[str]:
        headers = [c.header for c in COLUMNS]
        if self.query.text.strip():
            headers[COLUMN_INDEX["title"]] = "Match"
        return headers

    def headerData(self, section: int, orientation: QtCore.Qt.Orientation, role: int = QtCore.Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == QtCore.Qt.Orientation.Horizontal and role == QtCore.Qt.ItemDataRole.ToolTipRole and 0 <= section < len(COLUMNS):
            return COLUMNS[section].tip
        return super().headerData(section, orientation, role)

    def row_id(self, row: Any) -> Hashable:
        return row.memory.id

    def memory_at(self, row: int) -> Memory | None:
        """The memory shown in ``row``."""
        item = self.row_at(row)
        return item.memory if item is not None else None

    def update_memory(self, memory: Memory) -> None:
        """Replace a loaded memory with a fresher copy (after an edit) without reloading."""
        row = self.row_of(memory.id)
        if row >= 0:
            old = self._rows[row]
            self._rows[row] = MemoryRow(memory, old.snippet, old.score)
            self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def strengths_changed(self) -> None:
        """Repaint strength and relative times (the clock moved)."""
        if self._rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(self._rows) - 1, len(COLUMNS) - 1))

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
            if key in ("id", "version", "uses", "importance", "strength"):
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
        m = row.memory
        if key == "id":
            return str(m.id)
        if key == "title":
            if row.snippet and self.query.text.strip():
                return row.snippet
            return m.title
        if key == "layer":
            return m.layer
        if key == "type":
            return m.type
        if key == "project":
            return m.project or ""
        if key == "strength":
            return f"{strength(m, now, self.decay_config):.2f}"
        if key == "created":
            return fmt.short_when(m.created_at, now)
        if key == "used":
            return fmt.relative(m.last_accessed_at, now)
        if key == "version":
            return str(m.version) + ("" if m.is_latest else " (old)")
        if key == "uses":
            return str(m.access_count)
        if key == "importance":
            return f"{m.importance:.2f}"
        if key == "tags":
            return ", ".join(m.tags)
        if key == "expires":
            if m.forget_after is None:
                return ""
            return "expired" if m.is_expired(now) else fmt.relative(m.forget_after, now)
        return ""


def strip_marks(text: str) -> str:
    """A snippet without its « » match marks."""
    return text.replace(SNIPPET_OPEN, "").replace(SNIPPET_CLOSE, "")
