"""Statistics on aggregated numbers (never on raw attempt rows).

Every function takes plain numbers (per-arm, per-task scores the boards aggregated in SQL) and
is deterministic for a seed. None depends on the order its inputs arrive in, on attempt ids or
on task names: per-task figures are sorted by value before anything is resampled, so renaming
or shuffling tasks changes no figure. Arms are laid out in the order of their keys, which only
decides which bootstrap draw of the Bradley-Terry fit goes to which pair of arms.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit, ndtri
from scipy.stats import binom, bootstrap, nct
from scipy.stats import t as t_distribution

LOW_SAMPLE = 30  # below this many attempts (or shared tasks) an interval is too wide to rank on


class _Sortable(Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


ArmKey = TypeVar("ArmKey", bound=_Sortable)
TaskKey = TypeVar("TaskKey", bound=Hashable)


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """The Wilson score interval, as ``binomtest(...).proportion_ci(method="wilson")`` gives it
    (Newcombe's formula, scipy's own): written out because binomtest also computes an exact
    p-value nobody reads here, a pmf sum that took 4 ms of every board's 5 ms per arm."""
    if trials == 0:
        return None
    z = float(ndtri(0.5 + 0.5 * confidence))
    p = successes / trials
    denominator = 2 * (trials + z**2)
    center = (2 * trials * p + z**2) / denominator
    delta = z / denominator * math.sqrt(4 * trials * p * (1 - p) + z**2)
    low = 0.0 if successes == 0 else center - delta
    high = 1.0 if successes == trials else center + delta
    return low, high


MIN_JUDGED = 10  # below this many judged attempts an evaluator mean is not shown
BOOTSTRAP_RESAMPLES = 2000


def bootstrap_mean_interval(values: list[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of the mean, seeded so a page shows the same interval twice."""
    if len(set(values)) == 1:  # no spread: the interval is the value (scipy would warn)
        return float(values[0]), float(values[0])
    result = bootstrap(
        (np.sort(np.asarray(values, dtype=float)),),  # sorted: the order rows come back in must not matter
        np.mean,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value on the discordant pairs (b: A right and B wrong, c: the
    reverse), as statsmodels' `mcnemar(exact=True)`."""
    return float(_mcnemar_exact(np.array([b]), np.array([c]))[0])


def _mcnemar_exact(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # Twice the smaller tail of Binomial(b + c, 1/2), capped at 1: what binomtest's two-sided
    # test gives at p = 1/2 (the distribution is symmetric), in one call for every pair; one
    # binomtest per pair costs more than the rest of the 45 verdicts of 10 arms together.
    # No discordant pair gives 1.
    return np.minimum(1.0, 2 * binom.cdf(np.minimum(b, c), b + c, 0.5))


# Per-task scores closer than this are a tie: the same counts averaged in another order can
# differ in the last bit.
TIE_TOLERANCE = 1e-9
DETECTION_POWER = 0.8  # the chance a real difference of the minimum detectable size is found


def minimum_detectable_difference(
    differences: Sequence[float], confidence: float = 0.95, power: float = DETECTION_POWER
) -> float | None:
    """The smallest mean per-task difference (a share: 0.1 is 10 points) a two-sided paired
    test at ``1 - confidence`` finds with probability ``power`` on this many tasks: the
    t-test's standardised effect (solved from the noncentral t, as statsmodels' TTestPower
    does) times the standard deviation of the differences observed, or 1, the largest two
    shares' difference can have, when they do not vary. None below two tasks."""
    n = len(differences)
    if n < 2:
        return None
    spread = float(np.std(differences, ddof=1)) or 1.0
    alpha, df = 1 - confidence, n - 1
    critical = t_distribution.ppf(1 - alpha / 2, df)

    def shortfall(effect: float) -> float:
        noncentrality = effect * math.sqrt(n)
        found = float(nct.sf(critical, df, noncentrality) + nct.cdf(-critical, df, noncentrality))
        return (1.0 if math.isnan(found) else found) - power  # NaN: scipy's tail far past any doubt

    return float(brentq(shortfall, 1e-9, 100.0)) * spread


PAIRED_RESAMPLES = 1000


@dataclass(frozen=True)
class PairedVerdict:
    """Arm A against arm B on the task instances both have a score for (a score in [0, 1] per
    task: a binary success, its mean over repetitions, an accuracy or an evaluator score).

    wins/ties/losses count the tasks where A's score is above, equal to or below B's.
    `p_value` is McNemar's exact test with the wins and losses as the discordant pairs. With
    binary outcomes that is McNemar's test itself; with repetitions or graded scores it is the
    exact sign test on the tasks where the arms differ (no rounding of 2/3 to "right": a task
    where A scores 2/3 and B 1/3 is a win for A, 2/3 against 1 a loss).
    `mean_difference` is the mean of A - B per task, with a paired percentile bootstrap interval
    (tasks resampled with replacement); all three are None without a shared task.
    """

    shared_tasks: int
    wins: int
    ties: int
    losses: int
    p_value: float
    mean_difference: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95
    min_shared_tasks: int = LOW_SAMPLE

    @property
    def enough_tasks(self) -> bool:
        return self.shared_tasks >= self.min_shared_tasks

    @property
    def significant(self) -> bool:
        """The interval excludes 0, on enough shared tasks: on a handful of tasks the
        percentile bootstrap has almost no spread (3 wins out of 3 give the interval [1, 1])."""
        if not self.enough_tasks or self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 0 or self.ci_high < 0

    def flipped(self) -> PairedVerdict:
        """The same verdict read from B's side."""
        return PairedVerdict(
            shared_tasks=self.shared_tasks,
            wins=self.losses,
            ties=self.ties,
            losses=self.wins,
            p_value=self.p_value,
            mean_difference=None if self.mean_difference is None else -self.mean_difference,
            ci_low=None if self.ci_high is None else -self.ci_high,
            ci_high=None if self.ci_low is None else -self.ci_low,
            confidence=self.confidence,
            min_shared_tasks=self.min_shared_tasks,
        )

    def sentence(self, a: str, b: str, verb: str = "resolves") -> str:
        """The verdict in words, e.g. "A resolves 7.2 points more than B, 95% CI 2.1-12.3,
        p = 0.004, on 180 shared tasks" (an en dash in the interval). `verb` names the metric
        ("resolves", "answers correctly", "scores"); a point is a hundredth of the score's range."""
        if self.mean_difference is None or self.ci_low is None or self.ci_high is None:
            return f"{a} and {b} have no task in common."
        difference, low, high = self.mean_difference, self.ci_low, self.ci_high
        if difference < 0:  # say how much less, with the interval of the shortfall
            difference, low, high = -difference, -high, -low
        direction = "more" if self.mean_difference > 0 else "less"
        if _points(difference) == "0.0":
            comparison = f"{a} {verb} as much as {b}"
        else:
            comparison = f"{a} {verb} {_points(difference)} points {direction} than {b}"
        if not self.enough_tasks:
            return (
                f"Too few shared tasks to tell {a} from {b}: {comparison} on {self.shared_tasks} "
                f"shared tasks, at least {self.min_shared_tasks} are needed."
            )
        figures = (
            f"{self.confidence:.0%} CI {_interval(low, high)}, {_p_value(self.p_value)}, "
            f"on {self.shared_tasks} shared tasks"
        )
        if self.significant:
            return f"{comparison}, {figures}."
        return f"No significant difference: {comparison}, {figures}."


def _points(share: float) -> str:
    return f"{share * 100:.1f}".replace("-", "\N{MINUS SIGN}")


def _interval(low: float, high: float) -> str:
    if low >= 0:
        return f"{_points(low)}\N{EN DASH}{_points(high)}"
    return f"{_points(low)} to {_points(high)}"  # a dash between signed numbers reads as a minus


def _p_value(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def paired_verdict(
    a_scores: Mapping[TaskKey, float],
    b_scores: Mapping[TaskKey, float],
    *,
    rounds: int = PAIRED_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_shared_tasks: int = LOW_SAMPLE,
) -> PairedVerdict:
    """A (first) against B on the tasks both scored; see PairedVerdict. The interval comes from
    `rounds` resamples of the tasks and their mirror images (2 * rounds resampled means)."""
    differences = _shared_differences(_score_matrix([a_scores, b_scores]), 0, 1)
    return _verdicts([differences], rounds, seed, confidence, min_shared_tasks)[0]


def paired_verdicts(
    pairs: Sequence[tuple[Mapping[TaskKey, float], Mapping[TaskKey, float]]],
    *,
    rounds: int = PAIRED_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_shared_tasks: int = LOW_SAMPLE,
) -> list[PairedVerdict]:
    """`paired_verdict` of each (A, B) pair with the same seed, in one go: pairs with as many
    shared tasks share one set of resampling draws, drawn once (a trend over 20 runs of 8 arms
    asks 152 verdicts, and drawing 1,000 rounds of 2,000 tasks costs more than using them)."""
    differences = [_shared_differences(_score_matrix([a, b]), 0, 1) for a, b in pairs]
    return _verdicts(differences, rounds, seed, confidence, min_shared_tasks)


def pairwise_verdicts(
    scores_by_arm: Mapping[ArmKey, Mapping[TaskKey, float]],
    *,
    rounds: int = PAIRED_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    min_shared_tasks: int = LOW_SAMPLE,
) -> dict[tuple[ArmKey, ArmKey], PairedVerdict]:
    """A verdict for every pair of arms, keyed (A, B) with A's key before B's (`flipped()`
    reads one from B's side). Equal to `paired_verdict` on each pair with the same seed."""
    arms = sorted(scores_by_arm)
    matrix = _score_matrix([scores_by_arm[arm] for arm in arms])
    pairs = list(itertools.combinations(range(len(arms)), 2))
    differences = [_shared_differences(matrix, a, b) for a, b in pairs]
    verdicts = _verdicts(differences, rounds, seed, confidence, min_shared_tasks)
    return {(arms[a], arms[b]): verdict for (a, b), verdict in zip(pairs, verdicts, strict=True)}


def _score_matrix(scores_by_arm: Sequence[Mapping[TaskKey, float]]) -> np.ndarray:
    """One row per arm, one column per task any arm has (in no particular order: whatever
    reads it sorts what it takes), NaN where an arm has no score."""
    tasks = {task: column for column, task in enumerate(set().union(*scores_by_arm))}
    matrix = np.full((len(scores_by_arm), len(tasks)), np.nan)
    for row, scores in enumerate(scores_by_arm):
        matrix[row, [tasks[task] for task in scores]] = list(scores.values())
    return matrix


def _shared_differences(matrix: np.ndarray, a: int, b: int) -> np.ndarray:
    """Row a minus row b on each task both have, sorted: what follows depends on the values
    alone, not on task names or the order the tasks came in."""
    differences = matrix[a] - matrix[b]
    differences = differences[~np.isnan(differences)]
    differences[np.abs(differences) <= TIE_TOLERANCE] = 0.0
    differences.sort()
    return differences


def _verdicts(
    differences: Sequence[np.ndarray], rounds: int, seed: int, confidence: float, min_shared_tasks: int
) -> list[PairedVerdict]:
    wins = np.array([(pair > 0).sum() for pair in differences], dtype=int)
    losses = np.array([(pair < 0).sum() for pair in differences], dtype=int)
    p_values = _mcnemar_exact(wins, losses)
    resamples: dict[int, np.ndarray] = {}
    verdicts = []
    for index, pair in enumerate(differences):
        n = len(pair)
        mean = low = high = None
        if n:
            if n not in resamples:
                resamples[n] = _resample_counts(n, rounds, seed)
            mean = float(pair.mean())
            low, high = (
                float(bound) for bound in np.quantile(_resampled_means(pair, resamples[n]), _tails(confidence))
            )
        verdicts.append(
            PairedVerdict(
                shared_tasks=n,
                wins=int(wins[index]),
                ties=n - int(wins[index]) - int(losses[index]),
                losses=int(losses[index]),
                p_value=float(p_values[index]),
                mean_difference=mean,
                ci_low=low,
                ci_high=high,
                confidence=confidence,
                min_shared_tasks=min_shared_tasks,
            )
        )
    return verdicts


def _resample_counts(n: int, rounds: int, seed: int) -> np.ndarray:
    """For each round of resampling n tasks with replacement, how many times each position was
    drawn. Every pair with n shared tasks uses the same draws, so a pair's interval does not
    depend on which other pairs were asked."""
    draws = np.random.default_rng(seed).integers(0, n, size=(rounds, n))
    per_position = np.bincount((draws + n * np.arange(rounds)[:, None]).ravel(), minlength=rounds * n)
    return per_position.reshape(rounds, n).astype(float)


def _resampled_means(differences: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The mean of each round's resample of the sorted differences, and of its mirror image
    (each draw of position i read as a draw of position n - 1 - i: Hall's antithetic
    resampling, 1989). With the mirrors, B against A resamples exactly the negated means of A
    against B, so the two read the same interval the other way round. (einsum, not a matrix
    product: BLAS may split the sums differently from one machine's threads to another's.)"""
    sums = [np.einsum("rn,n->r", counts, differences), np.einsum("rn,n->r", counts, differences[::-1])]
    return np.concatenate(sums) / len(differences)


def _tails(confidence: float) -> list[float]:
    return [(1 - confidence) / 2, (1 + confidence) / 2]


# FastChat's Elo scale: a 400-point gap means 10 to 1 odds of winning.
ELO_SCALE, ELO_BASE, ELO_MEAN = 400.0, 10.0, 1000.0
BRADLEY_TERRY_RESAMPLES = 1000
# A clean sweep has no maximum-likelihood rating: the likelihood keeps rising as the winner's
# rating goes to infinity. As sklearn's LogisticRegression does with its L2 penalty (here
# C = 1e8), a ridge on the strengths keeps every fit finite. So small a ridge moves the rating
# of an arm with any loss or tie by far less than 1e-6 points, and leaves a clean sweep a few
# thousand points ahead (the penalty only bites once the odds reach about n / 1e-8 for n
# battles), where the bootstrap cannot move it: a board should show such an arm with its
# battle count and low-sample flag rather than trust its interval.
BRADLEY_TERRY_RIDGE = 1e-8
NEWTON_STEPS = 100
NEWTON_TOLERANCE = 1e-10
STEP_HALVINGS = 30


@dataclass(frozen=True)
class ArmRating:
    """An arm's Bradley-Terry rating on the Elo scale (the mean of the arms rated is 1000),
    its bootstrap interval, and the battles it took part in."""

    rating: float
    ci_low: float
    ci_high: float
    battles: int


def bradley_terry(
    scores_by_arm: Mapping[ArmKey, Mapping[TaskKey, float]],
    *,
    rounds: int = BRADLEY_TERRY_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[ArmKey, ArmRating | None]:
    """Bradley-Terry ratings over all arms, FastChat's method: each task two arms share is a
    battle between them (the higher score wins; equal scores are a tie, half a win to each
    side), the maximum-likelihood fit of all battles on the Elo scale, and a percentile
    interval from refitting on the battles resampled with replacement (seeded). An arm
    without a battle (a lone arm, or one that shares no task) is None.

    Ratings compare arms linked by battles; arms in groups that never met each other are
    centred group by group and cannot be compared across groups. The fit is a Newton
    iteration run on the data and every bootstrap round at once (one sklearn fit per round,
    as FastChat does, takes about a hundred times longer); the tests check it against a
    direct maximum-likelihood fit.
    """
    arms = sorted(scores_by_arm)
    matrix = _score_matrix([scores_by_arm[arm] for arm in arms])
    pairs, outcomes = _battles(matrix)
    battles = np.zeros(len(arms), dtype=int)
    np.add.at(battles, pairs, outcomes.sum(axis=1, keepdims=True))
    ratings: dict[ArmKey, ArmRating | None] = dict.fromkeys(arms)
    rated = np.flatnonzero(battles)
    if not len(rated):
        return ratings
    position = np.zeros(len(arms), dtype=int)
    position[rated] = np.arange(len(rated))
    pairs = position[pairs]
    counts = outcomes.ravel()
    drawn = np.random.default_rng(seed).multinomial(counts.sum(), counts / counts.sum(), size=rounds)
    samples = np.concatenate([outcomes[None], drawn.reshape(rounds, *outcomes.shape)])  # the data first
    elo = ELO_MEAN + ELO_SCALE * _fit_strengths(samples, pairs, len(rated)) / np.log(ELO_BASE)
    resampled = elo[1:]
    resampled[_battle_counts(samples[1:], pairs, len(rated)) == 0] = np.nan  # drew none of its battles
    low, high = np.nanquantile(resampled, _tails(confidence), axis=0)
    for index, arm in enumerate(rated):
        ratings[arms[arm]] = ArmRating(
            rating=float(elo[0, index]), ci_low=float(low[index]), ci_high=float(high[index]), battles=int(battles[arm])
        )
    return ratings


def _battles(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs of rows that share tasks, and per pair how many the first won, tied and lost."""
    pairs, outcomes = [], []
    for a, b in itertools.combinations(range(len(matrix)), 2):
        differences = _shared_differences(matrix, a, b)
        if len(differences):
            pairs.append((a, b))
            outcomes.append(((differences > 0).sum(), (differences == 0).sum(), (differences < 0).sum()))
    return np.array(pairs, dtype=int).reshape(-1, 2), np.array(outcomes, dtype=int).reshape(-1, 3)


def _battle_counts(samples: np.ndarray, pairs: np.ndarray, arms: int) -> np.ndarray:
    return _onto_arms(samples.sum(axis=2), pairs, arms, second_sign=1.0)


def _onto_arms(per_pair: np.ndarray, pairs: np.ndarray, arms: int, second_sign: float) -> np.ndarray:
    """Per sample, each arm's sum of a per-pair figure over its pairs, the figure counted with
    second_sign where the arm is the pair's second. (A scatter rather than a product with an
    incidence matrix: BLAS threads cost more than they save on matrices this small.)"""
    grid = np.zeros((len(per_pair), arms, arms))
    grid[:, pairs[:, 0], pairs[:, 1]] = per_pair
    return grid.sum(axis=2) + second_sign * grid.sum(axis=1)


def _fit_strengths(samples: np.ndarray, pairs: np.ndarray, arms: int) -> np.ndarray:
    """Per sample (its wins, ties and losses per pair), the strengths (natural log odds, mean
    0) maximising the ridge-penalised Bradley-Terry likelihood, by damped Newton steps taken
    on all samples at once."""
    first = samples[..., 0] + samples[..., 1] / 2  # the first arm's score over the pair's battles
    second = samples[..., 2] + samples[..., 1] / 2
    # The likelihood sees only differences, so the Newton system is singular along the
    # constant direction but for the tiny ridge, which would magnify rounding there: give
    # that direction weight 1 instead (the steps stay the same, they are orthogonal to it).
    regularised = np.full((arms, arms), 1.0 / arms) + BRADLEY_TERRY_RIDGE * np.eye(arms)
    diagonal = np.arange(arms)
    strengths = np.zeros((len(samples), arms))
    loss = _penalised_loss(strengths, pairs, first, second)
    for _ in range(NEWTON_STEPS):
        gaps = strengths[:, pairs[:, 0]] - strengths[:, pairs[:, 1]]
        win_chance, loss_chance = expit(gaps), expit(-gaps)
        # Not as games * p - wins, which cancels to rounding noise for a clean sweep.
        gradient = _onto_arms(second * win_chance - first * loss_chance, pairs, arms, second_sign=-1.0)
        curvature = np.zeros((len(samples), arms, arms))
        curvature[:, pairs[:, 0], pairs[:, 1]] = (first + second) * win_chance * loss_chance
        curvature += curvature.swapaxes(1, 2)
        hessian = regularised - curvature
        hessian[:, diagonal, diagonal] += curvature.sum(axis=2)
        step = np.linalg.solve(hessian, (gradient + BRADLEY_TERRY_RIDGE * strengths)[..., None])[..., 0]
        strengths, loss, step = _damped(strengths, step, loss, pairs, first, second)
        strengths -= strengths.mean(axis=1, keepdims=True)
        if np.abs(step).max() < NEWTON_TOLERANCE:
            break
    return strengths


def _damped(
    strengths: np.ndarray, step: np.ndarray, loss: np.ndarray, *battles: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The strengths after the Newton step, halved for each sample whose loss it would raise
    (Newton's method can overshoot on a logistic loss far from the optimum); their loss; the
    step taken."""
    scale = np.ones((len(step), 1))
    for _ in range(STEP_HALVINGS):
        moved = strengths - scale * step
        moved_loss = _penalised_loss(moved, *battles)
        # Near the optimum the loss changes by no more than rounding: that is no overshoot.
        worse = moved_loss > loss * (1 + 1e-12)
        if not worse.any():
            break
        scale[worse] /= 2
    return moved, moved_loss, scale * step


def _penalised_loss(strengths: np.ndarray, pairs: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Minus the log-likelihood plus the ridge, per sample (never negative)."""
    gaps = strengths[:, pairs[:, 0]] - strengths[:, pairs[:, 1]]
    # first * log(1 + e^-gap) + second * log(1 + e^gap), with one logarithm instead of two.
    minus_log_likelihood = ((first + second) * -log_expit(gaps) + second * gaps).sum(axis=1)
    return minus_log_likelihood + BRADLEY_TERRY_RIDGE / 2 * (strengths**2).sum(axis=1)


def ci_aware_ranks(
    intervals: Mapping[ArmKey, tuple[float, float, float] | None], higher_is_better: bool = True
) -> dict[ArmKey, int | None]:
    """Rank = 1 + the number of other arms significantly better: whose interval (low, high,
    point) lies wholly on the better side of this arm's. Arms whose intervals overlap share a
    rank. An arm without data (None) has no rank. Returned best first: by rank, then point
    estimate, then key, the arms without data last."""

    def better(other: tuple[float, float, float], this: tuple[float, float, float]) -> bool:
        return other[0] > this[1] if higher_is_better else other[1] < this[0]

    scored = {arm: interval for arm, interval in intervals.items() if interval is not None}
    ranks = {
        arm: 1 + sum(better(other, interval) for other_arm, other in scored.items() if other_arm != arm)
        for arm, interval in scored.items()
    }
    sign = -1 if higher_is_better else 1
    order = sorted(scored, key=lambda arm: (ranks[arm], sign * scored[arm][2], arm))
    return {arm: ranks[arm] for arm in order} | dict.fromkeys(sorted(set(intervals) - set(scored)))


def paired_ranks(
    arms: Iterable[ArmKey], verdicts: Mapping[tuple[ArmKey, ArmKey], PairedVerdict]
) -> dict[ArmKey, int | None]:
    """Rank = 1 + the number of arms that beat this one significantly in a paired verdict
    (scores, so higher is better). An arm that shares no task with any other has no rank.
    Returned best first, by rank then key."""
    arms = sorted(arms)
    beaten_by: dict[ArmKey, set[ArmKey]] = {arm: set() for arm in arms}
    compared: set[ArmKey] = set()
    for (a, b), verdict in verdicts.items():
        if verdict.shared_tasks:
            compared |= {a, b}
        if verdict.significant and verdict.mean_difference is not None:
            winner, loser = (a, b) if verdict.mean_difference > 0 else (b, a)
            beaten_by[loser].add(winner)
    ranked = sorted((1 + len(beaten_by[arm]), arm) for arm in arms if arm in compared)
    return {arm: rank for rank, arm in ranked} | dict.fromkeys(arm for arm in arms if arm not in compared)


def bootstrap_mean_interval_from_counts(
    counts: Sequence[int], confidence: float = 0.95, rounds: int = BOOTSTRAP_RESAMPLES, seed: int | Sequence[int] = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap of the mean of integer scores given as how many times each score
    0, 1, 2, ... occurred. Resampling n scores with replacement draws those counts from a
    multinomial, so each round costs one draw over the distinct scores, however many scores
    there are: the interval of a million verdicts takes as long as that of ten. None without
    a score."""
    weights = np.asarray(counts, dtype=float)
    n = int(weights.sum())
    if n == 0:
        return None
    scores = np.arange(len(weights), dtype=float)
    present = scores[weights > 0]
    if len(present) == 1:  # no spread: the interval is the value
        return float(present[0]), float(present[0])
    drawn = np.random.default_rng(seed).multinomial(n, weights / n, size=rounds)
    # einsum rather than a matrix product, for the same sums on every machine (see _resampled_means).
    means = np.einsum("rk,k->r", drawn, scores) / n
    low, high = np.quantile(means, _tails(confidence))
    return float(low), float(high)
