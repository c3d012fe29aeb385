"""Calibrate & Tidiness: what happened to memories, proposed settings with their effect, and the aggressiveness knob.

The **Calibrate** tab shows memories' fates (recalled, never used, forgotten by a rule, forgotten by hand) by kind and
by initial importance, and the proposals :mod:`memlens.calibrate` makes from them, each with what the sweep would
forget now and in 30 days with and without it. Apply changes the store's settings (audited); Reject drops the
proposal from the list and writes nothing. The **Tidiness** tab is the knob of :mod:`memlens.tidiness`: each
position's settings and what it would forget now and in 30 days, planned before the person applies it.

Everything is read through the store's public API in the background (:func:`load_calibration`); the previews plan
inside a transaction that is always rolled back, so loading runs as a (non-writing) store operation.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlens import calibrate, tidiness
from memlens.calibrate import CalibrationReport, FateCounts, Proposal
from memlens.config import StoreSettings
from memlens.gui.operations import OpChanges, OpHost, StoreOp
from memlens.gui.qt import QtCore, QtWidgets, Signal
from memlens.store import MemoryStore
from memlens.tidiness import PositionPreview

#: Short headers (the tables sit side by side); the tooltips say them in full.
_FATE_HEADS = ("Recalled", "Unused", "By rule", "By hand", "Total")
_FATE_TIPS = ("Still stored and used at least once", "Still stored, never recalled", "Erased by the auto-forget sweep",
              "Erased by a person or an agent (forget)", "Memories in the group")
#: What applying settings changes in the views: strengths, the sweep column, counts and the audit log.
SETTINGS_CHANGES = OpChanges(lists=True, counts=True, strengths=True, audit=True)


@dataclass(frozen=True)
class CalibrationData:
    """Everything the dialog shows, read in one go at ``now``."""

    now: datetime
    report: CalibrationReport
    position: int | None
    previews: list[PositionPreview]


def load_calibration(host: OpHost, *, now: datetime) -> StoreOp[CalibrationData]:
    """The calibration report and the knob's previews at ``now``. Runs as a store operation because previews of other
    decay settings plan inside a rolled-back transaction; it reports no changes."""

    def load(store: MemoryStore, _ctx: Any) -> CalibrationData:
        return CalibrationData(now, calibrate.report(store, now=now), tidiness.position_of(store.settings), tidiness.preview(store, now=now))

    return StoreOp(host, "calibrate", load, title="Could not calibrate")


def apply_proposal(host: OpHost, proposal: Proposal, *, now: datetime) -> StoreOp[StoreSettings]:
    """Apply a calibration proposal (audited with its key)."""
    return StoreOp(host, "configure", lambda store, _ctx: calibrate.apply(store, proposal, now=now), SETTINGS_CHANGES, title="Could not apply the proposal")


def set_tidiness(host: OpHost, position: int, *, now: datetime) -> StoreOp[StoreSettings]:
    """Move the knob to ``position`` (audited)."""
    return StoreOp(host, "configure", lambda store, _ctx: tidiness.apply(store, position, now=now), SETTINGS_CHANGES, title="Could not set tidiness")


def _item(text: str, *, number: bool = False) -> QtWidgets.QTableWidgetItem:
    item = QtWidgets.QTableWidgetItem(text)
    item.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled | QtCore.Qt.ItemFlag.ItemIsSelectable)
    if number:
        item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
    return item


def _table(name: str, accessible: str, first: str) -> QtWidgets.QTableWidget:
    table = QtWidgets.QTableWidget(0, 1 + len(_FATE_HEADS))
    table.setObjectName(name)
    table.setAccessibleName(accessible)
    table.setHorizontalHeaderLabels([first, *_FATE_HEADS])
    table.verticalHeader().hide()
    table.verticalHeader().setDefaultSectionSize(22)
    for column, tip in enumerate(_FATE_TIPS, start=1):
        head = table.horizontalHeaderItem(column)
        if head is not None:
            head.setToolTip(tip)
    table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    for column in range(1 + len(_FATE_HEADS)):
        table.horizontalHeader().setSectionResizeMode(column, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
    return table


def _fill(table: QtWidgets.QTableWidget, groups: dict[str, FateCounts]) -> None:
    rows = [(name, c) for name, c in groups.items() if c.total]
    table.setRowCount(len(rows))
    for r, (name, c) in enumerate(rows):
        table.setItem(r, 0, _item(name))
        for col, value in enumerate((c.recalled, c.never_used, c.forgotten_by_rule, c.forgotten_by_hand, c.total), start=1):
            table.setItem(r, col, _item(str(value), number=True))


class CalibrateDialog(QtWidgets.QDialog):
    """Shows a :class:`CalibrationData`; emits what the person chooses to apply."""

    proposal_applied = Signal(object)  # Proposal
    tidiness_applied = Signal(int)

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("calibrateDialog")
        self.setWindowTitle("Calibrate & Tidiness")
        self.data: CalibrationData | None = None
        self.status = QtWidgets.QLabel("Reading what happened to your memories…")
        self.status.setObjectName("calibrateStatus")
        self.status.setWordWrap(True)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setObjectName("calibrateTabs")
        self.tabs.addTab(self._calibrate_tab(), "Calibrate")
        self.tabs.addTab(self._tidiness_tab(), "Tidiness")
        buttons = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
        buttons.setObjectName("calibrateButtons")
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(buttons)
        self.resize(1000, 660)

    # --- building ---------------------------------------------------------------------------------------------

    def _calibrate_tab(self) -> QtWidgets.QWidget:
        self.kind_table = _table("fatesByKind", "Fates by kind", "Kind")
        self.band_table = _table("fatesByBand", "Fates by initial importance", "Initial importance")
        self.reasons = QtWidgets.QLabel("")
        self.reasons.setObjectName("forgetReasons")
        self.reasons.setWordWrap(True)
        self.proposals = QtWidgets.QListWidget()
        self.proposals.setObjectName("proposalList")
        self.proposals.setAccessibleName("Proposals")
        # A proposal's title is a sentence: wrapped in the list, not cut off behind a horizontal scroll bar.
        self.proposals.setWordWrap(True)
        self.proposals.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        self.proposals.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.proposals.currentRowChanged.connect(self._proposal_selected)
        self.proposal_text = QtWidgets.QTextBrowser()
        self.proposal_text.setObjectName("proposalDetail")
        self.proposal_text.setAccessibleName("Proposal and its effect")
        self.apply_button = QtWidgets.QPushButton("&Apply Proposal")
        self.apply_button.setObjectName("applyProposal")
        self.apply_button.setAccessibleName("Apply proposal")
        self.apply_button.clicked.connect(self._apply_proposal)
        self.reject_button = QtWidgets.QPushButton("&Reject")
        self.reject_button.setObjectName("rejectProposal")
        self.reject_button.setAccessibleName("Reject proposal")
        self.reject_button.setToolTip("Drop this proposal from the list (nothing is written)")
        self.reject_button.clicked.connect(self._reject_proposal)
        tables = QtWidgets.QHBoxLayout()
        tables.addWidget(self.kind_table, 1)
        tables.addWidget(self.band_table, 1)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.proposals, 2)
        side = QtWidgets.QVBoxLayout()
        side.addWidget(self.proposal_text, 1)
        actions = QtWidgets.QHBoxLayout()
        actions.addStretch(1)
        actions.addWidget(self.reject_button)
        actions.addWidget(self.apply_button)
        side.addLayout(actions)
        row.addLayout(side, 3)
        tab = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(tab)
        layout.addLayout(tables, 3)
        layout.addWidget(self.reasons)
        heading = QtWidgets.QLabel("<b>Proposals</b>")
        layout.addWidget(heading)
        layout.addLayout(row, 2)
        self._update_proposal_buttons()
        return tab

    def _tidiness_tab(self) -> QtWidgets.QWidget:
        self.knob = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.knob.setObjectName("tidinessKnob")
        self.knob.setAccessibleName("Tidiness, from keep almost everything to tidy")
        self.knob.setRange(1, len(tidiness.LEVELS))
        self.knob.setPageStep(1)
        self.knob.setTickPosition(QtWidgets.QSlider.TickPosition.TicksBelow)
        self.knob.setValue(tidiness.DEFAULT_POSITION)
        self.knob.valueChanged.connect(self._position_selected)
        ends = QtWidgets.QHBoxLayout()
        ends.addWidget(QtWidgets.QLabel(tidiness.LEVELS[0].name))
        ends.addStretch(1)
        ends.addWidget(QtWidgets.QLabel(tidiness.LEVELS[-1].name))
        self.position_text = QtWidgets.QLabel("")
        self.position_text.setObjectName("tidinessSettings")
        self.position_text.setWordWrap(True)
        self.preview_table = QtWidgets.QTableWidget(len(tidiness.LEVELS), 4)
        self.preview_table.setObjectName("tidinessPreview")
        self.preview_table.setAccessibleName("What each position would forget")
        self.preview_table.setHorizontalHeaderLabels(["Position", "Settings", "Forgets now", "Forgets in 30 days"])
        self.preview_table.verticalHeader().hide()
        self.preview_table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.preview_table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.preview_table.setWordWrap(True)
        header = self.preview_table.horizontalHeader()
        header.setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.Stretch)
        for col in (0, 2, 3):
            header.setSectionResizeMode(col, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        self.preview_table.cellClicked.connect(lambda row, _col: self.knob.setValue(row + 1))
        self.tidiness_button = QtWidgets.QPushButton("Apply &Position")
        self.tidiness_button.setObjectName("applyTidiness")
        self.tidiness_button.setAccessibleName("Apply tidiness position")
        self.tidiness_button.clicked.connect(lambda: self.tidiness_applied.emit(self.knob.value()))
        tab = QtWidgets.QWidget()
        layout = QtWidgets.QVBoxLayout(tab)
        layout.addWidget(self.knob)
        layout.addLayout(ends)
        layout.addWidget(self.position_text)
        note = QtWidgets.QLabel("Each count: what the sweep would forget with that position, beside what it forgets with the settings as they are.")
        note.setWordWrap(True)
        layout.addWidget(note)
        layout.addWidget(self.preview_table, 1)
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.tidiness_button)
        layout.addLayout(buttons)
        self._position_selected(self.knob.value())
        return tab

    # --- showing ----------------------------------------------------------------------------------------------

    def show_data(self, data: CalibrationData) -> None:
        """Show a freshly read report and previews."""
        self.data = data
        report = data.report
        total = report.total
        self.status.setText(
            f"{total.total} memories as of {data.now:%Y-%m-%d %H:%M}: {total.recalled} recalled, {total.never_used} never used, "
            f"{total.forgotten_by_rule} forgotten by a rule, {total.forgotten_by_hand} forgotten by hand."
        )
        _fill(self.kind_table, report.by_kind)
        _fill(self.band_table, report.by_band)
        reasons = ", ".join(f"{why}: {n}" for why, n in report.reasons.items()) or "none yet"
        self.reasons.setText(f"Why forgotten memories went: {html.escape(reasons)}")
        self.proposals.clear()
        for p in report.proposals:
            item = QtWidgets.QListWidgetItem(p.title)
            item.setData(QtCore.Qt.ItemDataRole.UserRole, p.key)
            item.setToolTip(p.reason)
            self.proposals.addItem(item)
        if report.proposals:
            self.proposals.setCurrentRow(0)
        else:
            self.proposal_text.setHtml("<p>No proposals: nothing in these fates argues for other settings (or there are too few memories of a kind to tell).</p>")
        self._update_proposal_buttons()
        self._fill_previews(data)
        self.knob.blockSignals(True)
        self.knob.setValue(data.position or tidiness.DEFAULT_POSITION)
        self.knob.blockSignals(False)
        self._position_selected(self.knob.value())

    def _fill_previews(self, data: CalibrationData) -> None:
        for row, pv in enumerate(data.previews):
            lv = pv.level
            current = " (current)" if lv.position == data.position else ""
            self.preview_table.setItem(row, 0, _item(f"{lv.position} {lv.name}{current}"))
            self.preview_table.setItem(row, 1, _item(lv.settings_text()))
            for col, effect in zip((2, 3), pv.effects, strict=False):
                self.preview_table.setItem(row, col, _item(f"{effect.proposed_total}  (as set: {effect.current_total})", number=True))
        self.preview_table.resizeRowsToContents()

    def show_failure(self, message: str) -> None:
        """Reading failed; the dialog says why."""
        self.status.setText(f"<b>Could not calibrate:</b> {html.escape(message)}")

    def _selected_proposal(self) -> Proposal | None:
        item = self.proposals.currentItem()
        if item is None or self.data is None:
            return None
        return self.data.report.proposal(item.data(QtCore.Qt.ItemDataRole.UserRole))

    def _proposal_selected(self, _row: int) -> None:
        p = self._selected_proposal()
        self._update_proposal_buttons()
        if p is None or self.data is None:
            return
        effects = "".join(f"<li>{html.escape(e.sentence(self.data.now))}</li>" for e in p.effects)
        self.proposal_text.setHtml(f"<p><b>{html.escape(p.title)}</b></p><p>{html.escape(p.reason)}.</p><ul>{effects}</ul>")

    def _update_proposal_buttons(self) -> None:
        has = self.proposals.currentItem() is not None
        self.apply_button.setEnabled(has)
        self.reject_button.setEnabled(has)

    def _apply_proposal(self) -> None:
        p = self._selected_proposal()
        if p is not None:
            self.apply_button.setEnabled(False)
            self.proposal_applied.emit(p)

    def _reject_proposal(self) -> None:
        row = self.proposals.currentRow()
        if row >= 0:
            self.proposals.takeItem(row)
            if self.proposals.count() == 0:
                self.proposal_text.setHtml("<p>No proposals left.</p>")
        self._update_proposal_buttons()

    def _position_selected(self, position: int) -> None:
        lv = tidiness.level(position)
        text = f"<b>{lv.position} · {html.escape(lv.name)}</b>: {html.escape(lv.description)}<br>{html.escape(lv.settings_text())}"
        if self.data is not None:
            pv = self.data.previews[position - 1]
            text += "<br>" + "; ".join(html.escape(e.sentence(self.data.now)) for e in pv.effects)
            self.tidiness_button.setEnabled(position != self.data.position)
        self.position_text.setText(text)
        self.preview_table.selectRow(position - 1)


def open_calibration(host: OpHost, now: datetime, use_store_settings: Callable[[StoreSettings], Any]) -> CalibrateDialog:
    """Open the dialog, read the report and previews at ``now`` in the background, and apply what the person
    chooses (then read again, so the numbers show the new settings)."""
    dialog = CalibrateDialog(host.dialog_parent())

    def reload() -> None:
        load_calibration(host, now=now).success(dialog.show_data).failure(lambda e: dialog.show_failure(str(e))).run_in_background()

    def applied(settings: StoreSettings) -> None:
        use_store_settings(settings)
        reload()

    dialog.proposal_applied.connect(lambda p: apply_proposal(host, p, now=now).success(applied).run_in_background())
    dialog.tidiness_applied.connect(lambda n: set_tidiness(host, n, now=now).success(applied).run_in_background())
    host.open_dialog(dialog)
    reload()
    return dialog
