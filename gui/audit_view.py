"""The audit log: every change to the store, newest first, filterable by operation, target and time."""

from __future__ import annotations

import html
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memlens.gui import format as fmt
from memlens.gui.lazy_model import LazyTableModel, lazy_table_view
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.gui.tasks import StoreReader
from memlens.store import AuditCheck, AuditEntry, MemoryStore

if TYPE_CHECKING:
    from memlens.gui.refresher import Refresher

ENTRY_ROLE = QtCore.Qt.ItemDataRole.UserRole + 1


@dataclass(frozen=True)
class AuditFilter:
    """Which audit entries to show."""

    operation: str | None = None
    target_id: int | None = None
    since: datetime | None = None
    until: datetime | None = None


class AuditTableModel(LazyTableModel):
    """Audit entries matching an :class:`AuditFilter`, newest first: every id at once, entries in blocks."""

    HEADERS = ("#", "When", "Operation", "Actor", "Targets", "What happened")

    def __init__(self, reader: StoreReader | None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(reader, parent)
        self.filter = AuditFilter()

    def set_filter(self, audit_filter: AuditFilter) -> None:
        """Show the entries matching ``audit_filter``."""
        self.filter = audit_filter
        self.reload()

    def ids_reader(self) -> Callable[[MemoryStore], Sequence[Hashable]]:
        f = self.filter
        return lambda store: store.audit_ids(operation=f.operation, target_id=f.target_id, since=f.since, until=f.until)

    def rows_reader(self) -> Callable[[MemoryStore, list[Hashable]], list[Any]]:
        return lambda store, ids: list(store.audit_entries([int(i) for i in ids]))  # type: ignore[call-overload]

    def entry_at(self, row: int) -> AuditEntry | None:
        """The entry shown in ``row`` (None while its block is loading)."""
        return self.row_at(row)

    def cell(self, row: Any, column: int, role: int) -> Any:
        e: AuditEntry = row
        R = QtCore.Qt.ItemDataRole
        if role == ENTRY_ROLE:
            return e
        if role in (R.DisplayRole, R.AccessibleTextRole):
            return [str(e.id), fmt.audit_time(e, written=False), e.operation, e.actor, fmt.id_list(e.target_ids, 3), fmt.audit_summary(e)][column]
        if role == R.ToolTipRole and column == 1:
            return fmt.audit_time(e)
        if role == R.ToolTipRole and column == 5:
            return fmt.audit_summary(e)
        if role == R.TextAlignmentRole and column == 0:
            return (QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter).value
        return None


class AuditView(QtWidgets.QWidget):
    """Filters, the audit table and a readable view of the selected entry's details.

    Double-clicking an entry emits ``target_activated`` with its first target id.
    """

    target_activated = Signal(int)
    #: Emitted with the result each time the hash chain has been checked.
    chain_checked = Signal(object)

    def __init__(self, reader: StoreReader | None, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("auditView")
        self.model = AuditTableModel(reader, self)
        # The log's tamper evidence, checked off the UI thread whenever the view is shown or asked to.
        self.chain_state = QtWidgets.QLabel("Hash chain: not checked yet")
        self.chain_state.setObjectName("auditChainState")
        self.chain_state.setAccessibleName("Audit hash chain state")
        self.verify_button = QtWidgets.QPushButton("Verify chain")
        self.verify_button.setObjectName("auditVerifyButton")
        self.verify_button.setAccessibleName("Verify the audit log's hash chain")
        self.verify_button.setToolTip("Recompute every entry's hash and check that each follows the one before")
        self.verify_button.clicked.connect(self.verify_chain)
        self.operation = QtWidgets.QComboBox()
        self.operation.setObjectName("auditOperation")
        self.operation.setAccessibleName("Operation")
        self.operation.addItem("All operations", "")
        self.target = QtWidgets.QLineEdit()
        self.target.setObjectName("auditTarget")
        self.target.setAccessibleName("Target memory id")
        self.target.setPlaceholderText("target id")
        self.target.setClearButtonEnabled(True)
        self.target.setMaximumWidth(110)
        self.since = self._date_edit("auditSince", "Since")
        self.until = self._date_edit("auditUntil", "Until")
        self.use_since = QtWidgets.QCheckBox("Since")
        self.use_since.setObjectName("auditUseSince")
        self.use_until = QtWidgets.QCheckBox("Until")
        self.use_until.setObjectName("auditUseUntil")
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("auditMessage")

        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(QtWidgets.QLabel("Operation"))
        bar.addWidget(self.operation)
        bar.addWidget(QtWidgets.QLabel("Target"))
        bar.addWidget(self.target)
        bar.addWidget(self.use_since)
        bar.addWidget(self.since)
        bar.addWidget(self.use_until)
        bar.addWidget(self.until)
        bar.addStretch(1)
        bar.addWidget(self.message)

        self.table = lazy_table_view(self.model, "auditTable", "Audit log", (70, 130, 110, 70, 150))
        # The When column fits a whole time marked "as of" (an operation run at a simulated time).
        self.table.horizontalHeader().resizeSection(1, self.table.fontMetrics().horizontalAdvance("2026-03-02 04:00 (as of)") + 16)
        self.table.doubleClicked.connect(self._activated)
        self.details = QtWidgets.QTextBrowser()
        self.details.setObjectName("auditDetails")
        self.details.setAccessibleName("Audit entry details")
        self.details.setOpenLinks(False)
        self.details.anchorClicked.connect(lambda url: self._open_link(url.toString()))
        splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(self.details)
        splitter.setSizes([500, 180])

        chain_bar = QtWidgets.QHBoxLayout()
        chain_bar.addWidget(self.chain_state, 1)
        chain_bar.addWidget(self.verify_button)

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(splitter, 1)
        layout.addLayout(chain_bar)

        self.table.selectionModel().currentRowChanged.connect(self._show_current)
        self.operation.currentIndexChanged.connect(self.apply_filter)
        self.target.editingFinished.connect(self.apply_filter)
        for widget in (self.use_since, self.use_until):
            widget.toggled.connect(self.apply_filter)
        for edit in (self.since, self.until):
            edit.dateTimeChanged.connect(self._date_changed)
        self.model.loaded.connect(self._loaded)
        self.model.load_failed.connect(lambda msg: self.message.setText(f"Could not read the audit log: {msg}"))

    def set_reader(self, reader: StoreReader | None) -> None:
        """Read another store (or none)."""
        self.model.set_reader(reader)
        self.chain_state.setText("Hash chain: not checked yet")
        self.chain_state.setStyleSheet("")
        if reader is not None and self.isVisible():
            self.verify_chain()

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        self.verify_chain()

    def verify_chain(self) -> None:
        """Check the audit log's hash chain in the background and show whether it is intact."""
        reader = self.model.reader
        if reader is None:
            return
        self.chain_state.setText("Hash chain: checking…")
        reader.submit("audit-chain", lambda store: store.verify_audit(), self._show_chain, self._chain_failed)

    def _show_chain(self, check: AuditCheck) -> None:
        if check.ok:
            self.chain_state.setText(f"✔ Hash chain intact: {check.checked:,} entries, each following the one before")
            self.chain_state.setStyleSheet("color: #2e7d32")
        else:
            self.chain_state.setText(
                f"✘ Hash chain broken: {check.problem} (checked {check.checked:,} entries before it). "
                "The log was changed outside memlens; restore a backup to compare."
            )
            self.chain_state.setStyleSheet("color: #c62828; font-weight: bold")
        self.chain_checked.emit(check)

    def _chain_failed(self, message: object) -> None:
        self.chain_state.setText(f"Hash chain could not be checked: {message}")
        self.chain_state.setStyleSheet("")

    def _date_edit(self, name: str, accessible: str) -> QtWidgets.QDateTimeEdit:
        edit = QtWidgets.QDateTimeEdit(QtCore.QDateTime.currentDateTime())
        edit.setObjectName(name)
        edit.setAccessibleName(accessible)
        edit.setCalendarPopup(True)
        edit.setDisplayFormat("yyyy-MM-dd HH:mm")
        return edit

    def set_operations(self, operations: list[str]) -> None:
        """Offer these operations in the filter (keeps the current choice)."""
        current = self.operation.currentData()
        self.operation.blockSignals(True)
        self.operation.clear()
        self.operation.addItem("All operations", "")
        for op in operations:
            self.operation.addItem(op, op)
        index = self.operation.findData(current or "")
        self.operation.setCurrentIndex(max(0, index))
        self.operation.blockSignals(False)

    def _date_changed(self) -> None:
        if self.use_since.isChecked() or self.use_until.isChecked():
            self.apply_filter()

    def current_filter(self) -> AuditFilter:
        """The filter the controls describe (a target that is not a number is ignored and said so)."""
        text = self.target.text().strip().lstrip("#")
        target = int(text) if text.isdigit() else None
        self.message.setText("" if not text or target is not None else "The target must be a memory id (a number).")

        def utc(edit: QtWidgets.QDateTimeEdit) -> datetime:
            return datetime.fromtimestamp(edit.dateTime().toSecsSinceEpoch(), tz=timezone.utc)

        return AuditFilter(
            operation=self.operation.currentData() or None,
            target_id=target,
            since=utc(self.since) if self.use_since.isChecked() else None,
            until=utc(self.until) if self.use_until.isChecked() else None,
        )

    def show_in(self, pages: QtWidgets.QStackedWidget, refresher: Refresher | None) -> None:
        """Become the shown page (``refresher`` None: no store open), with the filter applied and anything stale read."""
        pages.setCurrentWidget(self)
        if refresher is not None:
            self.apply_filter()
            refresher.refresh_stale_page()

    def apply_filter(self) -> None:
        """Reload the table with the filter from the controls."""
        wanted = self.current_filter()
        if wanted != self.model.filter or not self.model.rowCount():
            self.model.set_filter(wanted)

    def _loaded(self) -> None:
        if self.table.selectionModel().currentIndex().isValid():
            self._show_current(self.table.selectionModel().currentIndex(), QtCore.QModelIndex())
        elif not self.model.rowCount():
            self.details.setHtml("<p style='color:gray'>No audit entries match.</p>")

    def _show_current(self, current: QtCore.QModelIndex, _previous: QtCore.QModelIndex) -> None:
        entry = self.model.entry_at(current.row()) if current.isValid() else None
        if entry is None:
            self.details.clear()
            return
        targets = ", ".join(f"<a href='memory:{t}'>#{t}</a>" for t in entry.target_ids) or "none"
        self.details.setHtml(
            f"<h4>#{entry.id} {html.escape(entry.operation)} by {html.escape(entry.actor)} at {fmt.audit_time(entry)}</h4>"
            f"<p>{html.escape(fmt.audit_summary(entry))}</p>"
            f"<p><b>Targets:</b> {targets}</p>"
            f"{fmt.details_html(entry.details)}"
            f"<p style='color:gray;font-size:small'>hash {entry.hash[:16]}…</p>"
        )

    def _open_link(self, text: str) -> None:
        kind, _, value = text.partition(":")
        if kind == "memory" and value.isdigit():
            self.target_activated.emit(int(value))

    def _activated(self, index: QtCore.QModelIndex) -> None:
        entry = self.model.entry_at(index.row())
        if entry is not None and entry.target_ids:
            self.target_activated.emit(entry.target_ids[0])
