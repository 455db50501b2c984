"""Throughput of the API's leaderboard endpoint (issue 16), or of the run endpoint CI polls
(`--endpoint run`, issue 31), on a 100,000-attempt run.

It creates (or, with --keep, reuses) the database prbench_apiload (or --database) on the Postgres server
DATABASE_URL names, seeds one finished run of 8 arms on 2,000 tasks with N attempts (default
100,000) as bench/boards.py seeds its run, refreshes its summaries, and makes a read-only API
key. Then it starts a real server on loopback, gunicorn (`gunicorn -c gunicorn.conf.py prbench.wsgi -w 2`, the
README's server, production settings), and has C concurrent clients (threads, one httpx client each)
call `GET /api/runs/{id}/leaderboards` (or `GET /api/runs/{id}`, the run with its progress)
with the key for a fixed time. It prints requests/s and the p50/p95/p99 latency as the clients
saw it, and for the run endpoint the target beside it (>= 150 requests/s with 8 clients).

Every request goes through what a customer's would: key lookup, the per-key throttle in Redis
(its allowance raised so the bench measures the endpoint, not the refusal), the access layer,
the boards from the run's summaries, and the audit middleware's row per request.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/api_load.py [--attempts 100000] [--clients 8] [--seconds 30] [--keep] \\
        [--endpoint leaderboards|run] [--database prbench_apiload]

REDIS_URL (default redis://127.0.0.1:6379/15) names the Redis database the server may write
its throttle counters and cache to.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import production_environment  # noqa: E402

DATABASE = "prbench_apiload"
ARMS = 8
ENDPOINTS = {"leaderboards": "/api/runs/{id}/leaderboards", "run": "/api/runs/{id}"}
RUN_TARGET_RPS = 150  # GET /api/runs/{id} with 8 clients (issue 31)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=30, help="how long the clients call")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--keep", action="store_true", help="keep the database, and reuse it next time")
    parser.add_argument("--endpoint", choices=ENDPOINTS, default="leaderboards", help="the endpoint the clients call")
    parser.add_argument("--database", default=DATABASE, help="the database to create (letters, digits, underscores)")
    args = parser.parse_args()
    if not args.database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    server = os.environ.get("DATABASE_URL", "")
    if not server.startswith(("postgres://", "postgresql://")):
        parser.error("DATABASE_URL must name a Postgres server (the bench creates its own database there)")
    url = urlunsplit(urlsplit(server)._replace(path=f"/{args.database}"))
    environment = {
        **production_environment(),
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"),
        "SECURE_SSL_REDIRECT": "False",  # plain HTTP on loopback
        "PRBENCH_API_REQUESTS_PER_MINUTE": "100000000",
    }
    os.environ.update(environment)
    reused = create_database(server, args.database, fresh=not args.keep)
    gunicorn = None
    try:
        run_code, key = prepare(args.attempts, reused)
        gunicorn = start_server(args.port, args.workers, environment)
        path = ENDPOINTS[args.endpoint].format(id=run_code)
        latencies, statuses = load(f"http://127.0.0.1:{args.port}", path, key, args.clients, args.seconds)
        report(latencies, statuses, args)
    finally:
        if gunicorn is not None:
            gunicorn.send_signal(signal.SIGTERM)
            gunicorn.wait(timeout=30)
        from django.db import connections

        connections.close_all()
        if not args.keep:
            drop_database(server, args.database)
    return 0


# --- the database and the run ------------------------------------------------------------------


def create_database(server: str, database: str, *, fresh: bool) -> bool:
    """True when an existing database is kept as it is."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if exists and not fresh:
            return True
        connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {database}")
    return False


def drop_database(server: str, database: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def prepare(attempts: int, reused: bool) -> tuple[str, str]:
    """The seeded run's public id (seeded now, unless a kept database has one of this size)
    and a new read-only API key of its organisation."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from experiments.models import Run
    from leaderboards.summaries import refresh_run_summaries
    from orgs.api_keys import do_create_api_key

    run = Run.objects.filter(org__slug="boardbench", total_attempts=attempts).first() if reused else None
    if run is None:
        from bench.boards import seed

        bench = seed(attempts)  # migrates, then one INSERT ... SELECT per 100,000 attempts
        run = Run.objects.get(pk=bench.run_id)
    started = time.perf_counter()
    refresh_run_summaries(run.pk)  # what the run's end does: its boards read these rows
    print(f"run {run.code}: {run.attempts.count():,} attempts, summaries in {time.perf_counter() - started:.2f} s")
    _, key = do_create_api_key(run.org, f"load-{int(time.time())}", ["read"], None)
    return str(run.code), key


# --- the server and the clients ----------------------------------------------------------------


def start_server(port: int, workers: int, environment: dict[str, str]) -> subprocess.Popen:
    import httpx

    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "--config=gunicorn.conf.py",  # the README's server: gthread workers and its timeouts
        "prbench.wsgi",
        f"--workers={workers}",
        f"--bind=127.0.0.1:{port}",
        "--log-level=warning",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=environment)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                print(f"gunicorn up: {workers} workers (gunicorn.conf.py) on 127.0.0.1:{port}")
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.terminate()
    raise SystemExit("gunicorn did not answer /healthz within 60 s")


def load(base: str, path: str, key: str, clients: int, seconds: float) -> tuple[list[float], dict[int, int]]:
    """Each client calls in a loop until the time is up; latencies in ms, statuses counted."""
    import httpx
    from tqdm import tqdm

    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as warm:
        first = warm.get(path)
        if first.status_code != 200:
            raise SystemExit(f"{first.status_code} from {path}: {first.text[:300]}")
        for _ in range(5):
            warm.get(path)  # each worker's first request imports and connects
    latencies: list[list[float]] = [[] for _ in range(clients)]
    statuses: list[dict[int, int]] = [{} for _ in range(clients)]
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                response = http.get(path)
                latencies[index].append((time.perf_counter() - started) * 1000)
                statuses[index][response.status_code] = statuses[index].get(response.status_code, 0) + 1

    threads = [threading.Thread(target=client, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    with tqdm(total=round(seconds), unit="s", desc=f"{clients} clients") as progress:
        while any(thread.is_alive() for thread in threads):
            time.sleep(1)
            progress.set_postfix(requests=sum(len(each) for each in latencies))
            progress.update(min(1, progress.total - progress.n))
    counted: dict[int, int] = {}
    for each in statuses:
        for status, count in each.items():
            counted[status] = counted.get(status, 0) + count
    return [latency for each in latencies for latency in each], counted


def report(latencies: list[float], statuses: dict[int, int], args: argparse.Namespace) -> None:
    cuts = statistics.quantiles(latencies, n=100)
    print(
        f"GET {ENDPOINTS[args.endpoint]}, {args.attempts:,} attempts, {args.clients} clients, "
        f"{args.workers} gunicorn workers, {args.seconds:g} s"
    )
    print(f"  requests: {len(latencies):,} ({', '.join(f'{s}: {n:,}' for s, n in sorted(statuses.items()))})")
    rate = len(latencies) / args.seconds
    target = ""
    if args.endpoint == "run":
        target = f" | target >= {RUN_TARGET_RPS} with 8 clients {'met' if rate >= RUN_TARGET_RPS else '! NOT met'}"
    print(f"  throughput: {rate:.1f} requests/s{target}")
    p50, p95, p99 = cuts[49], cuts[94], cuts[98]
    print(f"  latency: p50 {p50:.1f} ms, p95 {p95:.1f} ms, p99 {p99:.1f} ms, max {max(latencies):.1f} ms")


if __name__ == "__main__":
    raise SystemExit(main())
