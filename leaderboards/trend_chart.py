"""The trend over runs as plain geometry for an SVG line chart (as leaderboards/charts.py
draws the others: attributes and classes, no inline style), one line per matched arm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from experiments.models import Run
from leaderboards.charts import WIDTH, Tick
from leaderboards.crossrun import ArmTrend, TrendPoint, in_time_order

SERIES_CLASSES = 8  # app.css colours series-0 .. series-7, then starts again


@dataclass(frozen=True)
class TrendMark:
    point: TrendPoint
    x: float
    y: float
    y_low: float  # the Wilson interval's ends, in chart coordinates
    y_high: float


@dataclass(frozen=True)
class TrendSeries:
    label: str
    css_class: str
    line: str  # an SVG polyline's points
    marks: list[TrendMark]
    legend_y: float


@dataclass(frozen=True)
class TrendChart:
    width: int
    height: int
    left: float
    right: float
    top: float
    bottom: float
    series: list[TrendSeries]
    x_ticks: list[Tick]  # one per run: its short code
    y_ticks: list[Tick]
    legend_x: float


def trend_chart(trends: Sequence[ArmTrend], runs: Sequence[Run]) -> TrendChart | None:
    """Runs evenly spaced in time order along x, rates on y; None when no arm has a point."""
    drawn = [trend for trend in trends if trend.points]
    if not drawn:
        return None
    ordered = in_time_order(runs)
    left, right, top, bottom = 50.0, WIDTH - 190.0, 15.0, 245.0
    if len(ordered) == 1:
        x_of = {ordered[0].pk: (left + right) / 2}
    else:
        step = (right - left) / (len(ordered) - 1)
        x_of = {run.pk: left + step * index for index, run in enumerate(ordered)}

    def y(rate: float) -> float:
        return bottom - (bottom - top) * rate

    series = []
    for index, trend in enumerate(drawn):
        marks = [
            TrendMark(
                point=point,
                x=x_of[point.run.pk],
                y=y(point.rate),
                y_low=y(point.interval[0]) if point.interval else y(point.rate),
                y_high=y(point.interval[1]) if point.interval else y(point.rate),
            )
            for point in trend.points
        ]
        series.append(
            TrendSeries(
                label=trend.arm.label,
                css_class=f"series-{index % SERIES_CLASSES}",
                line=" ".join(f"{mark.x:.1f},{mark.y:.1f}" for mark in marks),
                marks=marks,
                legend_y=top + 8 + 18 * index,
            )
        )
    return TrendChart(
        width=WIDTH,
        height=int(max(bottom + 60, top + 18 * len(series) + 20)),
        left=left,
        right=right,
        top=top,
        bottom=bottom,
        series=series,
        x_ticks=[Tick(x_of[run.pk], str(run.code)[:8]) for run in ordered],
        y_ticks=[Tick(y(share), f"{share:.0%}") for share in (0.0, 0.25, 0.5, 0.75, 1.0)],
        legend_x=right + 24,
    )
