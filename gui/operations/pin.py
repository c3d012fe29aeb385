"""Pinning: a pinned memory keeps its strength and no sweep touches it."""

from __future__ import annotations

from datetime import datetime

from memlens.gui.operations import OpHost, StoreOp
from memlens.gui.operations.edit import update_memory
from memlens.models import Memory


def set_pinned(host: OpHost, memory_id: int, pinned: bool, *, now: datetime) -> StoreOp[Memory]:
    """Pin or unpin ``memory_id``. Reports only that memory (and its audit entry) as changed: no count, list or
    session depends on pinning."""
    return update_memory(host, memory_id, {"pinned": pinned}, now=now, name="pin")
