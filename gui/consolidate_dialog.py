"""Consolidation progress and result: runs in the background, can be cancelled, lists what changed.

The report says which method ran (LLM or the built-in deterministic rules) and whether an LLM was configured; every
created, reinforced or superseded memory is listed and opens in the main window on double-click.
"""

from __future__ import annotations

import html

from memlens.consolidate import ConsolidationReport
from memlens.gui.qt import QtCore, QtWidgets, Signal

ID_ROLE = QtCore.Qt.ItemDataRole.UserRole


class ConsolidateDialog(QtWidgets.QDialog):
    """Shows a running consolidation, then its report."""

    cancel_requested = Signal()
    memory_activated = Signal(int)

    def __init__(self, llm_note: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("consolidateDialog")
        self.setWindowTitle("Consolidate")
        self.setModal(False)
        self.heading = QtWidgets.QLabel("Consolidating: summarising sessions into episodes, and episodes into knowledge…")
        self.heading.setObjectName("consolidateHeading")
        self.heading.setWordWrap(True)
        self.llm_label = QtWidgets.QLabel(llm_note)
        self.llm_label.setObjectName("consolidateLlm")
        self.llm_label.setWordWrap(True)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("consolidateProgress")
        self.progress.setRange(0, 0)
        self.step = QtWidgets.QLabel("")
        self.step.setObjectName("consolidateStep")
        self.results = QtWidgets.QTreeWidget()
        self.results.setObjectName("consolidateResults")
        self.results.setAccessibleName("Consolidation results")
        self.results.setHeaderHidden(True)
        self.results.itemDoubleClicked.connect(self._open)
        self.results.itemActivated.connect(self._open)
        self.results.hide()
        self.buttons = QtWidgets.QDialogButtonBox()
        self.cancel_button = self.buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        self.cancel_button.setObjectName("consolidateCancel")
        self.close_button = self.buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Close)
        self.close_button.setObjectName("consolidateClose")
        self.close_button.hide()
        self.cancel_button.clicked.connect(self._cancel)
        self.close_button.clicked.connect(self.accept)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addWidget(self.llm_label)
        layout.addWidget(self.progress)
        layout.addWidget(self.step)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.buttons)
        self.resize(640, 460)

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.step.setText("Cancelling after the current step…")
        self.cancel_requested.emit()

    def set_progress(self, done: int, total: int, text: str) -> None:
        """Show progress (``total`` 0: unknown)."""
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))
        if text:
            self.step.setText(text)

    def show_failure(self, message: str) -> None:
        """The consolidation stopped with an error; nothing it had not committed was written."""
        self.heading.setText("<b>Consolidation failed.</b>")
        self.step.setText(html.escape(message))
        self.step.setWordWrap(True)
        self._finished()

    def show_report(self, report: ConsolidationReport, titles: dict[int, str]) -> None:
        """Show what the consolidation did (``titles`` names the memories), each memory clickable."""
        method = {"llm": "LLM", "deterministic": "deterministic (built-in rules)"}.get(report.method, report.method)
        if report.error:
            state = "Failed - nothing was written"
        elif report.cancelled:
            state = "Cancelled - nothing was written"
        else:
            state = "Done"
        self.heading.setText(f"<b>{state}.</b> Method: <b>{html.escape(method)}</b>.")
        if not report.llm_configured:
            self.llm_label.setText("No LLM is configured (Settings > LLM), so the built-in deterministic method ran.")
        self.step.setText(html.escape(report.error or report.message or ""))
        self.step.setWordWrap(True)
        self.results.clear()
        groups = (
            ("Episodes written", report.episodes),
            ("Facts and workflows created", report.created),
            ("Reinforced", report.reinforced),
            ("Superseded", report.superseded),
        )
        for label, ids in groups:
            parent = QtWidgets.QTreeWidgetItem([f"{label} ({len(ids)})"])
            parent.setData(0, ID_ROLE, 0)  # never leave item data empty: see memlens.gui.qt
            self.results.addTopLevelItem(parent)
            for memory_id in ids:
                title = titles.get(memory_id)
                child = QtWidgets.QTreeWidgetItem([f"#{memory_id} {title}" if title else f"#{memory_id} (no longer stored)"])
                child.setData(0, ID_ROLE, memory_id)
                child.setToolTip(0, "Double-click to open")
                parent.addChild(child)
            parent.setExpanded(True)
        self.results.show()
        self._finished()

    def _finished(self) -> None:
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.cancel_button.hide()
        self.close_button.show()

    def _open(self, item: QtWidgets.QTreeWidgetItem, _column: int = 0) -> None:
        memory_id = item.data(0, ID_ROLE)
        if isinstance(memory_id, int) and memory_id > 0:
            self.memory_activated.emit(memory_id)
