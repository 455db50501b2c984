"""gunicorn's settings for PRBench's web process: ``gunicorn -c gunicorn.conf.py prbench.wsgi``.

Each setting can be changed from the environment (``GUNICORN_*`` below) without editing this
file; a flag on the command line wins over both (``--workers 1``).
"""

from __future__ import annotations

import multiprocessing
import os


def _int(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, not {value!r}") from None


bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")

# Threads, not gunicorn's default sync workers. A sync worker tells the arbiter it is alive only
# between requests, so one request longer than ``timeout`` (a large download to a slow client:
# the 1M-attempt JSON export was cut at 30.9 s and 556 MB) gets the worker killed mid-response.
# A gthread worker's main thread keeps reporting while its threads serve, so ``timeout`` only
# catches a worker that is truly stuck. Large exports are background jobs written to files
# (experiments/run_exports.py), but their downloads still take as long as the client needs.
worker_class = "gthread"
# Two processes per core, as gunicorn suggests, plus one: pages are CPU-bound Django work
# (the GIL lets one thread of a process run Python at a time), so processes give the cores,
# and each process's threads overlap the waits on Postgres, Redis and slow clients.
workers = _int("GUNICORN_WORKERS", 2 * multiprocessing.cpu_count() + 1)
# Each thread keeps its own database connection (CONN_MAX_AGE): workers x threads connections
# to Postgres, 5 x 4 = 20 on a 2-core machine, well within Postgres's default 100.
threads = _int("GUNICORN_THREADS", 4)

# Seconds a worker may go without reporting to the arbiter before it is killed and replaced: with
# gthread, a hung process, not a slow request.
timeout = _int("GUNICORN_TIMEOUT", 60)
# On a restart or deploy (SIGTERM, SIGHUP), how long requests under way may take to finish before
# their worker is killed: a page or API answer is well under a second, a download may not be.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)
# Seconds an idle keep-alive connection stays open. Behind a load balancer, set it above the
# balancer's own idle timeout (60 s on AWS's ALB), or the balancer may send a request down a
# connection gunicorn has just closed and answer 502.
keepalive = _int("GUNICORN_KEEPALIVE", 5)

# The heartbeat files gunicorn writes every second go to memory where there is /dev/shm: on a
# container's overlay or a slow disk a blocked write can make the arbiter think a worker hung.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

# No access log unless GUNICORN_ACCESS_LOG names a file ("-": stdout), as gunicorn's default: the
# proxy in front usually keeps one, and a line per request costs the web process CPU. Errors
# (a worker killed, a failed boot) always go to stderr.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")
