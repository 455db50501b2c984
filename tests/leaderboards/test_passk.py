"""pass@k: the unbiased estimator, and its per-task counts aggregated in SQL."""

from math import comb

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from leaderboards.passk import PassAtK, ks_for, mean_pass_at_k, pass_at_k, run_pass_at_k
from providers.outcomes import SCORED, OutcomeClass
from tests.factories import ArmPlan


def test_the_estimator_gives_the_papers_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - comb(7, 5) / comb(10, 5))  # 1 - 21/252
    assert pass_at_k(10, 3, 5) == pytest.approx(0.9166667, abs=1e-7)
    assert pass_at_k(10, 0, 10) == 0.0 and pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 8, 3) == 1.0  # only 2 failing answers: every draw of 3 holds a pass
    # Not the naive 1 - (1 - c/n)^k, which is biased low.
    assert pass_at_k(10, 3, 5) > 1 - (1 - 0.3) ** 5
    assert pass_at_k(200, 13, 100) == pytest.approx(1 - comb(187, 100) / comb(200, 100))


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 4), (3, 1, 0), (0, 0, 1)])
def test_impossible_counts_are_refused(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_the_ks_shown_are_the_usual_ones_up_to_the_repetitions():
    assert ks_for(1) == [1]
    assert ks_for(3) == [1, 3]
    assert ks_for(10) == [1, 5, 10]
    assert ks_for(12) == [1, 5, 10, 12]
    assert ks_for(100) == [1, 5, 10, 25, 50, 100]


def test_the_mean_is_over_tasks_with_k_answers():
    # Three tasks of 10 answers (3, 0 and 10 passing) and one the platform failed 5 times.
    counts = [(10, 3), (10, 0), (10, 10), (5, 5)]
    one, five, ten = mean_pass_at_k(counts, [1, 5, 10])
    assert one == PassAtK(1, pytest.approx((0.3 + 0 + 1 + 1) / 4), 4)
    assert five == PassAtK(5, pytest.approx((1 - comb(7, 5) / comb(10, 5) + 0 + 1 + 1) / 4), 4)
    assert ten == PassAtK(10, pytest.approx((1 + 0 + 1) / 3), 3)  # the task with 5 answers cannot say
    assert mean_pass_at_k([], [1]) == [PassAtK(1, None, 0)]


def test_a_runs_counts_come_from_one_query_and_match_its_attempts(built_run):
    plans = [
        ArmPlan("a", quality=0.6, latency_ms=100, model_failure_rate=0.1, infrastructure_failure_rate=0.2),
        ArmPlan("b", quality=0.2, latency_ms=100),
    ]
    run, arms = built_run(plans, repetitions=5)
    with CaptureQueriesContext(connection) as queries:
        table = run_pass_at_k(run.attempts.all(), [(arms["b"].pk, "b"), (arms["a"].pk, "a")], 5)
    assert len(queries) == 1
    assert table.ks == [1, 5] and [arm.label for arm in table.arms] == ["b", "a"]
    for arm in table.arms:
        assert arm.figures == mean_pass_at_k(counted_by_hand(run, arms[arm.label]), [1, 5])
    # Arm a lost answers to the platform: those are no samples, so some tasks have fewer than 5.
    a_one, a_five = table.arms[1].figures
    tasks = run.experiment.dataset.tasks.count()
    assert a_one.tasks == tasks and 0 < a_five.tasks < tasks
    assert table.arms[0].figures[1].tasks == tasks


def counted_by_hand(run, arm) -> list[tuple[int, int]]:
    """Each task's (answers the model had its turn at, passing ones), read attempt by attempt."""
    counts: dict[int, list[int]] = {}
    for attempt in run.attempts.filter(arm=arm):
        n_c = counts.setdefault(attempt.task_id, [0, 0])
        if attempt.outcome in SCORED:
            n_c[0] += 1
            n_c[1] += attempt.outcome == OutcomeClass.SUCCESS and attempt.resolved is True
    return [(n, c) for n, c in counts.values() if n]
