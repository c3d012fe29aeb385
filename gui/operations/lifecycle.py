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
from memlens.gui import format as fmt
from memlens.gui.consolidate_dialog import ConsolidateDialog
from memlens.gui.dialogs import SettingsDialog, SweepPreviewDialog
from memlens.gui.operations import OpChanges, OpHost, StoreOp, WindowHost
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtWidgets
from memlens.gui.status_bar import StatusBar
from memlens.gui.tasks import TaskContext
from memlens.llm import LLMConfig, LLMError
from memlens.postgres.connection import is_url
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


def demo_tip(*, on_server: bool) -> str:
    """What Load Demo Data does, for the open store's backend (a demo never goes into a team's database)."""
    if on_server:
        return "Write a realistic demo into a new demo.db file beside your default store and open it (never into the PostgreSQL database)"
    return "Add a realistic demo of an agent's weeks of work"


def load_demo(host: OpHost, *, now: datetime) -> DemoOp:
    """Write the demo (a few weeks of an agent's work), reporting progress: into the open store only when it has
    never held a memory, otherwise into a new demo store beside it (``demo.db``), which is then opened. The demo's
    back-dated sweeps must never reach a person's own memories; nor does a demo ever go into a team's database on
    a PostgreSQL server, however empty: it goes into a demo file beside the default store."""

    def generate(store: MemoryStore, ctx: TaskContext) -> demo.DemoSummary:
        def step(done: int, total: int) -> None:
            ctx.progress(done, total)

        if store.id_sequence() == 0 and not is_url(str(store.path)):
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


# --- handlers: what a menu item or button starts ---------------------------------------------------------------


def start_demo(host: WindowHost, progress: QtWidgets.QProgressBar, button: QtWidgets.QPushButton) -> None:
    """Write the demo into the open store in the background, showing ``progress`` and disabling ``button`` meanwhile."""
    if host.path is None or host.read_only():
        return
    progress.show()
    progress.setRange(0, 0)
    button.setEnabled(False)

    def step(done: int, total: int, _text: str) -> None:
        if total:
            progress.setRange(0, total)
            progress.setValue(done)

    def ended() -> None:
        progress.hide()
        button.setEnabled(True)

    def finished(summary: demo.DemoSummary) -> None:
        ended()
        host.say(f"Demo loaded: {summary.describe()}", 10000)

    def failed(error: BaseException) -> None:
        ended()
        host.show_error("Could not load the demo", error)

    load_demo(host, now=host.clock()).success(finished).failure(failed).with_progress(step).run_in_background()


def sweep_summary(report: SweepReport) -> tuple[str, int]:
    """The status-bar sentence about a finished sweep and how long (ms) to show it."""
    acted = fmt.plural(len(report.decisions), "memory", "memories")
    parts = ", ".join(f"{n} {rule.replace('_', ' ')}" for rule, n in report.counts.items() if n)
    if report.stopped:
        return f"Sweep cancelled after acting on {acted} ({parts or 'none'}); the next sweep does the rest.", 10000
    if report.decisions:
        return f"Sweep acted on {acted} ({parts}).", 10000
    return "Sweep: nothing to forget.", 5000


def start_sweep(host: WindowHost, status: StatusBar, finished: Callable[[SweepReport], Any]) -> None:
    """Run the auto-forget sweep in the background with its progress and Cancel in ``status`` (skipped while one
    runs or while time travelling); ``finished`` gets the report."""
    if host.path is None or host.read_only() or host.tasks.running("sweep"):
        return

    def done(report: SweepReport) -> None:
        status.sweep_ended()
        host.say(*sweep_summary(report))
        finished(report)

    def failed(error: BaseException) -> None:
        status.sweep_ended()
        host.show_error("The sweep failed", error)

    op = run_sweep(host, now=host.clock()).success(done).failure(failed)
    handle = op.with_progress(lambda done, total, _text: status.sweep_step(done, total)).run_in_background()
    if handle is not None:
        status.sweep_started(handle.cancel)


def show_sweep_preview(host: WindowHost, when: datetime, shown: Callable[[SweepReport], Any]) -> None:
    """What a sweep at ``when`` would do, as a list in a dialog (a dry run); ``shown`` gets the report."""

    def opened(report: SweepReport) -> None:
        title = "Next sweep preview" if not host.read_only() else f"Sweep preview at {fmt.when(when)}"
        show_sweep_report(host, report, title)
        shown(report)

    preview_sweep(host, at=when).success(opened).run_in_background()


def show_sweep_report(host: WindowHost, report: SweepReport, title: str) -> None:
    """Open the list of what ``report`` would forget; a memory in it can be double-clicked to show it."""
    dialog = SweepPreviewDialog(report, title, host.dialog_parent())
    dialog.memory_activated.connect(host.go_to_memory)
    host.open_dialog(dialog)


def start_consolidation(host: WindowHost, llm_config: Callable[[], tuple[LLMConfig | None, str]], finished: Callable[[ConsolidationReport], Any]) -> None:
    """Run consolidation in the background with a progress dialog that can cancel it (one at a time: a second
    request raises the running one's dialog); ``finished`` gets the report."""
    if host.path is None or host.read_only():
        return
    if host.tasks.running("consolidate"):
        if host.dialog is not None:
            host.dialog.raise_()
        return
    try:
        llm, note = llm_config()
    except LLMError as error:
        host.show_error("Cannot consolidate", error)
        return
    dialog = ConsolidateDialog(note, host.dialog_parent())
    dialog.memory_activated.connect(host.go_to_memory)

    def done(result: ConsolidateResult) -> None:
        report, titles = result
        dialog.show_report(report, titles)
        if report.error:
            host.show_error("Consolidation failed", LLMError(report.error))
        finished(report)

    def failed(error: BaseException) -> None:
        dialog.show_failure(str(error))
        host.show_error("Consolidation failed", error)

    host.open_dialog(dialog)
    op = consolidate(host, now=host.clock(), llm=llm).success(done).failure(failed)
    handle = op.with_progress(dialog.set_progress).run_in_background()
    if handle is not None:
        dialog.cancel_requested.connect(handle.cancel)


def open_settings(
    host: WindowHost,
    prefs: Preferences,
    store_settings: StoreSettings | None,
    use_preferences: Callable[[Preferences], Any],
    use_store_settings: Callable[[StoreSettings], Any],
) -> None:
    """Edit timers, theme and LLM (kept per person: ``use_preferences``) and the open store's thresholds and decay
    rates (written in the background, then ``use_store_settings``)."""
    dialog = SettingsDialog(prefs, store_settings if host.path is not None else None, host.dialog_parent())

    def saved(settings: StoreSettings) -> None:
        use_store_settings(settings)
        host.say("Store settings saved.", 5000)

    def accepted() -> None:
        use_preferences(dialog.new_preferences())
        changes = dialog.store_changes()
        if changes and host.path is not None:
            configure_store(host, changes, now=host.clock()).success(saved).run_in_background()

    dialog.accepted.connect(accepted)
    host.open_dialog(dialog)
