"""The time-travel controls: the toolbar's date box and the banner above the pages while a later date is shown."""

from __future__ import annotations

from datetime import datetime, timedelta

from memlens.gui import format as fmt
from memlens.gui.icons import icon
from memlens.gui.operations.time_travel import TRAVEL_CHOICES, closest_choice, forecast
from memlens.gui.qt import QtCore, QtWidgets
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
