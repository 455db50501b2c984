"""Statistics on aggregated numbers (never on raw attempt rows)."""

from __future__ import annotations

from scipy.stats import binomtest

LOW_SAMPLE = 30  # below this many attempts an arm's interval is too wide to rank on


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float] | None:
    if trials == 0:
        return None
    interval = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)
