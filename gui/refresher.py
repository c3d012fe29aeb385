"""The refresh engine of the main window: what to read again after a change, and when.

:meth:`Refresher.refresh_counts` and :meth:`Refresher.refresh_lists` reload the sidebar's counts and the project,
audit-operation and settings lists; :meth:`Refresher.reload_rows` repaints rows whose contents changed;
:meth:`Refresher.mark_stale` and :meth:`Refresher.refresh_stale_page` keep every page current when it is shown
(hidden pages wait); :meth:`Refresher.check_expiries` notices a TTL running out as time passes. The window's
``apply_changes`` decides, from an operation's :class:`~memlens.gui.operations.OpChanges`, which of these run.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from memlens.config import StoreSettings
from memlens.gui.audit_view import AuditView
from memlens.gui.memory_model import EXPIRING_SOON, MemoryTableModel
from memlens.gui.memory_table import EmptyState, MemoryTable
from memlens.gui.operations import OpChanges
from memlens.gui.qt import QObject, QtWidgets, Signal
from memlens.gui.sessions_view import SessionsView
from memlens.gui.sidebar import Sidebar
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore
from memlens.sweep import SweepReport

#: The pages a change can make stale; each refreshes when it is next shown.
PAGES = ("memories", "audit", "sessions")


class RefreshHost(Protocol):
    """What the refresher reads from the window it refreshes (the main window is one)."""

    reader: StoreReader | None
    model: MemoryTableModel
    pages: QtWidgets.QStackedWidget
    audit_view: AuditView
    sessions_view: SessionsView
    sidebar: Sidebar
    table_stack: QtWidgets.QStackedWidget
    table: MemoryTable
    empty_state: EmptyState

    def now(self) -> datetime:
        """The moment the window shows."""

    def show_error(self, title: str, error: BaseException | str) -> None:
        """Tell the person a read failed."""

    def apply_changes(self, changes: OpChanges) -> None:
        """Refresh the views ``changes`` names."""

    def use_store_settings(self, settings: StoreSettings) -> None:
        """Use the store's settings just read (decay for strengths, the forget threshold for the bars)."""

    def next_sweep_at(self) -> datetime:
        """When the next automatic sweep runs."""


class Refresher(QObject):
    """Reads again, on the window's reader thread, what a change made stale, and shows it."""

    #: The sidebar's counts were read (per layer).
    counts_loaded = Signal(dict)
    #: The project list, the audit operations and the store's settings were read again.
    lists_loaded = Signal()
    #: Emitted with the dry-run report the table's Sweep column was marked from.
    sweep_marked = Signal(object)

    def __init__(self, host: RefreshHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.counts: dict[str, int] = {}
        self.is_empty = False
        #: Pages a change made stale (of :data:`PAGES`); each refreshes when next shown.
        self.stale_pages: set[str] = set()
        #: (expiring-soon filter on, memories whose TTL is past its horizon) at the last look.
        self.expiries_seen: tuple[bool, int] | None = None
        self.first_counts = False  # set when a store opens: its first counts may move an empty view to "all"

    def reset(self) -> None:
        """A store was opened: nothing is stale yet, and the next expiry check sets the baseline."""
        self.stale_pages.clear()
        self.expiries_seen = None
        self.first_counts = True

    def refresh_counts(self) -> None:
        """Reload the sidebar's layer counts (and notice an empty store)."""
        host = self.host
        if host.reader is None:
            return
        project = host.sidebar.current_project()
        now = host.now()

        def counts(store: MemoryStore) -> tuple[dict[str, int], bool]:
            result = store.layer_counts(project=project, now=now)
            empty = False
            if not any(result.values()) and project is None:
                empty = store.count_memories(latest_only=False, include_expired=True, now=now) == 0
            return result, empty

        def shown(result: tuple[dict[str, int], bool]) -> None:
            self.counts, self.is_empty = result
            host.sidebar.set_counts(self.counts)
            host.table_stack.setCurrentWidget(host.empty_state if self.is_empty else host.table)
            if self.first_counts:
                self.first_counts = False
                self._leave_an_empty_first_view()
            self.counts_loaded.emit(self.counts)

        host.reader.submit("counts", counts, shown, lambda e: host.show_error("Could not count memories", e))

    def _leave_an_empty_first_view(self) -> None:
        """A store opened on a layer it has nothing in (the view remembered from another store) shows all memories
        instead: a search typed there would say "0 matches" while the store holds hundreds."""
        view = self.host.sidebar.current_view()
        if view in self.counts and self.counts[view] == 0 and sum(self.counts.values()) > 0:
            self.host.sidebar.select("all")

    def refresh_lists(self) -> None:
        """Reload the project list, the audit operations and the store's settings."""
        host = self.host
        if host.reader is None:
            return

        def lists(store: MemoryStore) -> tuple[list[str], list[str], StoreSettings]:
            return store.projects(), store.audit_operations(), store.reload_settings()

        def shown(result: tuple[list[str], list[str], StoreSettings]) -> None:
            projects, operations, settings = result
            host.sidebar.set_projects(projects)
            host.audit_view.set_operations(operations)
            host.use_store_settings(settings)
            self.lists_loaded.emit()

        host.reader.submit("lists", lists, shown, lambda e: host.show_error("Could not read the store", e))

    def check_expiries(self) -> None:
        """Time moved: when a TTL ran out since the last look (or came within the "expiring soon" week while that
        filter is on), which memories the table lists changed, so it is refreshed like after a write.

        Counts the memories whose TTL is past that horizon: cheap (``forget_after`` is indexed) and, unlike
        refreshing the list on every tick, free on a 200k store where nothing expired."""
        host = self.host
        if host.reader is None:
            return
        soon = host.model.query.expiring_soon
        horizon = host.now() + (EXPIRING_SOON if soon else timedelta(0))

        def passed(store: MemoryStore) -> int:
            return store.count_memories(latest_only=False, include_expired=True, expiring_before=horizon)

        def seen(count: int) -> None:
            previous, self.expiries_seen = self.expiries_seen, (soon, count)
            if previous is not None and previous != (soon, count):
                host.apply_changes(OpChanges(memory_list=True))

        host.reader.submit("expiries", passed, seen, lambda e: host.show_error("Could not read the store", e))

    def reload_rows(self, ids: frozenset[int]) -> None:
        """Read the memories ``ids`` again and repaint their rows, if shown (the list itself did not change)."""
        host = self.host
        shown = [i for i in ids if host.model.row_of(i) >= 0]
        if host.reader is None or not shown:
            return

        def repaint(memories: list[Memory]) -> None:
            for memory in memories:
                host.model.update_memory(memory)

        host.reader.submit("rows", lambda store: store.get_many(shown), repaint, lambda e: host.show_error("Could not read the memory", e))

    def refresh_sweep_marks(self) -> None:
        """Plan the next sweep again (a dry run on the reader's planner thread: 30 ms at 200k memories, about a
        second at a million) and mark the table's rows it would act on; emits ``sweep_marked`` with the report."""
        host = self.host
        if host.reader is None:
            return
        when = host.next_sweep_at()

        def marked(report: SweepReport) -> None:
            host.model.set_sweep_plan(report.decisions, when)
            self.sweep_marked.emit(report)

        reader = host.reader

        def plan() -> None:
            reader.planner.submit("sweep-marks", lambda store: store.sweep(now=when, dry_run=True), marked, lambda e: host.show_error("Could not plan the next sweep", e))

        # On the planner's thread (see StoreReader.planner), once the reads asked for so far (the visible rows first) are in.
        reader.when_drained(plan)

    def _query_reads_edited_fields(self) -> bool:
        """Whether the table's filter or order uses what an in-place edit changes (pinning, tags, importance, TTL)."""
        q = self.host.model.query
        edited_orders = {"importance", "tags", "forget_after"}
        return q.pinned_only or bool(q.tags) or q.expiring_soon or q.order_by in edited_orders

    def mark_stale(self, changes: OpChanges) -> None:
        """Note the pages ``changes`` made stale, and repaint in place the rows whose contents alone changed (unless
        the table's filter or order reads what changed: then its list is stale too)."""
        if changes.memory_list or (changes.memory_ids and self._query_reads_edited_fields()):
            self.stale_pages.add("memories")
        elif changes.memory_ids:
            self.reload_rows(changes.memory_ids)
        if changes.audit:
            self.stale_pages.add("audit")
        if changes.sessions:
            self.stale_pages.add("sessions")

    def visible_page(self) -> str:
        """The key of the page shown: "memories", "audit" or "sessions"."""
        page = self.host.pages.currentWidget()
        return "audit" if page is self.host.audit_view else "sessions" if page is self.host.sessions_view else "memories"

    def refresh_stale_page(self) -> None:
        """Refresh the visible page if a change made it stale (hidden pages wait until they are shown)."""
        host = self.host
        key = self.visible_page()
        if key not in self.stale_pages or host.reader is None:
            return
        self.stale_pages.discard(key)
        if key == "audit":
            host.audit_view.model.refresh()
        elif key == "sessions":
            host.sessions_view.model.refresh()
        elif host.model.rowCount() or host.model.is_loading():
            host.model.refresh()
        else:
            host.model.reload()
