"""Chart geometry: the Pareto front, the latency buckets, and charts that have nothing to draw."""

from __future__ import annotations

import random
from decimal import Decimal
from types import SimpleNamespace

from django.template import Context, Template
from django.template.defaultfilters import floatformat

from leaderboards.boards import run_boards
from leaderboards.charts import bucket_names, cost_quality, latency_distribution, win_rate_heatmap
from leaderboards.pairwise import run_pairwise
from leaderboards.summaries import refresh_run_summaries
from leaderboards.templatetags.board_tags import coordinate, latency_bars
from tests.factories import ArmPlan


def boards_of(run):
    refresh_run_summaries(run.pk)
    return run_boards(run, {}, lambda *_: "")


def test_the_pareto_front_holds_the_arms_nothing_beats_on_both(built_run):
    run, _ = built_run(
        [
            ArmPlan("cheap-good", quality=0.9, latency_ms=100, price="0.001"),
            ArmPlan("dear-worse", quality=0.6, latency_ms=100, price="0.005"),  # worse and dearer: dominated
            ArmPlan("cheap-bad", quality=0.1, latency_ms=100, price="0.001"),  # as cheap, worse: dominated
            ArmPlan("unpriced", quality=1.0, latency_ms=100, price=None),  # no known cost: not drawn
        ],
        repetitions=3,
        seed=3,
    )
    scatter = cost_quality(boards_of(run))

    assert scatter is not None
    front = {p.label for p in scatter.points if p.on_front}
    assert front == {"cheap-good"}
    assert scatter.left_out == ["unpriced"]
    good = next(p for p in scatter.points if p.label == "cheap-good")
    assert scatter.front == f"{good.x:.1f},{good.y:.1f}"
    assert all(scatter.left <= p.x <= scatter.right and scatter.top <= p.y <= scatter.bottom for p in scatter.points)


def test_the_latency_distribution_shows_each_arms_share_per_bucket(built_run):
    run, _ = built_run([ArmPlan("fast", 1.0, latency_ms=80), ArmPlan("slow", 1.0, latency_ms=3000)])
    distribution = latency_distribution(boards_of(run))

    rows = {row.label: row for row in distribution.rows}
    assert len(distribution.buckets) == len(rows["fast"].counts) == 11
    assert sum(rows["slow"].counts) == rows["slow"].total == 12
    assert abs(sum(bar.share for bar in rows["fast"].bars) - 1) < 1e-9
    assert rows["fast"].counts.index(max(rows["fast"].counts)) < rows["slow"].counts.index(max(rows["slow"].counts))


def test_bucket_names_read_as_ranges():
    assert bucket_names([100, 1000, 2500]) == ["0ms–100ms", "100ms–1s", "1s–2.5s", "≥2.5s"]


def test_charts_with_nothing_to_draw_are_absent(built_run):
    run, _ = built_run([ArmPlan("solo", 0.5, latency_ms=100)], inference_only=True)
    boards = boards_of(run)
    assert cost_quality(boards) is None  # no quality in an inference-only run
    assert win_rate_heatmap(run_pairwise(run)) is None  # one arm: nothing to compare
    empty, _ = built_run([ArmPlan("down", 0.5, latency_ms=100, infrastructure_failure_rate=1.0)], seed=8)
    assert latency_distribution(boards_of(empty)) is None


def test_equal_arms_share_the_front_and_a_dearer_equal_one_does_not():
    from leaderboards.charts import _pareto_front

    points = [(1.0, 0.5, "a"), (1.0, 0.5, "b"), (2.0, 0.5, "dearer"), (2.0, 0.9, "better"), (0.5, 0.1, "cheapest")]
    assert _pareto_front(points) == ["a", "b", "better", "cheapest"]


def test_a_coordinate_prints_as_floatformat_1_does():
    """The charts' coordinates moved from floatformat:1 to a cheaper filter: the SVG stays
    the same to the character (halves up, from the repr; no "-0.0"; ints get their ".0")."""
    draws = random.Random(31)
    values = [0, 0.0, -0.0, -0.04, -0.05, 0.05, 0.25, 0.35, 1.45, 2.675, -2.675, 12, -7, 1e-7, 123456.75, 638.0]
    values += [draws.uniform(-700, 700) for _ in range(2000)] + [draws.randint(-700, 700) / 20 for _ in range(500)]
    values += [Decimal("0.15"), Decimal("-0.05"), Decimal("3")]
    values += [None, "", "x", float("nan"), float("inf"), -float("inf")]  # what a chart should never get

    for value in values:
        assert coordinate(value) == floatformat(value, 1), value


# What the latency chart's template drew per row before the latency_bars tag drew it.
BARS_AS_A_LOOP = (
    "{% load board_tags %}{% for bar in row.bars %}"
    '<rect class="bar" x="{{ bar.x|coordinate }}" y="{{ bar.y|coordinate }}" '
    'width="{{ latency.bar_width|add:-2|coordinate }}" height="{{ bar.height|coordinate }}">'
    "<title>{{ bar.count }} of {{ row.total }} calls ({{ bar.share|percent }})</title></rect>{% endfor %}"
)


def test_the_latency_bars_print_as_the_template_loop_did():
    """A guard: the tag drawing a row's bars prints what the loop over them printed, to the
    character, whatever the counts (thousands too) and the chart's width."""
    draws = random.Random(7)
    buckets = list(range(100, 1200, 100))
    for arms in (1, 3, 8):
        for _ in range(20):
            histograms = [[draws.choice([0, 1, 7, draws.randint(0, 250_000)]) for _ in range(len(buckets) + 1)]]
            histograms += [[draws.randint(0, 999) for _ in range(len(buckets) + 1)] for _ in range(arms - 1)]
            boards = SimpleNamespace(
                speed=SimpleNamespace(
                    entries=[
                        SimpleNamespace(arm=SimpleNamespace(shown_label=f"arm {n}"), extra={"histogram": h})
                        for n, h in enumerate(histograms)
                    ]
                ),
                latency_buckets=buckets,
            )
            latency = latency_distribution(boards)  # the two fields it reads
            if latency is None:
                continue
            for row in latency.rows:
                loop = Template(BARS_AS_A_LOOP).render(Context({"row": row, "latency": latency}))
                assert latency_bars(row, latency.bar_width) == loop
