"""Forgetting memories: what a forget would erase (read first, for the confirmation), then the erase itself."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memlens.gui.dialogs import ForgetPlan
from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.store import ForgetResult, MemoryStore


def load_forget_plan(store: MemoryStore, ids: Sequence[int]) -> ForgetPlan:
    """The memories among ``ids`` that still exist and, per memory, the other versions of its chain (reader thread)."""
    memories = store.get_many(list(ids))
    chains = {m.id: [v.id for v in store.history(m.id) if v.id != m.id] for m in memories}
    return ForgetPlan(memories, chains)


def forget_changes(result: ForgetResult) -> OpChanges:
    """What erasing memories changes: their rows, every list and count they were in, sessions and the audit log."""
    return OpChanges.of_memories(
        [*result.erased, *result.restored_latest], memory_list=True, counts=True, lists=True, sessions=True, audit=True
    )


def forget_memories(host: OpHost, ids: Sequence[int], *, reason: str | None, whole_chain: bool, now: datetime) -> StoreOp[ForgetResult]:
    """Erase ``ids`` (and with ``whole_chain`` every version of their chains) for good, recording ``reason``."""
    wanted = list(ids)
    return StoreOp(
        host,
        "forget",
        lambda store, _ctx: store.forget_many(wanted, reason=reason, whole_chain=whole_chain, now=now),
        forget_changes,
        title="Forget failed",
    )
