"""Editing a memory in place (importance, tags, TTL) and storing a new memory or a new version of one."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.models import Memory

#: ``MemoryStore.update`` arguments that move a memory's expiry, and so the per-layer counts (they leave out expired ones).
_EXPIRY_FIELDS = frozenset({"ttl_days", "clear_ttl"})
#: Arguments that move a memory between projects: the project list and which memories a project filter shows.
_PROJECT_FIELDS = frozenset({"project", "clear_project"})


def edit_changes(memory_id: int, fields: Mapping[str, Any]) -> OpChanges:
    """What an in-place edit changes: the memory's row and detail, its audit entry, and the counts for a TTL."""
    moved = bool(_PROJECT_FIELDS & fields.keys())
    return OpChanges.of_memories(
        [memory_id], counts=moved or bool(_EXPIRY_FIELDS & fields.keys()), memory_list=moved, lists=moved, audit=True
    )


def update_memory(host: OpHost, memory_id: int, fields: Mapping[str, Any], *, now: datetime, name: str = "update") -> StoreOp[Memory]:
    """Apply ``MemoryStore.update(memory_id, **fields)``: importance, tags, pinning, TTL or project."""
    changes = dict(fields)
    return StoreOp(
        host,
        name,
        lambda store, _ctx: store.update(memory_id, now=now, **changes),
        lambda memory: edit_changes(memory.id, changes),
        title="Could not save the change",
    )


def remember(
    host: OpHost,
    content: str,
    *,
    type: str,
    project: str | None,
    tags: list[str],
    supersede: Any,
    now: datetime,
    supersede_id: int | None = None,
) -> StoreOp[Memory]:
    """Store ``content`` as a new memory, or as a new version of what it supersedes (``supersede`` and
    ``supersede_id`` as the store takes them: ``supersede_id`` names the memory whatever the similarity)."""
    return StoreOp(
        host,
        "remember",
        lambda store, _ctx: store.remember(
            content, type=type, project=project, tags=tags, origin="user", supersede=supersede, supersede_id=supersede_id, now=now
        ),
        lambda memory: OpChanges.of_memories(
            [memory.id, *([memory.parent_id] if memory.parent_id else [])], memory_list=True, counts=True, lists=True, audit=True
        ),
        title="Could not store the memory",
    )
