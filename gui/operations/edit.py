"""Editing a memory in place (importance, tags, TTL) and storing a new memory or a new version of one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memlens.gui.dialogs import EditDialog
from memlens.gui.new_memory_dialog import NewMemoryDialog
from memlens.gui.operations import OpChanges, OpHost, StoreOp, WindowHost
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


def open_edit_dialog(host: WindowHost, saved: Callable[[Memory], Any]) -> None:
    """Edit the shown memory's importance, tags, pinning, project and TTL; ``saved`` gets the memory as stored."""
    memory = host.current_memory()
    if memory is None or host.read_only():
        return
    dialog = EditDialog(memory, host.dialog_parent(), now=host.clock())  # TTL days count from the window's clock

    def accepted() -> None:
        changes = dialog.changes()
        if changes:
            update_memory(host, memory.id, changes, now=host.clock()).success(saved).run_in_background()

    dialog.accepted.connect(accepted)
    host.open_dialog(dialog)


def open_new_memory_dialog(host: WindowHost, projects: list[str], project: str | None) -> None:
    """The supersede-preview dialog (offering ``projects``, starting at ``project``), then store what the person
    chose and show it."""
    if host.reader is None or host.read_only():
        return
    dialog = NewMemoryDialog(host.reader.planner, host.clock, projects, project, host.dialog_parent())

    def stored(memory: Memory) -> None:
        what = f"as version {memory.version} of #{memory.parent_id}" if memory.parent_id else "as a new memory"
        host.say(f"Stored #{memory.id} {what}.", 8000)
        host.go_to_memory(memory.id)

    def accepted() -> None:
        c = dialog.candidate()
        op = remember(
            host, c.content, type=c.type, project=c.project, tags=list(c.tags), supersede=c.supersede,
            supersede_id=c.supersede_id, now=host.clock(),
        )
        op.success(stored).run_in_background()

    dialog.accepted.connect(accepted)
    host.open_dialog(dialog)
