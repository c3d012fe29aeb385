"""The lifecycle timers: strength refresh and the auto-forget sweep, with a countdown, pause and "run now".

The timers only say *when*; the window runs the sweep in the background when ``sweep_due`` fires. Each timer has an
``objectName`` so tests (and people reading a widget dump) can find it.
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
        for timer in (self.refresh_timer, self.sweep_timer, self.countdown_timer):
            timer.stop()

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
