"""The lifecycle timers: strength refresh, the auto-forget sweep and scheduled consolidation, each with a countdown,
pause and "run now".

The timers only say *when*; the window runs the sweep (``sweep_due``) or the scheduled consolidation
(``consolidation_due``) in the background. The consolidation timer runs only while the store's opt-in schedule is
on; its interval is the store's, and its first shot waits for what is left of it since the last consolidation (by
cron, a hook or the app). Each timer has an ``objectName`` so tests (and people reading a widget dump) can find it.
"""

from __future__ import annotations

from memlens.gui.qt import QObject, QTimer, Signal


class LifecycleScheduler(QObject):
    """Owns the strength-refresh, sweep and countdown timers."""

    strength_tick = Signal()
    sweep_due = Signal()
    #: Seconds until the next sweep (-1 while paused), once a second.
    countdown = Signal(int)
    paused_changed = Signal(bool)
    #: Scheduled consolidation is wanted: False from the timer (run if due), True from "run now" (run anyway).
    consolidation_due = Signal(bool)
    #: Seconds until the next scheduled consolidation (-1 while paused, None while the schedule is off), once a second.
    consolidation_countdown = Signal(object)
    consolidation_paused_changed = Signal(bool)

    def __init__(self, refresh_ms: int = 60_000, sweep_ms: int = 3_600_000, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.refresh_timer = QTimer(self)
        self.refresh_timer.setObjectName("strengthRefreshTimer")
        self.refresh_timer.timeout.connect(self.strength_tick)
        self.sweep_timer = QTimer(self)
        self.sweep_timer.setObjectName("sweepTimer")
        self.sweep_timer.timeout.connect(self._sweep_timeout)
        self.countdown_timer = QTimer(self)
        self.countdown_timer.setObjectName("sweepCountdownTimer")
        self.countdown_timer.setInterval(1000)
        self.countdown_timer.timeout.connect(self._tick_countdown)
        self._paused = False
        self.consolidation_timer = QTimer(self)
        self.consolidation_timer.setObjectName("consolidationTimer")
        self.consolidation_timer.timeout.connect(self._consolidation_timeout)
        self._consolidation_ms: int | None = None  # None: the store's schedule is off
        self._consolidation_paused = False
        self.set_intervals(refresh_ms, sweep_ms)

    def set_intervals(self, refresh_ms: int, sweep_ms: int) -> None:
        """Change both intervals; a running sweep timer restarts with the new one."""
        self.refresh_timer.setInterval(max(50, int(refresh_ms)))
        self.sweep_timer.setInterval(max(50, int(sweep_ms)))
        if self.refresh_timer.isActive():
            self.refresh_timer.start()
        if self.sweep_timer.isActive():
            self.sweep_timer.start()

    def start(self, paused: bool = False) -> None:
        """Start the timers (the sweep timer stays stopped when ``paused``)."""
        self.refresh_timer.start()
        self.countdown_timer.start()
        self._paused = paused
        if not paused:
            self.sweep_timer.start()
        self.paused_changed.emit(self._paused)
        self._tick_countdown()

    def stop(self) -> None:
        """Stop every timer (closing the store)."""
        for timer in (self.refresh_timer, self.sweep_timer, self.countdown_timer, self.consolidation_timer):
            timer.stop()
        self._consolidation_ms = None

    def set_consolidation(self, interval_ms: int | None, first_ms: int | None = None, *, paused: bool | None = None) -> None:
        """Schedule consolidation every ``interval_ms`` (None: the schedule is off), the first time in ``first_ms``
        (default: a whole interval); ``paused`` sets the person's pause."""
        if paused is not None and paused != self._consolidation_paused:
            self._consolidation_paused = paused
            self.consolidation_paused_changed.emit(paused)
        self._consolidation_ms = None if interval_ms is None else max(50, int(interval_ms))
        self.consolidation_timer.stop()
        if self._consolidation_ms is not None and not self._consolidation_paused:
            self.consolidation_timer.start(self._consolidation_ms if first_ms is None else max(0, int(first_ms)))
        self._tick_countdown()

    def is_consolidation_paused(self) -> bool:
        """Whether scheduled consolidation is paused in this app."""
        return self._consolidation_paused

    def toggle_consolidation_pause(self) -> None:
        """Pause scheduled consolidation, or resume it with a full interval."""
        self.set_consolidation(self._consolidation_ms, paused=not self._consolidation_paused)

    def seconds_to_consolidation(self) -> int | None:
        """Seconds until the next scheduled consolidation; -1 while paused; None while the schedule is off."""
        if self._consolidation_ms is None:
            return None
        if self._consolidation_paused or not self.consolidation_timer.isActive():
            return -1
        return max(0, round(self.consolidation_timer.remainingTime() / 1000))

    def run_consolidation_now(self) -> None:
        """Ask for a consolidation now; a running schedule restarts its interval from here."""
        if self.consolidation_timer.isActive() and self._consolidation_ms is not None:
            self.consolidation_timer.start(self._consolidation_ms)
        self.consolidation_due.emit(True)
        self._tick_countdown()

    def _consolidation_timeout(self) -> None:
        if self._consolidation_ms is not None:
            self.consolidation_timer.start(self._consolidation_ms)  # after a shorter first shot, whole intervals
        self.consolidation_due.emit(False)
        self._tick_countdown()

    def is_paused(self) -> bool:
        """Whether automatic sweeps are paused."""
        return self._paused

    def pause(self) -> None:
        """Stop automatic sweeps; the countdown shows the pause."""
        if self._paused:
            return
        self.sweep_timer.stop()
        self._paused = True
        self.paused_changed.emit(True)
        self._tick_countdown()

    def resume(self) -> None:
        """Restart automatic sweeps with a full interval."""
        if not self._paused:
            return
        self._paused = False
        self.sweep_timer.start()
        self.paused_changed.emit(False)
        self._tick_countdown()

    def seconds_to_sweep(self) -> int:
        """Seconds until the next automatic sweep, or -1 while paused or stopped."""
        if self._paused or not self.sweep_timer.isActive():
            return -1
        return max(0, round(self.sweep_timer.remainingTime() / 1000))

    def run_now(self) -> None:
        """Ask for a sweep now and restart the interval from here."""
        if self.sweep_timer.isActive():
            self.sweep_timer.start()
        self.sweep_due.emit()
        self._tick_countdown()

    def _sweep_timeout(self) -> None:
        self.sweep_due.emit()
        self._tick_countdown()

    def _tick_countdown(self) -> None:
        self.countdown.emit(self.seconds_to_sweep())
        self.consolidation_countdown.emit(self.seconds_to_consolidation())
