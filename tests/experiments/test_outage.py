"""One provider down for the whole run: its arm shows the outage, the other arms do not notice."""

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from leaderboards.reporting import run_leaderboard
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply


def test_an_outage_fails_one_arm_not_the_run(experiment, org, django_capture_on_commit_callbacks):
    down = FakeProvider()
    down.default = Reply(503, {"error": {"message": "The engine is currently overloaded"}})
    try:
        credential = ProviderCredential(org=org, provider="openai", base_url=down.url + "/v1")
        credential.set_api_key("sk-test-outage-000000")
        credential.save()
        do_replace_arms(
            experiment,
            [
                ArmSpec("healthy", "mock", "mock-oracle", {"mode": "oracle"}),
                ArmSpec("down", "openai", "gpt-4o", {"max_retries": 2, "retry_base_ms": 1}),
            ],
        )
        with django_capture_on_commit_callbacks(execute=True):
            run = do_start_run(experiment)
        work_queue()
    finally:
        down.close()
    run.refresh_from_db()
    assert run.status == "completed"
    board = {row.label: row for row in run_leaderboard(run)}
    # The outage is the provider's, not the model's: shown apart, and no rate counts it.
    assert (board["down"].n, board["down"].infrastructure_failed, board["down"].resolved_rate) == (0, 4, None)
    assert (board["healthy"].n, board["healthy"].error_rate, board["healthy"].resolved_rate) == (4, 0.0, 1.0)
    failed = run.attempts.filter(arm__label="down")
    assert set(failed.values_list("error_category", "retries")) == {(ErrorCategory.OVERLOADED, 2)}
    assert len(down.seen) == 4 * 3  # every try reached the server, none more
    assert [row.label for row in run_leaderboard(run)] == ["healthy", "down"]


def test_each_retry_is_recorded_on_the_attempt(experiment, org, django_capture_on_commit_callbacks):
    flaky = FakeProvider()
    flaky.script(
        Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0.05"}),
        Reply(500, {"error": {"message": "oops"}}),
    )
    flaky.default = Reply(
        200,
        {
            "id": "x",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "no diff"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        },
    )
    try:
        credential = ProviderCredential(org=org, provider="openai", base_url=flaky.url + "/v1")
        credential.set_api_key("sk-test-retries-00000")
        credential.save()
        do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 3, "retry_base_ms": 1})])
        experiment.sample_size = 1
        experiment.save()
        with django_capture_on_commit_callbacks(execute=True):
            run = do_start_run(experiment)
        work_queue()
    finally:
        flaky.close()
    attempt = run.attempts.get()
    assert attempt.status == "completed" and attempt.retries == 2
    assert [(r["try"], r["category"]) for r in attempt.retry_log] == [(1, "rate_limited"), (2, "server_error")]
    assert attempt.retry_log[0]["wait_s"] >= 0.05
