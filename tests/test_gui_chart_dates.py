"""Strength chart date ticks read true over any span: days, weeks, months ("May 2024"), years; never the same
label twice, never elided in a narrow compare chart, and the "now" label clear of the chart's top edge."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlens.gui.qt import QtGui
from memlens.gui.strength_chart import StrengthChart, time_axis

pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

START = datetime(2023, 5, 3, 9, 0, tzinfo=timezone.utc)


def _labels(span: timedelta, max_ticks: int = 8) -> list[str]:
    return time_axis(START.timestamp(), (START + span).timestamp(), max_ticks).labels()


def test_two_days_ticks_by_hours():
    labels = _labels(timedelta(days=2))
    assert len(set(labels)) == len(labels) >= 3
    assert all(":" in label for label in labels), labels


def test_three_months_ticks_by_days_or_weeks():
    labels = _labels(timedelta(days=91))
    assert len(set(labels)) == len(labels) >= 3
    assert {label.split()[0] for label in labels} >= {"May", "Jun", "Jul"}, labels


def test_three_years_ticks_by_year_and_never_repeats_may():
    labels = _labels(timedelta(days=3 * 365))
    assert len(set(labels)) == len(labels) >= 3, labels
    assert all(label.split()[-1].isdigit() for label in labels), labels  # "Oct 2023" or "2024", each once
    # With fewer ticks allowed (a narrow chart), the ticks are years.
    years = _labels(timedelta(days=3 * 365), 5)
    assert len(set(years)) == len(years) >= 3 and all(label.isdigit() and len(label) == 4 for label in years), years


def test_eighteen_months_name_each_month_with_its_year():
    labels = _labels(timedelta(days=540))
    assert len(set(labels)) == len(labels), labels
    assert all(len(label.split()) == 2 and label.split()[1].isdigit() for label in labels), labels


def test_a_narrow_chart_keeps_whole_labels(qtbot, tmp_path):
    from memlens import MemoryStore
    from memlens.gui.detail import load_curve

    now = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
    chart = StrengthChart()
    qtbot.addWidget(chart)
    chart.resize(300, 260)
    chart.show()
    qtbot.waitExposed(chart)
    with MemoryStore.open(tmp_path / "m.db") as store:
        a = store.remember("fact one about deployments", layer="semantic", now=now - timedelta(days=60))
        b = store.remember("fact two about builds", layer="semantic", now=now - timedelta(days=20))
        chart.show_curves([load_curve(store, m, now) for m in (a, b)])
    qtbot.waitUntil(lambda: chart.chart.plotArea().width() > 0)
    chart._fit_time_axis()
    axis = chart.axis
    assert axis is not None
    labels = axis.labels()
    font = chart.time_axis().labelsFont()
    widest = max(QtGui.QFontMetricsF(font).horizontalAdvance(label) for label in labels)
    gap = chart.chart.plotArea().width() / max(1, axis.ticks - 1)
    assert widest <= gap, (labels, widest, gap)
    assert len(set(labels)) == len(labels)
    if chart.now_label.isVisible():
        assert chart.now_label.pos().y() >= chart.chart.plotArea().top()
