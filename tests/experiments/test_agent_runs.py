"""Agent arms through the real pipeline and sandbox: the mock model in a loop with tools on a
mined repository and on the demo's self-contained tasks, beside a single-turn arm of the same
model; the loop's edges (a malformed call, the turn ceiling, a token ceiling, a tool that times
out, a turn that fails for good); and a resumed trajectory that pays for no turn twice."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from datasets.demo import load_demo_dataset
from datasets.models import Dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Artifact, ArtifactKind, AttemptStatus
from experiments.trajectory import Ended, Trajectory
from providers.errors import ErrorCategory
from tests.conftest import client_for, work_queue
from tests.factories import ingest_textkit

ORACLE_AGENT = {"mode": "oracle", "solver": "agent", "max_turns": 12}


def run_arms(org, alice, dataset, start, arms, repetitions=1, **changes):
    spec = ExperimentSpec(name="agents", dataset=dataset, arms=arms, repetitions=repetitions, seed=11, **changes)
    run = start(do_save_experiment(org, spec, alice))
    work_queue()
    run.refresh_from_db()
    return run


def trajectory_of(attempt) -> Trajectory:
    return Trajectory.from_json(Artifact.objects.get(attempt=attempt, kind=ArtifactKind.TRAJECTORY).content)


def test_an_agent_arm_resolves_a_mined_repository_beside_its_single_turn_arm(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit)
    dataset = Dataset.objects.get(name="textkit")
    arms = [
        ArmSpec("single", "mock", "mock-oracle", {"mode": "oracle"}),
        ArmSpec("agent", "mock", "mock-oracle", ORACLE_AGENT),
        ArmSpec("wrong-agent", "mock", "mock-wrong", {"mode": "wrong", "solver": "agent"}),
    ]
    run = run_arms(org, alice, dataset, start, arms)
    assert run.status == "completed"
    tasks = dataset.tasks.filter(quarantined=False).count()
    for label, resolved in (("single", tasks), ("agent", tasks), ("wrong-agent", 0)):
        attempts = run.attempts.filter(arm__label=label)
        assert attempts.filter(status=AttemptStatus.COMPLETED).count() == tasks, label
        assert attempts.filter(resolved=True).count() == resolved, label
    for attempt in run.attempts.filter(arm__label="agent").select_related("task"):
        steps = trajectory_of(attempt)
        assert steps.ended == Ended.SUBMITTED
        assert attempt.turns == len(steps.steps) >= 3 and attempt.tool_calls == steps.tool_call_count
        names = [call["name"] for step in steps.steps for call in step.tool_calls]
        assert names[0] == "list_files" and "read_file" in names and "replace" in names and names[-1] == "submit"
        # The model was told the task's problem, not its hidden tests or its fix.
        first = steps.steps[0].sent[0]["content"]
        assert attempt.task.problem_statement in first
        hidden = [
            line[len("+def ") :].split("(")[0]
            for line in attempt.task.test_patch.splitlines()
            if line.startswith("+def ")
        ]
        assert hidden and not any(name in first for name in hidden)
        # Nor could a tool show them: no call's result holds the hidden tests' names.
        shown = "".join(result["content"] for step in steps.steps for result in step.results)
        assert not any(name in shown for name in hidden)
        assert attempt.input_tokens == sum(step.input_tokens for step in steps.steps)
        assert attempt.output and attempt.patch_applied and attempt.input_tokens > 0
        # The answer is the working copy's diff, validated on a fresh copy like any patch.
        patch = attempt.extracted_answer
        assert patch.startswith("diff --git a/") or patch.startswith("--- a/")
    single = run.attempts.filter(arm__label="single").first()
    assert single.turns is None and single.tool_calls is None
    assert not Artifact.objects.filter(attempt=single, kind=ArtifactKind.TRAJECTORY).exists()
    wrong = run.attempts.filter(arm__label="wrong-agent").first()
    assert wrong.patch_applied and wrong.resolved is False  # it edited, and fixed nothing


def test_an_agent_arm_runs_the_demo_tasks(org, alice, start):
    dataset = load_demo_dataset(org)
    arms = [ArmSpec("single", "mock", "mock-oracle", {"mode": "oracle"}), ArmSpec("agent", "mock", "m", ORACLE_AGENT)]
    run = run_arms(org, alice, dataset, start, arms)
    assert run.status == "completed"
    single = run.attempts.filter(arm__label="single", resolved=True).count()
    agent = run.attempts.filter(arm__label="agent", resolved=True).count()
    assert single == agent == run.attempts.filter(arm__label="agent").count() > 0
    attempt = run.attempts.filter(arm__label="agent").first()
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempt.code]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "read_file" in text and "submit" in text


def test_a_malformed_call_is_shown_to_the_model_and_counted(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("agent", "mock", "m", {**ORACLE_AGENT, "agent_fault": "malformed_call"})]
    attempt = run_arms(org, alice, dataset, start, arms).attempts.get()
    steps = trajectory_of(attempt)
    assert steps.malformed_calls == 1
    broken = next(step for step in steps.steps if any("malformed" in call for call in step.tool_calls))
    assert broken.results[0]["is_error"] and "JSON" in broken.results[0]["content"]
    # It read the error and went on: the attempt is still the model's to win.
    assert attempt.resolved is True
    assert any("malformed tool call" in warning for warning in attempt.warnings)


def test_the_turn_ceiling_ends_the_loop_and_the_working_copy_is_validated(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("agent", "mock", "m", {**ORACLE_AGENT, "agent_fault": "never_submit", "max_turns": 4})]
    attempt = run_arms(org, alice, dataset, start, arms).attempts.get()
    assert attempt.status == AttemptStatus.COMPLETED and attempt.turns == 4
    assert trajectory_of(attempt).ended == Ended.MAX_TURNS
    assert attempt.finish_reason == Ended.MAX_TURNS and attempt.patch_present is False and attempt.resolved is False


def test_a_token_ceiling_stops_before_the_turn_past_it(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("agent", "mock", "m", {**ORACLE_AGENT, "max_attempt_tokens": 1})]
    attempt = run_arms(org, alice, dataset, start, arms).attempts.get()
    assert attempt.turns == 1 and trajectory_of(attempt).ended == Ended.TOKEN_CEILING


def test_a_cost_ceiling_stops_before_the_turn_past_it(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    priced = {**ORACLE_AGENT, "price_input_per_mtok": 1000.0, "price_output_per_mtok": 1000.0}
    arms = [ArmSpec("agent", "mock", "m", {**priced, "max_attempt_cost_usd": 0.000001})]
    attempt = run_arms(org, alice, dataset, start, arms).attempts.get()
    assert attempt.turns == 1 and trajectory_of(attempt).ended == Ended.COST_CEILING
    assert attempt.cost_usd > 0


def test_the_no_tests_tool_set_offers_no_test_runs(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit)
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("agent", "mock", "m", {**ORACLE_AGENT, "tools": "no_tests"})]
    run = run_arms(org, alice, dataset, start, arms, repetitions=2)
    for attempt in run.attempts.all():
        offered = [tool["name"] for tool in attempt.request["tools"]]
        assert "run_tests" not in offered and "submit" in offered
        called = {call["name"] for step in trajectory_of(attempt).steps for call in step.tool_calls}
        assert "run_tests" not in called and attempt.resolved is True


def test_a_turn_that_fails_for_good_is_infrastructure_and_keeps_what_was_paid(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    config = {**ORACLE_AGENT, "failure_rate": 1.0, "max_retries": 0, "failure_category": "server_error"}
    attempt = run_arms(org, alice, dataset, start, [ArmSpec("agent", "mock", "m", config)]).attempts.get()
    assert attempt.status == AttemptStatus.FAILED and attempt.error_category == ErrorCategory.SERVER_ERROR
    assert attempt.outcome != "model_failure"
    assert trajectory_of(attempt).ended == Ended.INFRASTRUCTURE


def test_an_agent_arm_on_a_question_dataset_fails_as_the_platforms(org, alice, mmlu, start):
    run = run_arms(org, alice, mmlu, start, [ArmSpec("agent", "mock", "m", ORACLE_AGENT)], sample_size=2)
    attempt = run.attempts.first()
    assert attempt.error_category == ErrorCategory.PLATFORM_ERROR and "writes patches" in attempt.error_message


@pytest.mark.parametrize("bad", [{"max_turns": 5}, {"solver": "agent", "max_turns": 0}, {"solver": "robot"}])
def test_agent_settings_are_checked_like_every_setting(org, alice, bad):
    from experiments.actions import check_experiment_spec

    dataset = load_demo_dataset(org)
    spec = {
        "name": "x",
        "dataset": dataset.name,
        "arms": [{"label": "a", "provider": "mock", "model_name": "m", "config": bad}],
    }
    with pytest.raises(Exception) as refused:
        check_experiment_spec(org, spec)
    named = next(iter(key for key in bad if key != "solver"), "solver")
    assert f"config.{named}" in str(refused.value)


# provider -> model, the credential's base URL suffix, api-version, deployments, the fake model server
WIRES = {
    "openai": ("gpt-4o", "/v1", "", {}, "openai"),
    "openrouter": ("openai/gpt-4o", "/v1", "", {}, "openai"),
    "openai_compatible": ("llama3", "/v1", "", {}, "openai"),
    "azure_openai": ("gpt-4o", "", "2024-10-21", {"gpt-4o": "prod-4o"}, "openai"),
    "anthropic": ("claude-sonnet-4-5", "", "", {}, "anthropic"),
}


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("provider", sorted(WIRES))
def test_every_wire_runs_the_agent_through_the_pipeline_and_sandbox(org, alice, fake, provider, stream, start):
    """The mock agent behind a fake server speaking the provider's tool-call format: the real
    adapter, gateway, loop, tools in the sandbox and validation, as a real model would meet them."""
    from experiments.mock_books import register_mock_books
    from providers.models import ProviderCredential
    from tests.providers.agent_servers import anthropic_agent, openai_agent

    model, suffix, api_version, deployments, wire = WIRES[provider]
    dataset = load_demo_dataset(org)
    register_mock_books([dataset])  # the fake model's knowledge: it reads the task in the messages
    fake.responder = (openai_agent if wire == "openai" else anthropic_agent)({"mode": "oracle"})
    credential = ProviderCredential(
        org=org, provider=provider, base_url=fake.url + suffix, api_version=api_version, deployments=deployments
    )
    credential.set_api_key("sk-wire-agent-0000000000")
    credential.save()
    config = {"solver": "agent", "stream": stream, "max_retries": 0, "max_turns": 12}
    run = run_arms(org, alice, dataset, start, [ArmSpec("agent", provider, model, config)], sample_size=2)
    assert run.status == "completed"
    for attempt in run.attempts.all():
        assert attempt.status == AttemptStatus.COMPLETED and attempt.resolved is True, attempt.error_message
        steps = trajectory_of(attempt)
        assert steps.ended == Ended.SUBMITTED and attempt.turns == len(steps.steps) >= 3
        assert attempt.input_tokens > 0
    assert "sk-wire-agent-0000000000" not in json.dumps(
        list(run.attempts.values("request", "raw_response", "output")), default=str
    )


def test_an_agents_counts_are_its_turns_summed_cache_writes_included():
    """Each count the provider reports, summed over the turns: an Anthropic agent's cache
    writes (billed apart) are on the attempt as they are on a single-turn answer."""
    from decimal import Decimal

    from experiments.agent import _Totals
    from providers.types import Completion, Usage

    totals = _Totals()
    for cache_write in (100, 40):
        usage = Usage(input_tokens=500, output_tokens=20, cached_tokens=300, cache_write_tokens=cache_write)
        totals.add(Completion("", "tool_use", usage, latency_ms=10, cost_usd=Decimal("0.01"), model_served="m"))
    assert totals.usage == Usage(input_tokens=1000, output_tokens=40, cached_tokens=600, cache_write_tokens=140)
    assert (totals.cost, totals.latency_ms, totals.tokens) == (Decimal("0.02"), 20, 1040)
