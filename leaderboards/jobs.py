"""Rebuilding a run's summaries when folding cannot keep them: recording folds each chunk
into them in its own transaction (summaries.fold_recorded), so an attempt job no longer
rebuilds anything while a run records. What changes attempts already counted, or adds what
no fold saw, asks for a rebuild here: verdicts (throttled, at most one refresh per run every
REFRESH_EVERY_MS, longer after a refresh that took long: pause_after_refresh), a run's end,
cancellation, retried arms and re-pricing (unthrottled, ``queue_summary_refresh``).

Asking marks the run out of date (a Redis set) and queues a refresh job if it can take the
run's throttle key (SET NX with an expiry). The last request is never lost: a page showing
the run's boards asks again while the run is marked, and the recovery sweep
(``requeue_stale``) queues one for every run still marked. A reader that must count every
attempt recorded (an export, the gate) compares the summaries' fingerprint with the
attempts' (``ensure_fresh_summaries``) and rebuilds them if they differ.
Summaries are derived data, so a refresh that cannot be queued (Redis down) or fails is
logged and left to the sweep or to ``manage.py recompute_leaderboards``; it never fails the
caller.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterable

from redis.exceptions import RedisError

from leaderboards.summaries import refresh_run_summaries, stale_arms
from prbench.queues import get_connection, get_queue

logger = logging.getLogger(__name__)

REFRESH_EVERY_MS = 2000
OUT_OF_DATE = "prbench:summaries:out-of-date"


def _throttle_key(run_id: int) -> str:
    return f"prbench:summaries:throttle:{run_id}"


# A refresh reads every attempt of its run: a million take seconds. While verdicts come in, the
# next refresh waits this many times as long as the last one took (and REFRESH_EVERY_MS at
# least), so refreshing costs a worker at most a fifth of its time however large the run.
REFRESH_PAUSE_FACTOR = 4


def refresh_summaries(run_id: int) -> bool:
    """The job. Unmarks the run before rebuilding, so whatever is recorded meanwhile marks it
    again for the next refresh; and only once it has its turn, so a reader that finds the run
    unmarked can wait for this refresh rather than read what it is replacing."""
    redis = get_connection()
    started = time.monotonic()
    refreshed = refresh_run_summaries(run_id, on_locked=lambda: redis.srem(OUT_OF_DATE, run_id))
    redis.set(_throttle_key(run_id), 1, px=pause_after_refresh(time.monotonic() - started))
    return refreshed


def pause_after_refresh(seconds: float) -> int:
    """How long, in ms, recording waits before it may queue the run's next refresh."""
    return max(REFRESH_EVERY_MS, round(REFRESH_PAUSE_FACTOR * seconds * 1000))


def request_summary_refresh(run_ids: Iterable[int]) -> list[int]:
    """Mark the runs out of date and queue a refresh of those without one in the last
    REFRESH_EVERY_MS. Returns the runs queued."""
    ids = sorted(set(run_ids))
    if not ids:
        return []
    try:
        redis = get_connection()
        pipeline = redis.pipeline(transaction=False)
        pipeline.sadd(OUT_OF_DATE, *ids)
        for run_id in ids:
            pipeline.set(_throttle_key(run_id), 1, nx=True, px=REFRESH_EVERY_MS)
        taken = pipeline.execute()[1:]
        due = [run_id for run_id, took in zip(ids, taken, strict=True) if took]
        for run_id in due:
            _enqueue(run_id)
    except RedisError:
        logger.warning("summaries of run(s) %s not refreshed: Redis is unavailable", ids, exc_info=True)
        return []
    return due


def queue_summary_refresh(run_id: int) -> bool:
    """A refresh whatever the throttle says: at a run's end, so its last attempts are on its
    boards, or after its attempts were re-priced."""
    try:
        get_connection().sadd(OUT_OF_DATE, run_id)
        _enqueue(run_id)
    except RedisError:
        logger.warning("summaries of run %s not refreshed: Redis is unavailable", run_id, exc_info=True)
        return False
    return True


def refresh_if_out_of_date(run_id: int) -> bool:
    """A page showing the run's boards asks for this: the run recorded into since its last
    refresh gets one (throttled), so whoever watches it sees the last attempts and verdicts
    within seconds, not at the next sweep."""
    try:
        marked = bool(get_connection().sismember(OUT_OF_DATE, str(run_id)))
    except RedisError:
        logger.warning("summaries of run %s not checked: Redis is unavailable", run_id, exc_info=True)
        return False
    return marked and bool(request_summary_refresh([run_id]))


def ensure_fresh_summaries(run_id: int) -> None:
    """For an export, a command's board or the gate, which must count every attempt recorded:
    the run's summaries rebuilt here and now unless they describe its attempts as they are
    (summaries.stale_arms). The out-of-date mark cannot tell: it is set once an attempt has
    committed, so a reader can come between the two (``start_run --wait`` printed boards of
    20 answers of 40 that way), and a refresh under way may have read the attempts before the
    last one committed. A refresh under way is waited for, and this one is skipped if it left
    nothing to do. Marked (a verdict, which the attempts' versions do not show), or when Redis
    cannot say, they are rebuilt regardless."""
    try:
        marked = bool(get_connection().srem(OUT_OF_DATE, run_id))
    except RedisError:
        logger.warning("summaries of run %s rebuilt: Redis cannot say whether they are fresh", run_id, exc_info=True)
        marked = True
    if marked or stale_arms(run_id):
        refresh_run_summaries(run_id, on_locked=lambda: _unmark(run_id), if_stale=not marked)


def _unmark(run_id: int) -> None:
    """In the refresh's turn, as the refresh job does: a recording after this marks it again."""
    with contextlib.suppress(RedisError):  # the mark only spares a later refresh
        get_connection().srem(OUT_OF_DATE, run_id)


def refresh_out_of_date() -> list[int]:
    """The sweep's part: a refresh for every run recorded into since its last one."""
    try:
        marked = get_connection().smembers(OUT_OF_DATE)
    except RedisError:
        logger.warning("summaries not swept: Redis is unavailable", exc_info=True)
        return []
    return request_summary_refresh(int(run_id) for run_id in marked)


def _enqueue(run_id: int) -> None:
    # At the front: a big run queues thousands of attempt jobs, and its boards must not wait
    # for all of them.
    get_queue().enqueue(
        refresh_summaries,
        run_id,
        job_id=f"summaries-{run_id}-{uuid.uuid4().hex}",
        at_front=True,
        result_ttl=0,
        failure_ttl=7 * 24 * 3600,
    )
