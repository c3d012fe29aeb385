"""Settings expose the sweep's capacity and grace period; the dark theme's check boxes have a visible outline;
a search snippet is shown so that its first match is inside the cell."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.gui import theme
from memlens.gui.delegates import fit_snippet as first_match_visible
from memlens.gui.dialogs import SettingsDialog
from memlens.gui.main_window import MainWindow
from memlens.gui.qt import QtCore, QtGui, QtWidgets
from memlens.text import SNIPPET_CLOSE, SNIPPET_OPEN

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def test_settings_change_capacity_and_grace_period(qtbot, tmp_path: Path):
    path = tmp_path / "store" / "memory.db"
    with MemoryStore.open(path) as store:
        store.remember("The API lives at https://api.example.com", now=NOW)
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.store_opened, timeout=15000):
        window.open_store(path, create=False)
    qtbot.waitUntil(window.is_idle, timeout=15000)
    window.act_settings.trigger()
    qtbot.waitUntil(lambda: isinstance(window.dialog, SettingsDialog))
    dialog = window.dialog
    grace = dialog.findChild(QtWidgets.QDoubleSpinBox, "settingsGraceHours")
    capacity = dialog.findChild(QtWidgets.QSpinBox, "settingsRule_capacity")
    assert grace is not None and capacity is not None
    assert grace.value() == 1.0 and capacity.value() == 0
    grace.setValue(6.0)
    capacity.setValue(5000)
    with qtbot.waitSignal(window.write_finished, timeout=10000, check_params_cb=lambda name: name == "configure"):
        dialog.findChild(QtWidgets.QPushButton, "settingsSave").click()
    qtbot.waitUntil(window.is_idle, timeout=15000)
    window.close()
    with MemoryStore.open(path, create=False) as store:
        assert store.settings.grace_hours == 6.0 and store.settings.capacity == 5000


@pytest.fixture
def dark_app(qapp):
    old_style, old_palette, old_sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    theme.apply(qapp, "dark")
    yield qapp
    qapp.setStyle(old_style)
    qapp.setPalette(old_palette)
    qapp.setStyleSheet(old_sheet)


def test_dark_check_boxes_have_a_visible_outline(qtbot, dark_app):
    box = QtWidgets.QCheckBox("Pinned")
    qtbot.addWidget(box)
    box.resize(120, 24)
    image = box.grab().toImage()
    option = QtWidgets.QStyleOptionButton()
    box.initStyleOption(option)
    indicator = box.style().subElementRect(QtWidgets.QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    window = box.palette().color(QtGui.QPalette.ColorRole.Window).lightness()
    ratio = image.width() / box.width()
    edge = [
        QtGui.QColor(image.pixel(int(x * ratio), int(indicator.center().y() * ratio))).lightness()
        for x in range(indicator.left(), indicator.left() + 3)
    ]
    assert max(edge) - window >= 60, (edge, window)


def test_the_first_match_of_a_long_snippet_is_inside_the_cell(qapp):
    font = QtGui.QFont(qapp.font())
    words = " ".join(f"word{n}" for n in range(40))
    snippet = f"{words} {SNIPPET_OPEN}kubernetes{SNIPPET_CLOSE} cluster upgrade notes"
    width = 260.0
    shown = first_match_visible(snippet, font, width)
    assert shown.startswith("…") and f"{SNIPPET_OPEN}kubernetes{SNIPPET_CLOSE}" in shown
    end = shown.index(SNIPPET_CLOSE)
    plain = shown[:end].replace(SNIPPET_OPEN, "")
    bold = QtGui.QFont(font)
    bold.setWeight(QtGui.QFont.Weight.DemiBold)
    assert QtGui.QFontMetricsF(bold).horizontalAdvance(plain) <= width
    # Words before the match are kept as far as they fit, and a short snippet is shown whole.
    assert "word39" in shown
    short = f"the {SNIPPET_OPEN}kubernetes{SNIPPET_CLOSE} cluster"
    assert first_match_visible(short, font, width) == short


def test_a_search_over_all_layers_fits_a_1024_window(qtbot, tmp_path: Path):
    from memlens.demo import generate
    from memlens.gui.columns import COLUMNS

    path = tmp_path / "demo" / "memory.db"
    with MemoryStore.open(path, actor="demo") as store:
        generate(store, now=NOW, days=21, seed=7)
    settings = QtCore.QSettings(str(tmp_path / "memlens.gui.ini"), QtCore.QSettings.Format.IniFormat)
    window = MainWindow(settings, clock=lambda: NOW)
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    with qtbot.waitSignal(window.store_opened, timeout=15000):
        window.open_store(path, create=False)
    qtbot.waitUntil(window.is_idle, timeout=15000)
    window.sidebar.select("all")
    window.search_box.setText("staging deploy")
    window.apply_query()
    qtbot.waitUntil(lambda: window.is_idle() and window.model.rowCount() > 0, timeout=15000)
    header = window.table.horizontalHeader()
    widths = {c.key: header.sectionSize(i) for i, c in enumerate(COLUMNS) if not header.isSectionHidden(i)}
    assert {"score", "layer", "sweep"} <= widths.keys()
    assert window.table.horizontalScrollBar().maximum() == 0  # no sideways scrolling
    assert widths["title"] > max(w for k, w in widths.items() if k != "title")
    window.close()


def test_sidebar_makes_room_for_a_big_stores_counts(qtbot):
    from memlens.gui.sidebar import Sidebar

    sidebar = Sidebar()
    qtbot.addWidget(sidebar)
    sidebar.set_counts({"working": 0, "episodic": 9736, "semantic": 158568, "procedural": 29694})
    metrics = sidebar.tree.fontMetrics()
    assert sidebar.count_text("all") == "197,998"
    assert sidebar.minimumWidth() >= metrics.horizontalAdvance("All memories") + metrics.horizontalAdvance("197,998") + 40
