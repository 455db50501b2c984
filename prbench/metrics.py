"""The Prometheus metric families PRBench's processes record, and the helpers that record them.

Pure prometheus_client, no Django: the gateway, the pipeline and the evaluator import it.
What can be read from Postgres or Redis when Prometheus asks (queue depth, live workers,
running runs) is not recorded here but computed at scrape time (experiments/metrics_view.py), so
it needs no gauge living in any one process.

Multiprocess mode: with ``PROMETHEUS_MULTIPROC_DIR`` set in the environment before the process
starts (prometheus_client reads it at import), every web process and RQ worker writes its
samples to files in that shared directory and ``/metrics`` merges them. This module defines
counters and histograms only, which need no ``multiprocess_mode`` and leave nothing to clean
up when a process exits (``mark_process_dead`` removes live-gauge files, and there are none).

Labels are kept to a few values each: the provider (a fixed list in providers/registry.py),
statuses, outcome classes and error categories (fixed enums). Never an organisation, a model
name (customers type those, and a self-hosted server can name them anything), an id, or text.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import Counter, Histogram

NONE = "none"  # the error category of an attempt that did not fail

ATTEMPTS_FINISHED = Counter(
    "prbench_attempts_finished",
    "Attempts recorded as finished by a worker, once each: by status, outcome class, error category and provider",
    ["status", "outcome", "error_category", "provider"],
)
PROVIDER_LATENCY = Histogram(
    "prbench_provider_call_latency_seconds",
    "Provider calls that answered: the answering try's latency, first byte sent to last byte read",
    ["provider"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320),
)
PROVIDER_FIRST_TOKEN = Histogram(
    "prbench_provider_time_to_first_token_seconds",
    "Streamed provider calls that answered: time to the first token of the answering try",
    ["provider"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64),
)
PROVIDER_CALL_FAILURES = Counter(
    "prbench_provider_call_failures",
    "Provider calls that ended without an answer after their retries, by provider and error category",
    ["provider", "error_category"],
)
RUN_DURATION = Histogram(
    "prbench_run_duration_seconds",
    "Runs that finished (completed, failed or cancelled): from start to finish",
    ["status"],
    buckets=(10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400),
)
EVALUATOR_JUDGEMENTS = Counter(
    "prbench_evaluator_judgements",
    "Evaluator verdicts recorded: judged, or evaluator_error when no valid answer came; by workload and provider",
    ["workload", "status", "provider"],
)

AGENT_TURNS = Counter(
    "prbench_agent_turns",
    "Agent turns asked of a provider (turns replayed from the answer journal are not counted again), by provider",
    ["provider"],
)
AGENT_SESSION_WAIT = Histogram(
    "prbench_agent_session_wait_seconds",
    "How long agent attempts waited for one of their worker's sandbox sessions (PRBENCH_AGENT_SESSIONS)",
    buckets=(0.001, 0.01, 0.1, 1, 5, 15, 60, 300, 900),
)


def count_agent_turn(provider: str) -> None:
    AGENT_TURNS.labels(provider).inc()


def observe_agent_session_wait(seconds: float) -> None:
    AGENT_SESSION_WAIT.observe(seconds)


def count_attempts_finished(rows: Iterable[tuple[str, str, str, str]]) -> None:
    """One increment per attempt: ``rows`` are (status, outcome, error category, provider),
    one per attempt a job actually moved to a finished state."""
    for (status, outcome, category, provider), count in Tally(rows).items():
        ATTEMPTS_FINISHED.labels(status, outcome or NONE, category or NONE, provider).inc(count)


def observe_provider_call(provider: str, latency_ms: int, first_token_ms: int | None) -> None:
    PROVIDER_LATENCY.labels(provider).observe(latency_ms / 1000)
    if first_token_ms is not None:
        PROVIDER_FIRST_TOKEN.labels(provider).observe(first_token_ms / 1000)


def count_provider_failure(provider: str, category: str) -> None:
    PROVIDER_CALL_FAILURES.labels(provider, category).inc()


def observe_run_finished(status: str, seconds: float | None) -> None:
    if seconds is not None and seconds >= 0:
        RUN_DURATION.labels(status).observe(seconds)


def count_judgement(workload: str, status: str, provider: str) -> None:
    EVALUATOR_JUDGEMENTS.labels(workload, status, provider).inc()
