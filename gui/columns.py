"""The memory table's columns, in one registry: a column is one entry here.

Each :class:`Column` says its header and tooltip, its width (None: it stretches), whether it starts hidden, how a
cell shows a memory, the exact sort value, the ``order_by`` the database sorts it on
(``MemoryStore.list_ids``), and which delegate paints it. The memory model, the header's show/hide menu and the
window's delegates all read this list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memlens.decay import DecayConfig, strength
from memlens.gui import format as fmt
from memlens.models import Memory

Show = Callable[[Memory, datetime, DecayConfig], str]
SortValue = Callable[[Memory, datetime, DecayConfig], Any]
_FAR = datetime.max.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Column:
    """A memory table column; see the module docstring."""

    key: str
    header: str
    order_by: str
    tip: str
    show: Show
    sort_value: SortValue
    width: int | None = 80
    hidden: bool = False
    right_aligned: bool = False
    #: "strength" (a bar) or "snippet" (search matches highlighted); None: plain text.
    delegate: str | None = None
    #: The header menu can hide it (the title column always stays).
    hideable: bool = True


def _expires(m: Memory, now: datetime, _c: DecayConfig) -> str:
    if m.forget_after is None:
        return ""
    return "expired" if m.is_expired(now) else fmt.relative(m.forget_after, now)


COLUMNS: tuple[Column, ...] = (
    Column("id", "#", "id", "Memory id", lambda m, _n, _c: str(m.id), lambda m, _n, _c: m.id, width=46, right_aligned=True),
    Column(
        "title", "Title", "title", "Title (in a search: the matching passage)",
        lambda m, _n, _c: m.title, lambda m, _n, _c: m.title.lower(), width=None, delegate="snippet", hideable=False,
    ),
    Column("layer", "Layer", "layer", "Working, episodic, semantic or procedural", lambda m, _n, _c: m.layer, lambda m, _n, _c: m.layer, width=76),
    Column("type", "Type", "type", "fact, preference, decision, workflow, observation, …", lambda m, _n, _c: m.type, lambda m, _n, _c: m.type, width=78),
    Column(
        "project", "Project", "project", "Project the memory belongs to",
        lambda m, _n, _c: m.project or "", lambda m, _n, _c: (m.project or "").lower(), width=86,
    ),
    Column(
        "strength", "Strength", "last_accessed_at",
        "Strength now (0-1); sorting orders a large list by last use, a small one or a search exactly",
        lambda m, n, c: f"{strength(m, n, c):.2f}", lambda m, n, c: strength(m, n, c), width=86, right_aligned=True, delegate="strength",
    ),
    Column("created", "Created", "created_at", "When this version was stored", lambda m, n, _c: fmt.short_when(m.created_at, n), lambda m, _n, _c: m.created_at, width=98),
    Column(
        "used", "Last used", "last_accessed_at", "Last recall (or creation)",
        lambda m, n, _c: fmt.relative(m.last_accessed_at, n), lambda m, _n, _c: m.last_accessed_at, width=80, hidden=True,
    ),
    Column(
        "version", "Ver.", "version", "Version in its chain",
        lambda m, _n, _c: str(m.version) + ("" if m.is_latest else " (old)"), lambda m, _n, _c: m.version, width=40, right_aligned=True,
    ),
    Column("uses", "Uses", "access_count", "How often it was recalled", lambda m, _n, _c: str(m.access_count), lambda m, _n, _c: m.access_count, width=42, right_aligned=True),
    Column(
        "importance", "Imp.", "importance", "Importance (0-1)",
        lambda m, _n, _c: f"{m.importance:.2f}", lambda m, _n, _c: m.importance, width=44, hidden=True, right_aligned=True,
    ),
    Column(
        "tags", "Tags", "tags", "Tags",
        lambda m, _n, _c: ", ".join(m.tags), lambda m, _n, _c: ", ".join(sorted(m.tags)).lower(), width=110, hidden=True,
    ),
    Column("expires", "Expires", "forget_after", "When its TTL runs out", _expires, lambda m, _n, _c: m.forget_after or _FAR, width=76),
)
COLUMN_INDEX = {c.key: i for i, c in enumerate(COLUMNS)}
