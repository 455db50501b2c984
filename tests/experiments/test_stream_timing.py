"""Time to first token, output speed and wall time, from the provider call to the attempt
row, its page, the run's leaderboard and the export."""

from __future__ import annotations

import csv
import io

from django.urls import reverse

from experiments.actions import ArmSpec, do_replace_arms
from experiments.exports import csv_chunks
from leaderboards.reporting import run_leaderboard
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from tests.conftest import client_for, work_queue
from tests.providers.fake_server import FakeProvider, Reply
from tests.providers.sse_fixtures import openai_events


def one_arm(experiment, arm: ArmSpec, tasks: int = 2) -> None:
    do_replace_arms(experiment, [arm])
    experiment.sample_size = tasks
    experiment.save()


def test_a_mock_run_records_its_timing_and_the_board_shows_it(experiment, start, alice):
    one_arm(experiment, ArmSpec("slow", "mock", "mock-slow", {"mode": "oracle", "latency_ms": 40}))
    run = start(experiment, inference_only=True)
    work_queue()
    attempts = list(run.attempts.all())
    assert {a.status for a in attempts} == {"completed"}
    for attempt in attempts:
        # The mock's simulated first token: a fifth to a third of its 40 ms.
        assert 8 <= attempt.first_token_ms <= 14 and attempt.latency_ms == 40
        expected_speed = attempt.output_tokens * 1000 / (40 - attempt.first_token_ms)
        assert abs(attempt.output_tokens_per_s - expected_speed) < 0.01
        assert attempt.wall_ms >= 40  # the mock really sleeps its latency
    (row,) = run_leaderboard(run)
    assert 8 <= row.first_token_p50_ms <= 14 and row.output_tokens_per_s_median > 0
    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200
    assert "TTFT p50 ms" in page.content.decode() and "tok/s" in page.content.decode()
    detail = client_for(alice).get(reverse("experiments:attempt", args=[attempts[0].code]))
    assert detail.status_code == 200
    html = detail.content.decode()
    assert f"Time to first token</dt><dd>{attempts[0].first_token_ms} ms" in html
    assert f"Wall time incl. retries</dt><dd>{attempts[0].wall_ms} ms" in html
    header, *rows = csv.reader(io.StringIO("".join(csv_chunks(run))))  # a row's question spans lines
    assert "first_token_ms,output_tokens_per_s,wall_ms" in ",".join(header) and len(rows) == 2


def test_a_streamed_attempt_cut_once_records_both_latencies(experiment, org, start):
    server = FakeProvider()
    events = openai_events()
    # The first try is cut after 150 ms; the retry streams the whole answer.
    server.script(
        Reply(events=events, framing="close", cut_after=len(events) - 3, delay_s=0.15),
        Reply(events=events, piece_delay_s=0.02),
    )
    try:
        credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
        credential.set_api_key("sk-test-stream-000000")
        credential.save()
        one_arm(experiment, ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 1, "retry_base_ms": 1}), tasks=1)
        run = start(experiment, inference_only=True)
        work_queue()
    finally:
        server.close()
    for attempt in run.attempts.all():
        assert (attempt.status, attempt.error_message) == ("completed", "") and attempt.retries == 1
        assert attempt.retry_log[0]["category"] == ErrorCategory.CONNECTION
        assert attempt.output == "diff --git a/x b/x" and attempt.output_tokens == 7
        assert attempt.first_token_ms is not None and attempt.first_token_ms >= 20
        assert attempt.output_tokens_per_s is not None
        assert attempt.wall_ms >= attempt.latency_ms + 150
    assert len(server.seen) == 2


def test_a_failed_attempt_records_its_wall_time(experiment, org, start):
    server = FakeProvider()
    server.default = Reply(503, {"error": {"message": "The engine is currently overloaded"}}, delay_s=0.05)
    try:
        credential = ProviderCredential(org=org, provider="openai", base_url=server.url + "/v1")
        credential.set_api_key("sk-test-stream-000000")
        credential.save()
        one_arm(experiment, ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 1, "retry_base_ms": 1}))
        run = start(experiment, inference_only=True)
        work_queue()
    finally:
        server.close()
    for attempt in run.attempts.all():
        assert attempt.status == "failed" and attempt.error_category == ErrorCategory.OVERLOADED
        assert attempt.wall_ms >= 100  # two tries of at least 50 ms each
        assert attempt.first_token_ms is None and attempt.latency_ms is None
