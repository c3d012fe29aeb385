"""Conflicts: pairs of memories that disagree, side by side with the differing words highlighted, and what to do
about each (Keep newer / Keep older / Merge into one fact / Not a conflict, and Undo for a decided one).

The view reads through the window's :class:`~memlens.gui.tasks.StoreReader` and writes through :class:`StoreOp`
operations (:func:`resolve_op`, :func:`undo_op`, :func:`scan_op`) whose :class:`OpChanges` tell the window what to
refresh; it uses only the store's public conflict API (:mod:`memlens.conflicts`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from memlens.conflicts import Conflict, ScanReport, differing_words
from memlens.gui import format as fmt
from memlens.gui.lazy_model import LazyTableModel, lazy_table_view
from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.models import Memory
from memlens.store import MemoryStore

#: Status filter choices: label and the store's status name.
STATUS_CHOICES = (("Open", "open"), ("Resolved", "resolved"), ("Not conflicts", "dismissed"), ("All", "all"))
#: The highlight behind a differing word (readable on the light and the dark theme).
HIGHLIGHT = "background-color: rgba(255, 196, 0, 0.45); border-radius: 2px;"


class ConflictTableModel(LazyTableModel):
    """Conflicts with one status, most recently detected first."""

    HEADERS = ("#", "Older", "Newer", "What differs", "Status")

    def __init__(self, reader: StoreReader | None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(reader, parent)
        self.status = "open"

    def set_status(self, status: str) -> None:
        """Show conflicts with this status (open, resolved, dismissed or all)."""
        self.status = status
        self.reload()

    def ids_reader(self) -> Callable[[MemoryStore], Sequence[Hashable]]:
        status = self.status
        return lambda store: store.conflicts.ids(status=status)

    def rows_reader(self) -> Callable[[MemoryStore, list[Hashable]], list[Any]]:
        return lambda store, ids: store.conflicts.get_many([int(i) for i in ids])  # type: ignore[call-overload]

    def conflict_at(self, row: int) -> Conflict | None:
        """The conflict shown in ``row`` (None while its block is loading)."""
        return self.row_at(row)

    def cell(self, row: Any, column: int, role: int) -> Any:
        c: Conflict = row
        R = QtCore.Qt.ItemDataRole
        if role in (R.DisplayRole, R.AccessibleTextRole):
            status = {"open": "open", "resolved": "resolved", "dismissed": "not a conflict"}[c.status]
            return [str(c.id), c.older.title, c.newer.title, c.evidence.summary(), status][column]
        if role == R.ToolTipRole and column in (1, 2):
            m = c.older if column == 1 else c.newer
            return f"#{m.id} · {m.origin} · confidence {m.source_confidence:.2f} · {fmt.when(m.created_at)}\n{m.content}"
        return None


def highlighted(text: str, words: set[str]) -> str:
    """``text`` as HTML with every word in ``words`` (lower-cased) marked; trailing punctuation stays unmarked."""

    def mark(match: re.Match[str]) -> str:
        word, tail = match.group(1), match.group(2)
        escaped = html.escape(word)
        marked = f'<span style="{HIGHLIGHT}">{escaped}</span>' if word.lower() in words else escaped
        return marked + html.escape(tail)

    return re.sub(r"(\S+?)([.,;:!?)\]\"']*)(?=\s|$)", mark, text)


def resolve_op(host: OpHost, conflict_id: int, action: str, *, text: str | None = None) -> StoreOp[Conflict]:
    """Resolve a conflict (an action of :data:`memlens.conflicts.ACTIONS`); reports both sides, a merged fact and
    the lists as changed (ranking, counts and the audit log move)."""
    now = host.clock()
    return StoreOp(
        host,
        "resolve_conflict",
        lambda store, _ctx: store.resolve_conflict(conflict_id, action, text=text, now=now),
        _changes,
        title="Could not resolve the conflict",
    )


def undo_op(host: OpHost, conflict_id: int) -> StoreOp[Conflict]:
    """Undo a conflict's resolution."""
    now = host.clock()
    return StoreOp(host, "undo_conflict", lambda store, _ctx: store.undo_conflict(conflict_id, now=now), _changes, title="Could not undo the resolution")


def scan_op(host: OpHost) -> StoreOp[ScanReport]:
    """Look for conflicts among memories written since the last scan (rules only)."""
    now = host.clock()
    return StoreOp(
        host, "scan_conflicts", lambda store, _ctx: store.scan_conflicts(now=now), lambda report: OpChanges(audit=bool(report.found), memory_list=bool(report.found)),
        title="Could not scan for conflicts",
    )  # fmt: skip


def _changes(c: Conflict) -> OpChanges:
    fact = (c.resolution or {}).get("fact")
    ids = {c.newer.id, c.older.id} | ({int(fact)} if isinstance(fact, int) else set())
    return OpChanges.of_memories(ids, memory_list=True, counts=True, audit=True)


class SidePanel(QtWidgets.QFrame):
    """One memory of a pair: its label, its text with the differing words highlighted, and where it came from."""

    def __init__(self, title: str, name: str) -> None:
        super().__init__()
        self.setObjectName(name)
        self.setFrameShape(QtWidgets.QFrame.Shape.StyledPanel)
        self.heading = QtWidgets.QLabel(title)
        font = self.heading.font()
        font.setBold(True)
        self.heading.setFont(font)
        self.text = QtWidgets.QTextBrowser()
        self.text.setObjectName(f"{name}Text")
        self.text.setAccessibleName(f"{title} memory text")
        self.text.setOpenLinks(False)
        self.meta = QtWidgets.QLabel()
        self.meta.setObjectName(f"{name}Meta")
        self.meta.setWordWrap(True)
        self.meta.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextBrowserInteraction)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.heading)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.meta)

    def show_memory(self, memory: Memory | None, words: set[str]) -> None:
        """Show ``memory`` with ``words`` highlighted (nothing for None)."""
        if memory is None:
            self.text.clear()
            self.meta.clear()
            return
        self.text.setHtml(f"<p style='font-size: 11pt'>{highlighted(memory.content, words)}</p>")
        state = "" if memory.is_latest else " · not the latest version"
        self.meta.setText(
            f"<a href='memory:{memory.id}'>#{memory.id}</a> · {html.escape(memory.origin)} · confidence "
            f"{memory.source_confidence:.2f} · {html.escape(fmt.when(memory.created_at))}{state}"
        )


class ConflictsView(QtWidgets.QWidget):
    """The Conflicts page: the list of pairs above, the selected pair side by side below, and the decisions."""

    #: Emitted with a memory id when the person follows a side's link.
    memory_activated = Signal(int)
    #: Emitted with the number of open conflicts whenever it was read.
    open_count_changed = Signal(int)

    def __init__(self, reader: StoreReader | None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conflictsView")
        self.host: OpHost | None = None
        self._reader = reader
        self.current: Conflict | None = None
        self.model = ConflictTableModel(reader, self)
        self.status = QtWidgets.QComboBox()
        self.status.setObjectName("conflictStatus")
        self.status.setAccessibleName("Conflict status")
        for label, key in STATUS_CHOICES:
            self.status.addItem(label, key)
        self.scan_button = self._button("Scan now", "conflictScan", "Look for conflicts among memories written since the last scan")
        self.count_label = QtWidgets.QLabel()
        self.count_label.setObjectName("conflictCount")
        top = QtWidgets.QHBoxLayout()
        status_label = QtWidgets.QLabel("Show")
        status_label.setBuddy(self.status)
        top.addWidget(status_label)
        top.addWidget(self.status)
        top.addWidget(self.count_label, 1)
        top.addWidget(self.scan_button)
        self.table = lazy_table_view(self.model, "conflictTable", "Conflicts", (48, 260, 260, 240, 100))
        self.table.horizontalHeader().setStretchLastSection(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        for column in (1, 2, 3):
            header.setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(4, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.older_panel = SidePanel("Older", "conflictOlder")
        self.newer_panel = SidePanel("Newer", "conflictNewer")
        for panel in (self.older_panel, self.newer_panel):
            panel.meta.linkActivated.connect(self._open_link)
        sides = QtWidgets.QHBoxLayout()
        sides.addWidget(self.older_panel, 1)
        sides.addWidget(self.newer_panel, 1)
        self.evidence = QtWidgets.QLabel()
        self.evidence.setObjectName("conflictEvidence")
        self.evidence.setWordWrap(True)
        self.merge_text = QtWidgets.QLineEdit()
        self.merge_text.setObjectName("conflictMergeText")
        self.merge_text.setAccessibleName("Merged fact")
        self.merge_text.setPlaceholderText("The one fact both memories should become (for Merge)")
        self.keep_newer = self._button("Keep newer", "conflictKeepNewer", "Lower the older memory's confidence so search ranks it below the newer one")
        self.keep_older = self._button("Keep older", "conflictKeepOlder", "Lower the newer memory's confidence so search ranks it below the older one")
        self.merge = self._button("Merge into one fact", "conflictMerge", "Save the text above as a new fact citing both memories, and lower both")
        self.dismiss = self._button("Not a conflict", "conflictDismiss", "The two memories do not disagree: dismiss the pair")
        self.undo = self._button("Undo", "conflictUndo", "Reverse this conflict's resolution")
        buttons = QtWidgets.QHBoxLayout()
        for button in (self.keep_newer, self.keep_older, self.merge, self.dismiss):
            buttons.addWidget(button)
        buttons.addStretch(1)
        buttons.addWidget(self.undo)
        detail = QtWidgets.QWidget()
        detail_layout = QtWidgets.QVBoxLayout(detail)
        detail_layout.setContentsMargins(0, 0, 0, 0)
        detail_layout.addWidget(self.evidence)
        detail_layout.addLayout(sides, 1)
        merge_row = QtWidgets.QHBoxLayout()
        merge_label = QtWidgets.QLabel("Merged fact")
        merge_label.setBuddy(self.merge_text)
        merge_row.addWidget(merge_label)
        merge_row.addWidget(self.merge_text, 1)
        detail_layout.addLayout(merge_row)
        detail_layout.addLayout(buttons)
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.splitter.setObjectName("conflictSplitter")
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(detail)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.splitter, 1)
        self.status.currentIndexChanged.connect(lambda _i: self.model.set_status(str(self.status.currentData())))
        self.model.loaded.connect(self._loaded)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.keep_newer.clicked.connect(lambda: self._resolve("keep_newer"))
        self.keep_older.clicked.connect(lambda: self._resolve("keep_older"))
        self.merge.clicked.connect(lambda: self._resolve("merge"))
        self.dismiss.clicked.connect(lambda: self._resolve("not_conflict"))
        self.undo.clicked.connect(self._undo)
        self.scan_button.clicked.connect(self._scan)
        self.merge_text.textChanged.connect(lambda _t: self.update_buttons())
        self._show(None)

    @classmethod
    def for_window(cls, window: Any) -> ConflictsView:
        """The view wired to the main window: its operations run there, its links open memories there, the
        sidebar shows the open count whenever the window recounts, and time travel disables the decisions."""
        view = cls(None)
        view.host = window
        view.memory_activated.connect(window.go_to_memory)
        view.open_count_changed.connect(window.sidebar.set_conflict_count)
        window.refresher.counts_loaded.connect(lambda _counts: view.refresh_count())
        window.time_travel_changed.connect(lambda _when: view.update_buttons())
        return view

    def show_in(self, pages: QtWidgets.QStackedWidget) -> None:
        """Become the visible page and read the list afresh."""
        pages.setCurrentWidget(self)
        self.reload()

    def _button(self, text: str, name: str, tip: str) -> QtWidgets.QPushButton:
        button = QtWidgets.QPushButton(text)
        button.setObjectName(name)
        button.setAccessibleName(text)
        button.setToolTip(tip)
        return button

    # reading --------------------------------------------------------------------------------------------------

    def set_reader(self, reader: StoreReader | None) -> None:
        """Switch to another store."""
        self._reader = reader
        self.model.set_reader(reader)
        self._show(None)

    def reload(self) -> None:
        """Read the list (and the open count) again (nothing without a store)."""
        if self._reader is None:
            return
        self.model.set_status(str(self.status.currentData()))
        self.refresh_count()

    def refresh_count(self) -> None:
        """Read how many conflicts are open (emits :attr:`open_count_changed`)."""
        if self._reader is not None:
            self._reader.submit("conflict-count", lambda store: store.conflicts.count(status="open"), self.open_count_changed.emit)

    def _loaded(self) -> None:
        total = self.model.rowCount()
        self.count_label.setText(fmt.plural(total, "conflict"))
        wanted = self.current.id if self.current is not None else None
        row = next((r for r in range(total) if (c := self.model.conflict_at(r)) is not None and c.id == wanted), 0 if total else -1)
        if row >= 0:
            self.table.selectRow(row)
            self._current_changed(self.model.index(row, 0), QtCore.QModelIndex())
        else:
            self._show(None)

    def _current_changed(self, current: QtCore.QModelIndex, _previous: QtCore.QModelIndex) -> None:
        self._show(self.model.conflict_at(current.row()) if current.isValid() else None)

    def _show(self, conflict: Conflict | None) -> None:
        changed = conflict is None or self.current is None or conflict.id != self.current.id
        self.current = conflict
        newer_words, older_words = differing_words(conflict) if conflict is not None else (set(), set())
        self.older_panel.show_memory(conflict.older if conflict else None, older_words)
        self.newer_panel.show_memory(conflict.newer if conflict else None, newer_words)
        if conflict is None:
            self.evidence.setText("Select a conflict to see both memories side by side." if self.model.rowCount() else "No conflicts to show.")
        else:
            self.evidence.setText(f"<b>#{conflict.id}</b> · {html.escape(conflict.evidence.summary())} · score {conflict.score:.2f} ({conflict.method})")
        if changed:
            self.merge_text.setText(conflict.newer.content if conflict is not None else "")
        self.update_buttons()

    def update_buttons(self) -> None:
        """Enable the decisions that fit the shown conflict and whether the store may be written (not in time travel)."""
        c = self.current
        is_open = c is not None and c.status == "open"
        writable = self.host is not None and not self.host.read_only()
        for button in (self.keep_newer, self.keep_older, self.dismiss):
            button.setEnabled(is_open and writable)
        self.merge.setEnabled(is_open and writable and bool(self.merge_text.text().strip()))
        self.undo.setEnabled(c is not None and c.status != "open" and writable)
        self.scan_button.setEnabled(writable and self._reader is not None)

    def _open_link(self, link: str) -> None:
        if link.startswith("memory:"):
            self.memory_activated.emit(int(link.split(":", 1)[1]))

    # writing --------------------------------------------------------------------------------------------------

    def _resolve(self, action: str) -> None:
        if self.host is None or self.current is None:
            return
        text = self.merge_text.text().strip() if action == "merge" else None
        resolve_op(self.host, self.current.id, action, text=text).success(self._done).run_in_background()

    def _undo(self) -> None:
        if self.host is not None and self.current is not None:
            undo_op(self.host, self.current.id).success(self._done).run_in_background()

    def _scan(self) -> None:
        if self.host is not None:
            scan_op(self.host).success(lambda _report: self.reload()).run_in_background()

    def _done(self, conflict: Conflict) -> None:
        self.current = conflict
        self.reload()
