"""The live view: notices when another connection (an agent, the CLI, a hook) committed to the open store, by
polling ``PRAGMA data_version`` on the reader thread, so the window can refresh in place."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from memlens.gui import format as fmt
from memlens.gui.qt import QObject, QTimer, QtWidgets, Signal
from memlens.gui.tasks import StoreReader


class LiveView(QObject):
    """Polls the store every ``live_timer`` interval; emits ``changed`` when someone else committed and says so in
    ``label``. ``reader`` gives the open store's reader (None: no store)."""

    changed = Signal()

    def __init__(self, reader: Callable[[], StoreReader | None], label: QtWidgets.QLabel, clock: Callable[[], datetime], interval_ms: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._reader = reader
        self._label = label
        self._clock = clock
        self._data_version: int | None = None
        self._pending = False
        self.live_timer = QTimer(self)
        self.live_timer.setObjectName("livePollTimer")
        self.live_timer.setInterval(interval_ms)
        self.live_timer.timeout.connect(self.poll)

    def start(self, interval_ms: int) -> None:
        """Forget the last version seen, take a new baseline now, and poll every ``interval_ms``."""
        self._data_version = None
        self._pending = False
        self.poll()
        self.live_timer.setInterval(interval_ms)
        self.live_timer.start()

    def poll(self) -> None:
        """If another connection committed since the last poll, emit ``changed``."""
        if self._pending:
            return

        def seen(value: int) -> None:
            changed = self._data_version is not None and value != self._data_version
            self._data_version = value
            if changed:
                self._label.setText(f"updated {fmt.when(self._clock())}")
                self.changed.emit()

        self._read_version(seen)

    def absorb_own_write(self) -> None:
        """Take the store's data version after our own write as the baseline.

        Operations write on connections of their own, which the poll cannot tell from another process's: without
        this, every operation would be followed by a refresh of everything. (Another process committing in the
        moment between the two is seen at its next commit.)"""

        def seen(value: int) -> None:
            self._data_version = value

        self._read_version(seen)  # a poll already queued is made obsolete by this request (same key)

    def _read_version(self, seen: Callable[[int], None]) -> None:
        reader = self._reader()
        if reader is None:
            return
        self._pending = True

        def done(value: int) -> None:
            self._pending = False
            seen(value)

        def failed(error: BaseException) -> None:
            self._pending = False
            self._label.setText(f"live view paused: {error}")

        reader.submit("poll", lambda store: store.data_version(), done, failed)
