"""The four boards, from summaries: ranks that respect intervals, sorting, low-sample and
not-scored arms, and no quality board for an inference-only run."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from leaderboards.boards import Entry, run_boards, run_page_links, run_page_sorts
from leaderboards.stats import wilson_interval
from leaderboards.summaries import refresh_run_summaries
from tests.factories import ArmPlan

PLANS = [
    ArmPlan("strong", quality=0.9, latency_ms=3000, price="0.004"),
    ArmPlan("close", quality=0.85, latency_ms=2900, price="0.004"),
    ArmPlan("weak", quality=0.1, latency_ms=400, price="0.001"),
]


def links(name: str, sort: str) -> str:
    return f"?{name}={sort}"


def boards_of(run, **sorts):
    refresh_run_summaries(run.pk)
    return run_boards(run, sorts, links)


def labels(entries: list[Entry]) -> list[str]:
    return [e.arm.label for e in entries]


def test_quality_ranks_count_only_arms_significantly_better(built_run):
    run, _ = built_run(PLANS, repetitions=3)  # 36 attempts per arm on 12 tasks

    quality = boards_of(run).quality

    ranks = {e.arm.label: e.rank for e in quality.entries}
    # strong and close overlap: they share rank 1; both lie wholly above weak, which is 3rd.
    assert ranks == {"strong": 1, "close": 1, "weak": 3}
    assert labels(quality.entries)[-1] == "weak"
    strong = next(e for e in quality.entries if e.arm.label == "strong")
    assert strong.interval == pytest.approx(wilson_interval(strong.arm.resolved, strong.arm.n))
    assert strong.low_sample  # 12 scored tasks, under the default minimum of 30


def test_low_sample_flag_follows_the_setting(built_run, settings):
    run, _ = built_run(PLANS[:1])
    settings.PRBENCH_LOW_SAMPLE_MIN = 13
    assert boards_of(run).quality.entries[0].low_sample  # 12 scored tasks < 13
    settings.PRBENCH_LOW_SAMPLE_MIN = 12
    assert not boards_of(run).quality.entries[0].low_sample


def test_an_arm_the_infrastructure_failed_entirely_is_not_scored_and_not_ranked(built_run):
    run, _ = built_run([*PLANS[:2], ArmPlan("down", quality=1.0, latency_ms=100, infrastructure_failure_rate=1.0)])

    boards = boards_of(run)

    down = next(e for e in boards.quality.entries if e.arm.label == "down")
    assert (down.arm.n, down.arm.resolved_rate, down.rank) == (0, None, None)
    assert labels(boards.quality.entries)[-1] == "down"  # never ranked above a scored arm
    reliability = {row["label"]: row for row in boards.reliability}
    assert (reliability["down"]["failed"], reliability["down"]["share"]) == (12, 1.0)
    assert sum(count for _, count in reliability["down"]["causes"]) == 12


def test_speed_and_cost_rank_lower_first_and_unknown_cost_is_unranked(built_run):
    run, _ = built_run([*PLANS, ArmPlan("secret", quality=0.5, latency_ms=100, price=None)], repetitions=3)

    boards = boards_of(run)

    assert labels(boards.speed.entries)[:2] == ["secret", "weak"]
    assert {e.arm.label: e.rank for e in boards.speed.entries}["secret"] == 1
    cost = {e.arm.label: e for e in boards.cost.entries}
    assert cost["weak"].rank == 1 and cost["weak"].extra["per_task"] == Decimal("0.001")
    assert cost["secret"].rank is None and cost["secret"].arm.cost_usd is None  # unknown stays unknown
    assert labels(boards.cost.entries)[-1] == "secret"
    # Every answer costs the same: the interval of the mean has no width.
    assert cost["weak"].interval == pytest.approx((0.001, 0.001))


@pytest.mark.parametrize(
    ("sort", "expected"),
    [
        ("rate", ["weak", "close", "strong"]),
        ("-rate", ["strong", "close", "weak"]),
        ("arm", ["close", "strong", "weak"]),
        ("-arm", ["weak", "strong", "close"]),
        ("nonsense", None),  # an unknown column sorts by rank
    ],
)
def test_a_board_sorts_on_the_column_asked_for(built_run, sort, expected):
    run, _ = built_run(PLANS, repetitions=3)
    quality = boards_of(run, quality=sort).quality
    if expected is None:
        assert quality.sort == "rank" and [e.rank for e in quality.entries] == sorted(e.rank for e in quality.entries)
    else:
        assert labels(quality.entries) == expected and quality.sort == sort


def test_headings_link_to_the_other_direction_of_the_current_sort(built_run):
    run, _ = built_run(PLANS)
    headings = {h.column.key: h for h in boards_of(run, quality="-rate").quality.headings}
    assert (headings["rate"].direction, headings["rate"].url) == ("descending", "?quality=rate")
    assert (headings["n"].direction, headings["n"].url) == ("", "?quality=-n")  # higher first on a first click
    assert headings["arm"].url == "?quality=arm"
    assert headings[""].url == ""  # the interval does not sort


def test_the_run_page_keeps_each_boards_sort_and_other_parameters():
    query = QueryDict("speed_sort=p95&arm=oracle")
    assert run_page_sorts(query) == {"quality": "", "speed": "p95", "cost": "", "evaluator": ""}
    link = run_page_links("/runs/x/", query)("quality", "-rate")
    assert link.startswith("/runs/x/?") and set(link.split("?")[1].split("&")) == {
        "speed_sort=p95",
        "arm=oracle",
        "quality_sort=-rate",
    }


def test_an_inference_only_run_has_no_quality_board(built_run):
    run, _ = built_run(PLANS, inference_only=True)
    boards = boards_of(run)
    assert boards.quality is None
    assert [b.name for b in boards.boards] == ["speed", "cost", "evaluator"]


def test_evaluator_board_ranks_each_profile_apart(built_run):
    run, _ = built_run(PLANS, repetitions=2, verdicts=True)
    evaluator = boards_of(run).evaluator
    assert {e.evaluator.profile for e in evaluator.entries} == {"judge:v1 (mock)"}
    ranks = {e.arm.label: e.rank for e in evaluator.entries}
    assert ranks["strong"] == 1 and ranks["weak"] == 3  # resolved answers are judged higher


def test_boards_read_summaries_not_attempts(built_run):
    def queries_for(run) -> int:
        refresh_run_summaries(run.pk)
        with CaptureQueriesContext(connection) as queries:
            run_boards(run, {}, links)
        return len(queries)

    small, _ = built_run(PLANS[:1], verdicts=True)
    large, _ = built_run(PLANS, repetitions=3, verdicts=True, seed=9)
    assert queries_for(small) == queries_for(large) <= 4  # arms, evaluator summaries, experiment, dataset


def test_the_quality_board_can_leave_out_patches_only_fuzz_applied(built_run, bob):
    from django.urls import reverse

    from tests.conftest import client_for

    run, _ = built_run(PLANS[:1], repetitions=3)
    resolved = list(run.attempts.filter(resolved=True).order_by("sequence")[:5])
    run.attempts.filter(pk__in=[a.pk for a in resolved]).update(apply_method="patch_fuzz")
    refresh_run_summaries(run.pk)

    harness = run_boards(run, {}, links).quality.entries[0].arm
    clean = run_boards(run, {}, links, git_apply_only=True).quality.entries[0].arm

    assert clean.resolved == harness.resolved - 5 and clean.n == harness.n
    page = client_for(bob).get(reverse("experiments:run", args=[run.code]), {"apply": "git"}).content.decode()
    assert "Counting only patches <code>git apply</code> took cleanly: 5 that only" in page
    assert f"{clean.resolved_rate * 100:.1f}%" in page
    default = client_for(bob).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert "5 patches applied only with <code>patch --fuzz=5</code>" in default
