"""The memory table: the columns from :mod:`memlens.gui.columns`, their widths kept fair to the text column, the
header's show/hide menu and the row context menu; and the empty state shown instead when the store holds nothing."""

from __future__ import annotations

from memlens.gui.columns import COLUMN_INDEX, COLUMNS
from memlens.gui.delegates import SnippetDelegate, StrengthDelegate
from memlens.gui.icons import icon
from memlens.gui.memory_model import MemoryTableModel
from memlens.gui.qt import QtCore, QtGui, QtWidgets

#: The narrowest a table column other than the title gets in a narrow window (pixels).
NARROWEST_COLUMN = 40


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
    column kept the widest however narrow the window. ``context_actions`` fill the right-click menu."""

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
        if section != COLUMN_INDEX["title"] and not self._fitting:
            self._column_widths[section] = new  # the person's choice, given up only while the table is too narrow
            self.fit_columns()

    def fit_columns(self) -> None:
        """Keep the text (title) column the widest: when the table is too narrow for every column at its width,
        the other columns give up room in proportion (down to their header's width), never the title."""
        header = self.horizontalHeader()
        title = COLUMN_INDEX["title"]
        others = [i for i in range(len(COLUMNS)) if i != title and not header.isSectionHidden(i)]
        if not others:
            return
        sizes = self._fitted_sizes(others, self.viewport().width())
        self._fitting = True
        try:
            for i, width in sizes.items():
                header.resizeSection(i, width)
        finally:
            self._fitting = False

    def _fitted_sizes(self, others: list[int], available: int) -> dict[int, int]:
        """The widths of the columns ``others`` in a table ``available`` pixels wide."""
        wanted = {i: self._column_widths.get(i, COLUMNS[i].width or 80) for i in others}
        # Scaled so that the title keeps more than the widest other column, and a third of the table at least.
        total, widest = sum(wanted.values()), max(wanted.values())
        scale = min(1.0, (available - 24) / (total + widest), (available * 2 / 3) / total)
        fm = self.horizontalHeader().fontMetrics()
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
        return sizes

    def _header_menu(self, pos: QtCore.QPoint) -> None:
        """Right-click on the header: show or hide columns."""
        header = self.horizontalHeader()
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
        for act in self.context_actions:
            menu.addAction(act)
        menu.popup(self.viewport().mapToGlobal(pos))


class MemoryPage(QtWidgets.QSplitter):
    """The memories page: the filter bar, the table (or the empty state while the store is empty) and the count
    label on the left, the detail pane on the right.

    The table (and its text column) takes what the window gains; the detail keeps its width and never grows by
    itself when a longer memory is shown (its contents wrap instead)."""

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
