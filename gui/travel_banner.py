"""Time travel in the window: the toolbar's date box, the banner above the pages while a later date is shown, and
:class:`TimeTravel`, which moves the shown date."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from memlens.gui import format as fmt
from memlens.gui.icons import icon
from memlens.gui.memory_model import MemoryTableModel
from memlens.gui.operations import WindowHost
from memlens.gui.operations.lifecycle import show_sweep_report
from memlens.gui.operations.time_travel import TIME_MOVED, TRAVEL_CHOICES, closest_choice, forecast, open_time_travel_dialog, preview_at
from memlens.gui.qt import QObject, QtCore, QtWidgets, Signal
from memlens.sweep import SweepReport


def icon_label(name: str) -> QtWidgets.QLabel:
    """A small label showing an icon."""
    label = QtWidgets.QLabel()
    label.setPixmap(icon(name).pixmap(20, 20))
    return label


class TravelCombo(QtWidgets.QComboBox):
    """Now, a few later dates, or "Pick a date…"; each item's data is a timedelta, "now" or "pick"."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeTravel")
        self.setAccessibleName("Time travel")
        self.setToolTip("Preview the store at a later date (read-only)")
        for label, delta in TRAVEL_CHOICES:
            self.addItem(icon("time"), label, delta if delta is not None else "now")
        self.addItem(icon("time"), "Pick a date…", "pick")

    def show_date(self, when: datetime | None, now: datetime) -> None:
        """Show the choice for ``when`` (None: now; a date picked by hand: "Pick a date…") without emitting."""
        self.blockSignals(True)
        if when is None:
            self.setCurrentIndex(0)
        else:
            match = closest_choice(when, now)
            self.setCurrentIndex(match if match is not None else self.count() - 1)
        self.blockSignals(False)

    def offset(self, index: int) -> timedelta | str:
        """The item's offset from now, or "now" or "pick"."""
        data = self.itemData(index)
        return data if isinstance(data, timedelta) else str(data)

    def reload_icons(self) -> None:
        """Take the clock icon again (the theme changed)."""
        for i in range(self.count()):
            self.setItemIcon(i, icon("time"))


class TravelBanner(QtWidgets.QFrame):
    """Says which date is shown and what a sweep then would forget; ``list_button`` lists it, ``back_button`` ends it."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeTravelBanner")
        self.text = QtWidgets.QLabel()
        self.text.setObjectName("timeTravelText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.list_button = QtWidgets.QPushButton("What would be forgotten…")
        self.list_button.setObjectName("timeTravelList")
        self.list_button.setEnabled(False)
        self.back_button = QtWidgets.QPushButton(icon("back"), "Back to now")
        self.back_button.setObjectName("timeTravelBack")
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(icon_label("time"))
        layout.addWidget(self.text, 1)
        layout.addWidget(self.list_button)
        layout.addWidget(self.back_button)
        self.hide()

    def show_previewing(self, when: datetime, now: datetime) -> None:
        """Show the banner for ``when`` while the sweep's forecast is worked out."""
        self.text.setText(f"<b>Previewing {fmt.when(when)}</b> ({fmt.relative(when, now)}), read-only. Working out what will have faded or expired…")
        self.list_button.setEnabled(False)
        self.show()

    def show_forecast(self, when: datetime, now: datetime, report: SweepReport) -> None:
        """Say what a sweep at ``when`` would forget."""
        self.text.setText(
            f"<b>Previewing {fmt.when(when)}</b> ({fmt.relative(when, now)}), read-only: strengths, TTLs and counts "
            f"as they will be; {forecast(report)}."
        )
        self.list_button.setEnabled(bool(report.decisions))


class TravelHost(WindowHost, Protocol):
    """What time travel needs from the window (the main window is one): its shown date, which it sets, the table
    to reload and the store actions to enable or disable."""

    model: MemoryTableModel

    def set_store_actions(self, has_store: bool) -> None:
        """Enable the actions that fit: writing ones only at now."""


class TimeTravel(QObject):
    """Moves the window's shown date (``host.travel``) through the toolbar's ``combo``, the dialog and the
    ``banner``'s buttons, and keeps what a sweep at that date would forget (``report``)."""

    #: Emitted with the new date (None: back at now).
    changed = Signal(object)

    def __init__(self, host: TravelHost, combo: TravelCombo, banner: TravelBanner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host, self.combo, self.banner = host, combo, banner
        self.report: SweepReport | None = None
        combo.activated.connect(self._chosen)
        banner.list_button.clicked.connect(self.show_report)
        banner.back_button.clicked.connect(lambda: self.set_date(None))

    def _chosen(self, index: int) -> None:
        offset = self.combo.offset(index)
        if offset == "pick":
            self.open_dialog()
        elif isinstance(offset, timedelta):
            self.set_date(self.host.clock() + offset)
        else:
            self.set_date(None)

    def open_dialog(self) -> None:
        """Pick a date to preview the store at."""
        open_time_travel_dialog(self.host, self.set_date, self._sync_combo)

    def _sync_combo(self) -> None:
        self.combo.show_date(self.host.travel, self.host.clock())

    def set_date(self, when: datetime | None) -> None:
        """Show the store as it will be at ``when`` (read-only), or back at now with None (or a date not later)."""
        host = self.host
        if when is not None and when <= host.clock():
            when = None
        host.travel = when
        self.report = None
        self._sync_combo()
        host.set_store_actions(host.path is not None)
        if when is None:
            self.banner.hide()
        else:
            self.banner.show_previewing(when, host.clock())
            self._preview(when)
        host.model.reload()
        host.apply_changes(TIME_MOVED)
        self.changed.emit(when)

    def _preview(self, when: datetime) -> None:
        def shown(report: SweepReport) -> None:
            if self.host.travel == when:
                self.report = report
                self.banner.show_forecast(when, self.host.clock(), report)

        preview_at(self.host, when).success(shown).run_in_background()

    def show_report(self) -> None:
        """List what a sweep at the shown date would forget."""
        if self.report is not None and self.host.travel is not None:
            show_sweep_report(self.host, self.report, f"By {fmt.when(self.host.travel)}")
