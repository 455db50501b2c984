"""Speed of the pairwise statistics: a paired verdict for every pair of arms, and Bradley-Terry
ratings with their bootstrap, for 10 arms on 500 shared tasks with 1,000 bootstrap rounds.

    .venv/bin/python bench/stats_speed.py [--arms 10] [--tasks 500] [--repetitions 3] [--rounds 1000]

Target (issue 13): both together in under 0.5 s. Beside it, for scale, the time FastChat's way
would take: one sklearn LogisticRegression fit per bootstrap round. Pure numpy and scipy: no
database, no Django.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from leaderboards.stats import PairedVerdict, bradley_terry, pairwise_verdicts  # noqa: E402

TARGET_SECONDS = 0.5
REFERENCE_FITS = 20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--repetitions", type=int, default=3, help="attempts per task and arm; 1 for 0/1 scores")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    scores = scores_by_arm(args.arms, args.tasks, args.repetitions)
    verdict_times, rating_times = [], []
    for _ in range(args.repeats):
        started = time.perf_counter()
        verdicts = pairwise_verdicts(scores, rounds=args.rounds)
        verdicts_done = time.perf_counter()
        bradley_terry(scores, rounds=args.rounds)
        verdict_times.append(verdicts_done - started)
        rating_times.append(time.perf_counter() - verdicts_done)
    totals = [v + r for v, r in zip(verdict_times, rating_times, strict=True)]

    print(
        f"{args.arms} arms, {args.tasks} shared tasks, {args.repetitions} repetitions, "
        f"{args.rounds} bootstrap rounds, {args.repeats} repeats"
    )
    print(f"pairwise verdicts ({len(verdicts)} pairs)  {describe(verdict_times)}")
    print(f"Bradley-Terry + bootstrap      {describe(rating_times)}")
    print(f"total                          {describe(totals)}   target < {TARGET_SECONDS} s")
    per_fit = sklearn_seconds_per_fit(verdicts, sorted(scores))
    print(
        f"reference: one sklearn fit per round (FastChat) {per_fit * 1000:.1f} ms a fit, "
        f"{per_fit * args.rounds:.2f} s for {args.rounds} rounds"
    )
    return 0 if min(totals) < TARGET_SECONDS else 1


def scores_by_arm(arms: int, tasks: int, repetitions: int) -> dict[str, dict[str, float]]:
    """Per arm, the share of repetitions resolved per task; tasks share a difficulty."""
    rng = np.random.default_rng(0)
    difficulty = rng.normal(size=tasks)
    scores = {}
    for arm, skill in enumerate(np.linspace(-1.0, 1.0, arms)):
        chance = 1 / (1 + np.exp(difficulty - skill))
        resolved = (rng.random((tasks, repetitions)) < chance[:, None]).mean(axis=1)
        scores[f"arm-{arm:02d}"] = {f"task-{task}": float(resolved[task]) for task in range(tasks)}
    return scores


def describe(seconds: list[float]) -> str:
    return f"best {min(seconds):.3f} s, median {statistics.median(seconds):.3f} s"


def sklearn_seconds_per_fit(verdicts: dict[tuple[str, str], PairedVerdict], arms: list[str]) -> float:
    """FastChat's compute_mle_elo design: per pair, a row for each side's wins, weighted by the
    count, a tie counted half to each side; no intercept, no penalty."""
    from sklearn.linear_model import LogisticRegression

    index = {arm: i for i, arm in enumerate(arms)}
    rows, outcomes, weights = [], [], []
    for (a, b), verdict in verdicts.items():
        row = np.zeros(len(arms))
        row[index[a]], row[index[b]] = np.log(10), -np.log(10)
        rows += [row, row]
        outcomes += [1, 0]
        weights += [verdict.wins + verdict.ties / 2, verdict.losses + verdict.ties / 2]
    design, labels, sample_weight = np.array(rows), np.array(outcomes), np.array(weights)
    started = time.perf_counter()
    for _ in range(REFERENCE_FITS):
        LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6).fit(design, labels, sample_weight=sample_weight)
    return (time.perf_counter() - started) / REFERENCE_FITS


if __name__ == "__main__":
    sys.exit(main())
