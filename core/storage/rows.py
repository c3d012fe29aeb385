"""Rows to objects: the one place that turns a ``memories`` or ``sessions`` row into a :class:`Memory` or
:class:`Session`, reading every value by column name.

A row is either a :class:`sqlite3.Row` (it knows its names) or a plain tuple together with the column names it
was selected with: :data:`MEMORY_FIELDS` for a ``SELECT {MEMORY_COLUMNS}``, or the names of
``cursor.description`` (see :func:`memories_from_cursor`). Columns beyond the memory's own (a bm25 score, a
content hash) are simply not read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memlens.models import Memory, utc_from_ts
from memlens.storage.results import Relation, Session

#: The columns a Memory is made of, in the order of :data:`MEMORY_COLUMNS`.
MEMORY_FIELDS: tuple[str, ...] = (
    "id", "layer", "type", "title", "content", "project", "session_id", "tags", "importance", "origin", "source_ref",
    "created_at", "updated_at", "last_accessed_at", "access_count", "version", "parent_id", "chain_id", "supersedes",
    "supersede_similarity", "is_latest", "forget_after", "pinned", "metadata", "source_confidence",
)  # fmt: skip
#: The select list for a Memory from ``memories``.
MEMORY_COLUMNS = ", ".join(MEMORY_FIELDS)
#: The same select list for ``memories m`` (queries that join or filter on the alias).
M_COLUMNS = ", ".join("m." + name for name in MEMORY_FIELDS)

#: The columns a Session is made of, in select order.
SESSION_FIELDS: tuple[str, ...] = ("id", "project", "started_at", "last_event_at", "ended_at", "metadata")
SESSION_COLUMNS = ", ".join(SESSION_FIELDS)

#: The columns a Relation is made of, in select order.
RELATION_FIELDS: tuple[str, ...] = ("src_id", "dst_id", "kind", "created_at", "score")
RELATION_COLUMNS = ", ".join(RELATION_FIELDS)


def _by_name(row: Any, names: Sequence[str]) -> Mapping[str, Any]:
    """The row as a name -> value mapping (an sqlite3.Row already is one)."""
    if hasattr(row, "keys"):
        return row
    return dict(zip(names, row, strict=False))


def _when(value: float) -> datetime:
    when = utc_from_ts(value)
    assert when is not None
    return when


def _json_tuple(text: str) -> tuple[Any, ...]:
    """A stored JSON list as a tuple; most are empty, and json.loads costs a microsecond even for "[]"."""
    return () if text == "[]" else tuple(json.loads(text))


def memory_from_row(row: Any, names: Sequence[str] = MEMORY_FIELDS) -> Memory:
    """The Memory a row describes; ``names`` are the row's column names when it is a plain tuple."""
    r = _by_name(row, names)
    return Memory(
        id=r["id"],
        layer=r["layer"],
        type=r["type"],
        title=r["title"],
        content=r["content"],
        project=r["project"],
        session_id=r["session_id"],
        tags=_json_tuple(r["tags"]),
        importance=r["importance"],
        origin=r["origin"],
        source_ref=r["source_ref"],
        created_at=_when(r["created_at"]),
        updated_at=_when(r["updated_at"]),
        last_accessed_at=_when(r["last_accessed_at"]),
        access_count=r["access_count"],
        version=r["version"],
        parent_id=r["parent_id"],
        chain_id=r["chain_id"],
        supersedes=_json_tuple(r["supersedes"]),
        supersede_similarity=r["supersede_similarity"],
        is_latest=bool(r["is_latest"]),
        forget_after=utc_from_ts(r["forget_after"]),
        pinned=bool(r["pinned"]),
        metadata={} if r["metadata"] == "{}" else json.loads(r["metadata"]),
        source_confidence=r["source_confidence"],
    )


def column_names(cursor: Any) -> tuple[str, ...]:
    """The column names of an executed cursor's rows (``m.id`` is named ``id``)."""
    return tuple(d[0] for d in cursor.description)


def memories_from_cursor(cursor: Any) -> list[Memory]:
    """Every row of an executed cursor as a Memory, read by the names in ``cursor.description``."""
    names = column_names(cursor)
    return [memory_from_row(row, names) for row in cursor.fetchall()]


def session_from_row(row: Any, names: Sequence[str] = SESSION_FIELDS) -> Session:
    """The Session a ``sessions`` row describes."""
    r = _by_name(row, names)
    return Session(
        r["id"], r["project"], _when(r["started_at"]), _when(r["last_event_at"]), utc_from_ts(r["ended_at"]), json.loads(r["metadata"] or "{}")
    )


def relation_from_row(row: Any, names: Sequence[str] = RELATION_FIELDS) -> Relation:
    """The Relation a ``relations`` row describes."""
    r = _by_name(row, names)
    return Relation(r["src_id"], r["dst_id"], r["kind"], _when(r["created_at"]), r["score"])
