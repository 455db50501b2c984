"""The statistics behind the boards' verdicts, checked against references (issue 13): statsmodels
for Wilson and McNemar, a direct maximum-likelihood fit for Bradley-Terry, draw-by-draw
resampling for the paired bootstrap, and figures that survive shuffling and renaming."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import log_expit
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from leaderboards.stats import (
    PairedVerdict,
    bootstrap_mean_interval,
    bradley_terry,
    ci_aware_ranks,
    mcnemar_exact,
    paired_ranks,
    paired_verdict,
    paired_verdicts,
    pairwise_verdicts,
    wilson_interval,
)

ELO_PER_NATURAL_UNIT = 400 / math.log(10)


def binary_scores(rates: dict[str, float], tasks: int, seed: int) -> dict[str, dict[str, float]]:
    """Per arm, a 0/1 outcome per task, the tasks sharing a difficulty so arms are correlated."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=tasks)
    scores = {}
    for arm, rate in rates.items():
        chance = 1 / (1 + np.exp(difficulty - math.log(rate / (1 - rate))))
        scores[arm] = {f"task-{task}": float(rng.random() < chance[task]) for task in range(tasks)}
    return scores


def repeated_scores(arms: int, tasks: int, repetitions: int, seed: int) -> dict[str, dict[str, float]]:
    """Per arm, the mean over repetitions of a 0/1 outcome per task."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=tasks)
    scores = {}
    for arm in range(arms):
        chance = 1 / (1 + np.exp(difficulty - (arm - arms / 2) / 3))
        outcomes = rng.random((tasks, repetitions)) < chance[:, None]
        scores[f"arm-{arm}"] = {f"task-{task}": float(outcomes[task].mean()) for task in range(tasks)}
    return scores


# --- references: statsmodels ---------------------------------------------------------------


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_interval_equals_statsmodels(confidence):
    for successes, trials in [(0, 1), (1, 1), (0, 30), (7, 30), (15, 30), (30, 30), (123, 500), (1, 1000)]:
        low, high = wilson_interval(successes, trials, confidence)
        reference = proportion_confint(successes, trials, alpha=1 - confidence, method="wilson")
        assert (low, high) == pytest.approx(reference, abs=1e-9)


def test_mcnemar_exact_equals_statsmodels():
    counts = [*((b, c) for b in range(40) for c in range(40)), (300, 250), (1000, 940), (5000, 5100)]
    for b, c in counts:
        reference = mcnemar([[17, b], [c, 23]], exact=True).pvalue
        assert mcnemar_exact(b, c) == pytest.approx(reference, abs=1e-9), (b, c)


def test_paired_verdict_p_value_is_mcnemar_on_the_binary_outcomes():
    scores = binary_scores({"a": 0.6, "b": 0.5}, tasks=200, seed=4)
    a, b = scores["a"], scores["b"]
    table = [[0, 0], [0, 0]]
    for task in a:
        table[int(a[task] == 0)][int(b[task] == 0)] += 1  # row: A right / wrong, column: B

    verdict = paired_verdict(a, b)

    assert (verdict.wins, verdict.losses) == (table[0][1], table[1][0])
    assert verdict.ties == table[0][0] + table[1][1]
    assert verdict.p_value == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-9)


# --- the paired bootstrap ------------------------------------------------------------------


def test_paired_verdict_point_is_the_exact_mean_difference():
    scores = binary_scores({"a": 0.6, "b": 0.5}, tasks=180, seed=1)
    verdict = paired_verdict(scores["a"], scores["b"])
    exact = Fraction(sum(int(scores["a"][t]) - int(scores["b"][t]) for t in scores["a"]), 180)
    assert verdict.mean_difference == float(exact)

    graded = repeated_scores(arms=2, tasks=150, repetitions=3, seed=2)
    a, b = graded["arm-0"], graded["arm-1"]
    exact = sum(Fraction(a[t]) - Fraction(b[t]) for t in a) / 150
    assert paired_verdict(a, b).mean_difference == pytest.approx(float(exact), abs=1e-12)


def test_paired_interval_is_a_percentile_bootstrap_of_the_tasks():
    """Summing draw counts equals resampling draw by draw: each round draws n tasks with
    replacement from the seed, and its mirror image reads every draw from the other end."""
    graded = repeated_scores(arms=2, tasks=120, repetitions=4, seed=3)
    a, b = graded["arm-0"], graded["arm-1"]
    verdict = paired_verdict(a, b, rounds=400, seed=11)

    differences = np.sort([a[t] - b[t] for t in a])
    draws = np.random.default_rng(11).integers(0, 120, size=(400, 120))
    means = np.concatenate([differences[draws].mean(axis=1), differences[119 - draws].mean(axis=1)])
    assert (verdict.ci_low, verdict.ci_high) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])), abs=1e-12)
    # And it is as wide as the normal approximation says it should be.
    half_width = 1.96 * differences.std(ddof=1) / math.sqrt(120)
    assert verdict.ci_high - verdict.ci_low == pytest.approx(2 * half_width, rel=0.15)


def test_paired_interval_is_reproducible_and_contains_the_point():
    scores = repeated_scores(arms=2, tasks=300, repetitions=3, seed=5)
    a, b = scores["arm-0"], scores["arm-1"]

    verdict = paired_verdict(a, b, seed=7)

    assert paired_verdict(a, b, seed=7) == verdict
    assert paired_verdict(a, b, seed=8) != verdict  # the seed is what decides the draws
    assert verdict.ci_low < verdict.mean_difference < verdict.ci_high


def test_pairwise_verdicts_equal_each_pair_asked_alone():
    scores = repeated_scores(arms=4, tasks=90, repetitions=2, seed=6)
    scores["arm-3"] = {task: score for task, score in scores["arm-3"].items() if not task.endswith("7")}

    verdicts = pairwise_verdicts(scores, seed=3)

    assert list(verdicts) == list(combinations(sorted(scores), 2))
    assert {verdict.shared_tasks for verdict in verdicts.values()} == {90, 81}
    for (a, b), verdict in verdicts.items():
        assert verdict == paired_verdict(scores[a], scores[b], seed=3)


def test_a_batch_of_paired_verdicts_equals_each_pair_asked_alone():
    scores = repeated_scores(arms=4, tasks=90, repetitions=2, seed=9)
    scores["arm-2"] = {task: score for task, score in scores["arm-2"].items() if not task.endswith("3")}
    pairs = [("arm-1", "arm-0"), ("arm-2", "arm-1"), ("arm-3", "arm-2"), ("arm-0", "arm-3")]

    verdicts = paired_verdicts([(scores[a], scores[b]) for a, b in pairs], seed=4)

    assert [verdict.shared_tasks for verdict in verdicts] == [90, 81, 81, 90]
    assert verdicts == [paired_verdict(scores[a], scores[b], seed=4) for a, b in pairs]


def test_b_against_a_reads_the_same_verdict_the_other_way_round():
    scores = repeated_scores(arms=2, tasks=200, repetitions=3, seed=8)
    forward = paired_verdict(scores["arm-0"], scores["arm-1"])
    backward = paired_verdict(scores["arm-1"], scores["arm-0"]).flipped()
    assert (forward.wins, forward.ties, forward.losses, forward.p_value) == (
        backward.wins,
        backward.ties,
        backward.losses,
        backward.p_value,
    )
    assert (forward.mean_difference, forward.ci_low, forward.ci_high) == pytest.approx(
        (backward.mean_difference, backward.ci_low, backward.ci_high), abs=1e-12
    )


def test_graded_scores_count_a_higher_score_as_a_win():
    a = {"t1": 2 / 3, "t2": 2 / 3, "t3": 0.1 + 0.2, "t4": 1.0}
    b = {"t1": 1 / 3, "t2": 1.0, "t3": 0.3, "t4": 1.0, "t5": 0.0}
    verdict = paired_verdict(a, b, min_shared_tasks=1)
    # 0.1 + 0.2 is not 0.3 in floating point, but the same score all the same.
    assert (verdict.shared_tasks, verdict.wins, verdict.ties, verdict.losses) == (4, 1, 2, 1)
    assert verdict.p_value == 1.0


# --- sentences -----------------------------------------------------------------------------

ISSUE_EXAMPLE = PairedVerdict(
    shared_tasks=180, wins=30, ties=137, losses=13, p_value=0.004, mean_difference=0.072, ci_low=0.021, ci_high=0.123
)


def test_sentence_says_what_the_issue_asks_for():
    assert ISSUE_EXAMPLE.significant
    assert ISSUE_EXAMPLE.sentence("A", "B") == (
        "A resolves 7.2 points more than B, 95% CI 2.1\N{EN DASH}12.3, p = 0.004, on 180 shared tasks."
    )
    assert ISSUE_EXAMPLE.flipped().sentence("B", "A") == (
        "B resolves 7.2 points less than A, 95% CI 2.1\N{EN DASH}12.3, p = 0.004, on 180 shared tasks."
    )


def test_sentence_without_a_significant_difference_and_another_metric():
    verdict = PairedVerdict(
        shared_tasks=64, wins=9, ties=48, losses=7, p_value=0.8036, mean_difference=0.03125, ci_low=-0.05, ci_high=0.11
    )
    assert not verdict.significant
    assert verdict.sentence("gpt", "claude", verb="answers correctly") == (
        "No significant difference: gpt answers correctly 3.1 points more than claude, "
        "95% CI \N{MINUS SIGN}5.0 to 11.0, p = 0.8, on 64 shared tasks."
    )
    tie = PairedVerdict(
        shared_tasks=40, wins=0, ties=40, losses=0, p_value=1.0, mean_difference=0.0, ci_low=0.0, ci_high=0.0
    )
    assert tie.sentence("A", "B", verb="scores") == (
        "No significant difference: A scores as much as B, 95% CI 0.0\N{EN DASH}0.0, p = 1, on 40 shared tasks."
    )


def test_sentence_with_too_few_or_no_shared_tasks():
    few = paired_verdict({"t1": 1.0, "t2": 1.0, "t3": 1.0}, {"t1": 0.0, "t2": 0.0, "t3": 0.0, "t4": 1.0})
    # Three wins out of three: the bootstrap has no spread, and that is no evidence.
    assert (few.ci_low, few.ci_high) == (1.0, 1.0)
    assert not few.significant
    assert few.sentence("A", "B") == (
        "Too few shared tasks to tell A from B: A resolves 100.0 points more than B on 3 shared tasks, "
        "at least 30 are needed."
    )
    assert paired_verdict({"t1": 1.0}, {"t2": 1.0}).sentence("A", "B") == "A and B have no task in common."
    demanding = replace(ISSUE_EXAMPLE, min_shared_tasks=200)
    assert not demanding.significant and demanding.sentence("A", "B").startswith("Too few shared tasks")


def test_tiny_p_values_are_not_written_as_zero():
    verdict = PairedVerdict(
        shared_tasks=500, wins=300, ties=190, losses=10, p_value=1e-80, mean_difference=0.58, ci_low=0.53, ci_high=0.62
    )
    assert "p < 0.001" in verdict.sentence("A", "B")


# --- Bradley-Terry -------------------------------------------------------------------------


def battles_by_hand(scores: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    """(first, second, first's result) for each task each pair shares: 1 a win, 1/2 a tie."""
    battles = []
    for first, second in combinations(sorted(scores), 2):
        for task in scores[first].keys() & scores[second].keys():
            a, b = scores[first][task], scores[second][task]
            battles.append((first, second, 1.0 if a > b else 0.5 if a == b else 0.0))
    return battles


def direct_maximum_likelihood(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """The plain Bradley-Terry maximum-likelihood fit (no penalty), the first arm held at 0,
    reported on the Elo scale with the arms' mean at 1000."""
    arms = sorted(scores)
    index = {arm: i for i, arm in enumerate(arms)}
    battles = battles_by_hand(scores)
    first = np.array([index[b[0]] for b in battles])
    second = np.array([index[b[1]] for b in battles])
    result = np.array([b[2] for b in battles])

    def minus_log_likelihood(free: np.ndarray) -> tuple[float, np.ndarray]:
        strengths = np.r_[0.0, free]
        gap = strengths[first] - strengths[second]
        value = -(result * log_expit(gap) + (1 - result) * log_expit(-gap)).sum()
        residual = result - 1 / (1 + np.exp(-gap))
        gradient = np.zeros(len(arms))
        np.add.at(gradient, first, -residual)
        np.add.at(gradient, second, residual)
        return value, gradient[1:]

    def hessian(free: np.ndarray) -> np.ndarray:
        gap = np.r_[0.0, free][first] - np.r_[0.0, free][second]
        weight = 1 / (1 + np.exp(-gap)) / (1 + np.exp(gap))
        full = np.zeros((len(arms), len(arms)))
        for i, j, w in zip(first, second, weight, strict=True):
            full[[i, j, i, j], [i, j, j, i]] += [w, w, -w, -w]
        return full[1:, 1:]

    start = np.zeros(len(arms) - 1)
    fit = minimize(minus_log_likelihood, start, jac=True, hess=hessian, method="trust-exact", options={"gtol": 1e-11})
    # Its own stopping rule may give up on rounding noise: what matters is a zero gradient.
    assert np.abs(minus_log_likelihood(fit.x)[1]).max() < 1e-9, fit.message
    elo = np.r_[0.0, fit.x] * ELO_PER_NATURAL_UNIT
    return dict(zip(arms, elo - elo.mean() + 1000, strict=True))


def test_bradley_terry_equals_a_direct_maximum_likelihood_fit():
    scores = repeated_scores(arms=5, tasks=60, repetitions=2, seed=9)
    scores["arm-4"] = {task: score for task, score in scores["arm-4"].items() if task < "task-4"}  # fewer tasks

    ratings = bradley_terry(scores, rounds=200)

    reference = direct_maximum_likelihood(scores)
    for arm, rating in ratings.items():
        assert rating.rating == pytest.approx(reference[arm], abs=1e-6)
        assert rating.ci_low < rating.rating < rating.ci_high
    assert ratings["arm-0"].battles == 3 * 60 + len(scores["arm-4"])


def test_bradley_terry_bootstrap_is_reproducible():
    scores = binary_scores({"a": 0.7, "b": 0.5, "c": 0.4}, tasks=100, seed=10)
    assert bradley_terry(scores, seed=5) == bradley_terry(scores, seed=5)
    assert bradley_terry(scores, seed=5) != bradley_terry(scores, seed=6)


def test_a_clean_sweep_stays_finite_and_leaves_the_others_as_they_were():
    """An arm that wins every battle has no maximum-likelihood rating (it is infinite): the
    ridge parks it far above, and the other arms keep their ratings relative to each other."""
    others = repeated_scores(arms=3, tasks=50, repetitions=2, seed=12)
    sweeping = {task: 2.0 for task in others["arm-0"]}  # above every score the others can have

    ratings = bradley_terry({**others, "sweeper": sweeping}, rounds=200)

    sweeper = ratings["sweeper"]
    assert all(math.isfinite(x) for x in (sweeper.rating, sweeper.ci_low, sweeper.ci_high))
    assert sweeper.rating - max(ratings[arm].rating for arm in others) > 2000
    reference = direct_maximum_likelihood(others)
    gaps = [ratings[a].rating - ratings[b].rating for a, b in combinations(sorted(others), 2)]
    reference_gaps = [reference[a] - reference[b] for a, b in combinations(sorted(others), 2)]
    assert gaps == pytest.approx(reference_gaps, abs=1e-3)
    assert ci_aware_ranks({arm: (r.ci_low, r.ci_high, r.rating) for arm, r in ratings.items()})["sweeper"] == 1


def test_bradley_terry_edge_cases():
    a = {"t1": 1.0, "t2": 0.0}
    assert bradley_terry({}) == {}
    assert bradley_terry({"only": a}) == {"only": None}  # nobody to battle
    assert bradley_terry({"a": a, "elsewhere": {"t9": 1.0}}) == {"a": None, "elsewhere": None}
    ties = bradley_terry({"a": a, "b": dict(a), "c": dict(a)})
    assert {(r.rating, r.ci_low, r.ci_high) for r in ties.values()} == {(1000.0, 1000.0, 1000.0)}
    lonely = bradley_terry({"a": a, "b": {"t1": 0.0, "t2": 1.0}, "elsewhere": {"t9": 1.0}})
    assert lonely["elsewhere"] is None and lonely["a"].battles == 2


# --- ranks ---------------------------------------------------------------------------------


def test_ci_aware_rank_counts_the_arms_significantly_better():
    intervals = {"a": (0.60, 0.80, 0.70), "b": (0.55, 0.75, 0.65), "c": (0.20, 0.50, 0.35), "d": None}
    assert ci_aware_ranks(intervals) == {"a": 1, "b": 1, "c": 3, "d": None}
    assert list(ci_aware_ranks(intervals)) == ["a", "b", "c", "d"]  # best first
    latency = {"fast": (100.0, 120.0, 110.0), "slow": (300.0, 400.0, 350.0), "mid": (110.0, 310.0, 200.0)}
    assert ci_aware_ranks(latency, higher_is_better=False) == {"fast": 1, "mid": 1, "slow": 2}
    assert ci_aware_ranks({"only": (0.1, 0.2, 0.15)}) == {"only": 1}


def test_paired_ranks_count_the_arms_that_beat_it_significantly():
    def verdict(difference: float, low: float, high: float, shared: int = 100) -> PairedVerdict:
        return PairedVerdict(shared, 0, shared, 0, 1.0, difference, low, high)

    verdicts = {
        ("a", "b"): verdict(0.1, 0.05, 0.15),  # a beats b
        ("a", "c"): verdict(0.2, 0.10, 0.30),  # a beats c
        ("b", "c"): verdict(-0.02, -0.06, 0.03),  # no difference
        ("c", "d"): verdict(-0.3, -0.4, -0.2),  # d beats c
        ("a", "d"): verdict(0.01, -0.05, 0.07),
        ("b", "d"): verdict(0.3, 0.2, 0.4, shared=10),  # too few tasks to count
        ("a", "e"): verdict(0.0, 0.0, 0.0, shared=0),
    }
    assert paired_ranks("abcde", verdicts) == {"a": 1, "d": 1, "b": 2, "c": 3, "e": None}


# --- ranking stability ---------------------------------------------------------------------

RATES = {"ant": 0.85, "bee": 0.52, "cat": 0.5, "dog": 0.3, "eel": 0.1}


def figures(scores):
    verdicts = pairwise_verdicts(scores)
    ratings = bradley_terry(scores)
    return verdicts, ratings, board_ranks(scores, verdicts, ratings)


def board_ranks(scores, verdicts, ratings):
    bradley_terry_ranks = ci_aware_ranks({arm: (r.ci_low, r.ci_high, r.rating) for arm, r in ratings.items()})
    return bradley_terry_ranks, paired_ranks(scores, verdicts)


def test_a_known_ranking_is_pinned():
    verdicts, ratings, (by_rating, by_verdicts) = figures(binary_scores(RATES, tasks=200, seed=13))
    assert sorted(ratings, key=lambda arm: -ratings[arm].rating) == list(RATES)
    assert by_rating == {"ant": 1, "bee": 2, "cat": 2, "dog": 4, "eel": 5}
    assert by_verdicts == {"ant": 1, "bee": 2, "cat": 2, "dog": 4, "eel": 5}
    assert verdicts[("bee", "cat")].sentence("bee", "cat").startswith("No significant difference")


def test_shuffling_the_input_changes_no_figure():
    scores = binary_scores(RATES, tasks=200, seed=13)
    shuffler = random.Random(1)
    arms = list(scores)
    shuffler.shuffle(arms)
    shuffled = {}
    for arm in arms:
        tasks = list(scores[arm])
        shuffler.shuffle(tasks)
        shuffled[arm] = {task: scores[arm][task] for task in tasks}
    assert figures(shuffled) == figures(scores)


def test_renaming_tasks_changes_no_figure():
    scores = binary_scores(RATES, tasks=200, seed=13)
    new_names = list(range(200))
    random.Random(2).shuffle(new_names)  # names in a different order from the old ones
    renamed = {
        arm: {new_names[int(task.removeprefix("task-"))]: score for task, score in tasks.items()}
        for arm, tasks in scores.items()
    }
    assert figures(renamed) == figures(scores)


def test_renumbering_arms_changes_no_figure():
    scores = binary_scores(RATES, tasks=200, seed=13)
    numbers = {arm: 100 + 7 * i for i, arm in enumerate(sorted(scores))}  # e.g. other database ids
    verdicts, ratings, ranks = figures(scores)

    renumbered_verdicts, renumbered_ratings, renumbered_ranks = figures({numbers[a]: s for a, s in scores.items()})

    assert renumbered_verdicts == {(numbers[a], numbers[b]): v for (a, b), v in verdicts.items()}
    assert renumbered_ratings == {numbers[arm]: rating for arm, rating in ratings.items()}
    assert renumbered_ranks == tuple({numbers[arm]: rank for arm, rank in board.items()} for board in ranks)


def test_renaming_arms_in_another_order_changes_no_verdict_rating_or_rank():
    """Reversing the arms' order keeps every paired verdict and every rating; only which
    bootstrap draw of the Bradley-Terry fit goes to which pair of arms changes."""
    scores = binary_scores(RATES, tasks=200, seed=13)
    reverse = {arm: f"arm-{5 - i}" for i, arm in enumerate(sorted(scores))}
    verdicts, ratings, ranks = figures(scores)

    renamed_verdicts, renamed_ratings, renamed_ranks = figures({reverse[a]: s for a, s in scores.items()})

    for (a, b), verdict in verdicts.items():
        renamed = renamed_verdicts[(reverse[b], reverse[a])].flipped()
        assert (renamed.wins, renamed.ties, renamed.losses, renamed.p_value) == (
            verdict.wins,
            verdict.ties,
            verdict.losses,
            verdict.p_value,
        )
        assert (renamed.mean_difference, renamed.ci_low, renamed.ci_high) == pytest.approx(
            (verdict.mean_difference, verdict.ci_low, verdict.ci_high), abs=1e-12
        )
    for arm, rating in ratings.items():
        assert renamed_ratings[reverse[arm]].rating == pytest.approx(rating.rating, abs=1e-6)
    assert renamed_ranks == tuple({reverse[arm]: rank for arm, rank in board.items()} for board in ranks)


def test_evaluator_bootstrap_does_not_depend_on_row_order():
    values = [0.2, 0.9, 0.4, 0.4, 0.7, 0.1, 1.0, 0.6, 0.3, 0.8, 0.5, 0.55]
    shuffled = values[:]
    random.Random(3).shuffle(shuffled)
    assert bootstrap_mean_interval(shuffled, seed=4) == bootstrap_mean_interval(values, seed=4)


# --- edge cases ----------------------------------------------------------------------------


def test_no_shared_tasks_one_arm_and_all_ties():
    nothing = paired_verdict({"t1": 1.0}, {"t2": 0.0})
    assert (nothing.shared_tasks, nothing.mean_difference, nothing.ci_low, nothing.p_value) == (0, None, None, 1.0)
    assert not nothing.significant
    assert pairwise_verdicts({"only": {"t1": 1.0}}) == {}
    assert paired_ranks(["a", "b"], pairwise_verdicts({"a": {"t1": 1.0}, "b": {"t2": 1.0}})) == {"a": None, "b": None}

    same = {f"t{i}": i % 2 for i in range(40)}
    ties = paired_verdict(same, dict(same))
    assert (ties.wins, ties.ties, ties.losses, ties.p_value) == (0, 40, 0, 1.0)
    assert (ties.mean_difference, ties.ci_low, ties.ci_high) == (0.0, 0.0, 0.0)
    assert not ties.significant
