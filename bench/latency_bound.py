"""Latency-bound throughput: do provider calls overlap as they should?

For a mock with 250 ms latency it prints wall time / ideal, where ideal = ceil(N / C) x 250 ms,
for N = 400 at C = 16 (target <= 1.15) and N = 2,000 at C = 128 (target <= 1.25), and the
p95 attempt latency / 250 ms (target <= 1.2). Then the gateway's own overhead per call
against a bare OpenAI SDK call to the same local server, both streaming the answer (target:
under 1 ms median).

    .venv/bin/python bench/latency_bound.py [--workers 2] [--database prbench_latencybench]

Each case runs in a fresh process on the `make demo` set-up (SQLite under a temporary var
dir, embedded Redis, RQ SimpleWorkers) unless DATABASE_URL / REDIS_URL are set. With a
Postgres DATABASE_URL each case gets a fresh database on that server, --database (dropped at
the end, however the script ends), so the script can run again and again. A case that fails
prints its output and traceback, and the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._seeding import drop_database, recreate_database  # noqa: E402
from bench._settings import production_environment  # noqa: E402

DATABASE = "prbench_latencybench"
LATENCY_MS = 250
POLL_S = 0.1  # the run's end comes from its finished_at: polling only says when to look
RUN_TIMEOUT_S = 300
STDERR_LINES = 60
CASES = [(400, 16, 1.15), (2000, 128, 1.25)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--database", default=DATABASE, help="with a Postgres DATABASE_URL: the database to create (and drop) per case"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # "N,C": run one case in this process
    args = parser.parse_args()
    if args.case:
        attempts, concurrency = map(int, args.case.split(","))
        result = run_case(attempts, concurrency, args.workers)
        if result:
            print(json.dumps(result))
        return 0
    if not args.database.replace("_", "").isalnum():
        parser.error("--database: letters, digits and underscores only")
    server = os.environ.get("DATABASE_URL", "")
    on_postgres = server.startswith(("postgres://", "postgresql://"))
    try:
        for attempts, concurrency, target in CASES:
            per_worker = max(1, concurrency // args.workers)
            env = dict(
                production_environment(),
                **os.environ,
                PRBENCH_THREADS_PER_JOB=str(per_worker),
                PRBENCH_ATTEMPTS_PER_JOB=str(4 * per_worker),
            )
            if on_postgres:
                env["DATABASE_URL"] = fresh_database(server, args.database)
            out = child([f"{attempts},{concurrency}", "--workers", str(args.workers)], env)
            result = json.loads(out.strip().splitlines()[-1])
            ideal = math.ceil(attempts / concurrency) * LATENCY_MS / 1000
            ratio, p95_ratio = result["wall_s"] / ideal, result["p95_ms"] / LATENCY_MS
            print(
                f"N={attempts:>5} C={concurrency:>3}: wall {result['wall_s']:.2f}s / ideal {ideal:.2f}s = {ratio:.2f} "
                f"(target <= {target}) {'met' if ratio <= target else 'NOT met'}; "
                f"p95 latency {result['p95_ms']:.0f} ms = {p95_ratio:.2f} x 250 ms (target <= 1.2) "
                f"{'met' if p95_ratio <= 1.2 else 'NOT met'}; peak in flight {result['peak']}",
                flush=True,
            )
        env = dict(production_environment(), **os.environ)
        if on_postgres:
            env["DATABASE_URL"] = fresh_database(server, args.database)
        print(child(["0,0"], env), end="")
    except ChildFailed as failure:
        print(failure, file=sys.stderr)
        return 1
    finally:
        if on_postgres:
            drop_database(server, args.database)
    return 0


class ChildFailed(Exception):
    pass


def child(case_args: list[str], env: dict[str, str]) -> str:
    """One case in a fresh process: its output, or ChildFailed with what it printed and the
    end of what it wrote to stderr, its traceback last (a worker pool that keeps replacing
    dying workers can write thousands of lines before it)."""
    done = subprocess.run(
        [sys.executable, __file__, "--case", *case_args], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        errors = done.stderr.splitlines()
        cut = f" (its last {STDERR_LINES} of {len(errors)} lines)" if len(errors) > STDERR_LINES else ""
        raise ChildFailed(
            f"case {case_args[0]} exited with {done.returncode}\n--- its output\n{done.stdout}"
            f"--- its errors{cut}\n" + "\n".join(errors[-STDERR_LINES:])
        )
    return done.stdout


def fresh_database(server: str, database: str) -> str:
    """The URL of ``database`` on the server, created empty: every case (and every run of
    the script) starts from the same state, as on SQLite under a fresh var dir."""
    recreate_database(server, database)
    return urlunsplit(urlsplit(server)._replace(path=f"/{database}"))


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run_case(attempts: int, concurrency: int, workers: int) -> dict:
    setup_django()
    if attempts == 0:
        from prbench.queues import stop_embedded_redis

        try:
            return gateway_overhead()
        finally:
            stop_embedded_redis()
    import threading

    from django.utils import timezone

    from datasets.demo import load_demo_dataset
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
    from experiments.management.commands.demo import start_workers, stop_workers
    from experiments.models import Attempt, Run
    from orgs.models import Organization
    from prbench.queues import ensure_redis
    from providers import limits

    ensure_redis()
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    dataset = load_demo_dataset(org)
    config = {"mode": "oracle", "latency_ms": LATENCY_MS, "max_concurrency": concurrency}
    spec = ExperimentSpec(
        name=f"latency {attempts}x{concurrency}",
        dataset=dataset,
        sample_size=10,
        repetitions=attempts // 10,
        arms=[ArmSpec("slow", "mock", "mock-250ms", config)],
    )
    experiment = do_save_experiment(org, spec)
    processes = start_workers(workers)
    try:
        started = timezone.now()
        run = do_start_run(experiment, inference_only=True)
        key = limits.slots_key(f"run-arm:{run.arms.get().pk}")
        peak, stop = [0], threading.Event()

        def watch() -> None:
            redis = limits.get_connection()
            while not stop.wait(POLL_S):
                peak[0] = max(peak[0], redis.zcard(key))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        # One row by its key every POLL_S, not a scan of the run's attempts: the bench must
        # not take the CPU it measures.
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not Run.objects.filter(pk=run.pk, finished_at__isnull=False).exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the run did not finish within {RUN_TIMEOUT_S} s")
            time.sleep(POLL_S)
        stop.set()
        run.refresh_from_db(fields=["finished_at"])
        assert run.finished_at is not None
        wall = (run.finished_at - started).total_seconds()
    finally:
        stop_workers(processes)
    # The attempt's own latency as the platform saw it: from claim to recorded answer.
    spans = [
        (a.responded_at - a.started_at).total_seconds() * 1000
        for a in Attempt.objects.filter(run=run).only("started_at", "responded_at")
        if a.responded_at and a.started_at
    ]
    return {"wall_s": wall, "p95_ms": statistics.quantiles(spans, n=20)[-1], "peak": peak[0]}


def gateway_overhead() -> dict:
    import openai

    from orgs.models import Organization
    from providers import gateway
    from providers.models import ProviderCredential
    from providers.types import ArmSpec, CompletionRequest, Message
    from tests.providers.fake_server import FakeProvider, Reply
    from tests.providers.sse_fixtures import openai_events

    server = FakeProvider()
    # Streamed, as the gateway asks by default; the bare call below streams too.
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    server.default = Reply(events=openai_events(pieces=("ok",), usage=usage, model="gpt-4o"))
    org, _ = Organization.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    credential, _ = ProviderCredential.objects.get_or_create(org=org, provider="openai")
    credential.set_api_key("sk-bench-000000000000")
    credential.base_url = server.url + "/v1"
    credential.save()
    client = openai.OpenAI(api_key="sk-bench-000000000000", base_url=server.url + "/v1", max_retries=0)
    request = CompletionRequest(messages=(Message("user", "hi"),), max_output_tokens=1)
    arm = ArmSpec("openai", "gpt-4o", {"max_retries": 0})
    bare, governed = [], []
    for _ in range(400):
        started = time.perf_counter()
        stream = client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            max_completion_tokens=1,
            stream=True,
            stream_options={"include_usage": True},
        )
        for _chunk in stream:  # read to the end, as the gateway does
            pass
        bare.append(time.perf_counter() - started)
        started = time.perf_counter()
        gateway.complete(org.pk, arm, request)
        governed.append(time.perf_counter() - started)
    server.close()
    bare_ms, gateway_ms = statistics.median(bare[50:]) * 1000, statistics.median(governed[50:]) * 1000
    print(
        f"gateway overhead: median {gateway_ms:.2f} ms through the gateway vs {bare_ms:.2f} ms bare SDK call = "
        f"{gateway_ms - bare_ms:.2f} ms per call (target < 1 ms) {'met' if gateway_ms - bare_ms < 1 else 'NOT met'}"
    )
    return {}


if __name__ == "__main__":
    raise SystemExit(main())
