"""The opt-in response cache, end to end through the real OpenAI SDK against a local server:
an identical temperature-0 request of the same organisation reuses the stored answer, marked
cached, counted for quality and left out of latency and cost."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from datasets.demo import load_demo_dataset
from experiments.actions import ArmSpec, ExperimentSpec, SpecError, check_experiment_spec, do_save_experiment
from experiments.exports import csv_chunks
from experiments.models import Attempt, CachedResponse, Experiment, Run
from leaderboards.aggregation import arm_leaderboard
from leaderboards.reporting import run_board_text, run_leaderboard
from orgs.models import Organization
from providers.models import ProviderCredential
from tests.conftest import client_for, work_queue
from tests.forms import ORACLE, form_data
from tests.providers.fake_server import FakeProvider, Reply, Seen


def chat_completion(content: str) -> dict:
    """OpenAI's chat.completion object, as the API sends it."""
    return {
        "id": "chatcmpl-cache",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 120, "total_tokens": 1020},
    }


class GoldProvider(FakeProvider):
    """Answers each task with its gold patch (found by the problem statement in the prompt),
    so cached answers resolve their tasks like fresh ones."""

    def __init__(self, tasks) -> None:
        super().__init__()
        self.tasks = list(tasks)
        self.responder = self.answer

    def answer(self, seen: Seen) -> Reply:
        prompt = seen.body["messages"][-1]["content"]
        task = next(t for t in self.tasks if t.problem_statement in prompt)
        return Reply(200, chat_completion(f"Here is the fix.\n\n```diff\n{task.gold_patch}```\n"))

    def calls(self) -> int:
        return len(self.seen)


@pytest.fixture
def provider(dataset):
    fake = GoldProvider(dataset.tasks.all())
    yield fake
    fake.close()


def openai_credential(org, fake: FakeProvider) -> None:
    credential = ProviderCredential(org=org, provider="openai", base_url=fake.url + "/v1")
    credential.set_api_key("sk-test-cache-0000000000")
    credential.save()


def cached_experiment(org, dataset, *, cache=True, sample_size=2, repetitions=1, name="Cache", **config):
    arm = ArmSpec("gpt", "openai", "gpt-4o", {"temperature": 0, "max_retries": 0, **config})
    spec = ExperimentSpec(
        name=name,
        dataset=dataset,
        arms=[arm],
        sample_size=sample_size,
        sample_strategy="first",
        seed=3,
        repetitions=repetitions,
        response_cache=cache,
    )
    return do_save_experiment(org, spec)


@pytest.fixture
def run_now(start):
    """Start a run and work it. Without ``validate``, inference only: validating runs each
    task's tests, which only the tests about quality need."""

    def run_now(experiment, validate: bool = False) -> Run:
        run = start(experiment, inference_only=not validate)
        work_queue()
        run.refresh_from_db()
        return run

    return run_now


def by_task(run: Run) -> dict[str, Attempt]:
    return {a.task.external_id: a for a in run.attempts.select_related("task")}


# --- reuse -------------------------------------------------------------------------------


def test_a_second_run_reuses_every_answer_without_a_call(org, dataset, provider, start, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    first = run_now(experiment, validate=True)
    assert provider.calls() == 2
    assert first.attempts.filter(response_cached=False, status="completed").count() == 2
    # The run keeps the setting it started with: switching the cache off afterwards does
    # not change a run already under way.
    second = start(experiment)
    Experiment.objects.filter(pk=experiment.pk).update(response_cache=False)
    work_queue()
    second.refresh_from_db()
    assert second.status == "completed"
    assert provider.calls() == 2  # not one more
    paid, reused = by_task(first), by_task(second)
    assert paid.keys() == reused.keys()
    for task_id, attempt in reused.items():
        original = paid[task_id]
        assert attempt.response_cached and attempt.cached_from_id == original.pk
        assert (attempt.output, attempt.input_tokens, attempt.output_tokens) == (
            original.output,
            original.input_tokens,
            original.output_tokens,
        )
        assert attempt.resolved is True and attempt.patch_applied is True  # validated and scored again
        assert (attempt.cost_usd, attempt.cost_source, attempt.latency_ms) == (Decimal(0), "cache", None)
        assert attempt.request["messages"] == original.request["messages"]  # its own request, recorded
    entries = CachedResponse.objects.filter(org=org)
    assert sorted(entries.values_list("source_attempt_id", "hits")) == sorted((a.pk, 1) for a in paid.values())


def test_cached_attempts_count_for_quality_but_not_latency_or_cost(org, dataset, provider, run_now):
    openai_credential(org, provider)
    run_now(cached_experiment(org, dataset, sample_size=2, name="Two"))
    mixed = run_now(cached_experiment(org, dataset, sample_size=4, name="Four"), validate=True)
    assert provider.calls() == 2 + 2  # the two tasks answered before are not asked again
    called = mixed.attempts.filter(response_cached=False)
    assert called.count() == 2 and mixed.attempts.filter(response_cached=True).count() == 2
    latencies = sorted(called.values_list("latency_ms", flat=True))
    costs = list(called.values_list("cost_usd", flat=True))
    assert all(cost is not None and cost > 0 for cost in costs)  # priced from the catalog

    [row] = run_leaderboard(mixed)
    assert (row.n, row.resolved, row.resolved_rate, row.cached) == (4, 4, 1.0, 2)  # quality counts all
    assert row.latency_p50_ms == pytest.approx(float(np.percentile(latencies, 50)))
    assert row.latency_p95_ms == pytest.approx(float(np.percentile(latencies, 95)))
    assert row.cost_usd == sum(costs)
    assert row.cost_per_resolved_usd == (sum(costs) / 2).quantize(Decimal("0.00000001"))  # per paid answer
    assert "2 attempt(s) reused a cached answer" in run_board_text(mixed)


def test_a_board_of_cached_attempts_only_has_no_latency_and_no_cost(org, dataset, provider, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    run_now(experiment)
    [row] = arm_leaderboard(run_now(experiment).attempts.all())
    assert (row.n, row.cached) == (2, 2)
    assert (row.latency_p50_ms, row.latency_p95_ms, row.cost_usd, row.cost_per_resolved_usd) == (
        None,
        None,
        Decimal(0),
        None,
    )


def test_re_pricing_leaves_cached_attempts_free(org, dataset, provider, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    first = run_now(experiment)
    second = run_now(experiment)
    Attempt.objects.update(cost_usd=None, cost_source="")
    second.attempts.update(cost_usd=0, cost_source="cache")
    call_command("recompute_costs", stdout=io.StringIO())
    assert set(second.attempts.values_list("cost_usd", "cost_source")) == {(Decimal(0), "cache")}
    assert all(cost and cost > 0 for cost in first.attempts.values_list("cost_usd", flat=True))


def test_an_answer_is_reused_across_experiments_of_the_organisation(org, dataset, provider, run_now):
    openai_credential(org, provider)
    run_now(cached_experiment(org, dataset, name="One"))
    other = run_now(cached_experiment(org, dataset, name="Other"))
    assert provider.calls() == 2
    assert other.attempts.filter(response_cached=True).count() == 2


def test_operational_settings_do_not_change_the_key(org, dataset, provider, run_now):
    openai_credential(org, provider)
    run_now(cached_experiment(org, dataset, name="One"))
    patient = run_now(cached_experiment(org, dataset, name="Patient", max_retries=5, timeout_read_s=300))
    assert provider.calls() == 2
    assert patient.attempts.filter(response_cached=True).count() == 2


# --- no reuse ----------------------------------------------------------------------------


def test_with_the_cache_off_every_run_calls(org, dataset, provider, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset, cache=False)
    run_now(experiment)
    second = run_now(experiment)
    assert provider.calls() == 4
    assert not second.attempts.filter(response_cached=True).exists()
    assert not CachedResponse.objects.exists()  # nothing stored either


@pytest.mark.parametrize("temperature", [0.7, None])
def test_only_temperature_zero_is_cached(org, dataset, provider, run_now, temperature):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    arm = experiment.arms.get()
    arm.config = {"max_retries": 0} | ({"temperature": temperature} if temperature is not None else {})
    arm.save()
    run_now(experiment)
    second = run_now(experiment)
    assert provider.calls() == 4
    assert not second.attempts.filter(response_cached=True).exists()
    assert not CachedResponse.objects.exists()


def test_another_organisation_does_not_share_answers(org, dataset, provider, run_now):
    openai_credential(org, provider)
    run_now(cached_experiment(org, dataset))
    other_org = Organization.objects.create(slug="globex", name="Globex")
    openai_credential(other_org, provider)
    theirs = run_now(cached_experiment(other_org, load_demo_dataset(other_org)))
    assert provider.calls() == 4  # the identical requests were sent again
    assert not theirs.attempts.filter(response_cached=True).exists()
    assert CachedResponse.objects.filter(org=other_org).count() == 2


def test_a_failure_is_never_cached(org, dataset, provider, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    provider.responder = None
    provider.default = Reply(400, {"error": {"message": "bad", "type": "invalid_request_error", "code": None}})
    failed = run_now(experiment)
    assert set(failed.attempts.values_list("status", flat=True)) == {"failed"}
    assert not CachedResponse.objects.exists()
    provider.responder = provider.answer
    answered = run_now(experiment)
    assert provider.calls() == 4
    assert set(answered.attempts.values_list("status", "response_cached")) == {("completed", False)}


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4o-mini"},
        {"prompt": "Please fix this.\n{{problem_statement}}\n{{repository}}"},
        {"config": {"top_p": 0.5}},
        {"config": {"max_tokens": 2048}},
    ],
    ids=["model", "message", "top_p", "max_tokens"],
)
def test_a_changed_request_misses(org, dataset, provider, run_now, change):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    run_now(experiment)
    arm = experiment.arms.get()
    arm.model_name = change.get("model", arm.model_name)
    arm.config |= change.get("config", {})
    arm.save()
    experiment.prompt_template = change.get("prompt", experiment.prompt_template)
    experiment.save()
    changed = run_now(experiment)
    assert provider.calls() == 4
    assert not changed.attempts.filter(response_cached=True).exists()


# --- repetitions -------------------------------------------------------------------------


def test_repetitions_claimed_together_both_call(org, dataset, provider, run_now, settings):
    """Attempts claimed in one batch are looked up before any of them is answered, so
    identical ones are not deduplicated in flight; the first answer stored is the one kept."""
    settings.PRBENCH_THREADS_PER_JOB = 4
    openai_credential(org, provider)
    run = run_now(cached_experiment(org, dataset, sample_size=1, repetitions=2))
    assert provider.calls() == 2
    assert not run.attempts.filter(response_cached=True).exists()
    [entry] = CachedResponse.objects.all()
    assert entry.source_attempt_id in set(run.attempts.values_list("pk", flat=True)) and entry.hits == 0


def test_a_repetition_claimed_after_the_first_was_answered_reuses_it(org, dataset, provider, run_now, settings):
    settings.PRBENCH_THREADS_PER_JOB = 1  # one attempt per claim: the first is recorded before the next claim
    openai_credential(org, provider)
    run = run_now(cached_experiment(org, dataset, sample_size=1, repetitions=2))
    assert provider.calls() == 1
    first, second = run.attempts.order_by("sequence")
    assert (first.response_cached, second.response_cached, second.cached_from_id) == (False, True, first.pk)
    assert second.output == first.output


def test_the_mock_provider_is_cached_too(org, dataset, run_now):
    arm = ArmSpec("mock", "mock", "mock-oracle", {"mode": "oracle", "temperature": 0})
    spec = ExperimentSpec(name="Mock", dataset=dataset, arms=[arm], sample_size=3, response_cache=True)
    experiment = do_save_experiment(org, spec)
    first = run_now(experiment)
    second = run_now(experiment)
    assert not first.attempts.filter(response_cached=True).exists()
    assert second.attempts.filter(response_cached=True, patch_well_formed=True).count() == 3


# --- settings ----------------------------------------------------------------------------


def test_the_spec_sets_the_cache_and_names_a_bad_value(org, dataset):
    raw = {"name": "Spec", "dataset": dataset.name, "arms": [{"label": "m", "provider": "mock", "model_name": "m"}]}
    assert check_experiment_spec(org, raw).response_cache is False
    assert check_experiment_spec(org, raw | {"response_cache": True}).response_cache is True
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, raw | {"response_cache": "yes"})
    assert refused.value.messages == ["response_cache: must be true or false"]
    assert not Experiment.objects.exists()


def test_the_form_sets_the_cache_and_the_run_keeps_it(bob, dataset, start):
    client = client_for(bob)
    response = client.post(reverse("experiments:create"), form_data(dataset, [ORACLE], response_cache="on"))
    assert response.status_code == 302
    experiment = Experiment.objects.get()
    assert experiment.response_cache is True
    assert "identical temperature-0 requests reuse" in client.get(response["Location"]).content.decode()
    run = start(experiment)
    assert run.config_snapshot["response_cache"] is True
    edit = form_data(dataset, [ORACLE])  # an unticked box is not sent
    assert client.post(reverse("experiments:edit", args=[experiment.code]), edit).status_code == 302
    experiment.refresh_from_db()
    run.refresh_from_db()
    assert (experiment.response_cache, run.config_snapshot["response_cache"]) == (False, True)


# --- pages and export --------------------------------------------------------------------


def test_pages_and_export_mark_cached_attempts(alice, charlie, org, dataset, provider, run_now):
    openai_credential(org, provider)
    experiment = cached_experiment(org, dataset)
    first = run_now(experiment)
    second = run_now(experiment)
    reused = second.attempts.order_by("sequence").first()
    assert reused is not None and reused.cached_from is not None
    client = client_for(alice)

    response = client.get(reverse("experiments:attempt", args=[reused.code]))
    assert response.status_code == 200
    page = response.content.decode()
    source_url = reverse("experiments:attempt", args=[reused.cached_from.code])
    assert f'answer of <a href="{source_url}">attempt {reused.cached_from.sequence}</a>' in page
    paid = client.get(reverse("experiments:attempt", args=[first.attempts.first().code])).content.decode()
    assert "answer of" not in paid

    run_page = client.get(reverse("experiments:run", args=[second.code])).content.decode()
    assert run_page.count('title="Reused a cached answer: no provider call">cached</span>') == 2
    assert "2 cached</small>" in run_page and "response cache on" in run_page

    rows = list(csv.DictReader(io.StringIO("".join(csv_chunks(second)))))
    assert [row["cached"] for row in rows] == ["True", "True"]
    assert {row["cached"] for row in csv.DictReader(io.StringIO("".join(csv_chunks(first))))} == {"False"}

    assert client_for(charlie).get(reverse("experiments:attempt", args=[reused.code])).status_code == 404
