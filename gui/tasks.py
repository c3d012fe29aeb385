"""Store work off the UI thread: a reader thread for queries, a thread pool for writes and long operations.

The UI thread never touches SQLite. Two kinds of work exist (as in Anki's ``QueryOp``/``CollectionOp``):

* :class:`StoreReader` - quick reads (pages of a table, counts, one memory's details, a search) run one at a time on
  a dedicated thread with its own connection. Each request has a *key*; a newer request with the same key makes
  an older, not yet started one obsolete, and results of obsolete requests are dropped, so fast clicking never
  piles up work or shows stale answers. Its :attr:`~StoreReader.planner`, a second reader, takes the reads that plan
  (the next sweep's dry run, the supersede preview), which at a million memories take a second: the quick reads
  never wait behind them.
* :class:`TaskRunner` - writes and long operations (forget, sweep, consolidate, import) each open their own
  :class:`~memlens.store.MemoryStore` on the same file inside a pool thread, report progress, can be cancelled, and
  deliver their result by a queued signal.

Errors raised by the work are delivered to the ``on_error`` callback; :mod:`memlens.errors` environment errors carry a
message fit to show as is.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlens.gui.qt import QObject, QtCore, QThread, Signal, Slot
from memlens.store import MemoryStore

#: Where a store is: its file, or a PostgreSQL URL. A URL here may carry the password the person typed: it is what
#: the app connects with, kept in memory only; what is shown or saved is the store's ``path`` (without it).
StoreTarget = Path | str
ReadFn = Callable[[MemoryStore], Any]
#: The planner's page cache (KiB; a store's connection has 64 MiB, see memlens.storage.context.PAGE_CACHE_KIB).
PLANNER_CACHE_KIB = 8 * 1024
Callback = Callable[[Any], None]


@dataclass
class _Request:
    token: int
    key: str
    fn: ReadFn
    on_done: Callback | None
    on_error: Callback | None


class _ReaderWorker(QObject):
    """Lives on the reader thread; owns that thread's store connection."""

    done = Signal(int, object, object)  # token, result, error

    def __init__(self, path: StoreTarget, latest: dict[str, int], lock: threading.Lock, cache_kib: int | None) -> None:
        super().__init__()
        self._path = path
        self._cache_kib = cache_kib
        self._latest = latest
        self._lock = lock
        self._store: MemoryStore | None = None

    @Slot(object)
    def run(self, request: _Request) -> None:
        with self._lock:
            obsolete = self._latest.get(request.key) != request.token
        if obsolete:
            self.done.emit(request.token, None, None)
            return
        try:
            if self._store is None:
                self._store = MemoryStore.open(self._path, create=False, actor="gui")
                if self._cache_kib is not None:
                    self._store.conn.execute(f"PRAGMA cache_size = -{int(self._cache_kib)}")
            result = request.fn(self._store)
        except Exception as exc:  # delivered to the caller's on_error, shown as a message there
            self.done.emit(request.token, None, exc)
            return
        self.done.emit(request.token, result, None)

    @Slot()
    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        # The thread ends only now: quit() called from the UI thread could end its loop before this queued close
        # ran, leaving the connection to the garbage collector (a PostgreSQL one then warns it was never closed).
        self.thread().quit()


class StoreReader(QObject):
    """Runs read-only functions of a store on one background thread, newest request per key wins.

    ``submit(key, fn, on_done, on_error)`` queues ``fn(store)``; ``on_done(result)`` is called on the UI thread
    unless a later request with the same key was submitted meanwhile. ``idle`` is emitted whenever the queue
    drains (tests and the screenshot command wait on it).
    """

    idle = Signal()
    _run = Signal(object)
    _close = Signal()

    def __init__(self, path: StoreTarget, parent: QObject | None = None, *, cache_kib: int | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self._tokens = itertools.count(1)
        self._latest: dict[str, int] = {}
        self._lock = threading.Lock()
        self._pending: dict[int, _Request] = {}
        self._thread = QThread()
        self._thread.setObjectName("memlens-reader")
        self._worker = _ReaderWorker(path, self._latest, self._lock, cache_kib)
        self._worker.moveToThread(self._thread)
        self._run.connect(self._worker.run, QtCore.Qt.ConnectionType.QueuedConnection)
        self._close.connect(self._worker.close, QtCore.Qt.ConnectionType.QueuedConnection)
        self._worker.done.connect(self._deliver, QtCore.Qt.ConnectionType.QueuedConnection)
        self._thread.start()
        self._stopped = False
        self._planner: StoreReader | None = None
        self._when_drained: list[Callable[[], None]] = []

    @property
    def planner(self) -> StoreReader:
        """A second reader, on a thread and connection of its own, for the reads that plan: the next sweep's dry run
        and the supersede preview. A dry run takes about a second at a million memories; on this reader it held up
        the pages, counts and details queued behind it (scrolling a freshly opened store to its end waited for it).
        Both keep their in-memory supersede index in that one connection. Made on first use, stopped with this
        reader, and counted in its :meth:`pending`."""
        if self._planner is None:
            if self._stopped:
                return self  # stopped: submitting to it does nothing, as to this reader
            # A small page cache: what it plans from is read once a plan (the store's 64 MB default made the app's
            # peak memory 432 MB at a million memories, against 364 MB with one reader).
            self._planner = StoreReader(self.path, self, cache_kib=PLANNER_CACHE_KIB)
        return self._planner

    def submit(self, key: str, fn: ReadFn, on_done: Callback | None = None, on_error: Callback | None = None) -> int:
        """Queue ``fn(store)`` under ``key``; returns the request's token."""
        if self._stopped:
            return 0
        token = next(self._tokens)
        with self._lock:
            self._latest[key] = token
        request = _Request(token, key, fn, on_done, on_error)
        self._pending[token] = request
        self._run.emit(request)
        return token

    def when_drained(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the UI thread the next time nothing submitted here is pending (at once when nothing is; never
        when the reader stops first). The planner's work waits for it: planning on another thread while the visible
        rows loaded slowed them (the two threads share the interpreter and two cores)."""
        if self._pending:
            self._when_drained.append(fn)
        elif not self._stopped:
            fn()

    def pending(self) -> int:
        """How many requests have not been delivered yet (the :attr:`planner`'s too)."""
        return len(self._pending) + (self._planner.pending() if self._planner is not None else 0)

    def is_current(self, key: str, token: int) -> bool:
        """Whether ``token`` is still the newest request for ``key``."""
        with self._lock:
            return self._latest.get(key) == token

    @Slot(int, object, object)
    def _deliver(self, token: int, result: Any, error: Any) -> None:
        request = self._pending.pop(token, None)
        if request is not None and self.is_current(request.key, token):
            if error is not None:
                if request.on_error is not None:
                    request.on_error(error)
                else:
                    raise error
            elif request.on_done is not None:
                request.on_done(result)
        if not self._pending:
            waiting, self._when_drained = self._when_drained, []
            for fn in waiting:
                fn()
            self.idle.emit()

    def stop(self) -> None:
        """Drop what has not started, close the thread's connection and end the thread (blocks until it has)."""
        if self._stopped:
            return
        self._stopped = True
        with self._lock:
            self._latest.clear()
        self._pending.clear()
        self._when_drained.clear()
        self._close.emit()  # closes the connection, then ends the thread
        self._thread.wait()
        if self._planner is not None:
            self._planner.stop()


# --- the pool: writes and long operations ----------------------------------------------------------------------


class TaskContext:
    """Handed to a task's function: report progress, and check whether the person pressed Cancel."""

    def __init__(self, signals: _TaskSignals, cancel: threading.Event) -> None:
        self._signals = signals
        self.cancel_event = cancel

    def progress(self, done: int, total: int = 0, text: str = "") -> None:
        """Report ``done`` of ``total`` (0: unknown) steps, with an optional line of text."""
        self._signals.progress.emit(int(done), int(total), str(text))

    def cancelled(self) -> bool:
        """True once cancellation was asked for."""
        return self.cancel_event.is_set()


TaskFn = Callable[[MemoryStore, TaskContext], Any]


class _TaskSignals(QObject):
    progress = Signal(int, int, str)
    finished = Signal(object)
    failed = Signal(object)


class _TaskRunnable(QtCore.QRunnable):
    def __init__(self, path: StoreTarget, fn: TaskFn, signals: _TaskSignals, cancel: threading.Event, create: bool, actor: str) -> None:
        super().__init__()
        self._actor = actor
        self.setAutoDelete(True)
        self._path = path
        self._fn = fn
        self._signals = signals
        self._cancel = cancel
        self._create = create

    def run(self) -> None:
        try:
            with MemoryStore.open(self._path, create=self._create, actor=self._actor) as store:
                result = self._fn(store, TaskContext(self._signals, self._cancel))
        except Exception as exc:  # delivered to on_error on the UI thread
            self._signals.failed.emit(exc)
            return
        self._signals.finished.emit(result)


@dataclass
class TaskHandle:
    """A running task: its name, a way to cancel it, and whether it has finished."""

    name: str
    cancel_event: threading.Event
    signals: _TaskSignals
    finished: bool = False

    def cancel(self) -> None:
        """Ask the task to stop at its next check; its on_done still runs with whatever it returns."""
        self.cancel_event.set()


class TaskRunner(QObject):
    """Starts store tasks in a private thread pool and tracks them until they finish.

    Each task opens its own store (``actor="gui"`` unless told otherwise), so a long sweep or consolidation never blocks the reader or
    the UI, and SQLite serialises the writers.
    """

    busy_changed = Signal(bool)
    task_finished = Signal(str)

    def __init__(self, path: StoreTarget | None, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self._pool = QtCore.QThreadPool(self)
        self._pool.setMaxThreadCount(2)
        self._running: list[TaskHandle] = []

    def start(
        self,
        name: str,
        fn: TaskFn,
        *,
        on_done: Callback | None = None,
        on_error: Callback | None = None,
        on_progress: Callable[[int, int, str], None] | None = None,
        create: bool = False,
        path: StoreTarget | None = None,
        actor: str = "gui",
    ) -> TaskHandle:
        """Run ``fn(store, context)`` in the pool on the runner's store (or ``path``); callbacks run on the UI thread."""
        target = path or self.path
        if target is None:
            raise ValueError("no store is open")
        signals = _TaskSignals(self)
        cancel = threading.Event()
        handle = TaskHandle(name, cancel, signals)

        def finish() -> None:
            handle.finished = True
            if handle in self._running:
                self._running.remove(handle)
            signals.deleteLater()
            if not self._running:
                self.busy_changed.emit(False)
            self.task_finished.emit(name)

        def done(result: Any) -> None:
            try:
                if on_done is not None:
                    on_done(result)
            finally:
                finish()

        def failed(error: Any) -> None:
            try:
                if on_error is not None:
                    on_error(error)
                else:
                    raise error
            finally:
                finish()

        signals.finished.connect(done, QtCore.Qt.ConnectionType.QueuedConnection)
        signals.failed.connect(failed, QtCore.Qt.ConnectionType.QueuedConnection)
        if on_progress is not None:
            signals.progress.connect(on_progress, QtCore.Qt.ConnectionType.QueuedConnection)
        was_idle = not self._running
        self._running.append(handle)
        if was_idle:
            self.busy_changed.emit(True)
        self._pool.start(_TaskRunnable(target, fn, signals, cancel, create, actor))
        return handle

    def running(self, name: str | None = None) -> list[TaskHandle]:
        """Tasks not finished yet (all, or those called ``name``)."""
        return [h for h in self._running if name is None or h.name == name]

    def is_busy(self) -> bool:
        """Whether any task is still running or has an undelivered result."""
        return bool(self._running)

    def shutdown(self) -> None:
        """Ask every task to cancel, then wait for the pool to finish (blocks)."""
        for handle in self._running:
            handle.cancel()
        self._pool.waitForDone()
