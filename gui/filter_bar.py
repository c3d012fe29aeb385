"""The filter bar above the memory table: the search box, the type and tags filters and the pinned, expiring-soon
and all-versions switches. It says what it filters for as a :class:`MemoryQuery`; the window decides when to load."""

from __future__ import annotations

from memlens.gui.icons import icon
from memlens.gui.memory_model import MemoryQuery
from memlens.gui.qt import QtCore, QTimer, QtWidgets, Signal
from memlens.models import KNOWN_TYPES

#: Typing in the search box waits this long for the next key before the table searches.
SEARCH_DEBOUNCE_MS = 300


class FilterBar(QtWidgets.QWidget):
    """Two rows of filters; ``changed`` is emitted when one changed (typed text after ``search_timer`` runs out)."""

    changed = Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("filterBar")
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
        self.search_box.setMinimumWidth(self.fontMetrics().horizontalAdvance("Search memories (Ctrl+F)") + 48)
        self._lay_out()
        self.search_timer = QTimer(self)
        self.search_timer.setObjectName("searchDebounce")
        self.search_timer.setSingleShot(True)
        self.search_timer.setInterval(SEARCH_DEBOUNCE_MS)
        self.search_timer.timeout.connect(self.changed)
        self.search_box.textChanged.connect(self.search_timer.start)
        self.type_filter.currentIndexChanged.connect(self.changed)
        self.tags_filter.editingFinished.connect(self.changed)
        for box in (self.all_versions, self.pinned_filter, self.expiring_filter):
            box.toggled.connect(self.changed)

    def _lay_out(self) -> None:
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
        filters = QtWidgets.QVBoxLayout(self)
        filters.setContentsMargins(0, 0, 0, 0)
        filters.setSpacing(2)
        filters.addLayout(search_row)
        filters.addLayout(check_row)

    def query(self, *, layer: str | None, project: str | None, order_by: str, descending: bool) -> MemoryQuery:
        """The query these filters describe within ``layer`` and ``project``, in the given order."""
        tags = tuple(t.strip() for t in self.tags_filter.text().split(",") if t.strip())
        type_ = str(self.type_filter.currentData())
        return MemoryQuery(
            layer=layer,
            project=project,
            types=(type_,) if type_ else (),
            tags=tags,
            latest_only=not self.all_versions.isChecked(),
            pinned_only=self.pinned_filter.isChecked(),
            expiring_soon=self.expiring_filter.isChecked(),
            text=self.search_box.text().strip(),
            order_by=order_by,
            descending=descending,
        )

    def focus_search(self) -> None:
        """Put the cursor in the search box with its text selected."""
        self.search_box.setFocus(QtCore.Qt.FocusReason.ShortcutFocusReason)
        self.search_box.selectAll()
