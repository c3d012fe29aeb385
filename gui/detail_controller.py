"""What the detail pane shows, kept in step with the table's selection.

:class:`DetailController` loads one memory (or, for a forgotten one, when and why it went), the strength curves of
several selected memories to compare, and goes to a memory named anywhere in the app (an audit entry, a session, a
link in the detail pane), switching the sidebar's view and the filters so that its row can be selected.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from memlens.errors import NotFound
from memlens.gui.detail import DetailData, DetailPane, forgotten_message, load_curve, load_detail
from memlens.gui.memory_model import ID_ROLE, MemoryTableModel
from memlens.gui.memory_table import MemoryPage, MemoryTable
from memlens.gui.qt import QObject, QtCore, QtWidgets, Signal
from memlens.gui.sessions_view import SessionsView
from memlens.gui.sidebar import Sidebar
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore

#: At most this many selected memories have their strength curves compared.
COMPARE_LIMIT = 8


class DetailHost(Protocol):
    """What the detail controller needs from the window (the main window is one)."""

    reader: StoreReader | None
    model: MemoryTableModel
    table: MemoryTable
    detail: DetailPane
    sidebar: Sidebar
    pages: QtWidgets.QStackedWidget
    memory_splitter: MemoryPage
    sessions_view: SessionsView
    all_versions: QtWidgets.QCheckBox

    def now(self) -> datetime:
        """The moment the window shows."""

    def show_error(self, title: str, error: BaseException | str) -> None:
        """Tell the person a read failed."""

    def say(self, message: str, timeout_ms: int = 5000) -> None:
        """Show ``message`` in the status bar for a while."""


class DetailController(QObject):
    """Loads what the detail pane shows; ``memory_id`` is the memory it shows (or is loading), if any."""

    #: Emitted with the id of the memory the pane now shows (a forgotten one too).
    shown = Signal(int)

    def __init__(self, host: DetailHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.memory_id: int | None = None
        #: A memory to select once the table's rows have loaded (go_to_memory before its row was read).
        self.pending_select: int | None = None

    def clear(self, message: str | None = None) -> None:
        """Show nothing (with ``message`` saying why, if given)."""
        self.memory_id = None
        if message is None:
            self.host.detail.clear()
        else:
            self.host.detail.clear(message)

    def select_pending(self) -> None:
        """The table loaded rows: select the memory ``go_to_memory`` is waiting for, if it is among them."""
        if self.pending_select is not None and self.host.table.select_memory(self.pending_select):
            self.pending_select = None

    def current_row_changed(self, current: QtCore.QModelIndex, _previous: QtCore.QModelIndex) -> None:
        """The table's current row moved: show its memory."""
        memory_id = current.data(ID_ROLE) if current.isValid() else None
        if isinstance(memory_id, int):
            self.show_memory(memory_id)

    def rows_removed(self, *_args: Any) -> None:
        """Selected rows left the table (forgotten here or elsewhere): Qt moves only the focus to a neighbour, so
        clear it too; the detail then says nothing is selected, and Delete cannot offer a row nobody chose."""
        selection = self.host.table.selectionModel()
        if selection.hasSelection() or self.memory_id is None:
            return
        selection.clearCurrentIndex()
        self.clear("Nothing selected: the memory shown here left the list. Select one to see it here.")

    def selection_changed(self, *_args: Any) -> None:
        """Several rows selected: compare their strength curves."""
        ids = self.host.table.selected_ids()
        if len(ids) > 1:
            self.host.say(f"{len(ids)} selected", 3000)
            self.load_compare(ids[:COMPARE_LIMIT])

    def show_memory(self, memory_id: int) -> None:
        """Load and show one memory in the detail pane (a forgotten one shows when and why it went)."""
        host = self.host
        if host.reader is None:
            return
        self.memory_id = memory_id
        now = host.now()
        query_text = host.model.query.text

        def loaded(data: DetailData) -> None:
            if self.memory_id != memory_id:
                return  # the selection moved on (or was cleared) while this was read
            compare = len(host.table.selected_ids()) > 1
            host.detail.show_data(data, show_curve=not compare)
            self.shown.emit(data.memory.id)

        def failed(error: BaseException) -> None:
            if isinstance(error, NotFound):
                self.show_forgotten(memory_id)
            else:
                host.show_error("Could not read the memory", error)

        host.reader.submit("detail", lambda store: load_detail(store, memory_id, now, query_text), loaded, failed)

    def show_forgotten(self, memory_id: int) -> None:
        """Show that ``memory_id`` is gone: when, and why (from the audit log)."""
        host = self.host
        if host.reader is None:
            return
        self.memory_id = memory_id

        def shown(message: str) -> None:
            if self.memory_id != memory_id:
                return
            host.detail.show_missing(memory_id, message)
            self.shown.emit(memory_id)

        now = host.now()
        host.reader.submit("detail", lambda store: forgotten_message(store, memory_id, now), shown, lambda e: host.show_error("Could not read the audit log", e))

    def load_compare(self, ids: list[int]) -> None:
        """Draw the strength curves of ``ids`` together in the detail pane's chart."""
        host = self.host
        if host.reader is None:
            return
        now = host.now()

        def curves(store: MemoryStore) -> list[Any]:
            return [load_curve(store, m, now) for m in store.get_many(ids)]

        host.reader.submit("compare", curves, host.detail.chart.show_curves, lambda e: host.show_error("Could not compute strength curves", e))

    def go_to_memory(self, memory_id: int) -> None:
        """Show a memory from anywhere (an audit entry, a session, a link): switch to its layer and select it."""
        host = self.host
        if host.reader is None:
            return

        def found(memory: Memory) -> None:
            view = host.sidebar.current_view()
            if view not in ("all", memory.layer):
                host.sidebar.select(memory.layer)
            elif host.pages.currentWidget() is not host.memory_splitter:
                host.sidebar.select(view)
            if not memory.is_latest and not host.all_versions.isChecked():
                host.all_versions.setChecked(True)
            if not host.table.select_memory(memory.id):
                self.pending_select = memory.id
            self.show_memory(memory.id)

        def missing(error: BaseException) -> None:
            if isinstance(error, NotFound):
                if host.pages.currentWidget() is not host.memory_splitter:
                    host.sidebar.select("all")
                host.table.clearSelection()
                self.show_forgotten(memory_id)
            else:
                host.show_error("Could not read the memory", error)

        host.reader.submit("goto", lambda store: store.get(memory_id), found, missing)

    def follow_link(self, kind: str, value: str) -> None:
        """A link in the detail pane: a memory (a version click stays on the Versions tab) or a session."""
        if kind == "memory" and value.isdigit():
            if self.host.detail.tabs.currentIndex() == 1:
                self.show_memory(int(value))
            else:
                self.go_to_memory(int(value))
        elif kind == "session":
            self.host.sidebar.select("sessions")
            self.host.sessions_view.select_session(value)
