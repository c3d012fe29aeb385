"""The inspector's main window: the shell that builds the sidebar, filter bar, memory table, detail pane, audit log
and sessions, wires them to each other and to the operations in :mod:`memlens.gui.operations`, and refreshes the
views an operation's :class:`OpChanges` name (:meth:`MainWindow.apply_changes`).

All store work goes through :class:`memlens.gui.tasks.StoreReader` (reads) and :class:`memlens.gui.tasks.TaskRunner`
(writes and long operations), so the window never waits on SQLite. Whenever the live view sees another process
commit (``PRAGMA data_version``), :meth:`MainWindow.refresh_all` reloads counts, the visible rows and the open detail
in place. The actions are declared in :mod:`memlens.gui.actions`; what each one does lives in an operations module.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens.config import StoreSettings
from memlens.errors import MemlensError
from memlens.gui import format as fmt
from memlens.gui import theme
from memlens.gui.actions import EDIT_TIP, TABLE_MENU, ActionAttributes, WindowActions
from memlens.gui.audit_view import AuditView
from memlens.gui.calibrate_dialog import open_calibration
from memlens.gui.columns import COLUMN_INDEX
from memlens.gui.conflicts_view import ConflictsView
from memlens.gui.connect_dialog import shown_url
from memlens.gui.detail import DetailPane
from memlens.gui.detail_controller import DetailController
from memlens.gui.dialogs import show_about
from memlens.gui.filter_bar import FilterBar
from memlens.gui.icons import icon
from memlens.gui.live_view import LiveView
from memlens.gui.memory_model import MemoryQuery, MemoryTableModel
from memlens.gui.memory_table import MemoryPage, MemoryTable
from memlens.gui.operations import OpChanges
from memlens.gui.operations.consolidation_schedule import ScheduledConsolidation
from memlens.gui.operations.edit import open_edit_dialog, open_new_memory_dialog, update_memory
from memlens.gui.operations.forget import ask_to_forget
from memlens.gui.operations.lifecycle import (
    STRENGTH_TICK,
    demo_tip,
    open_settings,
    show_sweep_preview,
    start_consolidation,
    start_demo,
    start_sweep,
)
from memlens.gui.operations.pin import pin_shown
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtGui, QtWidgets, Signal
from memlens.gui.refresher import Refresher
from memlens.gui.scheduler import LifecycleScheduler
from memlens.gui.semantic_search import LocalSemanticSearch
from memlens.gui.sessions_view import SessionsView
from memlens.gui.sidebar import LAYERS, Sidebar
from memlens.gui.status_bar import StatusBar
from memlens.gui.store_session import connect_dialog, fill_recent, new_store_dialog, open_store_dialog, start_opening, store_title
from memlens.gui.tasks import StoreReader, StoreTarget, TaskRunner
from memlens.gui.transfer import start_export, start_import
from memlens.gui.travel_banner import TimeTravel, TravelBanner, TravelCombo
from memlens.gui.window_state import restore_state, save_state
from memlens.llm import LLMConfig, LLMError
from memlens.models import Memory
from memlens.sweep import SweepReport

__all__ = ["MainWindow", "Sidebar", "utc_now"]

#: Errors a person can act on: shown as a message. Anything else is a bug and is raised after the message.
USER_ERRORS: tuple[type[BaseException], ...] = (MemlensError, LLMError, OSError)


def utc_now() -> datetime:
    """The real current time, aware."""
    return datetime.now(timezone.utc)


class MainWindow(QtWidgets.QMainWindow, ActionAttributes):
    """The memlens inspector. ``clock`` gives "now" (tests and screenshots pass a fixed one)."""

    store_opened = Signal(str)
    counts_loaded = Signal(dict)
    detail_shown = Signal(int)
    write_finished = Signal(str)
    sweep_finished = Signal(object)
    sweep_previewed = Signal(object)
    #: Emitted with the dry-run report the table's Sweep column was marked from.
    sweep_marked = Signal(object)
    consolidate_finished = Signal(object)
    time_travel_changed = Signal(object)
    refreshed = Signal()
    error_shown = Signal(str)
    #: Emitted with the :class:`OpChanges` each time views were refreshed for them.
    changes_applied = Signal(object)
    #: Emitted after the project list, the audit operations and the store's settings were read again.
    lists_loaded = Signal()


    def __init__(self, settings: QtCore.QSettings, *, clock: Callable[[], datetime] = utc_now, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.settings = settings
        self.clock = clock
        self.prefs = Preferences.load(settings)
        #: The open store as it calls itself: its file, or its PostgreSQL URL without password (None: no store).
        self.path: Path | str | None = None
        self.reader: StoreReader | None = None
        self.tasks = TaskRunner(None, self)
        self.store_settings: StoreSettings | None = None
        self.travel: datetime | None = None
        self.dialog: QtWidgets.QDialog | None = None
        self._closing = False

        self.setWindowTitle("memlens")
        self.setWindowIcon(icon("app"))
        self._build_actions()
        self._build_ui()
        self._build_menus_and_toolbar()
        self._build_status()
        self._build_timers()
        restore_state(self)
        self.set_store_actions(False)

    # --- construction ----------------------------------------------------------------------------------------

    def _build_actions(self) -> None:
        self.registry = WindowActions(self, theme_name=self.prefs.theme, select_view=lambda key: self.sidebar.select(key), set_theme=self.set_theme)
        for attr, action in self.registry.by_attr.items():
            setattr(self, attr, action)
        self.view_actions = self.registry.views
        self.theme_actions = self.registry.themes

    def _build_ui(self) -> None:
        self.sidebar = Sidebar()
        self.sidebar.view_changed.connect(self._view_changed)
        self.sidebar.project_changed.connect(self._project_changed)
        self.filter_bar = FilterBar()
        self.filter_bar.changed.connect(self.apply_query)
        bar = self.filter_bar
        self.search_box, self.type_filter, self.tags_filter = bar.search_box, bar.type_filter, bar.tags_filter
        self.all_versions, self.pinned_filter, self.expiring_filter = bar.all_versions, bar.pinned_filter, bar.expiring_filter
        self.search_timer = bar.search_timer
        self._build_table()
        self.detail = DetailPane()
        # A set minimum: the splitter then ignores how wide the shown memory's contents would like to be.
        self.detail.setMinimumWidth(260)
        self.details = DetailController(self, self)
        self.details.shown.connect(self.detail_shown)
        # Also without a selection (a forgotten memory named elsewhere): what the detail shows, it shows open.
        self.details.shown.connect(lambda _memory_id: self.memory_splitter.show_detail(True))
        self.refresher = Refresher(self, self)
        self.refresher.counts_loaded.connect(self.counts_loaded)
        self.refresher.lists_loaded.connect(self.lists_loaded)
        self.refresher.sweep_marked.connect(self.sweep_marked)
        self.detail.link_activated.connect(self.details.follow_link)
        self.detail.edit_requested.connect(self.edit_dialog)
        self.detail.edit_button.setToolTip(EDIT_TIP)
        self.detail.pin_requested.connect(lambda pinned: pin_shown(self, pinned, self._saved))
        self.detail.forget_requested.connect(self.forget_detail)
        self.audit_view = AuditView(None)
        self.audit_view.target_activated.connect(self.go_to_memory)
        self.sessions_view = SessionsView(None)
        self.sessions_view.memory_activated.connect(self.go_to_memory)
        self.conflicts_view = ConflictsView.for_window(self)
        self.travel_banner = TravelBanner()
        self.travel_text, self.travel_list_button = self.travel_banner.text, self.travel_banner.list_button
        self._lay_out()

    def _build_table(self) -> None:
        self.model = MemoryTableModel(None, self.now, self)
        self.model.pin_icon = icon("pin")
        self.table = MemoryTable(self.model)
        self.table.context_actions = [self.registry.by_attr[attr] for attr in TABLE_MENU]
        self.strength_delegate = self.table.strength_delegate
        self.table.selectionModel().currentRowChanged.connect(lambda current, previous: self.details.current_row_changed(current, previous))
        self.table.selectionModel().selectionChanged.connect(lambda *_args: self.details.selection_changed())
        self.model.counted.connect(self._update_count_label)
        self.model.rowsRemoved.connect(lambda *_args: self.details.rows_removed())
        self.model.loaded.connect(self._model_loaded)
        self.model.load_failed.connect(lambda message: self.show_error("Could not read memories", MemlensError(message)))

    def _lay_out(self) -> None:
        self.memory_splitter = MemoryPage(self.filter_bar, self.table, self.detail)
        page = self.memory_splitter
        self.count_label, self.empty_state, self.table_stack = page.count_label, page.empty_state, page.table_stack
        self.empty_state.demo_button.clicked.connect(self.load_demo)
        self.empty_state.new_button.clicked.connect(self.new_memory_dialog)
        self.pages = QtWidgets.QStackedWidget()
        self.pages.setObjectName("pages")
        for widget in (self.memory_splitter, self.audit_view, self.sessions_view, self.conflicts_view):
            self.pages.addWidget(widget)
        right = QtWidgets.QWidget()
        right_layout = QtWidgets.QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.setSpacing(4)
        right_layout.addWidget(self.travel_banner)
        right_layout.addWidget(self.pages, 1)
        self.main_splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.main_splitter.setObjectName("mainSplitter")
        self.main_splitter.addWidget(self.sidebar)
        self.main_splitter.addWidget(right)
        self.main_splitter.setStretchFactor(1, 1)
        self.main_splitter.setSizes([180, 1220])
        self.setCentralWidget(self.main_splitter)

    def _build_menus_and_toolbar(self) -> None:
        self.recent_menu = self.registry.build_menus(self.menuBar())
        self._fill_recent()
        tb = self.addToolBar("Main")
        tb.setObjectName("mainToolbar")
        tb.setMovable(False)
        tb.setIconSize(QtCore.QSize(20, 20))
        tb.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.travel_combo = TravelCombo()
        self.time_travel = TimeTravel(self, self.travel_combo, self.travel_banner, self)
        self.time_travel.changed.connect(self.time_travel_changed)
        self.registry.build_toolbar(tb, {"travel": self.travel_combo})

    def _build_status(self) -> None:
        self.status = StatusBar()
        self.setStatusBar(self.status)
        self.busy_label, self.live_label, self.countdown_label = self.status.busy_label, self.status.live_label, self.status.countdown_label
        self.sweep_progress, self.sweep_cancel = self.status.sweep_progress, self.status.sweep_cancel
        self.tasks.busy_changed.connect(self.status.show_busy)
        self.semantic = LocalSemanticSearch(self, self.status, self.model)  # Lifecycle > Embed for Semantic Search; the table's searches
        self.store_opened.connect(self.semantic.check_store)

    def _build_timers(self) -> None:
        self.scheduler = LifecycleScheduler(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000, self)
        self.scheduler.strength_tick.connect(self.refresh_strengths)
        self.scheduler.sweep_due.connect(self.run_sweep)
        self.scheduler.countdown.connect(lambda seconds: self.status.show_countdown(seconds if self.path is not None else None))
        self.scheduler.paused_changed.connect(self._paused_changed)
        self.scheduled_consolidation = ScheduledConsolidation(self)  # its timer, countdown, pause and run now
        self.live = LiveView(lambda: self.reader, self.live_label, self.clock, self.prefs.live_poll_ms, self)
        self.live.changed.connect(self.refresh_all)
        self.live.notice.connect(lambda message: self.say(message, 15000))
        self.live_timer = self.live.live_timer

    # --- state -------------------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The moment the window shows: the time-travel date when previewing, else the clock."""
        return self.travel if self.travel is not None else self.clock()

    @property
    def counts(self) -> dict[str, int]:
        """The sidebar's per-layer counts, as last read."""
        return self.refresher.counts

    @property
    def is_empty(self) -> bool:
        """Whether the store holds no memory at all (the empty state shows instead of the table)."""
        return self.refresher.is_empty

    @property
    def _stale_pages(self) -> set[str]:
        return self.refresher.stale_pages

    def is_idle(self) -> bool:
        """No read pending, no task running, no table loading (tests and the screenshot command wait for this)."""
        if self.reader is not None and self.reader.pending():
            return False
        models = (self.model, self.audit_view.model, self.sessions_view.model, self.conflicts_view.model)
        return not self.tasks.is_busy() and not any(m.is_loading() for m in models)

    def read_only(self) -> bool:
        """True while previewing a later date (nothing may be written)."""
        return self.travel is not None

    def say(self, message: str, timeout_ms: int = 5000) -> None:
        """Show ``message`` in the status bar for ``timeout_ms``."""
        self.statusBar().showMessage(message, timeout_ms)

    def set_store_actions(self, has_store: bool) -> None:
        """Enable the actions that fit: those that need a store only with one, writing ones only at now."""
        writable = has_store and not self.read_only()
        self.registry.set_enabled(has_store=has_store, travelling=self.read_only())
        self.travel_combo.setEnabled(has_store)
        self.empty_state.demo_button.setEnabled(writable)
        self.empty_state.new_button.setEnabled(writable)
        self.detail.set_read_only(not writable)

    def save_state(self) -> None:
        """Remember geometry, toolbar/dock state, splitters, column layout, view and preferences."""
        with self.memory_splitter.as_chosen():
            save_state(self)

    # --- opening and closing stores ------------------------------------------------------------------------------

    def open_store(self, path: str | Path, *, create: bool = True) -> None:
        """Open (or create) the store at ``path`` in the background: a file, or a PostgreSQL URL (File > Connect);
        on failure the current store stays open (see :func:`memlens.gui.store_session.start_opening`)."""
        start_opening(self, path, create=create, activate=self._activate_store)

    def _activate_store(self, target: StoreTarget, settings: StoreSettings) -> None:
        self._close_store()
        path = self._attach_reader(target, settings)
        self.prefs.add_recent(path)
        self.prefs.save(self.settings)
        self._fill_recent()
        self.setWindowTitle(f"memlens — {store_title(path)}")
        self.status.show_store(path)
        for tip in (self.act_demo.setToolTip, self.act_demo.setStatusTip, self.empty_state.demo_button.setToolTip):
            tip(demo_tip(on_server=isinstance(target, str)))
        now = QtCore.QDateTime.fromSecsSinceEpoch(int(self.clock().timestamp()))
        self.audit_view.since.setDateTime(now.addDays(-7))
        self.audit_view.until.setDateTime(now)
        self.set_store_actions(True)
        self.refresher.reset()
        # The first check is the baseline, taken before anything is read; a server announces commits, a file is polled.
        self.live.start(self.prefs.live_poll_ms, listen_url=target if isinstance(target, str) else None)
        # The visible rows first (the reader works in order), then the counts and lists around them.
        self._view_changed(self.sidebar.current_view())
        self.refresh_counts()
        self.refresh_lists()
        self.refresher.check_expiries()  # the baseline for the strength ticks
        self.scheduler.set_intervals(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000)
        self.scheduler.start(paused=self.prefs.sweeps_paused)
        self.refresher.refresh_sweep_marks()  # for the sweep the timer now schedules
        self.say(f"Opened {store_title(path)}", 5000)
        self.store_opened.emit(str(path))

    def _attach_reader(self, target: StoreTarget, settings: StoreSettings) -> Path | str:
        # What is shown and saved is the path without a password; what the reader and tasks connect with keeps it.
        self.path = path = shown_url(target) if isinstance(target, str) else target
        self.tasks.path = target
        self.reader = StoreReader(target, self)
        self.use_store_settings(settings)
        self.refresher.reset()
        for view in (self.model, self.audit_view, self.sessions_view, self.conflicts_view):
            view.set_reader(self.reader)
        self.details.clear()
        return path

    def _close_store(self) -> None:
        self.scheduler.stop()
        self.live.stop()
        if self.reader is not None:
            for view in (self.model, self.audit_view, self.sessions_view, self.conflicts_view):
                view.set_reader(None)
            self.reader.stop()
            self.reader.deleteLater()
            self.reader = None

    def shutdown(self) -> None:
        """Stop timers, wait for background work and close every connection (the window is closing)."""
        if self._closing:
            return
        self._closing = True
        self.search_timer.stop()
        self.tasks.shutdown()
        self._close_store()

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        self.save_state()
        self.shutdown()
        super().closeEvent(event)

    def new_store_dialog(self) -> None:
        """File > New Store: choose where, then create and open it."""
        new_store_dialog(self)

    def open_store_dialog(self) -> None:
        """File > Open: choose an existing store."""
        open_store_dialog(self)

    def connect_dialog(self) -> None:
        """File > Connect: open a store on a PostgreSQL server by its URL."""
        connect_dialog(self, self.prefs.recent_files)

    def _fill_recent(self) -> None:
        fill_recent(self.recent_menu, self.prefs.recent_files, lambda path: self.open_store(path, create=False))

    # --- errors ------------------------------------------------------------------------------------------------

    def show_error(self, title: str, error: BaseException | str) -> None:
        """Tell the person what went wrong, in the error's own words; bugs are raised after the message."""
        message = str(error)
        if isinstance(error, BaseException) and not isinstance(error, USER_ERRORS):
            message = f"Unexpected error ({type(error).__name__}): {error}"
        self.statusBar().showMessage(message, 10000)
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Warning, title, message, QtWidgets.QMessageBox.StandardButton.Ok, self)
        box.setObjectName("errorMessage")
        box.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        self.error_shown.emit(message)
        if isinstance(error, BaseException) and not isinstance(error, USER_ERRORS):
            raise error

    # --- views and queries -------------------------------------------------------------------------------------

    def _view_changed(self, key: str) -> None:
        if key == "conflicts":
            return self.conflicts_view.show_in(self.pages)
        refresher = self.refresher if self.reader is not None else None
        if key == "audit":
            return self.audit_view.show_in(self.pages, refresher)
        if key == "sessions":
            return self.sessions_view.show_in(self.pages, self.sidebar.current_project(), refresher)
        self.pages.setCurrentWidget(self.memory_splitter)
        self.table.horizontalHeader().setSectionHidden(COLUMN_INDEX["layer"], key != "all")
        self.apply_query()
        self.refresher.refresh_stale_page()

    def _project_changed(self, _project: object) -> None:
        self.refresh_counts()
        self._view_changed(self.sidebar.current_view())

    def current_query(self) -> MemoryQuery:
        """The query the sidebar and filter bar describe (keeping the table's current order)."""
        view = self.sidebar.current_view()
        return self.filter_bar.query(
            layer=view if view in LAYERS else None,
            project=self.sidebar.current_project(),
            order_by=self.model.query.order_by,
            descending=self.model.query.descending,
        )

    def apply_query(self) -> None:
        """Reload the table if the filters changed."""
        self.search_timer.stop()
        if self.reader is None:
            return
        query = self.current_query()
        if query != self.model.query or (not self.model.rowCount() and not self.model.is_loading()):
            self.refresher.stale_pages.discard("memories")  # read afresh
            self.model.set_query(query)
            self.table.show_sort_order()

    def focus_search(self) -> None:
        """Ctrl+F: go to the memories and put the cursor in the search box."""
        if self.pages.currentWidget() is not self.memory_splitter:
            self.sidebar.select("all")
        self.filter_bar.focus_search()

    def _update_count_label(self, total: int) -> None:
        loaded = self.model.rowCount()
        if total < 0:
            self.count_label.setText(f"{loaded:,} loaded")
        elif self.model.query.text.strip():
            limit = " (best matches)" if total >= self.model.SEARCH_LIMIT else ""
            self.count_label.setText(f"{fmt.plural(total, 'match', 'matches')}{limit}")
        else:
            self.count_label.setText(f"{fmt.plural(total, 'memory', 'memories')}" + (f" · {loaded:,} loaded" if loaded < total else ""))

    def _model_loaded(self) -> None:
        if self.model.total is not None:
            self._update_count_label(self.model.total)
        self.details.select_pending()

    # --- selection and detail ----------------------------------------------------------------------------------

    def selected_ids(self) -> list[int]:
        """Ids of the selected memories, in table order."""
        return self.table.selected_ids()

    def show_memory(self, memory_id: int) -> None:
        """Load and show one memory in the detail pane (a forgotten one shows when and why it went)."""
        self.details.show_memory(memory_id)

    def go_to_memory(self, memory_id: int) -> None:
        """Show a memory from anywhere (an audit entry, a session, a link): switch to its layer and select it."""
        self.details.go_to_memory(memory_id)

    # --- refreshing --------------------------------------------------------------------------------------------

    def refresh_counts(self) -> None:
        """Reload the sidebar's layer counts (and notice an empty store)."""
        self.refresher.refresh_counts()

    def refresh_lists(self) -> None:
        """Reload the project list, the audit operations and the store's settings."""
        self.refresher.refresh_lists()

    def use_store_settings(self, settings: StoreSettings) -> None:
        """Use the store's settings just read (decay for strengths, the forget threshold for the bars)."""
        self.store_settings = settings
        self.model.decay_config = settings.decay
        self.strength_delegate.threshold = settings.decay.forget_threshold

    def refresh_all(self) -> None:
        """Reload counts, lists, the visible view's rows (in place) and the open detail; other views on showing."""
        if self.reader is None:
            return
        self.apply_changes(OpChanges.everything())
        self.refreshed.emit()

    def refresh_strengths(self) -> None:
        """The strength timer: repaint strengths and relative times, recount, and reload the lists if a TTL ran out."""
        self.apply_changes(STRENGTH_TICK)
        self.refresher.check_expiries()

    def operation_did_execute(self, name: str, changes: OpChanges) -> None:
        """A write called ``name`` succeeded: refresh what ``changes`` names and emit ``write_finished(name)``."""
        self.live.absorb_own_write()
        self.apply_changes(changes)
        self.write_finished.emit(name)

    def apply_changes(self, changes: OpChanges) -> None:
        """Refresh only the views ``changes`` names: the visible page at once, a hidden audit or sessions page when
        it is next shown. Emits ``changes_applied`` with what it was given."""
        if self.reader is None:
            return
        if changes.lists:
            self.refresh_lists()
        if changes.counts:
            self.refresh_counts()
        if changes.strengths:
            self.model.strengths_changed()
        on_memories = self.pages.currentWidget() is self.memory_splitter
        self.refresher.mark_stale(changes)
        self.refresher.refresh_stale_page()
        if changes.memory_ids or changes.memory_list or changes.counts or changes.strengths or changes.lists:
            self.refresher.refresh_sweep_marks()  # anything but a new audit entry may change what the next sweep does
        detail = self.details.memory_id
        if detail is not None and (detail in changes.memory_ids or changes.memory_list or (changes.strengths and on_memories)):
            self.show_memory(detail)
        self.changes_applied.emit(changes)

    def poll_for_changes(self) -> None:
        """The live view: if another connection committed since the last poll, refresh everything in place."""
        self.live.poll()

    # --- dialogs and operations --------------------------------------------------------------------------------

    def dialog_parent(self) -> QtWidgets.QWidget:
        """Operations' dialogs belong to the window."""
        return self

    def open_dialog(self, dialog: QtWidgets.QDialog) -> None:
        """Show ``dialog`` window-modal as ``self.dialog``; it deletes itself when closed."""
        self.dialog = dialog
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.finished.connect(lambda _r: setattr(self, "dialog", None) if self.dialog is dialog else None)
        dialog.open()

    def forget_selected(self) -> None:
        """Delete: confirm, then forget the selected memories (or the one in the detail pane)."""
        ids = self.selected_ids() if self.pages.currentWidget() is self.memory_splitter else []
        if not ids and self.detail.data is not None:
            ids = [self.detail.data.memory.id]
        if ids:
            self.forget_ids(ids)

    def forget_detail(self) -> None:
        """The detail pane's Forget button."""
        if self.detail.data is not None:
            ids = self.selected_ids()
            self.forget_ids(ids if self.detail.data.memory.id in ids else [self.detail.data.memory.id])

    def forget_ids(self, ids: list[int]) -> None:
        """Read what would be erased, then ask for confirmation (the dialog is ``self.dialog``)."""
        ask_to_forget(self, ids)

    def new_memory_dialog(self) -> None:
        """Ctrl+N: the supersede-preview dialog, then store what the person chose."""
        projects = [self.sidebar.project.itemData(i) for i in range(1, self.sidebar.project.count())]
        open_new_memory_dialog(self, projects, self.sidebar.current_project())

    def current_memory(self) -> Memory | None:
        """The memory the detail pane shows."""
        return self.detail.data.memory if self.detail.data is not None else None

    def edit_dialog(self) -> None:
        """Ctrl+E: edit the shown memory's importance, tags, pinning, project and TTL."""
        open_edit_dialog(self, self._saved)

    def update_memory(self, memory_id: int, changes: dict[str, Any]) -> None:
        """Apply ``MemoryStore.update`` changes in the background."""
        update_memory(self, memory_id, changes, now=self.clock()).success(self._saved).run_in_background()

    def _saved(self, memory: Memory) -> None:
        self.model.update_memory(memory)
        self.say(f"Saved #{memory.id}.", 5000)

    def toggle_pin(self) -> None:
        """Ctrl+P: pin or unpin the shown memory."""
        pin_shown(self, None, self._saved)

    def load_demo(self) -> None:
        """Write the demo (a few weeks of an agent's work) into this store, in the background."""
        start_demo(self, self.empty_state.progress, self.empty_state.demo_button)

    # --- lifecycle: sweep, consolidate, time travel -------------------------------------------------------------

    def sweep_now(self) -> None:
        """Lifecycle > Run Sweep Now (restarts the interval)."""
        self.scheduler.run_now()

    def run_sweep(self) -> None:
        """Run the auto-forget sweep in the background (skipped while one runs or while time travelling)."""

        def finished(report: SweepReport) -> None:
            self.refresher.refresh_sweep_marks()  # the timer restarted: the next sweep is an interval away
            self.sweep_finished.emit(report)

        start_sweep(self, self.status, finished)

    def next_sweep_at(self) -> datetime:
        """When the next automatic sweep runs (while time travelling: the date shown). The sweep preview and the
        table's Sweep column both plan for this moment, so they agree."""
        if self.read_only():
            return self.now()
        return self.now() + timedelta(seconds=max(0, self.scheduler.seconds_to_sweep()))

    def preview_sweep(self) -> None:
        """What the next automatic sweep would do, as a list (dry run: changes nothing)."""
        if self.path is not None:
            show_sweep_preview(self, self.next_sweep_at(), self.sweep_previewed.emit)

    def toggle_pause(self) -> None:
        """Pause or resume automatic sweeps."""
        if self.scheduler.is_paused():
            self.scheduler.resume()
        else:
            self.scheduler.pause()
        self.prefs.sweeps_paused = self.scheduler.is_paused()
        self.prefs.save(self.settings)

    def _paused_changed(self, paused: bool) -> None:
        self.refresher.refresh_sweep_marks()  # paused: the "next sweep" is whatever Run Sweep Now would do
        self.act_pause.setChecked(paused)
        self.act_pause.setIcon(icon("play" if paused else "pause"))
        self.act_pause.setText("Resume &Automatic Sweeps" if paused else "Pause &Automatic Sweeps")

    def llm_config(self) -> tuple[LLMConfig | None, str]:
        """The LLM endpoint from Settings (else the MEMLENS_LLM_* environment), and a sentence saying which is used."""
        return LLMConfig.resolve(self.prefs.llm_base_url, self.prefs.llm_model)

    def consolidate(self) -> None:
        """Run consolidation in the background with a progress dialog that can cancel it."""
        start_consolidation(self, self.llm_config, self.consolidate_finished.emit)

    def calibrate_dialog(self) -> None:
        """Lifecycle > Calibrate & Tidiness: memories' fates, proposals and the tidiness knob, with previews."""
        if self.path is not None:
            open_calibration(self, self.now(), self.use_store_settings)

    def time_travel_dialog(self) -> None:
        """Pick a date to preview the store at."""
        self.time_travel.open_dialog()

    def back_to_now(self) -> None:
        """Leave the time-travel preview."""
        self.time_travel.set_date(None)

    def set_time_travel(self, when: datetime | None) -> None:
        """Show the store as it will be at ``when`` (read-only), or back at now with None."""
        self.time_travel.set_date(when)

    # --- settings, theme, import/export -----------------------------------------------------------------------

    def settings_dialog(self) -> None:
        """Edit timers, theme and LLM (kept per person) and the store's thresholds and decay rates."""
        open_settings(self, self.prefs, self.store_settings, self.apply_preferences, self.use_store_settings)

    def apply_preferences(self, prefs: Preferences) -> None:
        """Use and persist new preferences (timer intervals apply at once)."""
        theme_changed = prefs.theme != self.prefs.theme
        self.prefs = prefs
        self.prefs.save(self.settings)
        self.scheduler.set_intervals(prefs.refresh_seconds * 1000, prefs.sweep_seconds * 1000)
        self.refresher.refresh_sweep_marks()
        self.live_timer.setInterval(prefs.live_poll_ms)
        if theme_changed:
            self.set_theme(prefs.theme)

    def set_theme(self, name: str) -> None:
        """Switch between the system, light and dark palettes (persisted)."""
        app = QtWidgets.QApplication.instance()
        if isinstance(app, QtWidgets.QApplication):
            theme.apply(app, name)
        self.prefs.theme = name
        self.prefs.save(self.settings)
        self.registry.check_theme(name)
        self._reload_icons()

    def _reload_icons(self) -> None:
        self.registry.reload_icons()
        self.act_pause.setIcon(icon("play" if self.scheduler.is_paused() else "pause"))
        for key, item in self.sidebar.items.items():
            item.setIcon(0, icon(key))
        self.model.pin_icon = icon("pin")
        self.travel_combo.reload_icons()
        for button, name in ((self.detail.edit_button, "edit"), (self.detail.pin_button, "pin"), (self.detail.forget_button, "forget")):
            button.setIcon(icon(name))

    def import_dialog(self) -> None:
        """File > Import."""
        start_import(self)

    def export_dialog(self) -> None:
        """File > Export."""
        start_export(self)

    def about(self) -> None:
        """Help > About."""
        show_about(self, self.path)
