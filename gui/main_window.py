"""The inspector's main window: sidebar, memory table, detail pane, audit log, sessions, and every action.

All store work goes through :class:`memlens.gui.tasks.StoreReader` (reads) and :class:`memlens.gui.tasks.TaskRunner` (writes and
long operations), so the window never waits on SQLite. After any write of its own, and whenever the live poll sees
another process commit (``PRAGMA data_version``), :meth:`MainWindow.refresh_all` reloads counts, the visible rows and
the open detail in place.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from memlens import demo
from memlens.config import StoreSettings, default_store_path
from memlens.errors import MemlensError, NotFound
from memlens.gui import format as fmt
from memlens.gui import theme
from memlens.gui.audit_view import AuditView
from memlens.gui.columns import COLUMN_INDEX, COLUMNS
from memlens.gui.consolidate_dialog import ConsolidateDialog
from memlens.gui.delegates import SnippetDelegate, StrengthDelegate
from memlens.gui.detail import DetailData, DetailPane, load_curve, load_detail
from memlens.gui.dialogs import EditDialog, ForgetDialog, ForgetPlan, SettingsDialog, SweepPreviewDialog, TimeTravelDialog
from memlens.gui.file_dialogs import choose_open_file, choose_save_file
from memlens.gui.icons import icon
from memlens.gui.memory_model import EXPIRING_SOON, ID_ROLE, MemoryQuery, MemoryTableModel
from memlens.gui.new_memory_dialog import NewMemoryDialog
from memlens.gui.operations import OpChanges
from memlens.gui.operations.edit import remember, update_memory
from memlens.gui.operations.forget import forget_memories, load_forget_plan
from memlens.gui.operations.lifecycle import STRENGTH_TICK, ConsolidateResult, configure_store, consolidate, load_demo, preview_sweep, run_sweep
from memlens.gui.operations.pin import set_pinned
from memlens.gui.operations.time_travel import TIME_MOVED, TRAVEL_CHOICES, closest_choice, forecast, preview_at
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtGui, QTimer, QtWidgets, Signal
from memlens.gui.scheduler import LifecycleScheduler
from memlens.gui.sessions_view import SessionsView
from memlens.gui.tasks import StoreReader, TaskContext, TaskRunner
from memlens.gui.transfer import start_export, start_import
from memlens.llm import LLMConfig, LLMError
from memlens.models import KNOWN_TYPES, Layer, Memory
from memlens.store import MemoryStore
from memlens.sweep import SweepReport

LAYERS = tuple(layer.value for layer in Layer)
LAYER_LABELS = {"working": "Working", "episodic": "Episodic", "semantic": "Semantic", "procedural": "Procedural"}
#: Errors a person can act on: shown as a message. Anything else is a bug and is raised after the message.
USER_ERRORS: tuple[type[BaseException], ...] = (MemlensError, LLMError, OSError)
COMPARE_LIMIT = 8
SEARCH_DEBOUNCE_MS = 300
EDIT_TIP = "Edit importance, tags, pinning, project and TTL"


#: The narrowest a table column other than the title gets in a narrow window (pixels).
NARROWEST_COLUMN = 40
#: The detail pane's starting width (it keeps it: the table's text column takes what the window gains).
DETAIL_WIDTH = 310


def utc_now() -> datetime:
    """The real current time, aware."""
    return datetime.now(timezone.utc)


def forgotten_message(store: MemoryStore, memory_id: int, now: datetime) -> str:
    """HTML saying when, by whom and why ``memory_id`` was erased, in the words of :meth:`MemoryStore.explain` (reader thread)."""
    try:
        said = store.explain(memory_id, now=now)
    except NotFound:
        return (
            f"There is no memory #{memory_id}. The audit log has no forget entry naming it: it was never stored here, or "
            "it was erased in a bulk operation whose entry records only a count."
        )
    return f"Memory #{memory_id} was forgotten on purpose: {html.escape(said)} Its text is gone; the audit log keeps a hash of it."


class Sidebar(QtWidgets.QWidget):
    """The four layers with live counts, all memories, the audit log and sessions, plus the project filter."""

    view_changed = Signal(str)  # "all", a layer name, "audit" or "sessions"
    project_changed = Signal(object)  # str or None

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sidebarPanel")
        self.project = QtWidgets.QComboBox()
        self.project.setObjectName("projectFilter")
        self.project.setAccessibleName("Project filter")
        self.project.addItem("All projects", "")
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setObjectName("sidebar")
        self.tree.setAccessibleName("Views")
        self.tree.setColumnCount(2)
        self.tree.setHeaderHidden(True)
        self.tree.setRootIsDecorated(False)
        self.tree.setIndentation(8)
        self.tree.setIconSize(QtCore.QSize(18, 18))
        self.items: dict[str, QtWidgets.QTreeWidgetItem] = {}
        memories = self._group("MEMORIES")
        self._add(memories, "all", "All memories", "all")
        for layer in LAYERS:
            self._add(memories, layer, LAYER_LABELS[layer], layer)
        history = self._group("HISTORY")
        self._add(history, "audit", "Audit log", "audit")
        self._add(history, "sessions", "Sessions", "sessions")
        self.tree.expandAll()
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        label = QtWidgets.QLabel("Project")
        label.setBuddy(self.project)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 0, 6)
        layout.addWidget(label)
        layout.addWidget(self.project)
        layout.addWidget(self.tree, 1)
        # Wide enough for "Procedural" and a 5-digit count: a squeezed sidebar only shows "…".
        self.setMinimumWidth(self.fontMetrics().horizontalAdvance("Procedural 00000") + 64)
        self.tree.currentItemChanged.connect(self._current_changed)
        self.project.currentIndexChanged.connect(lambda _i: self.project_changed.emit(self.current_project()))

    def _group(self, title: str) -> QtWidgets.QTreeWidgetItem:
        item = QtWidgets.QTreeWidgetItem([title, ""])
        item.setData(0, QtCore.Qt.ItemDataRole.UserRole, "")  # never leave item data empty: see memlens.gui.qt
        item.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
        font = item.font(0)
        font.setPointSizeF(max(7.0, font.pointSizeF() * 0.8))
        font.setBold(True)
        item.setFont(0, font)
        item.setForeground(0, self.palette().brush(QtGui.QPalette.ColorGroup.Disabled, QtGui.QPalette.ColorRole.WindowText))
        self.tree.addTopLevelItem(item)
        return item

    def _add(self, parent: QtWidgets.QTreeWidgetItem, key: str, label: str, icon_name: str) -> None:
        item = QtWidgets.QTreeWidgetItem([label, ""])
        item.setData(0, QtCore.Qt.ItemDataRole.UserRole, key)
        item.setIcon(0, icon(icon_name))
        item.setTextAlignment(1, QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
        parent.addChild(item)
        self.items[key] = item

    def _current_changed(self, current: QtWidgets.QTreeWidgetItem | None, _previous: QtWidgets.QTreeWidgetItem | None) -> None:
        key = current.data(0, QtCore.Qt.ItemDataRole.UserRole) if current is not None else None
        if isinstance(key, str):
            self.view_changed.emit(key)

    def current_view(self) -> str:
        """The selected view's key."""
        item = self.tree.currentItem()
        key = item.data(0, QtCore.Qt.ItemDataRole.UserRole) if item is not None else None
        return key if isinstance(key, str) else "semantic"

    def select(self, key: str) -> None:
        """Select a view by key."""
        item = self.items.get(key)
        if item is not None:
            self.tree.setCurrentItem(item)

    def current_project(self) -> str | None:
        """The project chosen in the filter (None: all projects)."""
        return str(self.project.currentData()) or None

    def set_counts(self, counts: dict[str, int]) -> None:
        """Show the latest, unexpired memories per layer."""
        for layer in LAYERS:
            self.items[layer].setText(1, f"{counts.get(layer, 0):,}")
        total = f"{sum(counts.get(layer, 0) for layer in LAYERS):,}"
        self.items["all"].setText(1, total)
        # Room for the longest label beside the longest count: a big store's "197,998" squeezed them to "All me…".
        metrics = self.tree.fontMetrics()
        wanted = metrics.horizontalAdvance("All memories") + metrics.horizontalAdvance(total) + 72
        if wanted > self.minimumWidth():
            self.setMinimumWidth(wanted)

    def count_text(self, key: str) -> str:
        """The count shown beside a view."""
        return self.items[key].text(1)

    def set_projects(self, projects: list[str]) -> None:
        """Offer these projects (keeps the current choice when it still exists)."""
        current = self.current_project()
        self.project.blockSignals(True)
        self.project.clear()
        self.project.addItem("All projects", "")
        for name in projects:
            self.project.addItem(name, name)
        index = self.project.findData(current) if current else 0
        self.project.setCurrentIndex(max(0, index))
        self.project.blockSignals(False)
        if current is not None and index < 0:
            self.project_changed.emit(None)


class EmptyState(QtWidgets.QWidget):
    """Shown instead of the table when the store holds no memories at all."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("emptyState")
        title = QtWidgets.QLabel("This store is empty")
        title.setObjectName("emptyTitle")
        # Lines broken by hand rather than word-wrapped: a wrapped label centred in a layout is given the height
        # of fewer lines than it needs once the style sheet's font applies, and its last line is clipped.
        text = QtWidgets.QLabel(
            "Memories appear here as your agent works: hooks, the MCP server\n"
            "or the Python API write them, and this view refreshes on its own.\n"
            "To look around first, load a demo: a few weeks of an agent's work\n"
            "across all four layers, with version chains, decayed and expiring\n"
            "memories and an audit history."
        )
        text.setAlignment(QtCore.Qt.AlignmentFlag.AlignHCenter)
        self.demo_button = QtWidgets.QPushButton(icon("demo"), "Load demo data")
        self.demo_button.setObjectName("loadDemoButton")
        self.demo_button.setAccessibleName("Load demo data")
        self.new_button = QtWidgets.QPushButton(icon("new"), "New memory…")
        self.new_button.setObjectName("emptyNewButton")
        self.new_button.setAccessibleName("New memory")
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("demoProgress")
        self.progress.setMaximumWidth(360)
        self.progress.hide()
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.demo_button)
        buttons.addWidget(self.new_button)
        buttons.addStretch(1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addStretch(1)
        for widget in (title, text):
            layout.addWidget(widget, 0, QtCore.Qt.AlignmentFlag.AlignHCenter)
        layout.addSpacing(12)
        layout.addLayout(buttons)
        layout.addWidget(self.progress, 0, QtCore.Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)


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
        self._data_version: int | None = None
        self._poll_pending = False
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
        self._build_menus()
        self._build_toolbar()
        self._build_status()

        self.scheduler = LifecycleScheduler(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000, self)
        self.scheduler.strength_tick.connect(self.refresh_strengths)
        self.scheduler.sweep_due.connect(self.run_sweep)
        self.scheduler.countdown.connect(self._show_countdown)
        self.scheduler.paused_changed.connect(self._paused_changed)
        self.live_timer = QTimer(self)
        self.live_timer.setObjectName("livePollTimer")
        self.live_timer.setInterval(self.prefs.live_poll_ms)
        self.live_timer.timeout.connect(self.poll_for_changes)
        self.search_timer = QTimer(self)
        self.search_timer.setObjectName("searchDebounce")
        self.search_timer.setSingleShot(True)
        self.search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self.search_timer.timeout.connect(self.apply_query)
        self.search_box.textChanged.connect(self.search_timer.start)
        self.tasks.busy_changed.connect(lambda busy: self.busy_label.setText("Working…" if busy else ""))
        self._restore_state()
        self._set_store_actions(False)

    # --- construction ----------------------------------------------------------------------------------------

    def _action(self, name: str, text: str, icon_name: str | None, slot: Callable[..., Any], shortcut: Any = None, tip: str = "") -> QtGui.QAction:
        action = QtGui.QAction(text, self)
        action.setObjectName(name)
        if icon_name:
            action.setIcon(icon(icon_name))
        if shortcut is not None:
            action.setShortcut(shortcut)
        if tip:
            action.setToolTip(tip)
            action.setStatusTip(tip)
        action.triggered.connect(lambda _checked=False: slot())
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        K = QtGui.QKeySequence
        self.act_new_store = self._action("actionNewStore", "&New Store…", "new", self.new_store_dialog, K("Ctrl+Shift+N"), "Create an empty store file")
        self.act_open = self._action("actionOpen", "&Open Store…", "open", self.open_store_dialog, K.StandardKey.Open, "Open another store file")
        self.act_import = self._action("actionImport", "&Import…", "import", self.import_dialog, None, "Import memories from a file")
        self.act_export = self._action("actionExport", "&Export…", "export", self.export_dialog, None, "Export memories to a file")
        self.act_settings = self._action("actionSettings", "&Settings…", "settings", self.settings_dialog, K("Ctrl+,"), "Timers, thresholds, decay rates, LLM, theme")
        self.act_quit = self._action("actionQuit", "&Quit", None, self.close, K.StandardKey.Quit)
        self.act_new_memory = self._action("actionNewMemory", "&New Memory…", "new", self.new_memory_dialog, K.StandardKey.New, "Write a memory and preview what it would supersede")
        self.act_edit = self._action("actionEdit", "&Edit…", "edit", self.edit_dialog, K("Ctrl+E"), EDIT_TIP)
        self.act_pin = self._action("actionPin", "&Pin / Unpin", "pin", self.toggle_pin, K("Ctrl+P"), "Pinned memories are never swept")
        self.act_forget = self._action("actionForget", "&Forget…", "forget", self.forget_selected, K(QtCore.Qt.Key.Key_Delete), "Erase the selected memories for good")
        self.act_find = self._action("actionFind", "&Find", "search", self.focus_search, K.StandardKey.Find, "Search memories (full text)")
        self.act_refresh = self._action("actionRefresh", "&Refresh", "refresh", self.refresh_all, K.StandardKey.Refresh, "Reload counts, rows and details")
        self.act_refresh.setShortcuts([K(QtCore.Qt.Key.Key_F5)])
        self.act_consolidate = self._action("actionConsolidate", "&Consolidate…", "consolidate", self.consolidate, K("Ctrl+Shift+C"), "Summarise sessions into episodes and episodes into knowledge")
        self.act_sweep = self._action("actionSweepNow", "Run &Sweep Now", "sweep", self.sweep_now, K("Ctrl+Shift+S"), "Run the auto-forget sweep now")
        self.act_sweep_preview = self._action("actionSweepPreview", "&Preview Next Sweep…", "preview", self.preview_sweep, None, "What the next sweep would forget (changes nothing)")
        self.act_pause = self._action("actionPauseSweeps", "Pause &Automatic Sweeps", "pause", self.toggle_pause, None, "Pause or resume the automatic sweep timer")
        self.act_pause.setCheckable(True)
        self.act_travel = self._action("actionTimeTravel", "&Time Travel…", "time", self.time_travel_dialog, K("Ctrl+T"), "Preview the store at a later date (read-only)")
        self.act_back_to_now = self._action("actionBackToNow", "&Back to Now", "back", lambda: self.set_time_travel(None), None, "Leave the time-travel preview")
        self.act_demo = self._action("actionLoadDemo", "Load &Demo Data", "demo", self.load_demo, None, "Add a realistic demo of an agent's weeks of work")
        self.act_about = self._action("actionAbout", "&About memlens", None, self.about)
        self.view_actions: dict[str, QtGui.QAction] = {}
        for n, key in enumerate((*LAYERS, "audit", "sessions"), start=1):
            label = LAYER_LABELS.get(key, {"audit": "Audit Log", "sessions": "Sessions"}.get(key, key))
            self.view_actions[key] = self._action(f"actionView_{key}", label, key, lambda k=key: self.sidebar.select(k), K(f"Ctrl+{n}"))
        self.theme_actions = QtGui.QActionGroup(self)
        for name in theme.THEMES:
            act = QtGui.QAction(name.capitalize(), self, checkable=True)
            act.setObjectName(f"actionTheme_{name}")
            act.setChecked(name == self.prefs.theme)
            act.triggered.connect(lambda _c=False, n=name: self.set_theme(n))
            self.theme_actions.addAction(act)

    def _build_ui(self) -> None:
        self.sidebar = Sidebar()
        self.sidebar.view_changed.connect(self._view_changed)
        self.sidebar.project_changed.connect(self._project_changed)

        # Memory page: filters, table (or the empty state), detail.
        self.search_box = QtWidgets.QLineEdit()
        self.search_box.setObjectName("searchBox")
        self.search_box.setAccessibleName("Search")
        self.search_box.setPlaceholderText("Search memories (Ctrl+F)")
        self.search_box.setClearButtonEnabled(True)
        self.search_box.addAction(icon("search"), QtWidgets.QLineEdit.ActionPosition.LeadingPosition)
        self.type_filter = QtWidgets.QComboBox()
        self.type_filter.setObjectName("typeFilter")
        self.type_filter.setAccessibleName("Type filter")
        self.type_filter.addItem("All types", "")
        for t in KNOWN_TYPES:
            self.type_filter.addItem(t, t)
        self.tags_filter = QtWidgets.QLineEdit()
        self.tags_filter.setObjectName("tagsFilter")
        self.tags_filter.setAccessibleName("Tags filter")
        self.tags_filter.setPlaceholderText("tags")
        self.tags_filter.setClearButtonEnabled(True)
        self.tags_filter.setMaximumWidth(140)
        self.all_versions = QtWidgets.QCheckBox("All versions")
        self.all_versions.setObjectName("allVersionsFilter")
        self.all_versions.setToolTip("Also show superseded versions (otherwise latest only)")
        self.pinned_filter = QtWidgets.QCheckBox("Pinned")
        self.pinned_filter.setObjectName("pinnedFilter")
        self.expiring_filter = QtWidgets.QCheckBox("Expiring soon")
        self.expiring_filter.setObjectName("expiringFilter")
        self.expiring_filter.setToolTip("TTL runs out within 7 days")
        self.count_label = QtWidgets.QLabel()
        self.count_label.setObjectName("countLabel")
        self.search_box.setMinimumWidth(self.fontMetrics().horizontalAdvance("Search memories (Ctrl+F)") + 48)
        # Two rows: at 1024 px one row squeezed the search box and the tags to "…".
        search_row = QtWidgets.QHBoxLayout()
        search_row.addWidget(self.search_box, 3)
        search_row.addWidget(self.type_filter)
        search_row.addWidget(self.tags_filter, 1)
        check_row = QtWidgets.QHBoxLayout()
        check_row.addWidget(self.all_versions)
        check_row.addWidget(self.pinned_filter)
        check_row.addWidget(self.expiring_filter)
        check_row.addStretch(1)
        filters = QtWidgets.QVBoxLayout()
        filters.setSpacing(2)
        filters.addLayout(search_row)
        filters.addLayout(check_row)
        self.type_filter.currentIndexChanged.connect(self.apply_query)
        self.tags_filter.editingFinished.connect(self.apply_query)
        for box in (self.all_versions, self.pinned_filter, self.expiring_filter):
            box.toggled.connect(self.apply_query)

        self.model = MemoryTableModel(None, self.now, self)
        self.model.pin_icon = icon("pin")
        self.table = QtWidgets.QTableView()
        self.table.setObjectName("memoryTable")
        self.table.setAccessibleName("Memories")
        self.table.setModel(self.model)
        # The header asks whether each column is wholly selected (row by row, in Qt) to draw its sections; a selection
        # model of its own keeps Select All over a million rows from scanning them all.
        self.table.horizontalHeader().setSelectionModel(QtCore.QItemSelectionModel(self.model, self.table))
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setShowGrid(False)
        self.table.setTextElideMode(QtCore.Qt.TextElideMode.ElideRight)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(26)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.DescendingOrder)
        self.table.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._table_menu)
        header = self.table.horizontalHeader()
        header.setSectionsMovable(True)
        header.setHighlightSections(False)
        header.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        self.strength_delegate = StrengthDelegate(self.table)
        delegates: dict[str, QtWidgets.QStyledItemDelegate] = {"strength": self.strength_delegate, "snippet": SnippetDelegate(self.table)}
        self._fitting = False
        # Wide enough for a 7-digit id (the font decides, not a fixed number of pixels).
        self._id_width = self.table.fontMetrics().horizontalAdvance("0000000") + 20
        self._column_widths = {i: max(c.width, self._id_width) if c.key == "id" else c.width for i, c in enumerate(COLUMNS) if c.width is not None}
        for section, column in enumerate(COLUMNS):
            if column.width is None:
                header.setSectionResizeMode(section, QtWidgets.QHeaderView.ResizeMode.Stretch)
            else:
                self.table.setColumnWidth(section, self._column_widths[section])
            header.setSectionHidden(section, column.hidden or column.search_only)
            if column.delegate is not None:
                self.table.setItemDelegateForColumn(section, delegates[column.delegate])
        self.table.selectionModel().currentRowChanged.connect(self._current_row_changed)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        self.model.counted.connect(self._update_count_label)
        self.model.rowsRemoved.connect(self._rows_removed)
        self.model.loaded.connect(self._model_loaded)
        self.model.load_failed.connect(lambda message: self.show_error("Could not read memories", MemlensError(message)))

        self.empty_state = EmptyState()
        self.empty_state.demo_button.clicked.connect(self.load_demo)
        self.empty_state.new_button.clicked.connect(self.new_memory_dialog)
        self.table_stack = QtWidgets.QStackedWidget()
        self.table_stack.setObjectName("tableStack")
        self.table_stack.addWidget(self.table)
        self.table_stack.addWidget(self.empty_state)

        table_box = QtWidgets.QWidget()
        table_layout = QtWidgets.QVBoxLayout(table_box)
        table_layout.setContentsMargins(6, 6, 0, 0)
        table_layout.addLayout(filters)
        table_layout.addWidget(self.table_stack, 1)
        table_layout.addWidget(self.count_label)

        self.detail = DetailPane()
        # A set minimum: the splitter then ignores how wide the shown memory's contents would like to be.
        self.detail.setMinimumWidth(260)
        self.detail.link_activated.connect(self._link)
        self.detail.edit_requested.connect(self.edit_dialog)
        self.detail.edit_button.setToolTip(EDIT_TIP)
        self.detail.pin_requested.connect(self._pin_from_detail)
        self.detail.forget_requested.connect(self.forget_detail)
        self.memory_splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.memory_splitter.setObjectName("memorySplitter")
        self.memory_splitter.addWidget(table_box)
        self.memory_splitter.addWidget(self.detail)
        # The table (and its text column) takes what the window gains; the detail keeps its width and never
        # grows by itself when a longer memory is shown (its contents wrap instead).
        self.memory_splitter.setStretchFactor(0, 1)
        self.memory_splitter.setStretchFactor(1, 0)
        self.memory_splitter.setCollapsible(0, False)
        self.table.viewport().installEventFilter(self)
        header.sectionResized.connect(self._section_resized)

        self.audit_view = AuditView(None)
        self.audit_view.target_activated.connect(self.go_to_memory)
        self.sessions_view = SessionsView(None)
        self.sessions_view.memory_activated.connect(self.go_to_memory)

        self.pages = QtWidgets.QStackedWidget()
        self.pages.setObjectName("pages")
        self.pages.addWidget(self.memory_splitter)
        self.pages.addWidget(self.audit_view)
        self.pages.addWidget(self.sessions_view)

        # Time-travel banner above the pages.
        self.travel_banner = QtWidgets.QFrame()
        self.travel_banner.setObjectName("timeTravelBanner")
        self.travel_text = QtWidgets.QLabel()
        self.travel_text.setObjectName("timeTravelText")
        self.travel_text.setWordWrap(True)
        self.travel_text.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.travel_list_button = QtWidgets.QPushButton("What would be forgotten…")
        self.travel_list_button.setObjectName("timeTravelList")
        self.travel_list_button.clicked.connect(self._show_travel_report)
        self.travel_list_button.setEnabled(False)
        back = QtWidgets.QPushButton(icon("back"), "Back to now")
        back.setObjectName("timeTravelBack")
        back.clicked.connect(lambda: self.set_time_travel(None))
        banner_layout = QtWidgets.QHBoxLayout(self.travel_banner)
        banner_layout.setContentsMargins(10, 6, 10, 6)
        banner_layout.addWidget(icon_label("time"))
        banner_layout.addWidget(self.travel_text, 1)
        banner_layout.addWidget(self.travel_list_button)
        banner_layout.addWidget(back)
        self.travel_banner.hide()

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

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self.act_new_store)
        file_menu.addAction(self.act_open)
        self.recent_menu = file_menu.addMenu("Open &Recent")
        self.recent_menu.setObjectName("recentMenu")
        file_menu.addSeparator()
        file_menu.addAction(self.act_import)
        file_menu.addAction(self.act_export)
        file_menu.addAction(self.act_demo)
        file_menu.addSeparator()
        file_menu.addAction(self.act_settings)
        file_menu.addSeparator()
        file_menu.addAction(self.act_quit)
        edit_menu = bar.addMenu("&Edit")
        for act in (self.act_new_memory, self.act_edit, self.act_pin, self.act_forget):
            edit_menu.addAction(act)
        edit_menu.addSeparator()
        edit_menu.addAction(self.act_find)
        view_menu = bar.addMenu("&View")
        for act in self.view_actions.values():
            view_menu.addAction(act)
        view_menu.addSeparator()
        view_menu.addAction(self.act_refresh)
        view_menu.addAction(self.act_travel)
        view_menu.addAction(self.act_back_to_now)
        theme_menu = view_menu.addMenu("T&heme")
        for act in self.theme_actions.actions():
            theme_menu.addAction(act)
        life = bar.addMenu("&Lifecycle")
        for act in (self.act_consolidate, self.act_sweep, self.act_sweep_preview, self.act_pause):
            life.addAction(act)
        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self.act_about)
        self._fill_recent()

    def _build_toolbar(self) -> None:
        tb = self.addToolBar("Main")
        tb.setObjectName("mainToolbar")
        tb.setMovable(False)
        tb.setIconSize(QtCore.QSize(20, 20))
        tb.setToolButtonStyle(QtCore.Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        for act in (self.act_new_memory, self.act_forget):
            tb.addAction(act)
        tb.addSeparator()
        for act in (self.act_consolidate, self.act_sweep, self.act_pause, self.act_sweep_preview):
            tb.addAction(act)
        tb.addSeparator()
        self.travel_combo = QtWidgets.QComboBox()
        self.travel_combo.setObjectName("timeTravel")
        self.travel_combo.setAccessibleName("Time travel")
        self.travel_combo.setToolTip("Preview the store at a later date (read-only)")
        for label, delta in TRAVEL_CHOICES:
            self.travel_combo.addItem(icon("time"), label, delta if delta is not None else "now")
        self.travel_combo.addItem(icon("time"), "Pick a date…", "pick")
        self.travel_combo.activated.connect(self._travel_chosen)
        tb.addWidget(self.travel_combo)
        tb.addSeparator()
        tb.addAction(self.act_refresh)
        tb.addAction(self.act_settings)

    def _build_status(self) -> None:
        status = self.statusBar()
        status.setObjectName("statusBar")
        self.busy_label = QtWidgets.QLabel()
        self.busy_label.setObjectName("busyLabel")
        self.live_label = QtWidgets.QLabel()
        self.live_label.setObjectName("liveLabel")
        self.countdown_label = QtWidgets.QLabel()
        self.countdown_label.setObjectName("sweepCountdown")
        self.countdown_label.setToolTip("Time to the next automatic sweep (Lifecycle menu: run now, pause, preview)")
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
        status.addPermanentWidget(self.sweep_progress)
        status.addPermanentWidget(self.sweep_cancel)
        self._sweep_cancel_slot: Callable[[], None] | None = None
        self.sweep_cancel.clicked.connect(lambda: self._sweep_cancel_slot() if self._sweep_cancel_slot is not None else None)
        status.addPermanentWidget(self.busy_label)
        status.addPermanentWidget(self.live_label)
        status.addPermanentWidget(self.countdown_label)

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

    def _set_store_actions(self, has_store: bool) -> None:
        writable = has_store and not self.read_only()
        for act in (self.act_new_memory, self.act_edit, self.act_pin, self.act_forget, self.act_consolidate, self.act_sweep, self.act_import, self.act_demo):
            act.setEnabled(writable)
        for act in (self.act_export, self.act_refresh, self.act_sweep_preview, self.act_travel, self.act_pause):
            act.setEnabled(has_store)
        self.act_back_to_now.setEnabled(self.read_only())
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
        self.prefs.add_recent(path)
        self.prefs.save(self.settings)
        self._fill_recent()
        self.setWindowTitle(f"memlens - {path}")
        now = QtCore.QDateTime.fromSecsSinceEpoch(int(self.clock().timestamp()))
        self.audit_view.since.setDateTime(now.addDays(-7))
        self.audit_view.until.setDateTime(now)
        self._set_store_actions(True)
        self._data_version = None
        self._poll_pending = False
        self._expiries_seen = None
        # The first poll sets the baseline before anything is read, so a commit by another process after it is seen.
        self.poll_for_changes()
        # The visible rows first (the reader works in order), then the counts and lists around them.
        self._view_changed(self.sidebar.current_view())
        self.refresh_counts()
        self.refresh_lists()
        self._check_expiries()  # the baseline for the strength ticks
        self.scheduler.set_intervals(self.prefs.refresh_seconds * 1000, self.prefs.sweep_seconds * 1000)
        self.scheduler.start(paused=self.prefs.sweeps_paused)
        self.refresh_sweep_marks()  # for the sweep the timer now schedules
        self.live_timer.setInterval(self.prefs.live_poll_ms)
        self.live_timer.start()
        self.statusBar().showMessage(f"Opened {path}", 5000)
        self.store_opened.emit(str(path))

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
        start = str(self.path.parent if self.path else default_store_path().parent)
        name = choose_save_file(self, "New store", os.path.join(start, "memory.db"), "memlens stores (*.db);;All files (*)")
        if name:
            target = Path(name)
            if target.exists():
                self.show_error("Cannot create store", MemlensError(f"{target} already exists; use File > Open to open it."))
                return
            self.open_store(target, create=True)

    def open_store_dialog(self) -> None:
        """File > Open: choose an existing store."""
        start = str(self.path.parent if self.path else default_store_path().parent)
        name = choose_open_file(self, "Open store", start, "memlens stores (*.db);;All files (*)")
        if name:
            self.open_store(name, create=False)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for n, path in enumerate(self.prefs.recent_files, start=1):
            act = self.recent_menu.addAction(f"&{n} {path}")
            act.setObjectName(f"recentFile{n}")
            act.triggered.connect(lambda _c=False, p=path: self.open_store(p, create=False))
        self.recent_menu.setEnabled(bool(self.prefs.recent_files))

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
        layer = view if view in LAYERS else None
        tags = tuple(t.strip() for t in self.tags_filter.text().split(",") if t.strip())
        type_ = str(self.type_filter.currentData())
        return MemoryQuery(
            layer=layer,
            project=self.sidebar.current_project(),
            types=(type_,) if type_ else (),
            tags=tags,
            latest_only=not self.all_versions.isChecked(),
            pinned_only=self.pinned_filter.isChecked(),
            expiring_soon=self.expiring_filter.isChecked(),
            text=self.search_box.text().strip(),
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
        """Show the search-only columns (Score) during a search, and the model's order in the header's indicator."""
        header = self.table.horizontalHeader()
        searching = bool(self.model.query.text.strip())
        for section, column in enumerate(COLUMNS):
            if column.search_only:
                header.setSectionHidden(section, not searching)
        section, order = self.model.sort_column()
        # Only the indicator: the model has already ordered its rows (a search starts in score order).
        header.blockSignals(True)
        header.setSortIndicator(section, order)
        header.blockSignals(False)

    def focus_search(self) -> None:
        """Ctrl+F: go to the memories and put the cursor in the search box."""
        if self.pages.currentWidget() is not self.memory_splitter:
            self.sidebar.select("all")
        self.search_box.setFocus(QtCore.Qt.FocusReason.ShortcutFocusReason)
        self.search_box.selectAll()

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
        if self._pending_select is not None:
            row = self.model.row_of(self._pending_select)
            if row >= 0:
                self._pending_select = None
                self.table.selectRow(row)
                self.table.scrollTo(self.model.index(row, 0))

    # --- selection and detail ----------------------------------------------------------------------------------

    def selected_ids(self) -> list[int]:
        """Ids of the selected memories, in table order."""
        # From the selection's ranges, not one index per row: selecting all of a million rows stays instant.
        selection = self.table.selectionModel().selection()
        ranges = [(r.top(), r.bottom()) for r in (selection.at(i) for i in range(selection.size())) if r.isValid()]
        return self.model.ids_in_rows(ranges)  # type: ignore[return-value]  # the memory table's ids are ints

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
            row = self.model.row_of(memory.id)
            if row >= 0:
                self.table.selectRow(row)
                self.table.scrollTo(self.model.index(row, 0))
            else:
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

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.table.viewport() and event.type() == QtCore.QEvent.Type.Resize:
            self.fit_columns()
        return super().eventFilter(watched, event)

    def _section_resized(self, section: int, _old: int, new: int) -> None:
        if section != COLUMN_INDEX["title"] and not self._fitting:
            self._column_widths[section] = new  # the person's choice, given up only while the table is too narrow
            self.fit_columns()

    def fit_columns(self) -> None:
        """Keep the text (title) column the widest: when the table is too narrow for every column at its width,
        the other columns give up room in proportion (down to their header's width), never the title."""
        header = self.table.horizontalHeader()
        title = COLUMN_INDEX["title"]
        others = [i for i in range(len(COLUMNS)) if i != title and not header.isSectionHidden(i)]
        if not others:
            return
        available = self.table.viewport().width()
        wanted = {i: self._column_widths.get(i, COLUMNS[i].width or 80) for i in others}
        # Scaled so that the title keeps more than the widest other column, and a third of the table at least.
        total, widest = sum(wanted.values()), max(wanted.values())
        scale = min(1.0, (available - 24) / (total + widest), (available * 2 / 3) / total)
        fm = header.fontMetrics()
        sizes: dict[int, int] = {}
        for i, width in wanted.items():
            floor = fm.horizontalAdvance(str(COLUMNS[i].header)) + 14
            if COLUMNS[i].key == "id":
                floor = max(floor, self._id_width)  # ids of 7 digits stay whole
            sizes[i] = max(floor, int(width * scale))
        # Too many columns for their headers (a search over all layers at 1024 px): rather than squeeze the title
        # to nothing and scroll sideways, the others go below their header's width (it is elided), ids excepted.
        excess = sum(sizes.values()) - int(available * 2 / 3)
        soft = {i: w - NARROWEST_COLUMN for i, w in sizes.items() if COLUMNS[i].key != "id" and w > NARROWEST_COLUMN}
        if excess > 0 and soft:
            share = min(1.0, excess / sum(soft.values()))
            for i, spare in soft.items():
                sizes[i] -= int(spare * share)
        self._fitting = True
        try:
            for i, width in sizes.items():
                header.resizeSection(i, width)
        finally:
            self._fitting = False

    def _header_menu(self, pos: QtCore.QPoint) -> None:
        """Right-click on the header: show or hide columns."""
        header = self.table.horizontalHeader()
        menu = QtWidgets.QMenu(self)
        for section, column in enumerate(COLUMNS):
            if not column.hideable or column.search_only:
                continue
            act = menu.addAction(column.header if column.header != "#" else "Id")
            act.setCheckable(True)
            act.setChecked(not header.isSectionHidden(section))
            act.toggled.connect(lambda on, sec=section: header.setSectionHidden(sec, not on))
        menu.popup(header.mapToGlobal(pos))

    def _table_menu(self, pos: QtCore.QPoint) -> None:
        menu = QtWidgets.QMenu(self)
        for act in (self.act_edit, self.act_pin, self.act_forget):
            menu.addAction(act)
        menu.popup(self.table.viewport().mapToGlobal(pos))

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
        self._absorb_own_write()
        self.apply_changes(changes)
        self.write_finished.emit(name)

    def _absorb_own_write(self) -> None:
        """Take the store's data version after our own write as the live poll's baseline.

        Operations write on connections of their own, which the poll cannot tell from another process's: without
        this, every operation would be followed by a refresh of everything. (Another process committing in the
        moment between the two is seen at its next commit.)"""
        if self.reader is None:
            return
        self._poll_pending = True  # a poll already queued is made obsolete by this request (same key)

        def seen(value: int) -> None:
            self._poll_pending = False
            self._data_version = value

        def failed(error: BaseException) -> None:
            self._poll_pending = False
            self.live_label.setText(f"live view paused: {error}")

        self.reader.submit("poll", lambda store: store.data_version(), seen, failed)

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
        if self.reader is None or self._poll_pending:
            return
        self._poll_pending = True

        def version(store: MemoryStore) -> int:
            return store.data_version()

        def seen(value: int) -> None:
            self._poll_pending = False
            changed = self._data_version is not None and value != self._data_version
            self._data_version = value
            if changed:
                self.live_label.setText(f"updated {fmt.when(self.clock())}")
                self.refresh_all()

        def failed(error: BaseException) -> None:
            self._poll_pending = False
            self.live_label.setText(f"live view paused: {error}")

        self.reader.submit("poll", version, seen, failed)

    # --- writes ------------------------------------------------------------------------------------------------

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
        if self.reader is None or self.read_only():
            return
        self.reader.submit("forget-plan", lambda store: load_forget_plan(store, ids), self._confirm_forget, lambda e: self.show_error("Cannot forget", e))

    def _confirm_forget(self, plan: ForgetPlan) -> None:
        if not plan.memories:
            self.show_error("Nothing to forget", MemlensError("The selected memories are already gone."))
            return
        dialog = ForgetDialog(plan, self)
        ids = [m.id for m in plan.memories]

        def accepted() -> None:
            whole_chain, reason = dialog.values()
            forget_memories(self, ids, reason=reason, whole_chain=whole_chain, now=self.clock()).success(
                lambda result: self.statusBar().showMessage(f"Forgot {fmt.plural(len(result.erased), 'memory version', 'memory versions')}.", 8000)
            ).run_in_background()

        dialog.accepted.connect(accepted)
        self.open_dialog(dialog)

    def new_memory_dialog(self) -> None:
        """Ctrl+N: the supersede-preview dialog, then store what the person chose."""
        if self.reader is None or self.read_only():
            return
        projects = [self.sidebar.project.itemData(i) for i in range(1, self.sidebar.project.count())]
        dialog = NewMemoryDialog(self.reader, self.clock, projects, self.sidebar.current_project(), self)

        def stored(memory: Memory) -> None:
            what = f"as version {memory.version} of #{memory.parent_id}" if memory.parent_id else "as a new memory"
            self.statusBar().showMessage(f"Stored #{memory.id} {what}.", 8000)
            self.go_to_memory(memory.id)

        def accepted() -> None:
            c = dialog.candidate()
            op = remember(
                self, c.content, type=c.type, project=c.project, tags=list(c.tags), supersede=c.supersede,
                supersede_id=c.supersede_id, now=self.clock(),
            )
            op.success(stored).run_in_background()

        dialog.accepted.connect(accepted)
        self.open_dialog(dialog)

    def _current_memory(self) -> Memory | None:
        return self.detail.data.memory if self.detail.data is not None else None

    def edit_dialog(self) -> None:
        """Ctrl+E: edit the shown memory's importance, tags, pinning, project and TTL."""
        memory = self._current_memory()
        if memory is None or self.read_only():
            return
        dialog = EditDialog(memory, self, now=self.clock())  # TTL days count from the window's clock

        def accepted() -> None:
            changes = dialog.changes()
            if changes:
                self.update_memory(memory.id, changes)

        dialog.accepted.connect(accepted)
        self.open_dialog(dialog)

    def update_memory(self, memory_id: int, changes: dict[str, Any]) -> None:
        """Apply ``MemoryStore.update`` changes in the background."""
        update_memory(self, memory_id, changes, now=self.clock()).success(self._saved).run_in_background()

    def _saved(self, memory: Memory) -> None:
        self.model.update_memory(memory)
        self.statusBar().showMessage(f"Saved #{memory.id}.", 5000)

    def toggle_pin(self) -> None:
        """Ctrl+P: pin or unpin the shown memory."""
        memory = self._current_memory()
        if memory is not None:
            set_pinned(self, memory.id, not memory.pinned, now=self.clock()).success(self._saved).run_in_background()

    def _pin_from_detail(self, pinned: bool) -> None:
        memory = self._current_memory()
        if memory is not None and memory.pinned != pinned:
            set_pinned(self, memory.id, pinned, now=self.clock()).success(self._saved).run_in_background()

    def load_demo(self) -> None:
        """Write the demo (a few weeks of an agent's work) into this store, in the background."""
        if self.path is None or self.read_only():
            return
        progress = self.empty_state.progress
        progress.show()
        progress.setRange(0, 0)
        self.empty_state.demo_button.setEnabled(False)

        def step(done: int, total: int, _text: str) -> None:
            if total:
                progress.setRange(0, total)
                progress.setValue(done)

        def finished(summary: demo.DemoSummary) -> None:
            progress.hide()
            self.empty_state.demo_button.setEnabled(True)
            self.statusBar().showMessage(f"Demo loaded: {summary.describe()}", 10000)

        def failed(error: BaseException) -> None:
            progress.hide()
            self.empty_state.demo_button.setEnabled(True)
            self.show_error("Could not load the demo", error)

        load_demo(self, now=self.clock()).success(finished).failure(failed).with_progress(step).run_in_background()

    # --- lifecycle: sweep, consolidate, time travel -------------------------------------------------------------

    def sweep_now(self) -> None:
        """Lifecycle > Run Sweep Now (restarts the interval)."""
        self.scheduler.run_now()

    def run_sweep(self) -> None:
        """Run the auto-forget sweep in the background (skipped while one runs or while time travelling)."""
        if self.path is None or self.read_only() or self.tasks.running("sweep"):
            return

        def step(done: int, total: int, _text: str) -> None:
            self.sweep_progress.setRange(0, max(total, 1))
            self.sweep_progress.setValue(done)

        def ended() -> None:
            self.sweep_progress.hide()
            self.sweep_cancel.hide()
            self.sweep_cancel.setEnabled(True)

        def done(report: SweepReport) -> None:
            ended()
            self.refresh_sweep_marks()  # the timer restarted: the next sweep is an interval away
            acted = fmt.plural(len(report.decisions), "memory", "memories")
            parts = ", ".join(f"{n} {rule.replace('_', ' ')}" for rule, n in report.counts.items() if n)
            if report.stopped:
                self.statusBar().showMessage(f"Sweep cancelled after acting on {acted} ({parts or 'none'}); the next sweep does the rest.", 10000)
            elif report.decisions:
                self.statusBar().showMessage(f"Sweep acted on {acted} ({parts}).", 10000)
            else:
                self.statusBar().showMessage("Sweep: nothing to forget.", 5000)
            self.sweep_finished.emit(report)

        def failed(error: BaseException) -> None:
            ended()
            self.show_error("The sweep failed", error)

        handle = run_sweep(self, now=self.clock()).success(done).failure(failed).with_progress(step).run_in_background()
        if handle is not None:
            self.sweep_progress.setRange(0, 0)  # busy until the first batch is done
            self.sweep_progress.show()
            self.sweep_cancel.show()

            def cancel() -> None:
                handle.cancel()
                self.sweep_cancel.setEnabled(False)
                self.statusBar().showMessage("Stopping the sweep after its current batch…", 5000)

            self._sweep_cancel_slot = cancel

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
        if self.path is None:
            return
        when = self.next_sweep_at()

        def shown(report: SweepReport) -> None:
            title = "Next sweep preview" if not self.read_only() else f"Sweep preview at {fmt.when(when)}"
            dialog = SweepPreviewDialog(report, title, self)
            dialog.memory_activated.connect(self.go_to_memory)
            self.open_dialog(dialog)
            self.sweep_previewed.emit(report)

        preview_sweep(self, at=when).success(shown).run_in_background()

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

    def _show_countdown(self, seconds: int) -> None:
        if self.path is None:
            self.countdown_label.setText("")
        elif seconds < 0:
            self.countdown_label.setText("Automatic sweeps paused")
        else:
            self.countdown_label.setText(f"Next sweep in {fmt.countdown(seconds)}")

    def llm_config(self) -> tuple[LLMConfig | None, str]:
        """The LLM endpoint from Settings (else the MEMLENS_LLM_* environment), and a sentence saying which is used."""
        return LLMConfig.resolve(self.prefs.llm_base_url, self.prefs.llm_model)

    def consolidate(self) -> None:
        """Run consolidation in the background with a progress dialog that can cancel it."""
        if self.path is None or self.read_only():
            return
        if self.tasks.running("consolidate"):
            if self.dialog is not None:
                self.dialog.raise_()
            return
        try:
            llm, note = self.llm_config()
        except LLMError as error:
            self.show_error("Cannot consolidate", error)
            return
        dialog = ConsolidateDialog(note, self)
        dialog.memory_activated.connect(self.go_to_memory)

        def done(result: ConsolidateResult) -> None:
            report, titles = result
            dialog.show_report(report, titles)
            if report.error:
                self.show_error("Consolidation failed", LLMError(report.error))
            self.consolidate_finished.emit(report)

        def failed(error: BaseException) -> None:
            dialog.show_failure(str(error))
            self.show_error("Consolidation failed", error)

        self.open_dialog(dialog)
        handle = consolidate(self, now=self.clock(), llm=llm).success(done).failure(failed).with_progress(dialog.set_progress).run_in_background()
        if handle is not None:
            dialog.cancel_requested.connect(handle.cancel)

    def _travel_chosen(self, index: int) -> None:
        data = self.travel_combo.itemData(index)
        if data == "pick":
            self.time_travel_dialog()
        elif isinstance(data, timedelta):
            self.set_time_travel(self.clock() + data)
        else:
            self.set_time_travel(None)

    def time_travel_dialog(self) -> None:
        """Pick a date to preview the store at."""
        if self.path is None:
            return
        dialog = TimeTravelDialog(self.clock(), self.travel, self)
        dialog.accepted.connect(lambda: self.set_time_travel(dialog.value()))
        dialog.rejected.connect(self._sync_travel_combo)
        self.open_dialog(dialog)

    def _sync_travel_combo(self) -> None:
        self.travel_combo.blockSignals(True)
        if self.travel is None:
            self.travel_combo.setCurrentIndex(0)
        else:
            match = closest_choice(self.travel, self.clock())
            self.travel_combo.setCurrentIndex(match if match is not None else self.travel_combo.count() - 1)
        self.travel_combo.blockSignals(False)

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
            self.travel_text.setText(f"<b>Previewing {fmt.when(when)}</b> ({fmt.relative(when, self.clock())}), read-only. Working out what will have faded or expired…")
            self.travel_list_button.setEnabled(False)
            self.travel_banner.show()
            self._preview_travel(when)
        self.model.reload()
        self.apply_changes(TIME_MOVED)
        self.time_travel_changed.emit(when)

    def _preview_travel(self, when: datetime) -> None:
        def shown(report: SweepReport) -> None:
            if self.travel != when:
                return
            self.travel_report = report
            self.travel_text.setText(
                f"<b>Previewing {fmt.when(when)}</b> ({fmt.relative(when, self.clock())}), read-only: strengths, TTLs and counts "
                f"as they will be; {forecast(report)}."
            )
            self.travel_list_button.setEnabled(bool(report.decisions))

        preview_at(self, when).success(shown).run_in_background()

    def _show_travel_report(self) -> None:
        if self.travel_report is not None and self.travel is not None:
            dialog = SweepPreviewDialog(self.travel_report, f"By {fmt.when(self.travel)}", self)
            dialog.memory_activated.connect(self.go_to_memory)
            self.open_dialog(dialog)

    # --- settings, theme, import/export -----------------------------------------------------------------------

    def settings_dialog(self) -> None:
        """Edit timers, theme and LLM (kept per person) and the store's thresholds and decay rates."""
        dialog = SettingsDialog(self.prefs, self.store_settings if self.path is not None else None, self)

        def saved(settings: StoreSettings) -> None:
            self._use_store_settings(settings)
            self.statusBar().showMessage("Store settings saved.", 5000)

        def accepted() -> None:
            self.apply_preferences(dialog.new_preferences())
            changes = dialog.store_changes()
            if changes and self.path is not None:
                configure_store(self, changes, now=self.clock()).success(saved).run_in_background()

        dialog.accepted.connect(accepted)
        self.open_dialog(dialog)

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
        for act in self.theme_actions.actions():
            act.setChecked(act.objectName() == f"actionTheme_{name}")
        self._reload_icons()

    def _reload_icons(self) -> None:
        names = {
            self.act_new_store: "new", self.act_open: "open", self.act_import: "import", self.act_export: "export",
            self.act_settings: "settings", self.act_new_memory: "new", self.act_edit: "edit", self.act_pin: "pin",
            self.act_forget: "forget", self.act_find: "search", self.act_refresh: "refresh", self.act_consolidate: "consolidate",
            self.act_sweep: "sweep", self.act_sweep_preview: "preview", self.act_travel: "time", self.act_back_to_now: "back",
            self.act_demo: "demo",
        }
        for act, name in names.items():
            act.setIcon(icon(name))
        self.act_pause.setIcon(icon("play" if self.scheduler.is_paused() else "pause"))
        for key, act in self.view_actions.items():
            act.setIcon(icon(key))
        for key, item in self.sidebar.items.items():
            item.setIcon(0, icon(key))
        self.model.pin_icon = icon("pin")
        for i in range(self.travel_combo.count()):
            self.travel_combo.setItemIcon(i, icon("time"))
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


def icon_label(name: str) -> QtWidgets.QLabel:
    """A small label showing an icon."""
    label = QtWidgets.QLabel()
    label.setPixmap(icon(name).pixmap(20, 20))
    return label
