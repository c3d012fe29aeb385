"""Pinning: a pinned memory keeps its strength and no sweep touches it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memlens.gui.operations import OpHost, StoreOp, WindowHost
from memlens.gui.operations.edit import update_memory
from memlens.models import Memory


def set_pinned(host: OpHost, memory_id: int, pinned: bool, *, now: datetime) -> StoreOp[Memory]:
    """Pin or unpin ``memory_id``. Reports only that memory (and its audit entry) as changed: no count, list or
    session depends on pinning."""
    return update_memory(host, memory_id, {"pinned": pinned}, now=now, name="pin")


def pin_shown(host: WindowHost, pinned: bool | None, saved: Callable[[Memory], Any]) -> None:
    """Pin (True), unpin (False) or toggle (None) the memory the detail pane shows; ``saved`` gets it as stored."""
    memory = host.current_memory()
    wanted = not memory.pinned if memory is not None and pinned is None else pinned
    if memory is not None and memory.pinned != wanted:
        set_pinned(host, memory.id, bool(wanted), now=host.clock()).success(saved).run_in_background()
