"""Statistics on aggregated numbers (never on raw attempt rows)."""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, bootstrap

LOW_SAMPLE = 30  # below this many attempts an arm's interval is too wide to rank on


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    if trials == 0:
        return None
    interval = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


MIN_JUDGED = 10  # below this many judged attempts an evaluator mean is not shown
BOOTSTRAP_RESAMPLES = 2000


def bootstrap_mean_interval(values: list[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap of the mean, seeded so a page shows the same interval twice."""
    if len(set(values)) == 1:  # no spread: the interval is the value (scipy would warn)
        return float(values[0]), float(values[0])
    result = bootstrap(
        (np.asarray(values, dtype=float),),
        np.mean,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
