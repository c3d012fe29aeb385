"""Forgetting memories: what a forget would erase (read first, for the confirmation), then the erase itself."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memlens.errors import MemlensError
from memlens.gui import format as fmt
from memlens.gui.dialogs import ForgetDialog, ForgetPlan
from memlens.gui.operations import OpChanges, OpHost, StoreOp, WindowHost
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


def ask_to_forget(host: WindowHost, ids: list[int]) -> None:
    """Read what forgetting ``ids`` would erase, ask for confirmation (the dialog is ``host.dialog``), then erase."""
    if host.reader is None or host.read_only():
        return
    host.reader.submit("forget-plan", lambda store: load_forget_plan(store, ids), lambda plan: _confirm(host, plan), lambda e: host.show_error("Cannot forget", e))


def _confirm(host: WindowHost, plan: ForgetPlan) -> None:
    if not plan.memories:
        host.show_error("Nothing to forget", MemlensError("The selected memories are already gone."))
        return
    dialog = ForgetDialog(plan, host.dialog_parent())
    ids = [m.id for m in plan.memories]

    def accepted() -> None:
        whole_chain, reason = dialog.values()
        forget_memories(host, ids, reason=reason, whole_chain=whole_chain, now=host.clock()).success(
            lambda result: host.say(f"Forgot {fmt.plural(len(result.erased), 'memory version', 'memory versions')}.", 8000)
        ).run_in_background()

    dialog.accepted.connect(accepted)
    host.open_dialog(dialog)
