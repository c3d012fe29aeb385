"""The inspector's main window: the shell that builds the sidebar, filter bar, memory table, detail pane, audit log
and sessions, wires them to each other and to the operations in :mod:`memlens.gui.operations`, and refreshes the
views an operation's :class:`OpChanges` name (:meth:`MainWindow.apply_changes`).

All store work goes through :class:`memlens.gui.tasks.StoreReader` (reads) and :class:`memlens.gui.tasks.TaskRunner`
(writes and long operations), so the window never waits on SQLite. Whenever the live view sees another process
commit (``PRAGMA data_version``), :meth:`MainWindow.refresh_all` reloads counts, the visible rows and the open detail
in place. The actions are declared in :mod:`memlens.gui.actions`; what each one does lives in an operations module.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens.config import StoreSettings
from memlens.errors import MemlensError, NotFound
from memlens.gui import format as fmt
from memlens.gui import theme
from memlens.gui.actions import EDIT_TIP, TABLE_MENU, WindowActions
from memlens.gui.audit_view import AuditView
from memlens.gui.columns import COLUMN_INDEX
from memlens.gui.detail import DetailData, DetailPane, forgotten_message, load_curve, load_detail
from memlens.gui.filter_bar import FilterBar
from memlens.gui.icons import icon
from memlens.gui.live_view import LiveView
from memlens.gui.memory_model import EXPIRING_SOON, ID_ROLE, MemoryQuery, MemoryTableModel
from memlens.gui.memory_table import EmptyState, MemoryTable
from memlens.gui.operations import OpChanges
from memlens.gui.operations.edit import open_edit_dialog, open_new_memory_dialog, update_memory
from memlens.gui.operations.forget import ask_to_forget
from memlens.gui.operations.lifecycle import (
    STRENGTH_TICK,
    open_settings,
    show_sweep_preview,
    show_sweep_report,
    start_consolidation,
    start_demo,
    start_sweep,
)
from memlens.gui.operations.pin import pin_shown
from memlens.gui.operations.time_travel import TIME_MOVED, open_time_travel_dialog, preview_at
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtGui, QtWidgets, Signal
from memlens.gui.scheduler import LifecycleScheduler
from memlens.gui.sessions_view import SessionsView
from memlens.gui.sidebar import LAYERS, Sidebar
from memlens.gui.status_bar import StatusBar
from memlens.gui.store_session import fill_recent, new_store_dialog, open_store_dialog
from memlens.gui.tasks import StoreReader, TaskContext, TaskRunner
from memlens.gui.transfer import start_export, start_import
from memlens.gui.travel_banner import TravelBanner, TravelCombo
from memlens.llm import LLMConfig, LLMError
from memlens.models import Memory
from memlens.store import MemoryStore
from memlens.sweep import SweepReport

__all__ = ["MainWindow", "Sidebar", "utc_now"]

#: Errors a person can act on: shown as a message. Anything else is a bug and is raised after the message.
USER_ERRORS: tuple[type[BaseException], ...] = (MemlensError, LLMError, OSError)
COMPARE_LIMIT = 8
#: The detail pane's starting width (it keeps it: the table's text column takes what the window gains).
DETAIL_WIDTH = 310


def utc_now() -> datetime:
    """The real current time, aware."""
    return datetime.now(timezone.utc)


class MainWindow(QtWidgets.QMainWindow):
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

    # The actions, one attribute per entry of memlens.gui.actions.ACTIONS.
    act_new_store: QtGui.QAction
    act_open: QtGui.QAction
    act_import: QtGui.QAction
    act_export: QtGui.QAction
    act_settings: QtGui.QAction
    act_quit: QtGui.QAction
    act_new_memory: QtGui.QAction
    act_edit: QtGui.QAction
    act_pin: QtGui.QAction
    act_forget: QtGui.QAction
    act_find: QtGui.QAction
    act_refresh: QtGui.QAction
    act_consolidate: QtGui.QAction
    act_sweep: QtGui.QAction
    act_sweep_preview: QtGui.QAction
    act_pause: QtGui.QAction
    act_travel: QtGui.QAction
    act_back_to_now: QtGui.QAction
    act_demo: QtGui.QAction
    act_about: QtGui.QAction

    def __init__(self, settings: QtCore.QSettings, *, clock: Callable[[], datetime] = utc_now, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.settings = settings
        self.clock = clock
        self.prefs = Preferences.load(settings)
        self.path: Path | None = None
        self.reader: StoreReader | None = None
        self.tasks = TaskRunner(None, self)
        self.store_settings: StoreSettings | None = None
        self.travel: datetime | None = None
        self.travel_report: Any = None
        self.counts: dict[str, int] = {}
        self.is_empty = False
        self.dialog: QtWidgets.QDialog | None = None
        self._pending_select: int | None = None
        self._detail_id: int | None = None
        #: Pages a change made stale: "memories", "audit", "sessions"; each refreshes when next shown.
        self._stale_pages: set[str] = set()
        #: (expiring-soon filter on, memories whose TTL is past its horizon) at the last strength tick.
        self._expiries_seen: tuple[bool, int] | None = None
        self._closing = False

        self.setWindowTitle("memlens")
        self.setWindowIcon(icon("app"))
        self._build_actions()
        self._build_ui()
        self._build_menus_and_toolbar()
        self._build_status()
        self._build_timers()
        self._restore_state()
        self._set_store_actions(False)

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
        self.detail.link_activated.connect(self._link)
        self.detail.edit_requested.connect(self.edit_dialog)
        self.detail.edit_button.setToolTip(EDIT_TIP)
        self.detail.pin_requested.connect(lambda pinned: pin_shown(self, pinned, self._saved))
        self.detail.forget_requested.connect(self.forget_detail)
        self.audit_view = AuditView(None)
        self.audit_view.target_activated.connect(self.go_to_memory)
        self.sessions_view = SessionsView(None)
        self.sessions_view.memory_activated.connect(self.go_to_memory)
        self.travel_banner = TravelBanner()
        self.travel_text, self.travel_list_button = self.travel_banner.text, self.travel_banner.list_button
        self.travel_list_button.clicked.connect(self._show_travel_report)
        self.travel_banner.back_button.clicked.connect(self.back_to_now)
        self._lay_out()

    def _build_table(self) -> None:
        self.model = MemoryTableModel(None, self.now, self)
        self.model.pin_icon = icon("pin")
        self.table = MemoryTable(self.model)
        self.table.context_actions = [self.registry.by_attr[attr] for attr in TABLE_MENU]
        self.strength_delegate = self.table.strength_delegate
        self.table.selectionModel().currentRowChanged.connect(self._current_row_changed)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self.model.counted.connect(self._update_count_label)
        self.model.rowsRemoved.connect(self._rows_removed)
        self.model.loaded.connect(self._model_loaded)
        self.model.load_failed.connect(lambda message: self.show_error("Could not read memories", MemlensError(message)))
        self.count_label = QtWidgets.QLabel()
        self.count_label.setObjectName("countLabel")
        self.empty_state = EmptyState()
        self.empty_state.demo_button.clicked.connect(self.load_demo)
        self.empty_state.new_button.clicked.connect(self.new_memory_dialog)
        self.table_stack = QtWidgets.QStackedWidget()
        self.table_stack.setObjectName("tableStack")
        self.table_stack.addWidget(self.table)
        self.table_stack.addWidget(self.empty_state)

    def _lay_out(self) -> None:
        table_box = QtWidgets.QWidget()
        table_layout = QtWidgets.QVBoxLayout(table_box)
        table_layout.setContentsMargins(6, 6, 0, 0)
        table_layout.addWidget(self.filter_bar)
        table_layout.addWidget(self.table_stack, 1)
        table_layout.addWidget(self.count_label)
        self.memory_splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.memory_splitter.setObjectName("memorySplitter")
        self.memory_splitter.addWidget(table_box)
        self.memory_splitter.addWidget(self.detail)
        # The table (and its text column) takes what the window gains; the detail keeps its width and never
        # grows by itself when a longer memory is shown (its contents wrap instead).
        self.memory_splitter.setStretchFactor(0, 1)
        self.memory_splitter.setStretchFactor(1, 0)
        self.memory_splitter.setCollapsible(0, False)
        self.pages = QtWidgets.QStackedWidget()
        self.pages.setObjectName("pages")
        for page in (self.memory_splitter, self.audit_view, self.sessions_view):
            self.pages.addWidget(page)
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
        self.travel_combo.activated.connect(self._travel_chosen)
        self.registry.build_toolbar(tb, {"travel": self.travel_combo})

    def _build_status(self) -> None:
        self.status = StatusBar()
        self.setStatusBar(self.status)
        self.busy_label, self.live_label, self.countdown_label = self.status.busy_label, self.status.live_label, self.status.countdown_label
        self.sweep_progress, self.sweep_cancel = self.status.sweep_progress, self.status.sweep_cancel
        self.tasks.busy_changed.connect(self.status.show_busy)

    def _build_timers(self) -> None:
        self.scheduler = LifecycleScheduler(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000, self)
        self.scheduler.strength_tick.connect(self.refresh_strengths)
        self.scheduler.sweep_due.connect(self.run_sweep)
        self.scheduler.countdown.connect(lambda seconds: self.status.show_countdown(seconds if self.path is not None else None))
        self.scheduler.paused_changed.connect(self._paused_changed)
        self.live = LiveView(lambda: self.reader, self.live_label, self.clock, self.prefs.live_poll_ms, self)
        self.live.changed.connect(self.refresh_all)
        self.live_timer = self.live.live_timer

    # --- state -------------------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The moment the window shows: the time-travel date when previewing, else the clock."""
        return self.travel if self.travel is not None else self.clock()

    def is_idle(self) -> bool:
        """No read pending, no task running, no table loading (tests and the screenshot command wait for this)."""
        if self.reader is not None and self.reader.pending():
            return False
        models = (self.model, self.audit_view.model, self.sessions_view.model)
        return not self.tasks.is_busy() and not any(m.is_loading() for m in models)

    def read_only(self) -> bool:
        """True while previewing a later date (nothing may be written)."""
        return self.travel is not None

    def say(self, message: str, timeout_ms: int = 5000) -> None:
        """Show ``message`` in the status bar for ``timeout_ms``."""
        self.statusBar().showMessage(message, timeout_ms)

    def _set_store_actions(self, has_store: bool) -> None:
        writable = has_store and not self.read_only()
        self.registry.set_enabled(has_store=has_store, travelling=self.read_only())
        self.travel_combo.setEnabled(has_store)
        self.empty_state.demo_button.setEnabled(writable)
        self.empty_state.new_button.setEnabled(writable)
        self.detail.set_read_only(not writable)

    def _restore_state(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QtCore.QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1400, 860)
        state = self.settings.value("window/state")
        if isinstance(state, QtCore.QByteArray):
            self.restoreState(state)
        for name, splitter in (("mainSplitter", self.main_splitter), ("memorySplitter", self.memory_splitter)):
            value = self.settings.value(f"window/{name}")
            if isinstance(value, QtCore.QByteArray):
                splitter.restoreState(value)
        header = self.settings.value("window/tableHeader")
        if isinstance(header, QtCore.QByteArray):
            self.table.horizontalHeader().restoreState(header)
        if not isinstance(self.settings.value("window/memorySplitter"), QtCore.QByteArray):
            self.memory_splitter.setSizes([820, DETAIL_WIDTH])
        view = self.settings.value("window/view")
        self.sidebar.select(view if isinstance(view, str) and view in self.sidebar.items else "semantic")

    def save_state(self) -> None:
        """Remember geometry, toolbar/dock state, splitters, column layout, view and preferences."""
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/state", self.saveState())
        self.settings.setValue("window/mainSplitter", self.main_splitter.saveState())
        self.settings.setValue("window/memorySplitter", self.memory_splitter.saveState())
        self.settings.setValue("window/tableHeader", self.table.horizontalHeader().saveState())
        self.settings.setValue("window/view", self.sidebar.current_view())
        self.prefs.save(self.settings)

    # --- opening and closing stores ------------------------------------------------------------------------------

    def open_store(self, path: str | Path, *, create: bool = True) -> None:
        """Open (or create) the store at ``path`` in the background; on failure the current store stays open."""
        target = Path(path).expanduser()

        def probe(store: MemoryStore, _ctx: TaskContext) -> StoreSettings:
            return store.settings

        self.statusBar().showMessage(f"Opening {target}…")
        self.tasks.start(
            "open",
            probe,
            on_done=lambda settings: self._activate_store(target, settings),
            on_error=lambda error: self.show_error(f"Cannot open {target.name}", error),
            create=create,
            path=target,
        )

    def _activate_store(self, path: Path, settings: StoreSettings) -> None:
        self._close_store()
        self._attach_reader(path, settings)
        self.prefs.add_recent(path)
        self.prefs.save(self.settings)
        self._fill_recent()
        self.setWindowTitle(f"memlens - {path}")
        now = QtCore.QDateTime.fromSecsSinceEpoch(int(self.clock().timestamp()))
        self.audit_view.since.setDateTime(now.addDays(-7))
        self.audit_view.until.setDateTime(now)
        self._set_store_actions(True)
        self._expiries_seen = None
        # The first poll sets the baseline before anything is read, so a commit by another process after it is seen.
        self.live.start(self.prefs.live_poll_ms)
        # The visible rows first (the reader works in order), then the counts and lists around them.
        self._view_changed(self.sidebar.current_view())
        self.refresh_counts()
        self.refresh_lists()
        self._check_expiries()  # the baseline for the strength ticks
        self.scheduler.set_intervals(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000)
        self.scheduler.start(paused=self.prefs.sweeps_paused)
        self.refresh_sweep_marks()  # for the sweep the timer now schedules
        self.say(f"Opened {path}", 5000)
        self.store_opened.emit(str(path))

    def _attach_reader(self, path: Path, settings: StoreSettings) -> None:
        self.path = path
        self.tasks.path = path
        self.reader = StoreReader(path, self)
        self._use_store_settings(settings)
        self._stale_pages.clear()
        self.model.set_reader(self.reader)
        self.audit_view.set_reader(self.reader)
        self.sessions_view.set_reader(self.reader)
        self.detail.clear()
        self._detail_id = None

    def _close_store(self) -> None:
        self.scheduler.stop()
        self.live_timer.stop()
        if self.reader is not None:
            self.model.set_reader(None)
            self.audit_view.set_reader(None)
            self.sessions_view.set_reader(None)
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
        if key == "audit":
            self.pages.setCurrentWidget(self.audit_view)
            if self.reader is not None:
                self.audit_view.apply_filter()
                self._refresh_stale_page()
            return
        if key == "sessions":
            self.pages.setCurrentWidget(self.sessions_view)
            if self.reader is not None:
                model, project = self.sessions_view.model, self.sidebar.current_project()
                if project != model.project or not (model.rowCount() or model.is_loading()):
                    self._stale_pages.discard("sessions")  # read afresh for the project
                    model.set_project(project)
                else:
                    self._refresh_stale_page()  # in place: the selected session and the scroll position stay
            return
        self.pages.setCurrentWidget(self.memory_splitter)
        self.table.horizontalHeader().setSectionHidden(COLUMN_INDEX["layer"], key != "all")
        self.apply_query()
        self._refresh_stale_page()

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
            self._stale_pages.discard("memories")  # read afresh
            self.model.set_query(query)
            self._show_sort_order()

    def _show_sort_order(self) -> None:
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
        if self._pending_select is not None and self.table.select_memory(self._pending_select):
            self._pending_select = None

    # --- selection and detail ----------------------------------------------------------------------------------

    def selected_ids(self) -> list[int]:
        """Ids of the selected memories, in table order."""
        return self.table.selected_ids()

    def _current_row_changed(self, current: QtCore.QModelIndex, _previous: QtCore.QModelIndex) -> None:
        memory_id = current.data(ID_ROLE) if current.isValid() else None
        if isinstance(memory_id, int):
            self.show_memory(memory_id)

    def _rows_removed(self, *_args: Any) -> None:
        """Selected rows left the table (forgotten here or elsewhere): Qt moves only the focus to a neighbour, so
        clear it too; the detail then says nothing is selected, and Delete cannot offer a row nobody chose."""
        selection = self.table.selectionModel()
        if selection.hasSelection() or self._detail_id is None:
            return
        selection.clearCurrentIndex()
        self._detail_id = None
        self.detail.clear("Nothing selected: the memory shown here left the list. Select one to see it here.")

    def _selection_changed(self, *_args: Any) -> None:
        ids = self.selected_ids()
        if len(ids) > 1:
            self.statusBar().showMessage(f"{len(ids)} selected", 3000)
            self._load_compare(ids[:COMPARE_LIMIT])

    def show_memory(self, memory_id: int) -> None:
        """Load and show one memory in the detail pane (a forgotten one shows when and why it went)."""
        if self.reader is None:
            return
        self._detail_id = memory_id
        now = self.now()
        query_text = self.model.query.text

        def loaded(data: DetailData) -> None:
            if self._detail_id != memory_id:
                return  # the selection moved on (or was cleared) while this was read
            compare = len(self.selected_ids()) > 1
            self.detail.show_data(data, show_curve=not compare)
            self.detail_shown.emit(data.memory.id)

        def failed(error: BaseException) -> None:
            if isinstance(error, NotFound):
                self._show_forgotten(memory_id)
            else:
                self.show_error("Could not read the memory", error)

        self.reader.submit("detail", lambda store: load_detail(store, memory_id, now, query_text), loaded, failed)

    def _show_forgotten(self, memory_id: int) -> None:
        if self.reader is None:
            return

        def shown(message: str) -> None:
            if self._detail_id != memory_id:
                return
            self.detail.show_missing(memory_id, message)
            self.detail_shown.emit(memory_id)

        now = self.now()
        self.reader.submit("detail", lambda store: forgotten_message(store, memory_id, now), shown, lambda e: self.show_error("Could not read the audit log", e))

    def _load_compare(self, ids: list[int]) -> None:
        if self.reader is None:
            return
        now = self.now()

        def curves(store: MemoryStore) -> list[Any]:
            return [load_curve(store, m, now) for m in store.get_many(ids)]

        def shown(result: list[Any]) -> None:
            self.detail.chart.show_curves(result)

        self.reader.submit("compare", curves, shown, lambda e: self.show_error("Could not compute strength curves", e))

    def go_to_memory(self, memory_id: int) -> None:
        """Show a memory from anywhere (an audit entry, a session, a link): switch to its layer and select it."""
        if self.reader is None:
            return

        def found(memory: Memory) -> None:
            view = self.sidebar.current_view()
            if view not in ("all", memory.layer):
                self.sidebar.select(memory.layer)
            elif self.pages.currentWidget() is not self.memory_splitter:
                self.sidebar.select(view)
            if not memory.is_latest and not self.all_versions.isChecked():
                self.all_versions.setChecked(True)
            if not self.table.select_memory(memory.id):
                self._pending_select = memory.id
            self.show_memory(memory.id)

        def missing(error: BaseException) -> None:
            if isinstance(error, NotFound):
                if self.pages.currentWidget() is not self.memory_splitter:
                    self.sidebar.select("all")
                self.table.clearSelection()
                self._detail_id = memory_id
                self._show_forgotten(memory_id)
            else:
                self.show_error("Could not read the memory", error)

        self.reader.submit("goto", lambda store: store.get(memory_id), found, missing)

    def _link(self, kind: str, value: str) -> None:
        if kind == "memory" and value.isdigit():
            if self.detail.tabs.currentIndex() == 1:
                self.show_memory(int(value))  # a version click stays on the Versions tab
            else:
                self.go_to_memory(int(value))
        elif kind == "session":
            self.sidebar.select("sessions")
            self.sessions_view.select_session(value)

    # --- refreshing --------------------------------------------------------------------------------------------

    def refresh_counts(self) -> None:
        """Reload the sidebar's layer counts (and notice an empty store)."""
        if self.reader is None:
            return
        project = self.sidebar.current_project()
        now = self.now()

        def counts(store: MemoryStore) -> tuple[dict[str, int], bool]:
            result = store.layer_counts(project=project, now=now)
            empty = False
            if not any(result.values()) and project is None:
                empty = store.count_memories(latest_only=False, include_expired=True, now=now) == 0
            return result, empty

        def shown(result: tuple[dict[str, int], bool]) -> None:
            self.counts, self.is_empty = result
            self.sidebar.set_counts(self.counts)
            self.table_stack.setCurrentWidget(self.empty_state if self.is_empty else self.table)
            self.counts_loaded.emit(self.counts)

        self.reader.submit("counts", counts, shown, lambda e: self.show_error("Could not count memories", e))

    def refresh_lists(self) -> None:
        """Reload the project list, the audit operations and the store's settings."""
        if self.reader is None:
            return

        def lists(store: MemoryStore) -> tuple[list[str], list[str], StoreSettings]:
            return store.projects(), store.audit_operations(), store.reload_settings()

        def shown(result: tuple[list[str], list[str], StoreSettings]) -> None:
            projects, operations, settings = result
            self.sidebar.set_projects(projects)
            self.audit_view.set_operations(operations)
            self._use_store_settings(settings)
            self.lists_loaded.emit()

        self.reader.submit("lists", lists, shown, lambda e: self.show_error("Could not read the store", e))

    def _use_store_settings(self, settings: StoreSettings) -> None:
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
        self._check_expiries()

    def _check_expiries(self) -> None:
        """Time moved: when a TTL ran out since the last look (or came within the "expiring soon" week while that
        filter is on), which memories the table lists changed, so it is refreshed like after a write.

        Counts the memories whose TTL is past that horizon: cheap (``forget_after`` is indexed) and, unlike
        refreshing the list on every tick, free on a 200k store where nothing expired."""
        if self.reader is None:
            return
        soon = self.model.query.expiring_soon
        horizon = self.now() + (EXPIRING_SOON if soon else timedelta(0))

        def passed(store: MemoryStore) -> int:
            return store.count_memories(latest_only=False, include_expired=True, expiring_before=horizon)

        def seen(count: int) -> None:
            previous, self._expiries_seen = self._expiries_seen, (soon, count)
            if previous is not None and previous != (soon, count):
                self.apply_changes(OpChanges(memory_list=True))

        self.reader.submit("expiries", passed, seen, lambda e: self.show_error("Could not read the store", e))

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
        if changes.memory_list or (changes.memory_ids and self._query_reads_edited_fields()):
            self._stale_pages.add("memories")
        elif changes.memory_ids:
            self._reload_rows(changes.memory_ids)
        if changes.audit:
            self._stale_pages.add("audit")
        if changes.sessions:
            self._stale_pages.add("sessions")
        self._refresh_stale_page()
        if changes.memory_ids or changes.memory_list or changes.counts or changes.strengths or changes.lists:
            self.refresh_sweep_marks()  # anything but a new audit entry may change what the next sweep does
        detail = self._detail_id
        if detail is not None and (detail in changes.memory_ids or changes.memory_list or (changes.strengths and on_memories)):
            self.show_memory(detail)
        self.changes_applied.emit(changes)

    def _query_reads_edited_fields(self) -> bool:
        """Whether the table's filter or order uses what an in-place edit changes (pinning, tags, importance, TTL)."""
        q = self.model.query
        edited_orders = {"importance", "tags", "forget_after"}
        return q.pinned_only or bool(q.tags) or q.expiring_soon or q.order_by in edited_orders

    def _reload_rows(self, ids: frozenset[int]) -> None:
        """Read the memories ``ids`` again and repaint their rows, if shown (the list itself did not change)."""
        shown = [i for i in ids if self.model.row_of(i) >= 0]
        if self.reader is None or not shown:
            return

        def repaint(memories: list[Memory]) -> None:
            for memory in memories:
                self.model.update_memory(memory)

        self.reader.submit("rows", lambda store: store.get_many(shown), repaint, lambda e: self.show_error("Could not read the memory", e))

    def _refresh_stale_page(self) -> None:
        """Refresh the visible page if a change made it stale (hidden pages wait until they are shown)."""
        page = self.pages.currentWidget()
        key = "audit" if page is self.audit_view else "sessions" if page is self.sessions_view else "memories"
        if key not in self._stale_pages or self.reader is None:
            return
        self._stale_pages.discard(key)
        if key == "audit":
            self.audit_view.model.refresh()
        elif key == "sessions":
            self.sessions_view.model.refresh()
        elif self.model.rowCount() or self.model.is_loading():
            self.model.refresh()
        else:
            self.model.reload()

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
            self.refresh_sweep_marks()  # the timer restarted: the next sweep is an interval away
            self.sweep_finished.emit(report)

        start_sweep(self, self.status, finished)

    def next_sweep_at(self) -> datetime:
        """When the next automatic sweep runs (while time travelling: the date shown). The sweep preview and the
        table's Sweep column both plan for this moment, so they agree."""
        if self.read_only():
            return self.now()
        return self.now() + timedelta(seconds=max(0, self.scheduler.seconds_to_sweep()))

    def refresh_sweep_marks(self) -> None:
        """Plan the next sweep again (a dry run on the reader thread: 30 ms at 200k memories) and mark the table's
        rows it would act on; emits ``sweep_marked`` with the report."""
        if self.reader is None:
            return
        when = self.next_sweep_at()

        def marked(report: SweepReport) -> None:
            self.model.set_sweep_plan(report.decisions, when)
            self.sweep_marked.emit(report)

        self.reader.submit("sweep-marks", lambda store: store.sweep(now=when, dry_run=True), marked, lambda e: self.show_error("Could not plan the next sweep", e))

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
        self.refresh_sweep_marks()  # paused: the "next sweep" is whatever Run Sweep Now would do
        self.act_pause.setChecked(paused)
        self.act_pause.setIcon(icon("play" if paused else "pause"))
        self.act_pause.setText("Resume &Automatic Sweeps" if paused else "Pause &Automatic Sweeps")

    def llm_config(self) -> tuple[LLMConfig | None, str]:
        """The LLM endpoint from Settings (else the MEMLENS_LLM_* environment), and a sentence saying which is used."""
        return LLMConfig.resolve(self.prefs.llm_base_url, self.prefs.llm_model)

    def consolidate(self) -> None:
        """Run consolidation in the background with a progress dialog that can cancel it."""
        start_consolidation(self, self.llm_config, self.consolidate_finished.emit)

    def _travel_chosen(self, index: int) -> None:
        offset = self.travel_combo.offset(index)
        if offset == "pick":
            self.time_travel_dialog()
        elif isinstance(offset, timedelta):
            self.set_time_travel(self.clock() + offset)
        else:
            self.set_time_travel(None)

    def time_travel_dialog(self) -> None:
        """Pick a date to preview the store at."""
        open_time_travel_dialog(self, self.set_time_travel, self._sync_travel_combo)

    def _sync_travel_combo(self) -> None:
        self.travel_combo.show_date(self.travel, self.clock())

    def back_to_now(self) -> None:
        """Leave the time-travel preview."""
        self.set_time_travel(None)

    def set_time_travel(self, when: datetime | None) -> None:
        """Show the store as it will be at ``when`` (read-only), or back at now with None."""
        if when is not None and when <= self.clock():
            when = None
        self.travel = when
        self.travel_report = None
        self._sync_travel_combo()
        self._set_store_actions(self.path is not None)
        if when is None:
            self.travel_banner.hide()
        else:
            self.travel_banner.show_previewing(when, self.clock())
            self._preview_travel(when)
        self.model.reload()
        self.apply_changes(TIME_MOVED)
        self.time_travel_changed.emit(when)

    def _preview_travel(self, when: datetime) -> None:
        def shown(report: SweepReport) -> None:
            if self.travel == when:
                self.travel_report = report
                self.travel_banner.show_forecast(when, self.clock(), report)

        preview_at(self, when).success(shown).run_in_background()

    def _show_travel_report(self) -> None:
        if self.travel_report is not None and self.travel is not None:
            show_sweep_report(self, self.travel_report, f"By {fmt.when(self.travel)}")

    # --- settings, theme, import/export -----------------------------------------------------------------------

    def settings_dialog(self) -> None:
        """Edit timers, theme and LLM (kept per person) and the store's thresholds and decay rates."""
        open_settings(self, self.prefs, self.store_settings, self.apply_preferences, self._use_store_settings)

    def apply_preferences(self, prefs: Preferences) -> None:
        """Use and persist new preferences (timer intervals apply at once)."""
        theme_changed = prefs.theme != self.prefs.theme
        self.prefs = prefs
        self.prefs.save(self.settings)
        self.scheduler.set_intervals(prefs.refresh_seconds * 1000, prefs.sweep_seconds * 1000)
        self.refresh_sweep_marks()
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
        from memlens import __version__

        QtWidgets.QMessageBox.about(
            self,
            "About memlens",
            f"<b>memlens {__version__}</b><p>See, curate and forget what your AI agent remembers.</p><p>Store: {html.escape(str(self.path or 'none'))}</p>",
        )

