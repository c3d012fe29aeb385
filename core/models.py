"""Plain data records that the store hands out.

Everything here is immutable and free of SQLite and Qt, so the GUI, the CLI, the MCP server and the lifecycle
engine can pass these around without touching the database.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any


class Layer(str, enum.Enum):
    """The four memory layers, from raw observations up to knowledge."""

    WORKING = "working"
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class Origin(str, enum.Enum):
    """Who or what wrote a memory."""

    AGENT = "agent"
    USER = "user"
    TOOL = "tool"
    IMPORT = "import"
    CONSOLIDATION = "consolidation"


#: Memory types that the store knows. Other strings are accepted and decay like ``fact``.
KNOWN_TYPES: tuple[str, ...] = (
    "fact",
    "preference",
    "decision",
    "pattern",
    "workflow",
    "bug",
    "task",
    "chitchat",
    "observation",
    "summary",
    "lesson",
    "archive",
)

#: The layer a type lands in when the caller does not say.
DEFAULT_LAYER_FOR_TYPE: dict[str, Layer] = {
    "observation": Layer.WORKING,
    "summary": Layer.EPISODIC,
    "workflow": Layer.PROCEDURAL,
}

RELATION_KINDS: tuple[str, ...] = ("supersedes", "extends", "derives", "contradicts", "related")

#: The ``source_confidence`` a memory starts with, by origin: an explicit user statement is trusted above an agent's
#: inference (see :mod:`memlens.conflicts`). Other origins start at :data:`DEFAULT_SOURCE_CONFIDENCE`.
ORIGIN_CONFIDENCE: dict[str, float] = {"user": 1.0, "import": 0.9, "agent": 0.8}
DEFAULT_SOURCE_CONFIDENCE = 0.7


def source_confidence_for(origin: str) -> float:
    """The ``source_confidence`` a new memory of this origin starts with."""
    return ORIGIN_CONFIDENCE.get(origin, DEFAULT_SOURCE_CONFIDENCE)


def utc_from_ts(ts: float | None) -> datetime | None:
    """An aware UTC datetime from a stored epoch-seconds value (None stays None)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc)


def ts_from_dt(when: datetime) -> float:
    """Epoch seconds from an aware datetime; naive datetimes are refused so time zones never get guessed."""
    if when.tzinfo is None:
        raise ValueError("datetimes passed to memlens must be timezone-aware (for example datetime.now(timezone.utc))")
    return when.timestamp()


@dataclass(frozen=True)
class Memory:
    """One version of one memory, as stored.

    Times are aware UTC datetimes. ``chain_id`` is the id of the first version of the chain this memory belongs to;
    ``parent_id`` the version it superseded (None for a first version).
    """

    id: int
    layer: str
    type: str
    title: str
    content: str
    project: str | None
    session_id: str | None
    tags: tuple[str, ...]
    importance: float
    origin: str
    source_ref: str | None
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    access_count: int
    version: int
    parent_id: int | None
    chain_id: int
    supersedes: tuple[int, ...]
    supersede_similarity: float | None
    is_latest: bool
    forget_after: datetime | None
    pinned: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    #: How far the memory's source is trusted (0..1): set from its origin, lowered when a conflict is resolved against it.
    #: Not part of :meth:`to_dict` (the export format): like the conflicts it comes from, it stays with the store.
    source_confidence: float = 1.0

    def is_expired(self, now: datetime) -> bool:
        """True when the memory's TTL has passed at ``now``."""
        return self.forget_after is not None and self.forget_after <= now

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 strings), the shape the CLI and MCP server print."""
        return {
            "id": self.id,
            "layer": self.layer,
            "type": self.type,
            "title": self.title,
            "content": self.content,
            "project": self.project,
            "session_id": self.session_id,
            "tags": list(self.tags),
            "importance": self.importance,
            "origin": self.origin,
            "source_ref": self.source_ref,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "last_accessed_at": self.last_accessed_at.isoformat(),
            "access_count": self.access_count,
            "version": self.version,
            "parent_id": self.parent_id,
            "chain_id": self.chain_id,
            "supersedes": list(self.supersedes),
            "supersede_similarity": self.supersede_similarity,
            "is_latest": self.is_latest,
            "forget_after": self.forget_after.isoformat() if self.forget_after else None,
            "pinned": self.pinned,
            "metadata": self.metadata,
        }
