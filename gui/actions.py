"""Every action of the main window in one registry: its objectName, text, icon, shortcut, tip, the window method it
triggers and when it is enabled; and the menus and toolbar laid out from it.

Adding an action is one :class:`ActionSpec` in :data:`ACTIONS` (plus its place in :data:`MENUS` or :data:`TOOLBAR`);
the window gets it as the attribute ``spec.attr``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Literal

from memlens.gui import theme
from memlens.gui.icons import icon
from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.gui.sidebar import LAYER_LABELS, LAYERS

Key = QtCore.Qt.Key
StandardKey = QtGui.QKeySequence.StandardKey
#: When an action is enabled: with a store open and writable (not time travelling), with any store open, while
#: time travelling, or always.
Enabled = Literal["writable", "store", "travelling", "always"]
EDIT_TIP = "Edit importance, tags, pinning, project and TTL"


@dataclass(frozen=True)
class ActionSpec:
    """One action: the window attribute it becomes, its objectName, text, icon name, the window method it calls."""

    attr: str
    name: str
    text: str
    icon: str | None
    slot: str
    shortcut: str | QtGui.QKeySequence.StandardKey | QtCore.Qt.Key | None = None
    tip: str = ""
    enabled: Enabled = "always"
    checkable: bool = False


ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("act_new_store", "actionNewStore", "&New Store…", "new", "new_store_dialog", "Ctrl+Shift+N", "Create an empty store file"),
    ActionSpec("act_open", "actionOpen", "&Open Store…", "open", "open_store_dialog", StandardKey.Open, "Open another store file"),
    ActionSpec("act_connect", "actionConnect", "&Connect…", "open", "connect_dialog", "Ctrl+Shift+O", "Open a store on a PostgreSQL server by its URL"),
    ActionSpec("act_import", "actionImport", "&Import…", "import", "import_dialog", None, "Import memories from a file", "writable"),
    ActionSpec("act_export", "actionExport", "&Export…", "export", "export_dialog", None, "Export memories to a file", "store"),
    ActionSpec("act_settings", "actionSettings", "&Settings…", "settings", "settings_dialog", "Ctrl+,", "Timers, thresholds, decay rates, LLM, theme"),
    ActionSpec("act_quit", "actionQuit", "&Quit", None, "close", StandardKey.Quit),
    ActionSpec("act_new_memory", "actionNewMemory", "&New Memory…", "new", "new_memory_dialog", StandardKey.New, "Write a memory and preview what it would supersede", "writable"),
    ActionSpec("act_edit", "actionEdit", "&Edit…", "edit", "edit_dialog", "Ctrl+E", EDIT_TIP, "writable"),
    ActionSpec("act_pin", "actionPin", "&Pin / Unpin", "pin", "toggle_pin", "Ctrl+P", "Pinned memories are never swept", "writable"),
    ActionSpec("act_forget", "actionForget", "&Forget…", "forget", "forget_selected", Key.Key_Delete, "Erase the selected memories for good", "writable"),
    ActionSpec("act_find", "actionFind", "&Find", "search", "focus_search", StandardKey.Find, "Search memories (full text)"),
    ActionSpec("act_refresh", "actionRefresh", "&Refresh", "refresh", "refresh_all", Key.Key_F5, "Reload counts, rows and details", "store"),
    ActionSpec("act_consolidate", "actionConsolidate", "&Consolidate…", "consolidate", "consolidate", "Ctrl+Shift+C", "Summarise sessions into episodes and episodes into knowledge", "writable"),
    ActionSpec("act_sweep", "actionSweepNow", "Run &Sweep Now", "sweep", "sweep_now", "Ctrl+Shift+S", "Run the auto-forget sweep now", "writable"),
    ActionSpec("act_sweep_preview", "actionSweepPreview", "&Preview Next Sweep…", "preview", "preview_sweep", None, "What the next sweep would forget (changes nothing)", "store"),
    ActionSpec("act_calibrate", "actionCalibrate", "Ca&librate && Tidiness…", "chart", "calibrate_dialog", None, "What happened to memories, proposed settings and the tidiness knob, with previews", "writable"),
    ActionSpec("act_embed", "actionEmbed", "&Embed for Semantic Search", "search", "semantic.start", None, "Compute vectors with the local model so search also finds by meaning (in the background, resumable)", "writable"),
    ActionSpec("act_pause", "actionPauseSweeps", "Pause &Automatic Sweeps", "pause", "toggle_pause", None, "Pause or resume the automatic sweep timer", "store", checkable=True),
    ActionSpec("act_travel", "actionTimeTravel", "&Time Travel…", "time", "time_travel_dialog", "Ctrl+T", "Preview the store at a later date (read-only)", "store"),
    ActionSpec("act_back_to_now", "actionBackToNow", "&Back to Now", "back", "back_to_now", None, "Leave the time-travel preview", "travelling"),
    ActionSpec("act_demo", "actionLoadDemo", "Load &Demo Data", "demo", "load_demo", None, "Add a realistic demo of an agent's weeks of work", "writable"),
    ActionSpec("act_about", "actionAbout", "&About memlens", None, "about"),
)

#: The menu bar: each menu's title and entries (an action's attribute, None for a separator, or a submenu's key:
#: "recent" for Open Recent, "views" for the view actions, "themes" for the Theme menu).
MENUS: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    ("&File", ("act_new_store", "act_open", "act_connect", "recent", None, "act_import", "act_export", "act_demo", None, "act_settings", None, "act_quit")),
    ("&Edit", ("act_new_memory", "act_edit", "act_pin", "act_forget", None, "act_find")),
    ("&View", ("views", None, "act_refresh", "act_travel", "act_back_to_now", "themes")),
    ("&Lifecycle", ("act_consolidate", "act_sweep", "act_sweep_preview", "act_pause", None, "act_calibrate", "act_embed")),
    ("&Help", ("act_about",)),
)

#: The toolbar: actions by attribute, None for a separator, "travel" for the time-travel box.
TOOLBAR: tuple[str | None, ...] = (
    "act_new_memory", "act_forget", None, "act_consolidate", "act_sweep", "act_pause", "act_sweep_preview", None, "travel", None,
    "act_refresh", "act_settings",
)  # fmt: skip

#: The table's right-click menu.
TABLE_MENU = ("act_edit", "act_pin", "act_forget")

_VIEW_LABELS = {**LAYER_LABELS, "audit": "Audit Log", "sessions": "Sessions"}


class ActionAttributes:
    """The window's actions as typed attributes, one per entry of :data:`ACTIONS` (set by :class:`WindowActions`'s
    owner from ``by_attr``); a test checks the two lists agree."""

    act_new_store: QtGui.QAction
    act_open: QtGui.QAction
    act_connect: QtGui.QAction
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
    act_calibrate: QtGui.QAction
    act_embed: QtGui.QAction
    act_travel: QtGui.QAction
    act_back_to_now: QtGui.QAction
    act_demo: QtGui.QAction
    act_about: QtGui.QAction


class WindowActions:
    """The actions of ``window`` made from :data:`ACTIONS` (``by_attr``), one per view (``views``, Ctrl+1…) and one per
    theme (``themes``, exclusive). Each triggers ``getattr(window, spec.slot)()``; a dotted slot (``semantic.start``)
    names a method of a part of the window, looked up when triggered since the part is made after the actions."""

    def __init__(self, window: QtWidgets.QMainWindow, *, theme_name: str, select_view: Callable[[str], None], set_theme: Callable[[str], None]) -> None:
        self.window = window
        self.by_attr: dict[str, QtGui.QAction] = {spec.attr: self._make(spec) for spec in ACTIONS}
        self.views: dict[str, QtGui.QAction] = {}
        for n, key in enumerate((*LAYERS, "audit", "sessions"), start=1):
            spec = ActionSpec(f"view_{key}", f"actionView_{key}", _VIEW_LABELS[key], key, "", f"Ctrl+{n}")
            self.views[key] = self._make(spec, partial(select_view, key))
        self.themes = QtGui.QActionGroup(window)
        for name in theme.THEMES:
            act = QtGui.QAction(name.capitalize(), window, checkable=True)
            act.setObjectName(f"actionTheme_{name}")
            act.setChecked(name == theme_name)
            act.triggered.connect(lambda _c=False, n=name: set_theme(n))
            self.themes.addAction(act)

    def _make(self, spec: ActionSpec, slot: Callable[[], object] | None = None) -> QtGui.QAction:
        action = QtGui.QAction(spec.text, self.window)
        action.setObjectName(spec.name)
        if spec.icon:
            action.setIcon(icon(spec.icon))
        if spec.shortcut is not None:
            action.setShortcut(QtGui.QKeySequence(spec.shortcut))
        if spec.tip:
            action.setToolTip(spec.tip)
            action.setStatusTip(spec.tip)
        action.setCheckable(spec.checkable)
        if slot is not None:
            target = slot
        elif "." in spec.slot:

            def target() -> object:
                return attrgetter(spec.slot)(self.window)()

        else:
            target = getattr(self.window, spec.slot)
        action.triggered.connect(lambda _checked=False: target())
        self.window.addAction(action)
        return action

    def set_enabled(self, *, has_store: bool, travelling: bool) -> None:
        """Enable each action as its spec's ``enabled`` says."""
        state = {"writable": has_store and not travelling, "store": has_store, "travelling": travelling, "always": True}
        for spec in ACTIONS:
            self.by_attr[spec.attr].setEnabled(state[spec.enabled])

    def check_theme(self, name: str) -> None:
        """Tick the theme ``name`` in the Theme menu."""
        for act in self.themes.actions():
            act.setChecked(act.objectName() == f"actionTheme_{name}")

    def reload_icons(self) -> None:
        """Take every icon again (the theme changed)."""
        for spec in ACTIONS:
            if spec.icon:
                self.by_attr[spec.attr].setIcon(icon(spec.icon))
        for key, act in self.views.items():
            act.setIcon(icon(key))

    def build_menus(self, bar: QtWidgets.QMenuBar) -> QtWidgets.QMenu:
        """Fill the menu bar from :data:`MENUS`; returns the (empty) Open Recent menu."""
        recent = QtWidgets.QMenu("Open &Recent", bar)
        recent.setObjectName("recentMenu")
        for title, entries in MENUS:
            menu = bar.addMenu(title)
            for entry in entries:
                if entry is None:
                    menu.addSeparator()
                elif entry == "recent":
                    menu.addMenu(recent)
                elif entry == "views":
                    menu.addActions(list(self.views.values()))
                elif entry == "themes":
                    menu.addMenu("T&heme").addActions(self.themes.actions())
                else:
                    menu.addAction(self.by_attr[entry])
        return recent

    def build_toolbar(self, toolbar: QtWidgets.QToolBar, widgets: Mapping[str, QtWidgets.QWidget]) -> None:
        """Fill ``toolbar`` from :data:`TOOLBAR`, placing ``widgets`` by key."""
        for entry in TOOLBAR:
            if entry is None:
                toolbar.addSeparator()
            elif entry in widgets:
                toolbar.addWidget(widgets[entry])
            else:
                toolbar.addAction(self.by_attr[entry])
