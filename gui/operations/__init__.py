"""GUI actions as small operation objects, in the manner of Anki's ``aqt/operations``.

An operation runs one store call in the background through the window's :class:`~memlens.gui.tasks.TaskRunner`,
then calls its ``success`` (or ``failure``) callback on the UI thread and hands the host an :class:`OpChanges`
saying what it changed. The host (the main window) refreshes only the views those changes name, so pinning a memory
repaints one row instead of reloading counts, lists, the audit log and the sessions.

Each module here holds the operations of one concern (:mod:`.forget`, :mod:`.edit`, :mod:`.pin`, :mod:`.lifecycle`,
:mod:`.time_travel`); each function returns a :class:`StoreOp` that the caller starts with
:meth:`StoreOp.run_in_background`, usually after adding a ``success`` callback::

    forget_memories(window, ids, reason="outdated", whole_chain=False, now=now).success(said).run_in_background()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from memlens.errors import MemlensError
from memlens.gui.qt import QtWidgets
from memlens.gui.tasks import StoreReader, TaskContext, TaskHandle, TaskRunner
from memlens.models import Memory
from memlens.store import MemoryStore

T = TypeVar("T")


@dataclass(frozen=True)
class OpChanges:
    """What an operation changed, so each view can tell whether it must refresh.

    ``memory_ids``: memories whose contents changed (their rows repaint, the detail pane reloads if it shows one);
    ``memory_list``: which memories match a query may have changed (rows added, removed or reordered);
    ``counts``: the sidebar's per-layer counts; ``lists``: the project list, the audit operations and the store's
    settings; ``sessions``: sessions or their observations; ``audit``: entries the audit view should show now;
    ``strengths``: the clock moved, so strengths, relative times and expiry must be shown anew.
    """

    memory_ids: frozenset[int] = field(default_factory=frozenset)
    memory_list: bool = False
    counts: bool = False
    lists: bool = False
    sessions: bool = False
    audit: bool = False
    strengths: bool = False

    @classmethod
    def everything(cls) -> OpChanges:
        """Changes that make every view refresh (another process wrote, F5, or a write failed half way)."""
        return cls(memory_list=True, counts=True, lists=True, sessions=True, audit=True, strengths=True)

    @classmethod
    def of_memories(cls, ids: Iterable[int], **flags: bool) -> OpChanges:
        """Changes to the contents of ``ids``, plus the named flags."""
        return cls(memory_ids=frozenset(ids), **flags)

    def is_empty(self) -> bool:
        """Whether nothing changed."""
        return self == OpChanges()


#: Nothing changed (reads, previews, a failed read).
NO_CHANGES = OpChanges()


class OpHost(Protocol):
    """What an operation needs from the window that starts it (the main window is one)."""

    tasks: TaskRunner
    #: The open store as it calls itself (``MemoryStore.path``): its file, or its PostgreSQL URL without password.
    path: Path | str | None

    def clock(self) -> datetime:
        """The real current time (never the time-travel date)."""

    def read_only(self) -> bool:
        """True while nothing may be written (time travel)."""

    def show_error(self, title: str, error: BaseException | str) -> None:
        """Tell the person what went wrong."""

    def dialog_parent(self) -> QtWidgets.QWidget:
        """The widget the operation's dialogs belong to."""

    def open_dialog(self, dialog: QtWidgets.QDialog) -> None:
        """Show a window-modal dialog that deletes itself when closed."""

    def operation_did_execute(self, name: str, changes: OpChanges) -> None:
        """A write called ``name`` succeeded: refresh the views ``changes`` names and announce it."""

    def apply_changes(self, changes: OpChanges) -> None:
        """Refresh the views ``changes`` names."""

    def open_store(self, path: str | Path, *, create: bool = True) -> None:
        """Show the store at ``path`` instead of the current one (the demo opens the demo store it wrote)."""


class WindowHost(OpHost, Protocol):
    """What the handlers that open an operation's dialog and start it need from the window (the main window is one):
    the reader for what a dialog shows first, the detail pane, the selection and the status bar."""

    reader: StoreReader | None
    dialog: QtWidgets.QDialog | None
    travel: datetime | None

    def now(self) -> datetime:
        """The moment the window shows (the time-travel date when previewing)."""

    def current_memory(self) -> Memory | None:
        """The memory the detail pane shows."""

    def selected_ids(self) -> list[int]:
        """Ids of the memories selected in the table (none while another page shows)."""

    def go_to_memory(self, memory_id: int) -> None:
        """Show and select a memory wherever it is."""

    def say(self, message: str, timeout_ms: int = 5000) -> None:
        """Show ``message`` in the status bar for a while."""


StoreFn = Callable[[MemoryStore, TaskContext], T]


class StoreOp(Generic[T]):
    """One store call in the background with success/failure callbacks and the changes it reports.

    ``changes`` maps the call's result to an :class:`OpChanges` (or is one). A writing operation is refused while
    the host is read-only; after a failed write every view refreshes, since part of it may have been committed.
    ``writes=False`` makes a read in the pool (a dry-run sweep), which reports no changes.
    """

    def __init__(
        self,
        host: OpHost,
        name: str,
        op: StoreFn[T],
        changes: Callable[[T], OpChanges] | OpChanges = NO_CHANGES,
        *,
        title: str,
        writes: bool = True,
        actor: str = "gui",
    ) -> None:
        self.host = host
        self.name = name
        self.title = title
        self.writes = writes
        self.actor = actor
        self._op = op
        self._changes = changes
        self._success: Callable[[T], Any] | None = None
        self._failure: Callable[[BaseException], Any] | None = None
        self._progress: Callable[[int, int, str], None] | None = None
        #: The changes reported by the last successful run (tests read it).
        self.reported: OpChanges | None = None

    def success(self, callback: Callable[[T], Any] | None) -> StoreOp[T]:
        """Call ``callback(result)`` on the UI thread when the operation succeeded (before the views refresh)."""
        self._success = callback
        return self

    def failure(self, callback: Callable[[BaseException], Any] | None) -> StoreOp[T]:
        """Call ``callback(error)`` instead of showing the error as a message."""
        self._failure = callback
        return self

    def with_progress(self, callback: Callable[[int, int, str], None] | None) -> StoreOp[T]:
        """Call ``callback(done, total, text)`` on the UI thread as the operation reports progress."""
        self._progress = callback
        return self

    def changes_for(self, result: T) -> OpChanges:
        """The changes this operation reports for ``result``."""
        return self._changes(result) if callable(self._changes) else self._changes

    def run_in_background(self) -> TaskHandle | None:
        """Start the operation; None when there is no store or a write is refused (the person is told why)."""
        host = self.host
        if host.path is None:
            return None
        if self.writes and host.read_only():
            host.show_error(self.title, MemlensError("The store is shown at a later date (time travel) and is read-only; go back to now to change it."))
            return None

        def done(result: T) -> None:
            changes = self.changes_for(result)
            self.reported = changes
            try:
                if self._success is not None:
                    self._success(result)
            finally:
                if self.writes:
                    host.operation_did_execute(self.name, changes)

        def failed(error: BaseException) -> None:
            try:
                if self._failure is not None:
                    self._failure(error)
                else:
                    host.show_error(self.title, error)
            finally:
                if self.writes:
                    host.apply_changes(OpChanges.everything())

        return host.tasks.start(self.name, self._op, on_done=done, on_error=failed, on_progress=self._progress, actor=self.actor)
