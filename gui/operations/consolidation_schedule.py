"""Scheduled consolidation in the app: the consolidation timer's run (only when due, since cron or a hook may have
run it meanwhile) and its "run now" (whenever anything is waiting), both in the background without a dialog, and
:class:`ScheduledConsolidation`, which wires the timer, the status bar and the store's schedule to the window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from memlens.config import ConsolidationSchedule
from memlens.consolidation_schedule import RAN, ScheduledRun, next_due_at
from memlens.gui.operations import NO_CHANGES, OpChanges, OpHost, StoreOp, WindowHost
from memlens.gui.qt import QObject
from memlens.gui.scheduler import LifecycleScheduler
from memlens.gui.tasks import TaskContext
from memlens.llm import LLMConfig, LLMError
from memlens.store import MemoryStore


def scheduled_changes(result: ScheduledRun) -> OpChanges:
    """A run that wrote changes what a manual consolidation changes; a no-op changes nothing."""
    report = result.report
    if result.status != RAN or report is None:
        return NO_CHANGES
    ids = [*report.episodes, *report.created, *report.reinforced, *report.superseded]
    return OpChanges.of_memories(ids, memory_list=True, counts=True, lists=True, sessions=True, audit=True)


def consolidate_on_schedule(host: OpHost, *, now: datetime, force: bool, llm: LLMConfig | None) -> StoreOp[ScheduledRun]:
    """Consolidate at ``now`` if the store's schedule says it is due (``force``: if anything is waiting)."""

    def op(store: MemoryStore, _ctx: TaskContext) -> ScheduledRun:
        return store.consolidate_due(now=now, force=force, llm=llm)

    return StoreOp(host, "scheduled-consolidation", op, scheduled_changes, title="Scheduled consolidation failed")


def start_scheduled_consolidation(
    host: WindowHost, *, force: bool, llm_config: Callable[[], tuple[LLMConfig | None, str]], finished: Callable[[ScheduledRun], Any]
) -> None:
    """Run :func:`consolidate_on_schedule` in the background (skipped while a consolidation runs or while time
    travelling); the status bar says what it did and ``finished`` gets the result."""
    if host.path is None or host.read_only() or host.tasks.running("consolidate") or host.tasks.running("scheduled-consolidation"):
        return
    try:
        llm, _note = llm_config()
    except LLMError:  # a bad endpoint in Settings: the deterministic method still runs on schedule
        llm = None

    def done(result: ScheduledRun) -> None:
        host.say(f"Scheduled consolidation: {result.summary}", 10000)
        finished(result)

    consolidate_on_schedule(host, now=host.clock(), force=force, llm=llm).success(done).run_in_background()


def plan_consolidation_timer(host: WindowHost, scheduler: LifecycleScheduler, *, interval_hours: float, paused: bool) -> None:
    """Start ``scheduler``'s consolidation timer for the store's schedule: its first shot when the store says the
    next run is due (read in the background), then every ``interval_hours``."""
    now = host.clock()

    def planned(due: datetime | None) -> None:
        first = None if due is None else round(max(0.0, (due - now).total_seconds()) * 1000)
        scheduler.set_consolidation(round(interval_hours * 3_600_000), first, paused=paused)

    read = StoreOp(host, "consolidation-plan", lambda store, _ctx: next_due_at(store, now), title="Could not read the consolidation schedule", writes=False)
    read.success(planned).run_in_background()


class ScheduledConsolidation(QObject):
    """Wires the window's consolidation timer: plans it when a store opens and whenever the store's schedule
    changes (here, or in another process), runs what it asks for, and keeps the person's pause."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self._schedule: ConsolidationSchedule | None = None
        scheduler, status = window.scheduler, window.status
        scheduler.consolidation_due.connect(self.run)
        scheduler.consolidation_countdown.connect(lambda s: status.show_consolidation_countdown(s if window.path is not None else None))
        status.consolidation_run_now.triggered.connect(scheduler.run_consolidation_now)
        status.consolidation_pause.triggered.connect(self.toggle_pause)
        window.store_opened.connect(lambda _path: self.plan())
        window.lists_loaded.connect(self._settings_read)

    def plan(self) -> None:
        """Set the timer from the store's opt-in schedule (stopped while it is off)."""
        window = self.window
        settings = window.store_settings
        self._schedule = settings.consolidation if settings is not None else None
        if window.path is None or self._schedule is None or not self._schedule.enabled:
            window.scheduler.set_consolidation(None)
            return
        plan_consolidation_timer(window, window.scheduler, interval_hours=self._schedule.interval_hours, paused=window.prefs.consolidation_paused)

    def run(self, force: bool = False) -> None:
        """Consolidate in the background if due (``force``: "run now", whenever anything is waiting)."""
        start_scheduled_consolidation(self.window, force=force, llm_config=self.window.llm_config, finished=lambda _result: self.plan())

    def toggle_pause(self) -> None:
        """Pause or resume scheduled consolidation in this app (remembered with the person's preferences)."""
        window = self.window
        window.scheduler.toggle_consolidation_pause()
        window.prefs.consolidation_paused = window.scheduler.is_consolidation_paused()
        window.prefs.save(window.settings)

    def _settings_read(self) -> None:
        settings = self.window.store_settings
        if settings is not None and settings.consolidation != self._schedule:
            self.plan()
