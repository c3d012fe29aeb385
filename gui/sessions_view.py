"""Sessions: an agent's runs, each with its observations in order and the episode that summarises it."""

from __future__ import annotations

import html
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memlens.gui import format as fmt
from memlens.gui.lazy_model import LazyTableModel, lazy_table_view
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore, Session

if TYPE_CHECKING:
    from memlens.gui.refresher import Refresher


class SessionTableModel(LazyTableModel):
    """Sessions, most recent activity first, optionally of one project: every id at once, sessions in blocks."""

    HEADERS = ("Session", "Project", "Started", "Last activity", "State")
    INT_IDS = False  # session ids are names

    def __init__(self, reader: StoreReader | None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(reader, parent)
        self.project: str | None = None

    def set_project(self, project: str | None) -> None:
        """Show only this project's sessions (None: all)."""
        self.project = project
        self.reload()

    def ids_reader(self) -> Callable[[MemoryStore], Sequence[Hashable]]:
        project = self.project
        return lambda store: store.session_ids(project=project)

    def rows_reader(self) -> Callable[[MemoryStore, list[Hashable]], list[Any]]:
        return lambda store, ids: list(store.sessions_by_id([str(i) for i in ids]))

    def placeholder(self, row_id: Hashable, column: int, role: int) -> Any:
        """A session not loaded yet shows its id (its name) and nothing else."""
        return str(row_id) if column == 0 and role == QtCore.Qt.ItemDataRole.DisplayRole else None

    def session_at(self, row: int) -> Session | None:
        """The session shown in ``row`` (None while its block is loading)."""
        return self.row_at(row)

    def cell(self, row: Any, column: int, role: int) -> Any:
        s: Session = row
        R = QtCore.Qt.ItemDataRole
        if role in (R.DisplayRole, R.AccessibleTextRole):
            state = "ended" if s.ended_at else "open"
            return [s.id, s.project or "", fmt.when(s.started_at), fmt.when(s.last_event_at), state][column]
        if role == R.ToolTipRole and column == 4:
            return f"ended {fmt.when(s.ended_at)}" if s.ended_at else "no end recorded yet"
        return None


@dataclass(frozen=True)
class SessionContents:
    """A session's memories split into observations (in order) and episode summaries."""

    session: Session
    observations: list[Memory]
    episodes: list[Memory]
    others: list[Memory]


def load_session(store: MemoryStore, session_id: str) -> SessionContents:
    """Everything the sessions view shows about one session (reader thread)."""
    memories = store.session_memories(session_id)
    return SessionContents(
        store.session(session_id),
        [m for m in memories if m.layer == "working"],
        [m for m in memories if m.layer == "episodic"],
        [m for m in memories if m.layer not in ("working", "episodic")],
    )


class SessionsView(QtWidgets.QWidget):
    """The session list, and for the selected session its observations and episode summary."""

    memory_activated = Signal(int)

    def __init__(self, reader: StoreReader | None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("sessionsView")
        self.model = SessionTableModel(reader, self)
        self.contents: SessionContents | None = None
        self.table = lazy_table_view(self.model, "sessionTable", "Sessions", ())
        # The session name takes what is left; the rest are as wide as their contents, so the list fits its pane.
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)
        when = self.table.fontMetrics().horizontalAdvance("2026-03-01 06:00") + 16
        for column, width in ((1, 90), (2, when), (3, when), (4, self.table.fontMetrics().horizontalAdvance("ended") + 20)):
            header.resizeSection(column, width)
        self.observations = QtWidgets.QListWidget()
        self.observations.setObjectName("sessionObservations")
        self.observations.setAccessibleName("Observations")
        self.observations.setWordWrap(True)
        self.observations.setAlternatingRowColors(True)
        self.observations.itemActivated.connect(self._open_item)
        self.observations.itemDoubleClicked.connect(self._open_item)
        self.summary = QtWidgets.QTextBrowser()
        self.summary.setObjectName("sessionSummary")
        self.summary.setAccessibleName("Episode summary")
        self.summary.setOpenLinks(False)
        self.summary.anchorClicked.connect(self._open_link)
        self.heading = QtWidgets.QLabel("Select a session.")
        self.heading.setObjectName("sessionHeading")
        self.heading.setWordWrap(True)

        right = QtWidgets.QWidget()
        right_layout = QtWidgets.QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.heading)
        inner = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        obs_box = QtWidgets.QGroupBox("Observations, in order")
        QtWidgets.QVBoxLayout(obs_box).addWidget(self.observations)
        sum_box = QtWidgets.QGroupBox("Episode summary")
        QtWidgets.QVBoxLayout(sum_box).addWidget(self.summary)
        inner.addWidget(obs_box)
        inner.addWidget(sum_box)
        inner.setSizes([380, 260])
        right_layout.addWidget(inner, 1)
        splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(right)
        # The list gets the larger share, and keeps it as the window narrows: at 1024 px its session names must
        # stay whole, while the observations wrap.
        splitter.setSizes([680, 340])
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(splitter)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.model.loaded.connect(self._reload_current)

    def set_reader(self, reader: StoreReader | None) -> None:
        """Switch to another store."""
        self.model.set_reader(reader)
        self.contents = None
        self._show(None)

    def show_in(self, pages: QtWidgets.QStackedWidget, project: str | None, refresher: Refresher | None) -> None:
        """Become the shown page for ``project`` (``refresher`` None: no store open). Read afresh when the project
        changed or nothing is shown yet; else refresh in place, so the selected session and the scroll position stay."""
        pages.setCurrentWidget(self)
        if refresher is None:
            return
        if project != self.model.project or not (self.model.rowCount() or self.model.is_loading()):
            refresher.stale_pages.discard("sessions")  # read afresh for the project
            self.model.set_project(project)
        else:
            refresher.refresh_stale_page()

    def _current_changed(self, current: QtCore.QModelIndex, _previous: QtCore.QModelIndex) -> None:
        session = self.model.session_at(current.row()) if current.isValid() else None
        if session is None:
            self._show(None)
            return
        self._load(session.id)

    def _reload_current(self) -> None:
        index = self.table.selectionModel().currentIndex()
        session = self.model.session_at(index.row()) if index.isValid() else None
        if session is not None:
            self._load(session.id)

    def _load(self, session_id: str) -> None:
        reader = self.model.reader
        if reader is None:
            return
        reader.submit(
            "session-contents",
            lambda store: load_session(store, session_id),
            self._show,
            lambda error: self.heading.setText(f"Could not read session {session_id}: {error}"),
        )

    def _show(self, contents: SessionContents | None) -> None:
        self.contents = contents
        self.observations.clear()
        if contents is None:
            self.heading.setText("Select a session to see its observations and episode summary.")
            self.summary.clear()
            return
        s = contents.session
        state = f"ended {fmt.when(s.ended_at)}" if s.ended_at else "still open"
        self.heading.setText(
            f"<b>{html.escape(s.id)}</b> · {html.escape(s.project or 'no project')} · started {fmt.when(s.started_at)} · {state} · "
            f"{fmt.plural(len(contents.observations), 'observation')}"
        )
        for m in contents.observations:
            flag = "  ⚠" if m.metadata.get("error") else ""
            item = QtWidgets.QListWidgetItem(f"{m.created_at.astimezone():%H:%M:%S}  {m.content[:220]}{flag}")
            item.setData(QtCore.Qt.ItemDataRole.UserRole, m.id)
            item.setToolTip(f"#{m.id} - double-click to open")
            self.observations.addItem(item)
        if not contents.observations:
            empty_note = QtWidgets.QListWidgetItem("No observations are stored for this session (they may have been swept).")
            empty_note.setData(QtCore.Qt.ItemDataRole.UserRole, 0)  # never leave item data empty: see memlens.gui.qt
            self.observations.addItem(empty_note)
        if contents.episodes:
            parts = []
            for e in contents.episodes:
                parts.append(f"<h4><a href='memory:{e.id}'>#{e.id}</a> {html.escape(e.title)}</h4><p>{html.escape(e.content).replace(chr(10), '<br>')}</p>")
            for m in contents.others:
                parts.append(f"<p>Also from this session: <a href='memory:{m.id}'>#{m.id}</a> {html.escape(m.title)} ({m.layer})</p>")
            self.summary.setHtml("".join(parts))
        else:
            self.summary.setHtml("<p style='color:gray'>Not consolidated yet: no episode summarises this session. Run Consolidate to create one.</p>")

    def _open_item(self, item: QtWidgets.QListWidgetItem) -> None:
        memory_id = item.data(QtCore.Qt.ItemDataRole.UserRole)
        if isinstance(memory_id, int) and memory_id > 0:
            self.memory_activated.emit(memory_id)

    def _open_link(self, url: QtCore.QUrl) -> None:
        kind, _, value = url.toString().partition(":")
        if kind == "memory" and value.isdigit():
            self.memory_activated.emit(int(value))

    def select_session(self, session_id: str) -> None:
        """Select ``session_id`` if it is loaded, else show it directly."""
        row = self.model.row_of(session_id)
        if row >= 0:
            self.table.selectRow(row)
        else:
            self._load(session_id)
