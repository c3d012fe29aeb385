"""The memory table's columns, in one registry: a column is one entry here.

Each :class:`Column` says its header and tooltip, its width (None: it stretches), whether it starts hidden, how a
cell shows a row (a memory, with its score and snippet when it came from a search), the exact sort value, the
``order_by`` the database sorts it on (``MemoryStore.list_ids``; "score" only exists in a search; "" for a column
only a list loaded whole can be sorted by, such as the next sweep's decisions), which delegate paints it, and its
priority when a narrow table has no room for every column. The memory model, the header's show/hide menu and the
window's delegates all read this list.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memlens import rules
from memlens.decay import DecayConfig, strength
from memlens.gui import format as fmt
from memlens.models import Memory
from memlens.sweep import SweepDecision


@dataclass(frozen=True)
class MemoryRow:
    """A memory as the table holds it; from a search also its snippet (matched terms in « »), score and the
    score's explanation (:meth:`memlens.storage.results.Hit.explain`)."""

    memory: Memory
    snippet: str | None = None
    score: float | None = None
    explanation: str | None = None
    #: Place in the engine's order (0 for the best hit); breaks ties between equal scores the way the engine did.
    rank: int = 0
    #: What the next sweep would do with it (the sweep preview's decision), if anything.
    sweep: SweepDecision | None = None


Show = Callable[[MemoryRow, datetime, DecayConfig], str]
SortValue = Callable[[MemoryRow, datetime, DecayConfig], Any]
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
    #: Shown only while the table holds search results (the score column).
    search_only: bool = False
    #: A cell's tooltip (None: the model's default for the column, if any).
    hover: Show | None = None
    #: When the table is too narrow for every shown column at its width, the shown columns of lowest priority are
    #: hidden first (ties: the rightmost first), until the text keeps a readable width. None: never hidden for room
    #: (the id, the text and the score).
    priority: int | None = 0


def _expires(r: MemoryRow, now: datetime, _c: DecayConfig) -> str:
    m = r.memory
    if m.forget_after is None:
        return ""
    return "expired" if m.is_expired(now) else fmt.relative(m.forget_after, now)


def _score(r: MemoryRow, _n: datetime, _c: DecayConfig) -> str:
    return "" if r.score is None else f"{r.score:.3f}"


_RULE_ORDER = {name: i for i, name in enumerate(rules.names())}


def _sweep(r: MemoryRow, _n: datetime, _c: DecayConfig) -> str:
    """The rule that takes it (short: the column is narrow; the tooltip says what happens and why)."""
    d = r.sweep
    return "" if d is None else "TTL" if d.rule == "ttl" else d.rule.replace("_", " ")


def _sweep_reason(r: MemoryRow, _n: datetime, _c: DecayConfig) -> str:
    d = r.sweep
    if d is None:
        return "The next sweep leaves it alone."
    verb = {"forget": "forget it", "archive": "archive it (then forget it)", "mark_not_latest": "make it an old version"}.get(d.action, d.action)
    return f"The next sweep would {verb} ({d.rule.replace('_', ' ')} rule): {d.reason}"


def _sweep_sort(r: MemoryRow, _n: datetime, _c: DecayConfig) -> tuple[int, int]:
    return (0, 0) if r.sweep is None else (1, -_RULE_ORDER.get(r.sweep.rule, 0))


COLUMNS: tuple[Column, ...] = (
    Column("id", "#", "id", "Memory id", lambda r, _n, _c: str(r.memory.id), lambda r, _n, _c: r.memory.id, width=58, right_aligned=True, priority=None),
    Column(
        "title", "Title", "title", "Title (in a search: the matching passage)",
        lambda r, _n, _c: r.memory.title, lambda r, _n, _c: r.memory.title.lower(), width=None, delegate="snippet", hideable=False, priority=None,
    ),
    Column(
        "score", "Score", "score", "Search score (the engine's order); the tooltip explains it",
        _score, lambda r, _n, _c: (r.score if r.score is not None else float("-inf"), -r.rank), width=56, right_aligned=True, search_only=True, priority=None,
    ),
    Column("layer", "Layer", "layer", "Working, episodic, semantic or procedural", lambda r, _n, _c: r.memory.layer, lambda r, _n, _c: r.memory.layer, width=76, priority=50),
    Column("type", "Type", "type", "fact, preference, decision, workflow, observation, …", lambda r, _n, _c: r.memory.type, lambda r, _n, _c: r.memory.type, width=78, priority=40),
    Column(
        "project", "Project", "project", "Project the memory belongs to",
        lambda r, _n, _c: r.memory.project or "", lambda r, _n, _c: (r.memory.project or "").lower(), width=86, priority=30,
    ),
    Column(
        "strength", "Strength", "last_accessed_at",
        "Strength now (0-1); sorting orders a large list by last use, a small one or a search exactly",
        lambda r, n, c: f"{strength(r.memory, n, c):.2f}", lambda r, n, c: strength(r.memory, n, c), width=86, right_aligned=True, delegate="strength", priority=70,
    ),
    Column(
        "created", "Created", "created_at", "When this version was stored",
        lambda r, n, _c: fmt.short_when(r.memory.created_at, n), lambda r, _n, _c: r.memory.created_at, width=98, priority=60,
    ),
    Column(
        "used", "Last used", "last_accessed_at", "Last recall (or creation)",
        lambda r, n, _c: fmt.relative(r.memory.last_accessed_at, n), lambda r, _n, _c: r.memory.last_accessed_at, width=80, hidden=True, priority=15,
    ),
    Column(
        "version", "Ver.", "version", "Version in its chain",
        lambda r, _n, _c: str(r.memory.version) + ("" if r.memory.is_latest else " (old)"), lambda r, _n, _c: r.memory.version, width=40, hidden=True, right_aligned=True, priority=10,
    ),
    Column(
        "uses", "Uses", "access_count", "How often it was recalled",
        lambda r, _n, _c: str(r.memory.access_count), lambda r, _n, _c: r.memory.access_count, width=42, hidden=True, right_aligned=True, priority=10,
    ),
    Column(
        "importance", "Imp.", "importance", "Importance (0-1)",
        lambda r, _n, _c: f"{r.memory.importance:.2f}", lambda r, _n, _c: r.memory.importance, width=44, hidden=True, right_aligned=True, priority=10,
    ),
    Column(
        "tags", "Tags", "tags", "Tags",
        lambda r, _n, _c: ", ".join(r.memory.tags), lambda r, _n, _c: ", ".join(sorted(r.memory.tags)).lower(), width=110, hidden=True, priority=5,
    ),
    Column("expires", "Expires", "forget_after", "When its TTL runs out", _expires, lambda r, _n, _c: r.memory.forget_after or _FAR, width=76, priority=20),
    Column(
        "sweep", "Sweep", "", "What the next sweep would do with it (the same plan as Lifecycle > Preview Next Sweep); "
        "hover a cell for the rule's reason", _sweep, _sweep_sort, width=64, hover=_sweep_reason, priority=55,
    ),
)
COLUMN_INDEX = {c.key: i for i, c in enumerate(COLUMNS)}
