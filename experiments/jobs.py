"""RQ entry points. Thin: they take ids and hand over to the pipeline (queueing them is
experiments/attempt_queue.py's, which the pipeline uses too).

Running any job twice is harmless: each attempt is claimed with a conditional update,
so a duplicate job finds nothing left to claim.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from structlog.contextvars import bound_contextvars

from experiments.models import Run
from experiments.pipeline import BatchRunner, finish_run_if_done
from prbench.queues import get_connection


def execute_attempts(run_id: int, attempt_ids: list[int]) -> int:
    """Execute a batch of one run's attempts, overlapping their provider calls on up to
    ``PRBENCH_THREADS_PER_JOB`` threads (each arm's own limit still holds, see
    providers.limits); returns how many this job recorded."""
    with bound_contextvars(**_public_ids(run_id)):  # on every line the job writes, then gone
        threads = _threads()
        capacity = _capacity(threads)
        ran = BatchRunner(run_id, attempt_ids, threads, capacity).run(_attempt_pool(capacity))
        finish_run_if_done(run_id)
        return ran


def _public_ids(run_id: int) -> dict[str, str]:
    """The run's public id and its organisation's slug, for the job's log lines."""
    found = Run.objects.filter(pk=run_id).values_list("code", "org__slug").first()
    return {"run": str(found[0]), "org": found[1]} if found else {}


def _threads() -> int:
    return max(1, settings.PRBENCH_THREADS_PER_JOB)


def _capacity(threads: int) -> int:
    """The pool's threads: the job's, and room for attempts stalled on their provider
    (BatchRunner._free_threads), so a hanging arm's calls do not take the others' threads."""
    return threads * (1 + STALLED_ROOM)


# Spare threads per job thread for stalled calls. An arm's stalled calls are bounded by its
# slots (max_concurrency, default 8), so two per thread leaves room for two hanging arms.
STALLED_ROOM = 2


def warm_attempt_pool() -> None:
    _attempt_pool(_capacity(_threads()))


WARM_UP_S = 10
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _attempt_pool(threads: int) -> ThreadPoolExecutor:
    """The worker process's attempt threads, started once, all at once, with a Redis
    connection open for each.

    A pool per job would start its threads lazily, one per submitted attempt, while the
    job's first attempts are already waiting on them, and each would then open its Redis
    connection in the middle of its first call: together that added about 100 ms to every
    first round. Opening the connections here, one after another, also keeps redis-py from
    opening many at once on different threads, which now and then failed with "Bad file
    descriptor" during the connection handshake.
    """
    global _pool, _pool_size
    if _pool is None or _pool_size != threads:
        if _pool is not None:
            _pool.shutdown(wait=True)
        _open_redis_connections(threads + 1)  # + 1 for this thread's own reads
        _pool, _pool_size = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="attempt"), threads
        everyone_started = threading.Barrier(threads + 1, timeout=WARM_UP_S)
        for _ in range(threads):  # each waits for all the others, so each task starts a thread
            _pool.submit(everyone_started.wait)
        everyone_started.wait()
    return _pool


REDIS_HEADROOM = 32


def _open_redis_connections(count: int) -> None:
    redis_pool = get_connection().connection_pool
    # Each pool thread may hold a connection at once, and the job's thread, the heartbeat and
    # RQ theirs: redis-py's pool refuses a 101st by default, which a 128-thread job exceeded.
    redis_pool.max_connections = max(redis_pool.max_connections, count + REDIS_HEADROOM)
    connections = [redis_pool.get_connection() for _ in range(count)]
    for connection in connections:
        redis_pool.release(connection)
