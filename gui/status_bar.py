"""The status bar: messages, which store is open and on which backend, "Working…", the live view's label, the countdown to the next automatic sweep, and a
running sweep's progress with its Cancel button."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from memlens.gui import format as fmt
from memlens.gui.qt import QtWidgets
from memlens.postgres.connection import is_url


class StatusBar(QtWidgets.QStatusBar):
    """The window's status bar; ``sweep_*`` show a sweep from its start to its end."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statusBar")
        self.busy_label = QtWidgets.QLabel()
        self.busy_label.setObjectName("busyLabel")
        self.store_label = QtWidgets.QLabel()
        self.store_label.setObjectName("storeLabel")
        self.live_label = QtWidgets.QLabel()
        self.live_label.setObjectName("liveLabel")
        self.countdown_label = QtWidgets.QLabel()
        self.countdown_label.setObjectName("sweepCountdown")
        self.countdown_label.setToolTip("Time to the next automatic sweep (Lifecycle menu: run now, pause, preview)")
        # Scheduled consolidation (shown only while the store's schedule is on): its countdown, with "run now" and
        # pause in the button's menu.
        self.consolidation_button = QtWidgets.QToolButton()
        self.consolidation_button.setObjectName("consolidationCountdown")
        self.consolidation_button.setAccessibleName("Scheduled consolidation")
        self.consolidation_button.setToolTip("Time to the next scheduled consolidation (click: run now or pause)")
        self.consolidation_button.setAutoRaise(True)
        self.consolidation_button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        consolidation_menu = QtWidgets.QMenu(self.consolidation_button)
        consolidation_menu.setObjectName("consolidationMenu")
        self.consolidation_run_now = consolidation_menu.addAction("Consolidate Now")
        self.consolidation_run_now.setObjectName("consolidationRunNow")
        self.consolidation_pause = consolidation_menu.addAction("Pause Scheduled Consolidation")
        self.consolidation_pause.setObjectName("consolidationPause")
        self.consolidation_pause.setCheckable(True)
        self.consolidation_button.setMenu(consolidation_menu)
        self.consolidation_button.hide()
        # A running sweep's progress and its Cancel (it stops before its next batch of erasures).
        self.sweep_progress = QtWidgets.QProgressBar()
        self.sweep_progress.setObjectName("sweepProgress")
        self.sweep_progress.setAccessibleName("Sweep progress")
        self.sweep_progress.setMaximumWidth(160)
        self.sweep_progress.setFormat("sweep %v/%m")
        self.sweep_progress.hide()
        self.sweep_cancel = QtWidgets.QToolButton()
        self.sweep_cancel.setObjectName("sweepCancel")
        self.sweep_cancel.setAccessibleName("Cancel the sweep")
        self.sweep_cancel.setText("Cancel")
        self.sweep_cancel.setToolTip("Stop the sweep after the batch it is erasing (what it erased stays erased)")
        self.sweep_cancel.hide()
        self._sweep_cancel_slot: Callable[[], None] | None = None
        self.sweep_cancel.clicked.connect(self._cancel_sweep)
        for widget in (self.sweep_progress, self.sweep_cancel, self.busy_label, self.store_label, self.live_label, self.countdown_label, self.consolidation_button):
            self.addPermanentWidget(widget)

    def show_store(self, location: Path | str) -> None:
        """Name the open store (``MemoryStore.path``: a file, or a URL without password) and its backend, briefly:
        "SQLite · memory.db", "PostgreSQL · agents"; the tooltip has the whole path or URL."""
        if isinstance(location, str) and is_url(location):
            backend, name = "PostgreSQL", unquote(urlsplit(location).path.lstrip("/")) or "postgres"
        else:
            backend, name = "SQLite", Path(location).name
        self.store_label.setText(f"{backend} · {name}")
        self.store_label.setToolTip(f"The open store, on {backend}: {location}")

    def show_busy(self, busy: bool) -> None:
        """Say "Working…" while background work runs."""
        self.busy_label.setText("Working…" if busy else "")

    def show_countdown(self, seconds: int | None) -> None:
        """Show the time to the next sweep (None: no store; negative: paused)."""
        if seconds is None:
            self.countdown_label.setText("")
        elif seconds < 0:
            self.countdown_label.setText("Automatic sweeps paused")
        else:
            self.countdown_label.setText(f"Next sweep in {fmt.countdown(seconds)}")

    def show_consolidation_countdown(self, seconds: int | None) -> None:
        """Show the time to the next scheduled consolidation (None: no store or the schedule is off; negative:
        paused)."""
        self.consolidation_button.setVisible(seconds is not None)
        self.consolidation_pause.setChecked(seconds is not None and seconds < 0)
        if seconds is None:
            self.consolidation_button.setText("")
        elif seconds < 0:
            self.consolidation_button.setText("Scheduled consolidation paused")
        else:
            self.consolidation_button.setText(f"Next consolidation in {fmt.countdown(seconds)}")

    def sweep_started(self, cancel: Callable[[], None]) -> None:
        """Show a busy progress bar and a Cancel button that calls ``cancel`` once."""
        self.sweep_progress.setRange(0, 0)  # busy until the first batch is done
        self.sweep_progress.show()
        self.sweep_cancel.show()
        self._sweep_cancel_slot = cancel

    def sweep_step(self, done: int, total: int) -> None:
        """The sweep erased ``done`` of ``total``."""
        self.sweep_progress.setRange(0, max(total, 1))
        self.sweep_progress.setValue(done)

    def sweep_ended(self) -> None:
        """The sweep finished, failed or stopped."""
        self.sweep_progress.hide()
        self.sweep_cancel.hide()
        self.sweep_cancel.setEnabled(True)

    def _cancel_sweep(self) -> None:
        if self._sweep_cancel_slot is not None:
            self._sweep_cancel_slot()
            self.sweep_cancel.setEnabled(False)
            self.showMessage("Stopping the sweep after its current batch…", 5000)
