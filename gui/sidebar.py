"""The sidebar: the four layers with live counts, all memories, the audit log and sessions, plus the project filter."""

from __future__ import annotations

from memlens.gui.icons import icon
from memlens.gui.qt import QtCore, QtGui, QtWidgets, Signal
from memlens.models import Layer

LAYERS = tuple(layer.value for layer in Layer)
LAYER_LABELS = {"working": "Working", "episodic": "Episodic", "semantic": "Semantic", "procedural": "Procedural"}


class Sidebar(QtWidgets.QWidget):
    """The four layers with live counts, all memories, the audit log and sessions, plus the project filter."""

    view_changed = Signal(str)  # "all", a layer name, "audit", "sessions" or "conflicts"
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
        review = self._group("REVIEW")
        self._add(review, "conflicts", "Conflicts", "conflicts")
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

    def set_conflict_count(self, count: int) -> None:
        """Show how many conflicts are open (nothing when none)."""
        self.items["conflicts"].setText(1, f"{count:,}" if count else "")

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
