"""The one seam through which experiments tells the floor above it (leaderboards) that a
run's results changed, without importing it: experiments sends, leaderboards connects its
receivers in its AppConfig.ready().

Sending is synchronous, in the sender's thread, and raises what a receiver raises, as the
direct calls it replaces did; a sender that must wait for its transaction's commit wraps the
send in ``transaction.on_commit`` itself, where it always did.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.dispatch import Signal

# Verdicts of these runs were recorded, and committed (attempts are announced by chunk_recorded).
results_recorded = Signal()  # run_ids: Iterable[int]
# These attempts were just recorded (completed or failed), in the sender's transaction, which
# has not committed: what depends on them is brought up to date in it, so it commits with them.
chunk_recorded = Signal()  # attempt_ids: list[int]
# The run changed as a whole: it finished or was cancelled, its stopped arms were retried,
# its attempts re-priced. What depends on it is rebuilt now, not when a throttle allows.
run_changed = Signal()  # run_id: int


def announce_recorded(run_ids: Iterable[int]) -> None:
    results_recorded.send(sender=None, run_ids=run_ids)


def announce_chunk_recorded(attempt_ids: list[int]) -> None:
    chunk_recorded.send(sender=None, attempt_ids=attempt_ids)


def announce_run_changed(run_id: int) -> None:
    run_changed.send(sender=None, run_id=run_id)
