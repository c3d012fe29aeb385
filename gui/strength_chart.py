"""The strength curve: past strength with recalls marked, projected decay to the forget threshold, TTL as a line.

Several memories can share one chart (compare mode); each gets its own colour. The data comes from
``MemoryStore.strength_curve`` and ``fades_at`` on the reader thread; this widget only draws.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from memlens.decay import StrengthCurve
from memlens.gui import format as fmt
from memlens.gui.qt import QtCharts, QtCore, QtGui, QtWidgets
from memlens.models import Memory

PALETTE = ("#2f6fb0", "#d9730d", "#2e9d5b", "#b5338a", "#7a5cc4", "#c0392b", "#1b8a99", "#8a6d1b")


@dataclass(frozen=True)
class CurveData:
    """Everything needed to draw one memory's strength."""

    memory: Memory
    curve: StrengthCurve
    fades_at: datetime | None
    threshold: float
    now: datetime


def _ms(ts: float) -> float:
    return ts * 1000.0


#: Tick steps the time axis may use: whole hours under three days, then days and weeks, months, years.
_HOUR_STEPS = (1, 2, 3, 4, 6, 12)
_DAY_STEPS = (1, 2, 3, 7, 14)
_MONTH_STEPS = (1, 2, 3, 6)
_YEAR_STEPS = (1, 2, 5, 10)
_MONTH = 365.2425 / 12 * 86400
_YEAR = 365.2425 * 86400
MAX_TICKS = 8
#: The label format of each kind of step (Qt date format).
TICK_FORMATS = {"hour": "MMM d hh:mm", "day": "MMM d", "month": "MMM yyyy", "year": "yyyy"}


@dataclass(frozen=True)
class TimeAxis:
    """A time axis: its range in epoch seconds, tick count (ticks equally spaced from start to end) and label format."""

    start: float
    end: float
    ticks: int
    format: str

    def labels(self) -> list[str]:
        """The text under each tick."""
        step = (self.end - self.start) / max(1, self.ticks - 1)
        return [QtCore.QDateTime.fromMSecsSinceEpoch(int(_ms(self.start + i * step))).toString(self.format) for i in range(self.ticks)]


def _candidates(t_min: float, span: float) -> list[tuple[str, datetime, float]]:
    """(kind, local start, step in seconds) for every step the axis may use, shortest first. Hours and days start on
    a whole hour or midnight; months start mid-month and years mid-year, so that with a step of an average month (or
    year) every tick stays inside its own month (year) and the labels name each one once."""
    local = datetime.fromtimestamp(t_min).astimezone()
    hour = local.replace(minute=0, second=0, microsecond=0)
    day = hour.replace(hour=0)
    mid_month = day.replace(day=15) if local.day >= 15 else (day.replace(day=1) - timedelta(days=1)).replace(day=15)
    mid_year = day.replace(month=7, day=1) if local.month >= 7 else day.replace(year=local.year - 1, month=7, day=1)
    out: list[tuple[str, datetime, float]] = []
    if span < 3 * 86400:
        out += [("hour", hour, h * 3600.0) for h in _HOUR_STEPS]
    out += [("day", day, d * 86400.0) for d in _DAY_STEPS]
    out += [("month", mid_month, m * _MONTH) for m in _MONTH_STEPS]
    out += [("year", mid_year, y * _YEAR) for y in _YEAR_STEPS]
    return out


def time_axis(t_min: float, t_max: float, max_ticks: int = MAX_TICKS) -> TimeAxis:
    """The axis covering [t_min, t_max] with at most ``max_ticks`` equally spaced ticks, each on a whole hour, a
    midnight, inside its own month or inside its own year, labelled to match ("Mar 2 14:00", "Mar 2", "May 2024",
    "2024"): every label names a different moment, so none repeats ("May … May …")."""
    span = max(t_max - t_min, 3600.0)
    options = _candidates(t_min, span)
    kind, start_dt, step = next(
        (o for o in options if math.ceil((t_max - o[1].timestamp()) / o[2]) <= max(2, max_ticks) - 1), options[-1]
    )
    start = start_dt.timestamp()
    intervals = max(1, math.ceil((t_max - start) / step))
    if kind == "day":
        # Whole days in local time (a DST change makes a day 23 or 25 hours): add days on the calendar, not seconds.
        end = (start_dt + timedelta(days=intervals * step // 86400)).timestamp()
    else:
        end = start + intervals * step
    return TimeAxis(start, end, intervals + 1, TICK_FORMATS[kind])


def even_ticks(t_min: float, t_max: float) -> tuple[float, float, int]:
    """An axis range covering [t_min, t_max] and its tick count, every tick the same distance apart on a whole hour,
    a midnight, a month or a year (:func:`time_axis` with :data:`MAX_TICKS`)."""
    axis = time_axis(t_min, t_max)
    return axis.start, axis.end, axis.ticks


class StrengthChart(QtWidgets.QWidget):
    """A QtCharts view of one or several memories' strength over time."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("strengthChart")
        self.chart = QtCharts.QChart()
        self.chart.setAnimationOptions(QtCharts.QChart.AnimationOption.NoAnimation)
        self.chart.legend().setAlignment(QtCore.Qt.AlignmentFlag.AlignBottom)
        self.chart.setMargins(QtCore.QMargins(4, 4, 4, 4))
        self.view = QtCharts.QChartView(self.chart)
        self.view.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        self.view.setObjectName("strengthChartView")
        self.view.setAccessibleName("Strength curve")
        self.caption = QtWidgets.QLabel()
        self.caption.setObjectName("strengthCaption")
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.caption)
        self.curves: list[CurveData] = []
        #: The label over the "now" line, kept above the plot area's top edge as the chart resizes.
        self.now_label = QtWidgets.QGraphicsSimpleTextItem("now", self.chart)
        self.now_label.setZValue(20)
        self._now_ts: float | None = None
        #: The times the curves span, and the axis laid out for them (its labels are what the ticks read).
        self._span: tuple[float, float] | None = None
        self.axis: TimeAxis | None = None
        self.chart.plotAreaChanged.connect(self._place_now_label)
        self.chart.plotAreaChanged.connect(lambda _area: self._fit_time_axis())
        self.clear()

    def clear(self, message: str = "Select a memory to see its strength over time.") -> None:
        """Show nothing but ``message``."""
        self.curves = []
        self._reset_chart()
        self.chart.setTitle("")
        self.caption.setText(message)

    def _reset_chart(self) -> None:
        self._now_ts = None
        self._span = None
        self.axis = None
        self.now_label.hide()
        self.chart.removeAllSeries()
        for axis in list(self.chart.axes()):
            self.chart.removeAxis(axis)
        self._apply_theme()

    def _apply_theme(self) -> None:
        pal = self.palette()
        self.chart.setBackgroundBrush(pal.color(QtGui.QPalette.ColorRole.Base))
        self.chart.setTitleBrush(pal.color(QtGui.QPalette.ColorRole.Text))
        self.chart.legend().setLabelColor(pal.color(QtGui.QPalette.ColorRole.Text))
        self.now_label.setBrush(pal.color(QtGui.QPalette.ColorRole.Text))

    def _place_now_label(self) -> None:
        if self._now_ts is None or not self.chart.series():
            self.now_label.hide()
            return
        point = self.chart.mapToPosition(QtCore.QPointF(_ms(self._now_ts), 1.0), self.chart.series()[0])
        # Inside the plot area, beside the line's top end: above it, the label touched the chart's edge or title.
        width = self.now_label.boundingRect().width()
        right = point.x() + 3 + width <= self.chart.plotArea().right()
        self.now_label.setPos(point.x() + 3 if right else point.x() - 3 - width, point.y() + 2)
        self.now_label.show()

    def time_axis(self) -> QtCharts.QDateTimeAxis | None:
        """The chart's date axis, if a curve is drawn."""
        return next((a for a in self.chart.axes() if isinstance(a, QtCharts.QDateTimeAxis)), None)

    def _fit_time_axis(self) -> None:
        """Space and label the date ticks for the span shown and the chart's width: as many as fit with their whole
        label and a gap (a narrow compare chart gets fewer ticks, never elided labels like "Fe… Fe…")."""
        x_axis = self.time_axis()
        if x_axis is None or self._span is None:
            return
        metrics = QtGui.QFontMetricsF(x_axis.labelsFont())
        plot_width = self.chart.plotArea().width() or max(100.0, self.view.width() - 60.0)
        max_ticks = MAX_TICKS
        while True:
            axis = time_axis(*self._span, max_ticks)
            widest = max(metrics.horizontalAdvance(label) for label in axis.labels())
            if max_ticks <= 2 or (widest + 16) * (axis.ticks - 1) <= plot_width:
                break
            max_ticks -= 1
        if axis == self.axis:
            return  # laid out already (the plot area moved by a pixel, or a resize changed nothing)
        # The last label is centred on the plot's right edge: leave it half its width of room, or Qt elides it.
        self.chart.setMargins(QtCore.QMargins(4, 4, 4 + math.ceil(widest / 2), 4))
        x_axis.setFormat(axis.format)
        x_axis.setRange(QtCore.QDateTime.fromMSecsSinceEpoch(int(_ms(axis.start))), QtCore.QDateTime.fromMSecsSinceEpoch(int(_ms(axis.end))))
        x_axis.setTickCount(axis.ticks)
        self.axis = axis

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_time_axis()

    def show_curves(self, curves: list[CurveData]) -> None:
        """Draw these memories' curves (one: full detail; several: compared on one chart)."""
        self.curves = list(curves)
        self._reset_chart()
        if not curves:
            self.caption.setText("No strength to show.")
            return
        text = self.palette().color(QtGui.QPalette.ColorRole.Text)
        grid = self.palette().color(QtGui.QPalette.ColorRole.Mid)
        x_axis = QtCharts.QDateTimeAxis()
        x_axis.setFormat("MMM d")
        x_axis.setTickCount(6)
        x_axis.setLabelsColor(text)
        x_axis.setGridLineColor(grid)
        y_axis = QtCharts.QValueAxis()
        y_axis.setRange(0.0, 1.0)
        y_axis.setTickCount(6)
        y_axis.setLabelFormat("%.1f")
        y_axis.setTitleText("strength")
        y_axis.setTitleBrush(text)
        y_axis.setLabelsColor(text)
        y_axis.setGridLineColor(grid)
        self.chart.addAxis(x_axis, QtCore.Qt.AlignmentFlag.AlignBottom)
        self.chart.addAxis(y_axis, QtCore.Qt.AlignmentFlag.AlignLeft)
        single = len(curves) == 1
        t_min = min(float(c.curve.times[0]) for c in curves)
        t_max = max(float(c.curve.times[-1]) for c in curves)
        notes: list[str] = []
        drawn: set[str] = set()
        for n, data in enumerate(curves):
            color = QtGui.QColor(PALETTE[n % len(PALETTE)])
            label = f"#{data.memory.id}" if not single else "strength"
            drawn |= self._add_curve(data, color, label, x_axis, y_axis, single)
            notes.append(self._note(data, single, color))
        threshold = curves[0].threshold
        now = curves[0].now.timestamp()
        if t_min <= now <= t_max:
            self._add_line([(now, 0.0), (now, 1.0)], grid.darker(130), "now", x_axis, y_axis, style=QtCore.Qt.PenStyle.SolidLine, legend=False)
            self._now_ts = now
        # Drawn last, so it lies over a projection that sits on it (knowledge at a floor equal to the threshold),
        # and dotted, so the two stay apart where they meet.
        self._add_line(
            [(t_min, threshold), (t_max, threshold)], QtGui.QColor("#c0392b"), f"threshold {threshold:.2f}", x_axis, y_axis,
            style=QtCore.Qt.PenStyle.DotLine, width=2.0, legend=False,
        )  # fmt: skip
        self._span = (t_min, t_max)
        self._fit_time_axis()
        self.chart.setTitle(f"#{curves[0].memory.id} {curves[0].memory.title}" if single else f"Comparing {len(curves)} memories")
        # One memory: the series are explained in the caption (a legend would not fit a narrow pane). Several: the
        # legend names the memories only; the shared lines are explained in the caption, where nothing is cut off.
        self.chart.legend().setVisible(not single)
        main = PALETTE[0] if single else self.palette().color(QtGui.QPalette.ColorRole.Text).name()
        keys = [f"<span style='color:{main}'>━</span> past strength", f"<span style='color:{main}'>╍</span> projected"]
        if "recall" in drawn:
            keys.append(f"<span style='color:{main}'>●</span> recall")
        keys.append(f"<span style='color:#c0392b'>┈</span> forget threshold {threshold:.2f}")
        if self._now_ts is not None:
            keys.append("┃ now")
        if "crossing" in drawn:
            keys.append("<span style='color:#c0392b'>■</span> crossing")
        if "ttl" in drawn:
            keys.append(f"<span style='color:{'#8e44ad' if single else main}'>╎</span> TTL")
        #: The words of the caption's key, for tests and screen readers.
        self.key_items = [html.unescape(k.split("</span>")[-1]).strip() for k in keys]
        self.caption.setText(" &nbsp; ".join(keys) + "<br>" + "<br>".join(notes))
        self._place_now_label()

    def _note(self, data: CurveData, single: bool, color: QtGui.QColor) -> str:
        m = data.memory
        prefix = "" if single else f"<span style='color:{color.name()}'>■</span> <b>#{m.id}</b> {html.escape(m.title[:60].rstrip())}: "
        if m.pinned:
            return prefix + "pinned - keeps its strength and is never swept."
        if data.fades_at is None:
            note = f"never falls below {data.threshold:.2f} by time alone"
        elif data.fades_at <= data.now:
            note = f"fell below {data.threshold:.2f} on {fmt.when(data.fades_at)}"
        else:
            note = f"falls below {data.threshold:.2f} on <b>{fmt.when(data.fades_at)}</b> ({fmt.relative(data.fades_at, data.now)}) unless recalled"
        if m.forget_after is not None:
            verb = "expired" if m.forget_after <= data.now else "expires"
            note += f"; TTL {verb} {fmt.when(m.forget_after)}"
        recalls = len(data.curve.access_times)
        if recalls:
            note += f"; {recalls} recall{'s' if recalls != 1 else ''} in view"
        return prefix + note + "."

    def _add_curve(
        self,
        data: CurveData,
        color: QtGui.QColor,
        label: str,
        x_axis: QtCharts.QAbstractAxis,
        y_axis: QtCharts.QAbstractAxis,
        single: bool,
    ) -> set[str]:
        """Add one memory's series; returns which optional marks were drawn ("recall", "crossing", "ttl")."""
        drawn: set[str] = set()
        curve = data.curve
        ttl = data.memory.forget_after
        # The projection stops where the TTL ends the memory: past it there is nothing left to decay.
        stop = ttl.timestamp() if ttl is not None else math.inf
        past = QtCharts.QLineSeries()
        future = QtCharts.QLineSeries()
        past.setName(f"{label} (past)" if single else label)
        future.setName("projected")
        last: tuple[float, float] | None = None
        for t, v, is_past in zip(curve.times.tolist(), curve.values.tolist(), curve.past.tolist(), strict=True):
            point = QtCore.QPointF(_ms(t), v)
            if is_past:
                past.append(point)
            else:
                if last is not None and future.count() == 0:
                    future.append(QtCore.QPointF(_ms(last[0]), last[1]))
                if t > stop:
                    if last is not None and last[0] < stop:
                        share = (stop - last[0]) / (t - last[0])
                        future.append(QtCore.QPointF(_ms(stop), last[1] + share * (v - last[1])))
                    break
                future.append(point)
            last = (t, v)
        pen = QtGui.QPen(color, 2.2)
        past.setPen(pen)
        dashed = QtGui.QPen(color, 2.0)
        dashed.setStyle(QtCore.Qt.PenStyle.DashLine)
        future.setPen(dashed)
        for series in (past, future):
            if series.count():
                self.chart.addSeries(series)
                series.attachAxis(x_axis)
                series.attachAxis(y_axis)
        if not single and future.count():
            self.chart.legend().markers(future)[0].setVisible(False)
        if len(curve.access_times):
            recalls = QtCharts.QScatterSeries()
            recalls.setName("recalls" if single else f"{label} recalls")
            recalls.setMarkerSize(9.0)
            recalls.setColor(color)
            recalls.setBorderColor(self.palette().color(QtGui.QPalette.ColorRole.Base))
            for t, v in zip(curve.access_times.tolist(), curve.access_values.tolist(), strict=True):
                recalls.append(QtCore.QPointF(_ms(t), v))
            self.chart.addSeries(recalls)
            recalls.attachAxis(x_axis)
            recalls.attachAxis(y_axis)
            drawn.add("recall")
            if not single:
                self.chart.legend().markers(recalls)[0].setVisible(False)
        t_end = float(curve.times[-1])
        if data.fades_at is not None and float(curve.times[0]) <= data.fades_at.timestamp() <= t_end:
            cross = QtCharts.QScatterSeries()
            cross.setName(f"fades {data.fades_at.astimezone():%b %d}")
            cross.setMarkerShape(QtCharts.QScatterSeries.MarkerShape.MarkerShapeRectangle)
            cross.setMarkerSize(10.0)
            cross.setColor(QtGui.QColor("#c0392b"))
            cross.append(QtCore.QPointF(_ms(data.fades_at.timestamp()), data.threshold))
            self.chart.addSeries(cross)
            cross.attachAxis(x_axis)
            cross.attachAxis(y_axis)
            drawn.add("crossing")
            if not single:
                self.chart.legend().markers(cross)[0].setVisible(False)
        if ttl is not None and float(curve.times[0]) <= ttl.timestamp() <= t_end:
            self._add_line(
                [(ttl.timestamp(), 0.0), (ttl.timestamp(), 1.0)], QtGui.QColor("#8e44ad") if single else color, f"TTL {ttl.astimezone():%b %d}",
                x_axis, y_axis, style=QtCore.Qt.PenStyle.DashLine, legend=False,
            )
            drawn.add("ttl")
        return drawn

    def _add_line(
        self,
        points: list[tuple[float, float]],
        color: QtGui.QColor,
        name: str,
        x_axis: QtCharts.QAbstractAxis,
        y_axis: QtCharts.QAbstractAxis,
        *,
        style: QtCore.Qt.PenStyle,
        width: float = 1.4,
        legend: bool = True,
    ) -> None:
        series = QtCharts.QLineSeries()
        series.setName(name)
        for t, v in points:
            series.append(QtCore.QPointF(_ms(t), v))
        pen = QtGui.QPen(color, width)
        pen.setStyle(style)
        series.setPen(pen)
        self.chart.addSeries(series)
        series.attachAxis(x_axis)
        series.attachAxis(y_axis)
        if not legend:
            self.chart.legend().markers(series)[0].setVisible(False)

    def changeEvent(self, event: QtCore.QEvent) -> None:
        if event.type() == QtCore.QEvent.Type.PaletteChange:
            if self.curves:
                self.show_curves(self.curves)
            else:
                self._apply_theme()
        super().changeEvent(event)
