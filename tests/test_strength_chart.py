"""The strength chart draws what its key says: a labelled "now" line, evenly spaced date ticks, a key listing only
what is drawn, a projection that ends at the TTL, and a threshold line that stays visible at the floor."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from memlens import MemoryStore
from memlens.gui.detail import load_curve
from memlens.gui.qt import QtCharts, QtCore
from memlens.gui.strength_chart import StrengthChart, even_ticks

# The offscreen platform plugin says this whenever a top-level window is shown; it is not about our code.
pytestmark = pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)")

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


@pytest.fixture
def chart(qtbot) -> StrengthChart:
    widget = StrengthChart()
    qtbot.addWidget(widget)
    widget.resize(700, 420)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def _series(chart: StrengthChart) -> dict[str, QtCharts.QAbstractSeries]:
    return {s.name(): s for s in chart.chart.series()}


def _visible_legend_names(chart: StrengthChart) -> list[str]:
    return [m.label() for m in chart.chart.legend().markers() if m.isVisible()]


def _ticks(chart: StrengthChart) -> list[datetime]:
    axis = next(a for a in chart.chart.axes() if isinstance(a, QtCharts.QDateTimeAxis))
    lo, hi, n = axis.min().toMSecsSinceEpoch(), axis.max().toMSecsSinceEpoch(), axis.tickCount()
    return [datetime.fromtimestamp((lo + i * (hi - lo) / (n - 1)) / 1000).astimezone() for i in range(n)]


def test_observation_chart_labels_now_and_spaces_ticks_evenly(chart: StrengthChart, tmp_path: Path, qtbot):
    with MemoryStore.open(tmp_path / "m.db") as store:
        obs = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=NOW - 2 * DAY)
        chart.show_curves([load_curve(store, obs, NOW)])
    qtbot.waitUntil(chart.now_label.isVisible)
    assert chart.now_label.text() == "now"
    assert "now" in _series(chart)
    ticks = _ticks(chart)
    assert len(ticks) >= 3
    steps = {b - a for a, b in itertools.pairwise(ticks)}
    assert len({round(s.total_seconds() / 3600) for s in steps}) == 1, ticks  # one step between every pair of ticks
    step_hours = round(next(iter(steps)).total_seconds() / 3600)
    if step_hours % 24 == 0:
        assert all((t.hour, t.minute) == (0, 0) for t in ticks), ticks  # every tick on a date, not part way through one
    # Nothing in the key that is not drawn: no TTL here.
    assert "TTL" not in chart.key_items
    assert ("crossing" in chart.key_items) == any(n.startswith("fades") for n in _series(chart))


def test_even_ticks_cover_the_range_in_equal_whole_days():
    t_min = datetime(2025, 11, 30, 14, 0).astimezone().timestamp()
    t_max = datetime(2025, 12, 7, 9, 0).astimezone().timestamp()
    start, end, count = even_ticks(t_min, t_max)
    assert start <= t_min and end >= t_max and 3 <= count <= 8
    days = (datetime.fromtimestamp(end).date() - datetime.fromtimestamp(start).date()).days
    assert days % (count - 1) == 0 and datetime.fromtimestamp(start).hour == 0


def test_projection_ends_at_the_ttl_and_the_key_names_it(chart: StrengthChart, tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        fact = store.remember("The payments sandbox key is valid until Friday", ttl_days=3, now=NOW - DAY)
        chart.show_curves([load_curve(store, fact, NOW)])
        ttl = store.get(fact.id).forget_after
    assert ttl is not None
    projected = _series(chart)["projected"]
    assert isinstance(projected, QtCharts.QLineSeries)
    last_x = max(p.x() for p in projected.points())
    assert last_x == pytest.approx(ttl.timestamp() * 1000, abs=1000)
    assert "TTL" in chart.key_items


def test_threshold_is_drawn_over_a_projection_resting_on_it(chart: StrengthChart, tmp_path: Path):
    with MemoryStore.open(tmp_path / "m.db") as store:
        fact = store.remember("The VPN gateway is vpn-3", importance=0.0, now=NOW - 400 * DAY)  # decayed to its floor
        chart.show_curves([load_curve(store, fact, NOW)])
    series = chart.chart.series()
    threshold = next(s for s in series if s.name().startswith("threshold"))
    projected = _series(chart)["projected"]
    assert series.index(threshold) > series.index(projected)  # painted later, so on top
    assert threshold.pen().style() != projected.pen().style()
    assert all(p.y() == pytest.approx(threshold.points()[0].y()) for p in projected.points())  # they do coincide


def test_compare_legend_names_memories_only_and_the_caption_the_shared_lines(chart: StrengthChart, tmp_path: Path, qtbot):
    with MemoryStore.open(tmp_path / "m.db") as store:
        a = store.observe("s1", "Bash", {"command": "ls"}, "ok", now=NOW - 2 * DAY)
        b = store.remember("The user said hello", type="chitchat", now=NOW - DAY)
        chart.show_curves([load_curve(store, a, NOW), load_curve(store, b, NOW)])
    qtbot.waitUntil(lambda: _visible_legend_names(chart) == [f"#{a.id}", f"#{b.id}"], timeout=3000)
    assert "forget threshold 0.10" in chart.key_items and "TTL" not in chart.key_items
    assert chart.chart.legend().isVisible()
    assert chart.now_label.text() == "now"
    assert QtCore.Qt.PenStyle.DotLine == next(s for s in chart.chart.series() if s.name().startswith("threshold")).pen().style()
