"""Latency-bound throughput: do provider calls overlap as they should?

For a mock with 250 ms latency it prints wall time / ideal, where ideal = ceil(N / C) x 250 ms,
for N = 400 at C = 16 (target <= 1.15) and N = 2,000 at C = 128 (target <= 1.25), and the
p95 attempt latency / 250 ms (target <= 1.2). Then the gateway's own overhead per call
against a bare OpenAI SDK call to the same local server, both streaming the answer (target:
under 1 ms median).

    .venv/bin/python bench/latency_bound.py [--workers 2]

Each case runs in a fresh process on the `make demo` set-up (SQLite under a temporary var
dir, embedded Redis, RQ SimpleWorkers) unless DATABASE_URL / REDIS_URL are set.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import production_environment  # noqa: E402

LATENCY_MS = 250
CASES = [(400, 16, 1.15), (2000, 128, 1.25)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # "N,C": run one case in this process
    args = parser.parse_args()
    if args.case:
        attempts, concurrency = map(int, args.case.split(","))
        result = run_case(attempts, concurrency, args.workers)
        if result:
            print(json.dumps(result))
        return 0
    for attempts, concurrency, target in CASES:
        per_worker = max(1, concurrency // args.workers)
        env = dict(
            production_environment(),
            **os.environ,
            PRBENCH_THREADS_PER_JOB=str(per_worker),
            PRBENCH_ATTEMPTS_PER_JOB=str(4 * per_worker),
        )
        out = subprocess.run(
            [sys.executable, __file__, "--case", f"{attempts},{concurrency}", "--workers", str(args.workers)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        result = json.loads(out.strip().splitlines()[-1])
        ideal = math.ceil(attempts / concurrency) * LATENCY_MS / 1000
        ratio, p95_ratio = result["wall_s"] / ideal, result["p95_ms"] / LATENCY_MS
        print(
            f"N={attempts:>5} C={concurrency:>3}: wall {result['wall_s']:.2f}s / ideal {ideal:.2f}s = {ratio:.2f} "
            f"(target <= {target}) {'met' if ratio <= target else 'NOT met'}; "
            f"p95 latency {result['p95_ms']:.0f} ms = {p95_ratio:.2f} x 250 ms (target <= 1.2) "
            f"{'met' if p95_ratio <= 1.2 else 'NOT met'}; peak in flight {result['peak']}"
        )
    env = dict(production_environment(), **os.environ)
    subprocess.run([sys.executable, __file__, "--case", "0,0"], env=env, check=True)
    return 0


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

    from datasets.demo import load_demo_dataset
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
    from experiments.management.commands.demo import start_workers, stop_workers
    from experiments.models import Attempt, AttemptStatus
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
        started = time.perf_counter()
        run = do_start_run(experiment, inference_only=True)
        key = limits.slots_key(f"run-arm:{run.arms.get().pk}")
        peak, stop = [0], threading.Event()

        def watch() -> None:
            redis = limits.get_connection()
            while not stop.is_set():
                peak[0] = max(peak[0], redis.zcard(key))
                time.sleep(0.02)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        while run.attempts.exclude(status__in=[AttemptStatus.COMPLETED, AttemptStatus.FAILED]).exists():
            time.sleep(0.02)
        wall = time.perf_counter() - started
        stop.set()
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
