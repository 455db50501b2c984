"""Which attempts of this process are waiting on their provider right now, and since when.

A job counts its attempts against its threads (experiments/pipeline.py BatchRunner), but an
attempt whose provider hangs, or which sleeps on a 429's retry-after, uses no CPU and does no
work: counted like the others, one bad arm would take the threads of every arm it shares a
job with. The job reads this to tell such calls from working ones. Pool threads write it,
the job's thread reads it; single dict operations are atomic under the GIL.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

_waiting_since: dict[int, float] = {}


@contextlib.contextmanager
def provider_call(attempt_id: int) -> Iterator[None]:
    """The attempt waits on its provider while the block runs (a call, retries included)."""
    _waiting_since[attempt_id] = time.monotonic()
    try:
        yield
    finally:
        _waiting_since.pop(attempt_id, None)


def waiting_since(attempt_id: int) -> float | None:
    """When the attempt's current provider call began (``time.monotonic()``); None if none runs."""
    return _waiting_since.get(attempt_id)
