"""The memory table: the columns from :mod:`memlens.gui.columns`, their widths kept fair to the text column, the
header's show/hide menu and the row context menu; and the empty state shown instead when the store holds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from memlens.gui.columns import COLUMN_INDEX, COLUMNS
from memlens.gui.delegates import SnippetDelegate, StrengthDelegate
from memlens.gui.icons import icon
from memlens.gui.memory_model import MemoryTableModel
from memlens.gui.qt import QtCore, QtGui, QtWidgets

#: The least the text (title) column keeps before other columns are hidden for room: this many pixels, or this share
#: of the table when that is more.
TEXT_MIN_WIDTH = 240
TEXT_MIN_SHARE = 0.4


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


class MemoryTable(QtWidgets.QTableView):
    """The table of memories over ``model``: rows selected whole, sorted by clicking a header, and the text (title)
    column kept readable however narrow the window (see :meth:`fit_columns`). ``context_actions`` fill the right-click
    menu."""

    def __init__(self, model: MemoryTableModel, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("memoryTable")
        self.setAccessibleName("Memories")
        self.setModel(model)
        self.memories = model
        self.context_actions: list[QtGui.QAction] = []
        # The header asks whether each column is wholly selected (row by row, in Qt) to draw its sections; a selection
        # model of its own keeps Select All over a million rows from scanning them all.
        self.horizontalHeader().setSelectionModel(QtCore.QItemSelectionModel(model, self))
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setShowGrid(False)
        self.setTextElideMode(QtCore.Qt.TextElideMode.ElideRight)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(26)
        self.setSortingEnabled(True)
        self.sortByColumn(COLUMN_INDEX["created"], QtCore.Qt.SortOrder.DescendingOrder)
        self.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._table_menu)
        header = self.horizontalHeader()
        header.setSectionsMovable(True)
        header.setHighlightSections(False)
        header.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        self.strength_delegate = StrengthDelegate(self)
        self._fitting = False
        #: Columns the person shows that are hidden only for want of room (shown again when the table widens).
        self._dropped: set[int] = set()
        # Wide enough for a 7-digit id (the font decides, not a fixed number of pixels).
        self._id_width = self.fontMetrics().horizontalAdvance("0000000") + 20
        self._column_widths = {i: max(c.width, self._id_width) if c.key == "id" else c.width for i, c in enumerate(COLUMNS) if c.width is not None}
        self._set_up_columns()
        self.viewport().installEventFilter(self)
        header.sectionResized.connect(self._section_resized)

    def _set_up_columns(self) -> None:
        header = self.horizontalHeader()
        delegates: dict[str, QtWidgets.QStyledItemDelegate] = {"strength": self.strength_delegate, "snippet": SnippetDelegate(self)}
        for section, column in enumerate(COLUMNS):
            if column.width is None:
                header.setSectionResizeMode(section, QtWidgets.QHeaderView.ResizeMode.Stretch)
            else:
                self.setColumnWidth(section, self._column_widths[section])
            header.setSectionHidden(section, column.hidden or column.search_only)
            if column.delegate is not None:
                self.setItemDelegateForColumn(section, delegates[column.delegate])

    def selected_ids(self) -> list[int]:
        """Ids of the selected memories, in table order."""
        # From the selection's ranges, not one index per row: selecting all of a million rows stays instant.
        selection = self.selectionModel().selection()
        ranges = [(r.top(), r.bottom()) for r in (selection.at(i) for i in range(selection.size())) if r.isValid()]
        return self.memories.ids_in_rows(ranges)  # type: ignore[return-value]  # the memory table's ids are ints

    def select_memory(self, memory_id: int) -> bool:
        """Select and scroll to ``memory_id``'s row; False when it is not loaded (yet)."""
        row = self.memories.row_of(memory_id)
        if row < 0:
            return False
        self.selectRow(row)
        self.scrollTo(self.memories.index(row, 0))
        return True

    def show_sort_order(self) -> None:
        """Show the search-only columns (Score) during a search, and the model's order in the header's indicator."""
        header = self.horizontalHeader()
        searching = bool(self.memories.query.text.strip())
        for section, column in enumerate(COLUMNS):
            if column.search_only:
                header.setSectionHidden(section, not searching)
        self.fit_columns()
        section, order = self.memories.sort_column()
        # Only the indicator: the model has already ordered its rows (a search starts in score order).
        header.blockSignals(True)
        header.setSortIndicator(section, order)
        header.blockSignals(False)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.viewport() and event.type() == QtCore.QEvent.Type.Resize:
            self.fit_columns()
        return super().eventFilter(watched, event)

    def _section_resized(self, section: int, _old: int, new: int) -> None:
        # Hiding a column (Qt may do it later, outside fit_columns) resizes it to 0: not a width the person chose.
        if section != COLUMN_INDEX["title"] and not self._fitting and new > 0:
            self._column_widths[section] = new  # the person's choice, given up only while the table is too narrow
            self.fit_columns()

    def fit_columns(self) -> None:
        """Keep the text (title) column readable: every other shown column keeps its width (at least its header's,
        so no header is cut), and when they leave the text less than :data:`TEXT_MIN_WIDTH` (or
        :data:`TEXT_MIN_SHARE` of the table), the columns of lowest :attr:`~memlens.gui.columns.Column.priority` are
        hidden (never squeezed) until it fits; they come back when the table widens."""
        if self._fitting:
            return
        header = self.horizontalHeader()
        title = COLUMN_INDEX["title"]
        shown = [i for i in range(len(COLUMNS)) if i != title and (i in self._dropped or not header.isSectionHidden(i))]
        widths = {i: self._readable_width(i) for i in shown}
        available = self.viewport().width()
        room = available - max(TEXT_MIN_WIDTH, int(available * TEXT_MIN_SHARE))
        droppable = sorted((i for i in shown if COLUMNS[i].priority is not None), key=lambda i: (COLUMNS[i].priority, -i))
        dropped: set[int] = set()
        while droppable and sum(w for i, w in widths.items() if i not in dropped) > room:
            dropped.add(droppable.pop(0))
        self._fitting = True
        try:
            for i in shown:
                header.setSectionHidden(i, i in dropped)
                if i not in dropped:
                    header.resizeSection(i, widths[i])
            self._dropped = dropped
        finally:
            self._fitting = False

    def _readable_width(self, section: int) -> int:
        """The person's width for a column, but never less than its header needs (nor, for ids, 7 digits)."""
        header = self.horizontalHeader()
        width = max(self._column_widths.get(section, COLUMNS[section].width or 80), header.sectionSizeFromContents(section).width())
        return max(width, self._id_width) if COLUMNS[section].key == "id" else width

    def show_dropped(self) -> None:
        """Show the columns hidden for room (until the next :meth:`fit_columns`): the header as the person chose it."""
        self._fitting = True
        try:
            for i in self._dropped:
                self.horizontalHeader().setSectionHidden(i, False)
        finally:
            self._fitting = False
        self._dropped = set()

    def _choose_column(self, section: int, shown: bool) -> None:
        self._dropped.discard(section)
        self.horizontalHeader().setSectionHidden(section, not shown)
        self.fit_columns()

    def _header_menu(self, pos: QtCore.QPoint) -> None:
        """Right-click on the header: show or hide columns."""
        header = self.horizontalHeader()
        menu = QtWidgets.QMenu(self)
        for section, column in enumerate(COLUMNS):
            if not column.hideable or column.search_only:
                continue
            act = menu.addAction(column.header if column.header != "#" else "Id")
            act.setCheckable(True)
            act.setChecked(section in self._dropped or not header.isSectionHidden(section))
            act.toggled.connect(lambda on, sec=section: self._choose_column(sec, on))
        menu.popup(header.mapToGlobal(pos))

    def _table_menu(self, pos: QtCore.QPoint) -> None:
        menu = QtWidgets.QMenu(self)
        for act in self.context_actions:
            menu.addAction(act)
        menu.popup(self.viewport().mapToGlobal(pos))


class MemoryPage(QtWidgets.QSplitter):
    """The memories page: the filter bar, the table (or the empty state while the store is empty) and the count
    label on the left, the detail pane on the right.

    The table (and its text column) takes what the window gains; the detail keeps its width and never grows by
    itself when a longer memory is shown (its contents wrap instead). While nothing is selected the detail collapses
    and gives its width to the table; a selection opens it again at the person's width (:meth:`show_detail`)."""

    def __init__(self, filter_bar: QtWidgets.QWidget, table: MemoryTable, detail: QtWidgets.QWidget, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(QtCore.Qt.Orientation.Horizontal, parent)
        self.setObjectName("memorySplitter")
        self.count_label = QtWidgets.QLabel()
        self.count_label.setObjectName("countLabel")
        self.empty_state = EmptyState()
        self.table_stack = QtWidgets.QStackedWidget()
        self.table_stack.setObjectName("tableStack")
        self.table_stack.addWidget(table)
        self.table_stack.addWidget(self.empty_state)
        table_box = QtWidgets.QWidget()
        table_layout = QtWidgets.QVBoxLayout(table_box)
        table_layout.setContentsMargins(6, 6, 0, 0)
        table_layout.addWidget(filter_bar)
        table_layout.addWidget(self.table_stack, 1)
        table_layout.addWidget(self.count_label)
        self.addWidget(table_box)
        self.addWidget(detail)
        self.setStretchFactor(0, 1)
        self.setStretchFactor(1, 0)
        self.setCollapsible(0, False)
        #: The detail's width as the person left it, given back each time it opens.
        self.detail_width = detail.minimumWidth()
        self._detail_shown = table.selectionModel().hasSelection()  # what show_detail last asked for (see showEvent)
        self.splitterMoved.connect(self._remember_detail_width)
        self.table = table
        table.selectionModel().selectionChanged.connect(self._selection_changed)
        table.model().modelReset.connect(self._selection_changed)

    def _selection_changed(self, *_args: object) -> None:
        self.show_detail(self.table.selectionModel().hasSelection())

    def _remember_detail_width(self, *_args: object) -> None:
        if self.sizes()[1] > 0:
            self.detail_width = self.sizes()[1]

    def show_detail(self, shown: bool) -> None:
        """Open the detail at the person's width, or collapse it to give its width to the table."""
        self._detail_shown = shown
        if not self.isVisible():
            return  # a hidden splitter's sizes are not yet its real ones: showEvent applies the wish
        table_width, detail_width = self.sizes()
        if shown == (detail_width > 0):
            return
        if detail_width > 0:
            self.detail_width = detail_width
        total = table_width + detail_width
        self.setSizes([total - self.detail_width, self.detail_width] if shown else [total, 0])

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        self.show_detail(self._detail_shown)

    @contextmanager
    def as_chosen(self) -> Iterator[None]:
        """Within, the page is laid out as the person chose it (the detail open at their width, no column hidden for
        room), so that saving it keeps their choices and not what an empty selection or a narrow window made of
        them; afterwards it is laid out for the window again."""
        shown = self._detail_shown
        self.show_detail(True)
        self.table.show_dropped()
        try:
            yield
        finally:
            self.show_detail(shown)
            self.table.fit_columns()
