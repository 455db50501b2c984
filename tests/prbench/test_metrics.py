"""/metrics: counters that move by exactly what the workers recorded, scrape-time state, who
may scrape, and multiprocess mode merging what several processes wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from evaluation.models import EvaluatorProfile, VerdictStatus
from experiments.actions import ArmSpec, do_cancel_run, do_replace_arms
from experiments.attempt_queue import enqueue_attempts
from experiments.jobs import execute_attempts
from experiments.models import AttemptStatus, RunStatus
from prbench.queues import queue_for_needs
from providers.errors import ErrorCategory
from providers.outcomes import OutcomeClass
from providers.registry import provider_names
from tests.conftest import work_queue

TOKEN = "metrics-token-0123456789abcdef"
Samples = dict[tuple[str, frozenset], float]


def scrape(client: Client | None = None, **extra) -> Samples:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "no-cache" in response["Cache-Control"]
    return parsed(response.content.decode())


def parsed(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def total_moved(before: Samples, after: Samples, name: str) -> float:
    return sum(v for (n, _), v in after.items() if n == name) - sum(v for (n, _), v in before.items() if n == name)


FINISHED = "prbench_attempts_finished_total"


@pytest.fixture
def three_arms(experiment):
    """4 tasks x 3 arms: answers, a model failure, an infrastructure failure."""
    do_replace_arms(
        experiment,
        [
            ArmSpec("good", "mock", "m", {"mode": "oracle"}),
            ArmSpec("filtered", "mock", "m", {"mode": "error", "failure_category": "content_filtered"}),
            ArmSpec(
                "down",
                "mock",
                "m",
                {"mode": "error", "failure_category": "overloaded", "max_retries": 1, "retry_base_ms": 1},
            ),
        ],
    )
    return experiment


def test_each_recorded_attempt_is_counted_once_by_status_outcome_category_and_provider(
    three_arms, start, django_capture_on_commit_callbacks
):
    before = scrape()
    run = start(three_arms, inference_only=True)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()
    after = scrape()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and run.attempts.count() == 12
    labels = {"provider": "mock"}
    assert (
        moved(before, after, FINISHED, status="completed", outcome="model_success", error_category="none", **labels)
        == 4
    )
    assert (
        moved(
            before,
            after,
            FINISHED,
            status="failed",
            outcome="model_failure",
            error_category="content_filtered",
            **labels,
        )
        == 4
    )
    assert (
        moved(
            before,
            after,
            FINISHED,
            status="failed",
            outcome="infrastructure_failure",
            error_category="overloaded",
            **labels,
        )
        == 4
    )
    assert total_moved(before, after, FINISHED) == 12
    # The gateway: four answers timed, eight calls that ended without one.
    assert moved(before, after, "prbench_provider_call_latency_seconds_count", provider="mock") == 4
    assert (
        moved(before, after, "prbench_provider_call_failures_total", provider="mock", error_category="overloaded") == 4
    )
    assert moved(before, after, "prbench_run_duration_seconds_count", status="completed") == 1

    # The same jobs delivered again, and run again by hand: nothing left to claim, nothing counted.
    ids = list(run.attempts.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        enqueue_attempts(run.pk, ids)
        work_queue()
        assert execute_attempts(run.pk, ids) == 0
    again = scrape()
    assert total_moved(after, again, FINISHED) == 0
    assert total_moved(after, again, "prbench_run_duration_seconds_count") == 0


def test_the_outcome_class_is_the_one_stored_on_the_attempt(three_arms, start, django_capture_on_commit_callbacks):
    before = scrape()
    run = start(three_arms, inference_only=True)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()
    after = scrape()
    for outcome in OutcomeClass.values:
        stored = run.attempts.filter(outcome=outcome).count()
        counted = sum(
            v - value(before, n, **dict(labels))
            for (n, labels), v in after.items()
            if n == FINISHED and dict(labels)["outcome"] == outcome
        )
        assert counted == stored


def test_a_poison_attempt_retired_by_the_claim_is_counted(
    experiment, start, django_capture_on_commit_callbacks, settings
):
    run = start(experiment, inference_only=True)
    run.attempts.update(claims=settings.PRBENCH_MAX_ATTEMPT_CLAIMS)
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()
    after = scrape()
    assert run.attempts.filter(status=AttemptStatus.FAILED, error_category="platform_error").count() == 8
    assert (
        moved(
            before,
            after,
            FINISHED,
            status="failed",
            outcome="infrastructure_failure",
            error_category="platform_error",
            provider="mock",
        )
        == 8
    )
    assert total_moved(before, after, FINISHED) == 8


def test_a_cancelled_run_is_observed_and_running_runs_are_counted_at_scrape_time(
    experiment, start, django_capture_on_commit_callbacks
):
    run = start(experiment)
    before = scrape()
    assert value(before, "prbench_runs_running") == 1
    assert value(before, "prbench_queue_jobs", queue="default") >= 1
    with django_capture_on_commit_callbacks(execute=True):
        assert do_cancel_run(run)
    after = scrape()
    assert value(after, "prbench_runs_running") == 0
    assert moved(before, after, "prbench_run_duration_seconds_count", status="cancelled") == 1


def test_live_workers_are_those_holding_a_live_lease(db):
    from datetime import timedelta

    from django.utils import timezone

    from experiments import liveness
    from experiments.models import WorkerLease

    liveness.stop()
    WorkerLease.objects.all().delete()
    now = timezone.now()
    WorkerLease.objects.create(name="a", hostname="h", pid=1, started_at=now, expires_at=now + timedelta(seconds=60))
    WorkerLease.objects.create(name="b", hostname="h", pid=2, started_at=now, expires_at=now - timedelta(seconds=5))
    assert value(scrape(), "prbench_workers_live") == 1


def test_evaluator_judgements_are_counted_by_workload_status_and_provider(
    experiment, start, django_capture_on_commit_callbacks
):
    EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )
    run = start(experiment)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # the attempts; their recording queues the evaluator's jobs
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()  # the evaluator's jobs
    after = scrape()
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).count()
    assert answered == 8
    judged = moved(
        before, after, "prbench_evaluator_judgements_total", workload="pr_patch", status="judged", provider="mock"
    )
    assert judged == answered


# --- who may scrape -------------------------------------------------------------------------


def test_an_outsider_address_gets_a_404(db):
    response = Client(REMOTE_ADDR="203.0.113.7").get("/metrics")
    assert response.status_code == 404
    assert b"prbench_" not in response.content


def test_loopback_may_scrape_by_default(db):
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200


def test_the_token_lets_any_address_scrape_and_a_wrong_one_does_not(db, settings):
    settings.PRBENCH_METRICS_TOKEN = TOKEN
    outsider = Client(REMOTE_ADDR="203.0.113.7")
    assert outsider.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert outsider.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN[:-1]}x").status_code == 404
    assert outsider.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 404
    assert outsider.get("/metrics").status_code == 404


def test_no_token_configured_accepts_no_token(db, settings):
    settings.PRBENCH_METRICS_TOKEN = ""
    outsider = Client(REMOTE_ADDR="203.0.113.7")
    assert outsider.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


def test_the_allowed_networks_are_configurable(db, settings):
    from prbench.settings import networks

    settings.PRBENCH_METRICS_ALLOWED_NETWORKS = networks("x", "10.0.0.0/8")
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 404
    assert Client(REMOTE_ADDR="::ffff:10.1.2.3").get("/metrics").status_code == 200


def test_a_forwarded_for_header_is_not_trusted(db):
    client = Client(REMOTE_ADDR="203.0.113.7")
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 404


def test_metrics_over_plain_http_are_answered_not_redirected(db, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert Client().get("/metrics").status_code == 200
    assert Client().post("/metrics").status_code == 405


def test_labels_hold_only_enumerated_values_never_an_org_a_model_or_an_output(
    three_arms, start, org, django_capture_on_commit_callbacks
):
    do_replace_arms(three_arms, [ArmSpec("good", "mock", "acme-secret-model-name", {"mode": "oracle"})])
    run = start(three_arms, inference_only=True)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()
    text = Client().get("/metrics").content.decode()
    outputs = list(run.attempts.exclude(output="").values_list("output", flat=True))
    assert outputs
    for forbidden in [org.slug, org.name, str(org.code), str(run.code), "acme-secret-model-name", *outputs]:
        assert forbidden not in text
    allowed = {
        "provider": set(provider_names()),
        "status": {*AttemptStatus.values, *RunStatus.values, *VerdictStatus.values},
        "outcome": {*OutcomeClass.values, "none"},
        "error_category": {*ErrorCategory.values, "none"},
        "workload": {"pr_patch", "qa_exact", "multiple_choice", "code_exec", "free_text"},
        "queue": set(settings.RQ_QUEUES),
    }
    for (name, labels), _ in parsed(text).items():
        if name.startswith("prbench_"):
            for label, label_value in labels:
                if label != "le":
                    assert label_value in allowed[label], (name, label, label_value)


# --- multiprocess mode ----------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import sys
    from prbench import metrics
    metrics.count_attempts_finished([("completed", "model_success", "", "mock")] * int(sys.argv[1]))
    metrics.observe_provider_call("mock", 1200, 300)
    """
)


def test_multiprocess_mode_merges_what_every_process_wrote(db, tmp_path: Path, monkeypatch):
    """Two processes (as two workers would) write to the shared directory; one scrape of a
    third (this web process) sees both, and not its own in-memory values."""
    directory = tmp_path / "prometheus"
    directory.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    root = Path(__file__).resolve().parents[2]
    for count in (3, 4):
        subprocess.run([sys.executable, "-c", WRITER, str(count)], env=env, cwd=root, check=True, timeout=60)
    assert len(list(directory.glob("*.db"))) >= 2
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    samples = scrape()
    labels = {"status": "completed", "outcome": "model_success", "error_category": "none", "provider": "mock"}
    assert value(samples, FINISHED, **labels) == 7
    assert value(samples, "prbench_provider_call_latency_seconds_count", provider="mock") == 2
    assert value(samples, "prbench_provider_time_to_first_token_seconds_bucket", provider="mock", le="0.5") == 2
    # The scrape-time state is there too, read by this process.
    assert ("prbench_runs_running", frozenset()) in samples


def test_the_queue_gauge_counts_the_needs_queues_too(db):
    queue_for_needs(("python3.9",)).enqueue("os.getpid")
    samples = scrape()
    assert value(samples, "prbench_queue_jobs", queue="env:python3.9") == 1
    assert value(samples, "prbench_queue_jobs", queue="default") == 0
