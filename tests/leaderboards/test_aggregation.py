from decimal import Decimal

import numpy as np
import pytest
from django.db.models import Count, F, Q, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from experiments.models import Attempt, AttemptStatus, Experiment, Run, RunArm, RunStatus
from leaderboards.aggregation import GroupedTotals, arm_leaderboard, arm_patch_quality, totals_by
from leaderboards.sql import _SqlitePercentile
from leaderboards.stats import wilson_interval
from providers.errors import ErrorCategory
from providers.outcomes import outcome_class


def test_wilson_interval_matches_the_textbook_values():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=1e-4) and high == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 5)[0] == pytest.approx(0.0, abs=1e-12)


def test_sqlite_percentile_matches_postgres_semantics():
    agg = _SqlitePercentile()
    for value in [10, None, 40, 20, 30]:
        agg.step(value, 0.95)
    assert agg.finalize() == pytest.approx(np.percentile([10, 20, 30, 40], 95))
    assert _SqlitePercentile().finalize() is None


@pytest.fixture
def run(experiment):
    return Run.objects.create(org=experiment.org, experiment=experiment, seed=1, status=RunStatus.RUNNING)


def add(run, arm, task, rep, status=AttemptStatus.COMPLETED, resolved=False, latency=None, cost=None, category=""):
    return Attempt.objects.create(
        run=run,
        arm=arm,
        task=task,
        repetition=rep,
        sequence=rep,
        status=status,
        resolved=resolved,
        latency_ms=latency,
        cost_usd=cost,
        error_category=category,
        outcome=outcome_class(status, category),
        queued_at=timezone.now(),
    )


def test_it_aggregates_per_arm_in_sql(run, dataset, django_assert_max_num_queries):
    task = dataset.tasks.first()
    fast = RunArm.objects.create(run=run, label="fast", provider="mock", model_name="a", position=0)
    slow = RunArm.objects.create(run=run, label="slow", provider="mock", model_name="b", position=1)
    latencies = [100, 200, 300, 400, 1000]
    for rep, latency in enumerate(latencies):
        add(run, fast, task, rep, resolved=rep < 4, latency=latency, cost=Decimal("0.01"))
    add(run, slow, task, 0, resolved=True, latency=50, cost=None)
    add(run, slow, task, 1, status=AttemptStatus.FAILED, category=ErrorCategory.TIMEOUT)
    add(run, slow, task, 2, status=AttemptStatus.CANCELLED)
    add(run, slow, task, 3, status=AttemptStatus.FAILED, category=ErrorCategory.SERVER_ERROR)
    with django_assert_max_num_queries(1):
        board = arm_leaderboard(run.attempts.all())
    by_label = {row.label: row for row in board}
    fast_row, slow_row = by_label["fast"], by_label["slow"]
    assert (fast_row.n, fast_row.resolved, fast_row.failed) == (5, 4, 0)
    assert fast_row.resolved_rate == 0.8
    assert (fast_row.ci_low, fast_row.ci_high) == pytest.approx(wilson_interval(4, 5))
    assert fast_row.latency_p50_ms == pytest.approx(300)
    assert fast_row.latency_p95_ms == pytest.approx(np.percentile(latencies, 95))
    assert fast_row.cost_usd == Decimal("0.05")
    assert fast_row.cost_per_resolved_usd == Decimal("0.0125")
    assert fast_row.low_sample
    # Cancelled attempts do not count, nor does the provider's outage: it is shown apart.
    # An unpriced answer makes the cost unknown, not zero.
    assert (slow_row.n, slow_row.resolved, slow_row.failed, slow_row.error_rate) == (2, 1, 1, 0.5)
    assert (slow_row.infrastructure_failed, fast_row.infrastructure_failed) == (1, 0)
    assert slow_row.cost_usd is None and slow_row.cost_per_resolved_usd is None
    assert [row.label for row in board] == ["fast", "slow"]


def test_ties_on_rate_break_on_the_interval_then_on_cost(run, dataset):
    task = dataset.tasks.first()
    cheap = RunArm.objects.create(run=run, label="cheap", provider="mock", model_name="a", position=0)
    dear = RunArm.objects.create(run=run, label="dear", provider="mock", model_name="b", position=1)
    for arm, cost in ((dear, "0.5"), (cheap, "0.1")):
        add(run, arm, task, 0, resolved=True, cost=Decimal(cost))
        add(run, arm, task, 1, resolved=False, cost=Decimal(cost))
    assert [row.label for row in arm_leaderboard(run.attempts.all())] == ["cheap", "dear"]


def test_an_empty_run_has_rows_without_rates(experiment):
    assert isinstance(experiment, Experiment)
    run = Run.objects.create(org=experiment.org, experiment=experiment, seed=1)
    assert arm_leaderboard(run.attempts.all()) == []


def test_patch_quality_rates_count_only_where_the_metric_applies(run, dataset, django_assert_max_num_queries):
    task = dataset.tasks.first()
    arm = RunArm.objects.create(run=run, label="a", provider="mock", model_name="a", position=0)
    now = timezone.now()
    rows = [
        # (patch present, well formed, applied, validated, F2P share, P2P broken, builds, lint clean, lines)
        (True, True, True, True, 1.0, 0, True, True, 4),
        (True, True, True, True, 0.5, 2, False, None, 2),
        (True, False, False, True, None, None, None, None, None),
        (False, False, False, True, None, None, None, None, None),
        (True, True, False, False, None, None, None, None, 6),  # inference only: never validated
    ]
    for rep, (present, formed, applied, validated, f2p, p2p, builds, clean, lines) in enumerate(rows):
        attempt = add(run, arm, task, rep)
        Attempt.objects.filter(pk=attempt.pk).update(
            patch_present=present,
            patch_well_formed=formed,
            patch_applied=applied,
            validated_at=now if validated else None,
            fail_to_pass_fraction=f2p,
            pass_to_pass_regressions=p2p,
            build_ok=builds,
            lint_clean=clean,
            lines_changed=lines,
        )
    add(run, arm, task, 9, status=AttemptStatus.FAILED)  # no answer: in no rate
    with django_assert_max_num_queries(1):
        (row,) = arm_patch_quality(run.attempts.all())
    assert row.answered == 5
    assert row.well_formed_rate == 3 / 4  # of the answers with a patch
    assert row.applied_rate == 2 / 4  # of the validated answers
    assert row.fail_to_pass_mean == 0.75 and row.pass_to_pass_regressions == 2
    assert (row.build_ok_rate, row.lint_clean_rate) == (0.5, 1.0)
    assert row.lines_changed_mean == 4.0


def test_evaluator_scores_need_ten_judged_attempts(run, dataset):
    from evaluation.models import EvaluatorProfile, Verdict
    from leaderboards.aggregation import arm_evaluator_scores
    from leaderboards.stats import bootstrap_mean_interval_from_counts

    task = dataset.tasks.first()
    profile = EvaluatorProfile.objects.create(name="judge", provider="mock", model_name="m")
    many = RunArm.objects.create(run=run, label="many", provider="mock", model_name="a", position=0)
    few = RunArm.objects.create(run=run, label="few", provider="mock", model_name="b", position=1)
    scores = [40, 55, 60, 62, 70, 71, 75, 80, 88, 90, 93]
    for rep, overall in enumerate(scores):
        attempt = add(run, many, task, rep)
        Verdict.objects.create(attempt=attempt, profile=profile, status="judged", overall=overall)
    error = add(run, many, task, 99)
    Verdict.objects.create(attempt=error, profile=profile, status="evaluator_error")
    for rep in range(9):
        Verdict.objects.create(attempt=add(run, few, task, rep), profile=profile, status="judged", overall=50)
    rows = {row.label: row for row in arm_evaluator_scores(Verdict.objects.filter(attempt__run=run))}
    assert rows["many"].mean_overall == pytest.approx(np.mean(scores))
    assert (rows["many"].judged, rows["many"].errors) == (11, 1)
    counts = [scores.count(score) for score in range(101)]
    low, high = bootstrap_mean_interval_from_counts(counts, seed=[run.seed % 2**32, many.position])
    assert (rows["many"].ci_low, rows["many"].ci_high) == (low, high)
    assert min(scores) < low < np.mean(scores) < high < max(scores)
    # About as wide as the normal approximation's 2 * 1.96 standard errors (bootstrap
    # percentile intervals run a little narrower at n = 11).
    normal_width = 2 * 1.96 * np.std(scores, ddof=1) / np.sqrt(len(scores))
    assert 0.7 * normal_width < high - low < 1.1 * normal_width
    assert rows["many"].profile == "judge:v1 (mock)"
    assert rows["few"].insufficient and rows["few"].mean_overall is None and rows["few"].judged == 9


def test_totals_counted_per_group_equal_the_filters_counted_in_sql(run, dataset):
    """GroupedTotals tests each filter on a group's columns in Python: what it counts is what
    Postgres counts with a FILTER per row, NULLs included (Django's SQL counts a NULL under a
    negation as not equal, as Python does, where SQL's own logic would count it unknown)."""
    task = dataset.tasks.first()
    arm = RunArm.objects.create(run=run, label="a", provider="mock", model_name="a", position=0)
    other = RunArm.objects.create(run=run, label="b", provider="mock", model_name="b", position=1)
    for rep, resolved in enumerate([True, False, None, None]):
        add(run, arm, task, rep, resolved=resolved, latency=100 * (rep + 1), cost=Decimal("0.5") if rep else None)
    add(run, arm, task, 4, status=AttemptStatus.FAILED, category=ErrorCategory.TIMEOUT, latency=7)
    add(run, other, task, 0, resolved=None)
    Attempt.objects.filter(run=run, repetition__in=[0, 3]).update(build_ok=True)
    totals = {
        "not_resolved": Count("id", filter=~Q(resolved=True)),
        "resolved_or_unbuilt": Count("id", filter=Q(resolved=True) | Q(build_ok__isnull=True)),
        "unpriced": Count("id", filter=Q(cost_usd__isnull=True)),
        "priced_not_failed": Count("latency_ms", filter=~Q(cost_usd__isnull=True) & ~Q(status__in=["failed"])),
        "latency_not_lost": Sum("latency_ms", filter=~Q(resolved=False)),
        "cost_of_nothing": Sum("cost_usd", filter=Q(status="cancelled")),
        "none_counted": Count("id", filter=Q(status="cancelled")),
        "tokens": Sum(Coalesce("input_tokens", 0), filter=Q(resolved__isnull=False), default=0),
    }
    attempts = Attempt.objects.filter(run=run)
    in_sql = {row.pop("arm_id"): row for row in totals_by(attempts, "arm_id", totals=totals)}

    grouped = GroupedTotals(totals)
    groups: dict[int, list] = {}
    for group in grouped.grouped(attempts, "arm_id"):
        groups.setdefault(group["arm_id"], []).append(group)

    assert {arm_id: grouped.totals(rows) for arm_id, rows in groups.items()} == in_sql
    assert in_sql[arm.pk]["not_resolved"] == 4 and in_sql[arm.pk]["cost_of_nothing"] is None


def test_a_total_counted_per_group_tests_lookups_only():
    with pytest.raises(ValueError, match="latency_ms__gte"):
        GroupedTotals({"slow": Count("id", filter=Q(latency_ms__gte=1000))})
    # A column compared with another would equal no value of a group: refused, not miscounted.
    with pytest.raises(ValueError, match="only lookups of values"):
        GroupedTotals({"same": Count("id", filter=Q(latency_ms=F("first_token_ms")))})
    with pytest.raises(ValueError, match="only lookups of values"):
        GroupedTotals({"either": Count("id", filter=Q(latency_ms__in=[1, F("first_token_ms")]))})
