"""The live view: notices when another connection (an agent, the CLI, a hook) committed to the open store, so the
window can refresh in place.

A SQLite store is polled: ``PRAGMA data_version`` on the reader thread, every ``live_poll_ms``. A PostgreSQL store
says so itself: every commit runs ``NOTIFY memlens_changes``, which :class:`ChangeListener` hears on a connection of
its own; each burst of notifications becomes one check of ``data_version``, exactly the check a poll makes. If that
connection cannot be made, or is lost, the live view falls back to polling and says why.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime

from memlens.gui import format as fmt
from memlens.gui.qt import QObject, QTimer, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.postgres.connection import CHANGE_CHANNEL

#: How long the listener gathers notifications before it reports them as one: a writer's burst of commits (an
#: import, a sweep) becomes a single refresh, and closing waits at most this long for the thread.
GATHER_SECONDS = 0.3


class ChangeListener(QObject):
    """``LISTEN memlens_changes`` on a PostgreSQL connection of its own, in a background thread. ``notified`` is
    emitted (and, being emitted off the GUI thread, queued to it) once per gathering window that heard a commit;
    ``failed`` with a message when the connection cannot be made or is lost, after which the thread ends."""

    notified = Signal()
    failed = Signal(str)

    def __init__(self, url: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._url = url
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="memlens-listen", daemon=True)

    def start(self) -> None:
        """Connect and listen, in the background."""
        self._thread.start()

    def stop(self) -> None:
        """End the thread and close its connection (waits up to one gathering window)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def is_listening(self) -> bool:
        """Whether the thread is still running."""
        return self._thread.is_alive()

    def _listen(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self._url, autocommit=True, application_name="memlens-live", connect_timeout=10) as conn:
                conn.execute(f"LISTEN {CHANGE_CHANNEL}")
                while not self._stopping.is_set():
                    if any(True for _ in conn.notifies(timeout=GATHER_SECONDS)) and not self._stopping.is_set():
                        self.notified.emit()
        except psycopg.Error as exc:
            if not self._stopping.is_set():
                # libpq's words name the server and user, never the password.
                self.failed.emit(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


class LiveView(QObject):
    """Emits ``changed`` when someone else committed to the store and says so in ``label``; ``notice`` carries a
    sentence for the status bar (how the live view learns of changes, and why it fell back to polling). ``reader``
    gives the open store's reader (None: no store)."""

    changed = Signal()
    notice = Signal(str)

    def __init__(self, reader: Callable[[], StoreReader | None], label: QtWidgets.QLabel, clock: Callable[[], datetime], interval_ms: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._reader = reader
        self._label = label
        self._clock = clock
        self._data_version: int | None = None
        self._pending = False
        #: A check was asked for while one was running: run one more when it is done (a commit may fall between).
        self._check_again = False
        self.listener: ChangeListener | None = None
        self.live_timer = QTimer(self)
        self.live_timer.setObjectName("livePollTimer")
        self.live_timer.setInterval(interval_ms)
        self.live_timer.timeout.connect(self.poll)

    def start(self, interval_ms: int, listen_url: str | None = None) -> None:
        """Forget the last version seen and take a new baseline now; then listen at ``listen_url`` (a PostgreSQL
        store's URL, password included) or, without one, poll every ``interval_ms``."""
        self.stop()
        self._data_version = None
        self._pending = False
        self._check_again = False
        self.poll()
        self.live_timer.setInterval(interval_ms)
        if listen_url is None:
            self.live_timer.start()
            return
        self.listener = ChangeListener(listen_url, self)
        self.listener.notified.connect(self.poll)
        self.listener.failed.connect(self._listening_failed)
        self.listener.start()
        self._label.setToolTip("Other writers' commits are shown as they happen (PostgreSQL LISTEN/NOTIFY)")

    def stop(self) -> None:
        """Stop polling and listening (the store is closing)."""
        self.live_timer.stop()
        if self.listener is not None:
            self.listener.stop()
            self.listener.deleteLater()
            self.listener = None
        self._label.setToolTip("")

    def is_listening(self) -> bool:
        """Whether commits are heard through LISTEN/NOTIFY (rather than polled for)."""
        return self.listener is not None and self.listener.is_listening()

    def _listening_failed(self, message: str) -> None:
        if self.listener is None:
            return
        self.listener.stop()
        self.listener.deleteLater()
        self.listener = None
        self.live_timer.start()
        self._label.setToolTip(f"LISTEN failed: {message}")
        self._label.setText("live view: polling")
        self.notice.emit(f"Live view: cannot listen for changes ({message}); checking every {self.live_timer.interval() / 1000:g} s instead.")
        self.poll()  # whatever was committed while the connection was going

    def poll(self) -> None:
        """If another connection committed since the last check, emit ``changed``."""
        if self._pending:
            self._check_again = True
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
            if self._check_again:
                self._check_again = False
                self.poll()

        def failed(error: BaseException) -> None:
            self._pending = False
            self._label.setText(f"live view paused: {error}")

        reader.submit("poll", lambda store: store.data_version(), done, failed)
