"""Charts as plain geometry for templates to draw as SVG: served with the page, no library,
and no inline style (the Content-Security-Policy forbids it; shading is a fill-opacity
attribute). Every chart's template also has a table with the same figures."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from leaderboards.boards import Entry, RunBoards
from leaderboards.pairwise import RunPairwise

WIDTH = 640


def _ticks(top: float, count: int = 4) -> list[float]:
    return [top * step / count for step in range(count + 1)]


@dataclass(frozen=True)
class Point:
    label: str
    x: float
    y: float
    y_low: float  # the quality interval's ends, in chart coordinates
    y_high: float
    cost: Decimal
    rate: float
    on_front: bool


@dataclass(frozen=True)
class Tick:
    at: float  # chart coordinate
    text: str


@dataclass(frozen=True)
class Scatter:
    width: int
    height: int
    points: list[Point]
    front: str  # the Pareto front as an SVG polyline's points
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    left: float
    bottom: float
    right: float
    top: float
    left_out: list[str]  # arms not drawn: no quality, or no known cost


def cost_quality(boards: RunBoards) -> Scatter | None:
    """Quality against cost per task, one point per arm with its interval, and the Pareto
    front: the arms no other arm beats on both (cheaper and at least as good). None when no
    arm has both figures (an inference-only run has no quality)."""
    if boards.quality is None:
        return None
    per_task: dict[int, Decimal] = {
        e.arm.arm_id: e.extra["per_task"] for e in boards.cost.entries if e.extra["per_task"]
    }
    drawable = [e for e in boards.quality.entries if e.arm.arm_id in per_task and e.arm.resolved_rate is not None]
    if not drawable:
        return None
    left, right, top, bottom = 70.0, WIDTH - 20.0, 15.0, 245.0
    costs = {e.arm.arm_id: per_task[e.arm.arm_id] for e in drawable}
    span = (max(float(cost) for cost in costs.values()) or 1.0) * 1.1  # all free: any scale will do

    def x(cost: float) -> float:
        return left + (right - left) * cost / span

    def y(rate: float) -> float:
        return bottom - (bottom - top) * rate

    front = _pareto_front([(float(costs[e.arm.arm_id]), e.arm.resolved_rate or 0.0, e) for e in drawable])
    points = [
        Point(
            label=e.arm.shown_label,
            x=x(float(costs[e.arm.arm_id])),
            y=y(e.arm.resolved_rate or 0.0),
            y_low=y(e.arm.ci_low or 0.0),
            y_high=y(e.arm.ci_high or 0.0),
            cost=costs[e.arm.arm_id],
            rate=e.arm.resolved_rate or 0.0,
            on_front=e in front,
        )
        for e in drawable
    ]
    on_front = sorted((p for p in points if p.on_front), key=lambda p: p.x)
    drawn = {e.arm.shown_label for e in drawable}
    return Scatter(
        width=WIDTH,
        height=280,
        points=points,
        front=" ".join(f"{p.x:.1f},{p.y:.1f}" for p in on_front),
        x_ticks=[Tick(x(value), f"${value:.4f}") for value in _ticks(span)],
        y_ticks=[Tick(y(share), f"{share:.0%}") for share in _ticks(1.0)],
        left=left,
        bottom=bottom,
        right=right,
        top=top,
        left_out=[e.arm.shown_label for e in boards.quality.entries if e.arm.shown_label not in drawn],
    )


def _pareto_front(points: list[tuple[float, float, Entry]]) -> list[Entry]:
    """The points no other point dominates: none is at most as dear and strictly better, or
    strictly cheaper and at least as good."""
    return [
        entry
        for cost, rate, entry in points
        if not any(
            (other_cost <= cost and other_rate > rate) or (other_cost < cost and other_rate >= rate)
            for other_cost, other_rate, _ in points
        )
    ]


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    height: float
    share: float
    count: int


@dataclass(frozen=True)
class DistributionRow:
    label: str
    y: float  # the row's baseline
    bars: list[Bar]
    counts: list[int]
    total: int


@dataclass(frozen=True)
class Distribution:
    width: int
    height: int
    left: float
    bar_width: float
    buckets: list[str]  # each bucket's range, for the table
    ticks: list[Tick]  # each bucket's lower edge, for the axis
    rows: list[DistributionRow]
    axis_y: float


def latency_distribution(boards: RunBoards) -> Distribution | None:
    """Per arm, the share of its calls in each latency bucket: one row of bars per arm on the
    same buckets, so the rows compare. None before any call was timed."""
    histograms = [(e.arm.shown_label, e.extra.get("histogram") or []) for e in boards.speed.entries]
    histograms = [(label, counts) for label, counts in histograms if sum(counts)]
    if not histograms:
        return None
    buckets = bucket_names(boards.latency_buckets)
    left, row_height, gap = 150.0, 46.0, 8.0
    bar_width = (WIDTH - left - 10) / len(buckets)
    rows = []
    for index, (label, counts) in enumerate(histograms):
        baseline = (index + 1) * row_height
        total = sum(counts)
        bars = [
            Bar(
                x=left + i * bar_width + 1,
                y=baseline - (row_height - gap) * count / total,
                height=(row_height - gap) * count / total,
                share=count / total,
                count=count,
            )
            for i, count in enumerate(counts)
        ]
        rows.append(DistributionRow(label, baseline, bars, counts, total))
    axis_y = len(rows) * row_height
    return Distribution(
        width=WIDTH,
        height=int(axis_y + 40),
        left=left,
        bar_width=bar_width,
        buckets=buckets,
        ticks=[Tick(left + i * bar_width, _short_ms(low)) for i, low in enumerate((0, *boards.latency_buckets))],
        rows=rows,
        axis_y=axis_y,
    )


def _short_ms(ms: int) -> str:
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms"


def bucket_names(edges: Sequence[int]) -> list[str]:
    bounds = [0, *edges]
    names = [f"{_short_ms(low)}\N{EN DASH}{_short_ms(high)}" for low, high in itertools.pairwise(bounds)]
    return [*names, f"\N{GREATER-THAN OR EQUAL TO}{_short_ms(bounds[-1])}"]


@dataclass(frozen=True)
class HeatCell:
    x: float
    y: float
    size: float
    win_rate: float | None
    opacity: float
    ahead: bool  # the row arm won more than half
    significant: bool
    shared: int


@dataclass(frozen=True)
class Heatmap:
    width: int
    height: int
    left: float
    top: float
    labels: list[tuple[str, float]]  # each arm and the centre of its row (and column)
    cells: list[HeatCell]


def win_rate_heatmap(pairwise: RunPairwise) -> Heatmap | None:
    """Row arm against column arm: blue where the row arm won more than half of the shared
    tasks, red where it lost more, deeper the further from even."""
    count = len(pairwise.labels)
    if count < 2:
        return None
    size, left, top = 44.0, 150.0, 110.0
    cells = []
    for i, row in enumerate(pairwise.matrix):
        for j, cell in enumerate(row):
            rate = cell.win_rate
            cells.append(
                HeatCell(
                    x=left + j * size,
                    y=top + i * size,
                    size=size - 2,
                    win_rate=rate,
                    opacity=0.0 if rate is None else round(min(1.0, abs(rate - 0.5) * 2) * 0.85 + 0.1, 3),
                    ahead=rate is not None and rate > 0.5,
                    significant=cell.significant,
                    shared=cell.shared,
                )
            )
    return Heatmap(
        width=int(left + count * size + 110),  # room for the last column's slanted label
        height=int(top + count * size + 10),
        left=left,
        top=top,
        labels=[(label, index * size + size / 2) for index, label in enumerate(pairwise.labels)],
        cells=cells,
    )
