"""The lifecycle: the auto-forget sweep (and its dry run), consolidation, the strength clock, demo data and the
store's settings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from memlens import demo
from memlens.config import StoreSettings
from memlens.consolidate import ConsolidationReport
from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.gui.tasks import TaskContext
from memlens.llm import LLMConfig
from memlens.store import MemoryStore
from memlens.sweep import SweepReport

#: The strength timer: nothing was written, but time moved, so strengths repaint and counts drop what expired.
STRENGTH_TICK = OpChanges(counts=True, strengths=True)


def sweep_changes(report: SweepReport) -> OpChanges:
    """A sweep that acted changes what a forget changes (plus the archives it wrote); one that did not, only its
    audit entry."""
    if not report.decisions:
        return OpChanges(audit=True)
    ids = [d.memory_id for d in report.decisions]
    return OpChanges.of_memories([*ids, *report.archives], memory_list=True, counts=True, lists=True, sessions=True, audit=True)


def run_sweep(host: OpHost, *, now: datetime) -> StoreOp[SweepReport]:
    """Run the auto-forget sweep at ``now``, reporting progress between its batches; cancelling the task stops it
    before the next batch (the report's ``stopped``)."""

    def sweep(store: MemoryStore, ctx: TaskContext) -> SweepReport:
        return store.sweep(now=now, progress=lambda done, total: ctx.progress(done, total), cancel=ctx.cancelled)

    return StoreOp(host, "sweep", sweep, sweep_changes, title="The sweep failed")


def preview_sweep(host: OpHost, *, at: datetime, name: str = "sweep-preview") -> StoreOp[SweepReport]:
    """What a sweep at ``at`` would do (a dry run: writes nothing, reports no changes)."""
    return StoreOp(host, name, lambda store, _ctx: store.sweep(now=at, dry_run=True), title="Could not preview the sweep", writes=False)


ConsolidateResult = tuple[ConsolidationReport, dict[int, str]]


def consolidate_changes(result: ConsolidateResult) -> OpChanges:
    """Consolidation writes episodes and knowledge, supersedes and reinforces: every list, count and session."""
    report, _titles = result
    ids = [*report.episodes, *report.created, *report.reinforced, *report.superseded]
    return OpChanges.of_memories(ids, memory_list=True, counts=True, lists=True, sessions=True, audit=True)


def consolidate(host: OpHost, *, now: datetime, llm: LLMConfig | None) -> StoreOp[ConsolidateResult]:
    """Consolidate at ``now`` (with ``llm``, else the deterministic method); cancellable through the task handle.
    The result carries the titles of every memory the report names, for the report dialog."""

    def run(store: MemoryStore, ctx: TaskContext) -> ConsolidateResult:
        report = store.consolidate(now=now, llm=llm, progress=ctx.progress, cancel=ctx.cancelled)
        ids = [*report.episodes, *report.created, *report.reinforced, *report.superseded]
        return report, {m.id: m.title for m in store.get_many(ids)}

    return StoreOp(host, "consolidate", run, consolidate_changes, title="Consolidation failed")


class DemoOp(StoreOp[demo.DemoSummary]):
    """Writing the demo; when it went into a new demo store beside the open one, the host opens that store after
    the caller's ``success`` callback has run."""

    def success(self, callback: Callable[[demo.DemoSummary], Any] | None) -> DemoOp:
        host = self.host

        def then_open(summary: demo.DemoSummary) -> None:
            try:
                if callback is not None:
                    callback(summary)
            finally:
                if host.path is None or Path(summary.path) != host.path:
                    host.open_store(Path(summary.path), create=False)

        super().success(then_open)
        return self


def load_demo(host: OpHost, *, now: datetime) -> DemoOp:
    """Write the demo (a few weeks of an agent's work), reporting progress: into the open store only when it has
    never held a memory, otherwise into a new demo store beside it (``demo.db``), which is then opened. The demo's
    back-dated sweeps must never reach a person's own memories."""

    def generate(store: MemoryStore, ctx: TaskContext) -> demo.DemoSummary:
        def step(done: int, total: int) -> None:
            ctx.progress(done, total)

        if store.id_sequence() == 0:
            return demo.generate(store, now=now, progress=step)
        with MemoryStore.open(demo.demo_path_beside(store.path), actor="demo") as demo_store:
            return demo.generate(demo_store, now=now, progress=step)

    op = DemoOp(host, "demo", generate, OpChanges.everything(), title="Could not load the demo", actor="demo")
    return op.success(None)


def configure_store(host: OpHost, changes: Mapping[str, Any], *, now: datetime) -> StoreOp[StoreSettings]:
    """Change the store's thresholds and decay rates; new rates change every strength and what the sweep does."""
    wanted = dict(changes)
    return StoreOp(
        host,
        "configure",
        lambda store, _ctx: store.configure(wanted, now=now),
        OpChanges(lists=True, counts=True, strengths=True, audit=True),
        title="Could not change the store's settings",
    )
