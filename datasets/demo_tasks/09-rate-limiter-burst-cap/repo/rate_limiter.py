"""Token-bucket rate limiter with an injectable clock for testability."""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """Allow bursts of up to ``capacity`` operations, refilled at ``rate`` per second.

    ``clock`` must return monotonically increasing seconds. It defaults to
    :func:`time.monotonic` and can be replaced with a fake clock in tests.
    """

    def __init__(
        self,
        capacity: float,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity <= 0 or rate <= 0:
            raise ValueError("capacity and rate must be positive")
        self.capacity = float(capacity)
        self.rate = float(rate)
        self._clock = clock
        self._tokens = float(capacity)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._updated)
        self._tokens = self._tokens + elapsed * self.rate
        self._updated = now

    @property
    def tokens(self) -> float:
        """Number of tokens currently available."""
        self._refill()
        return self._tokens

    def try_acquire(self, tokens: float = 1.0) -> bool:
        """Take ``tokens`` from the bucket if available; return whether it succeeded."""
        if tokens <= 0:
            raise ValueError("tokens must be positive")
        if tokens > self.capacity:
            return False
        self._refill()
        if self._tokens >= tokens:
            self._tokens -= tokens
            return True
        return False

    def wait_time(self, tokens: float = 1.0) -> float:
        """Return the seconds until ``tokens`` could be acquired (0.0 if now)."""
        self._refill()
        missing = tokens - self._tokens
        return max(0.0, missing / self.rate)
