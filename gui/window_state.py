"""The main window's layout between runs: geometry, toolbar state, splitters, the table's columns and the view shown,
kept in the person's QSettings under ``window/``."""

from __future__ import annotations

from typing import Protocol

from memlens.gui.memory_table import MemoryPage, MemoryTable
from memlens.gui.preferences import Preferences
from memlens.gui.qt import QtCore, QtWidgets
from memlens.gui.sidebar import Sidebar

#: The detail pane's starting width (it keeps it: the table's text column takes what the window gains).
DETAIL_WIDTH = 310
#: The window's size the first time it opens.
FIRST_SIZE = (1400, 860)


class StatefulWindow(Protocol):
    """What is saved of the main window (the main window is one)."""

    settings: QtCore.QSettings
    prefs: Preferences
    main_splitter: QtWidgets.QSplitter
    memory_splitter: MemoryPage
    table: MemoryTable
    sidebar: Sidebar

    def saveGeometry(self) -> QtCore.QByteArray: ...

    def restoreGeometry(self, geometry: QtCore.QByteArray) -> bool: ...

    def saveState(self, version: int = 0) -> QtCore.QByteArray: ...

    def restoreState(self, state: QtCore.QByteArray, version: int = 0) -> bool: ...

    def resize(self, w: int, h: int) -> None: ...


def _saved(settings: QtCore.QSettings, key: str) -> QtCore.QByteArray | None:
    value = settings.value(f"window/{key}")
    return value if isinstance(value, QtCore.QByteArray) and not value.isEmpty() else None


def restore_state(window: StatefulWindow) -> None:
    """Lay ``window`` out as it was last closed (a first run gets :data:`FIRST_SIZE` and the semantic view)."""
    settings = window.settings
    geometry = _saved(settings, "geometry")
    if geometry is not None:
        window.restoreGeometry(geometry)
    else:
        window.resize(*FIRST_SIZE)
    state = _saved(settings, "state")
    if state is not None:
        window.restoreState(state)
    splitters = {"mainSplitter": window.main_splitter, "memorySplitter": window.memory_splitter}
    for name, splitter in splitters.items():
        value = _saved(settings, name)
        if value is not None:
            splitter.restoreState(value)
    header = _saved(settings, "tableHeader")
    if header is not None:
        window.table.horizontalHeader().restoreState(header)
    if _saved(settings, "memorySplitter") is None:
        window.memory_splitter.setSizes([820, DETAIL_WIDTH])
    view = settings.value("window/view")
    window.sidebar.select(view if isinstance(view, str) and view in window.sidebar.items else "semantic")


def save_state(window: StatefulWindow) -> None:
    """Remember geometry, toolbar/dock state, splitters, column layout, view and preferences."""
    settings = window.settings
    settings.setValue("window/geometry", window.saveGeometry())
    settings.setValue("window/state", window.saveState())
    settings.setValue("window/mainSplitter", window.main_splitter.saveState())
    settings.setValue("window/memorySplitter", window.memory_splitter.saveState())
    settings.setValue("window/tableHeader", window.table.horizontalHeader().saveState())
    settings.setValue("window/view", window.sidebar.current_view())
    window.prefs.save(settings)
