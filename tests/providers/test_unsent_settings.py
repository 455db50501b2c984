"""What the gateway does not send is named, never dropped silently (issue 26): gpt-5.1 and
later keep temperature and top_p with reasoning_effort none (OpenAI's "Using GPT-5.x" guide:
sampling parameters only then); every setting left out is a warning on the attempt, stored and
shown on its page and in the API; the seed goes only where the API still documents it (OpenAI's
OpenAPI document marks chat completions' seed deprecated; Anthropic has none). Through the real
SDKs, against a local server that refuses what OpenAI and Anthropic refuse."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.urls import reverse

from experiments.actions import ArmSpec as ExperimentArm
from experiments.actions import do_replace_arms
from tests.conftest import api_client, client_for, make_api_key, work_queue
from tests.providers.fake_server import Reply, Seen
from tests.providers.refusals import ANTHROPIC_OK, OPENAI_OK, REQUEST, call, openai_refusal, strict_anthropic

# The platform's own seed, and no sampling setting any model here could refuse.
SEEDED = replace(REQUEST, seed_key="7:task:arm:0", temperature=None, top_p=None, stop=())
LATER_GPT5 = re.compile(r"gpt-5\.[1-9]")


def gpt5x_openai(seen: Seen) -> Reply:
    """OpenAI's rule for sampling on reasoning models: refused, except by gpt-5.1 and later
    with reasoning_effort none; stop refused by them all."""
    body = seen.body
    model = body["model"]
    if model.startswith(("o", "gpt-5")) and "-chat" not in model:
        takes_sampling = LATER_GPT5.match(model) and body.get("reasoning_effort") == "none"
        for param in ("temperature", "top_p") if not takes_sampling else ():
            if param in body:
                return Reply(400, openai_refusal(param))
        if "stop" in body:
            return Reply(400, openai_refusal("stop"))
    return Reply(200, OPENAI_OK)


@pytest.mark.parametrize("model", ["gpt-5.1", "gpt-5.2", "gpt-5.1-2025-11-13"])
def test_later_gpt5_with_no_reasoning_keeps_its_sampling_settings(setup, fake, model):
    org = setup("openai", gpt5x_openai)
    completion = call(org, "openai", model, reasoning_effort="none")
    body = fake.seen[-1].body
    assert (body["temperature"], body["top_p"], body["reasoning_effort"]) == (0.0, 0.9, "none")
    assert "stop" not in body
    assert completion.warnings == (f"stop was not sent: {model} is a reasoning model and refuses it",)


@pytest.mark.parametrize(
    "model, config, why",
    [
        ("gpt-5.1", {"reasoning_effort": "low"}, "gpt-5.1 takes it only with reasoning_effort none"),
        ("gpt-5.1", {}, "gpt-5.1 takes it only with reasoning_effort none"),
        ("gpt-5", {"reasoning_effort": "minimal"}, "gpt-5 is a reasoning model and refuses it"),
        ("o3", {}, "o3 is a reasoning model and refuses it"),
    ],
)
def test_sampling_settings_a_model_refuses_are_named(setup, fake, model, config, why):
    org = setup("openai", gpt5x_openai)
    completion = call(org, "openai", model, **config)
    assert completion.text == "the answer"
    assert not {"temperature", "top_p", "stop"} & set(fake.seen[-1].body)
    assert completion.warnings[:2] == (f"temperature was not sent: {why}", f"top_p was not sent: {why}")
    assert completion.warnings[2] == f"stop was not sent: {model} is a reasoning model and refuses it"


def test_models_that_sample_get_everything_and_no_warning(setup, fake):
    org = setup("openai", gpt5x_openai)
    completion = call(org, "openai", "gpt-4.1")
    assert {"temperature", "top_p", "stop"} <= set(fake.seen[-1].body) and completion.warnings == ()


def test_extended_thinking_names_the_sampling_it_leaves_out(setup, fake):
    org = setup("anthropic", strict_anthropic)
    thinking = replace(REQUEST, max_output_tokens=4096)
    completion = call(org, "anthropic", "claude-sonnet-4-5", thinking, thinking_budget_tokens=2048)
    body = fake.seen[-1].body
    assert "temperature" not in body and "top_p" not in body  # 0.9 is below thinking's 0.95
    assert completion.warnings == (
        "temperature was not sent: Anthropic refuses it with extended thinking (thinking_budget_tokens)",
        "top_p was not sent: Anthropic takes only 0.95 to 1 with extended thinking",
    )


@pytest.mark.parametrize(
    "provider, model, seeded",
    [
        ("openai", "gpt-4.1", False),  # deprecated in OpenAI's OpenAPI document
        ("azure_openai", "o4-mini", True),
        ("openrouter", "meta-llama/llama-3.3-70b-instruct", True),
        ("openai_compatible", "llama3", True),
        ("anthropic", "claude-sonnet-4-5", False),  # the Messages API has no seed
    ],
)
def test_the_seed_goes_only_where_the_api_documents_it(setup, fake, provider, model, seeded):
    org = setup(provider, lambda seen: Reply(200, ANTHROPIC_OK if provider == "anthropic" else OPENAI_OK))
    completion = call(org, provider, model, request=SEEDED)
    assert ("seed" in fake.seen[-1].body) is seeded
    assert completion.warnings == ()  # nobody asked for it: the platform's own seed


def test_asking_openai_for_the_seed_is_answered_with_a_warning(setup, fake):
    org = setup("openai", lambda seen: Reply(200, OPENAI_OK))
    completion = call(org, "openai", "gpt-4.1", request=SEEDED, send_seed=True)
    assert "seed" not in fake.seen[-1].body
    assert completion.warnings == (
        "seed was not sent: OpenAI's API marks seed deprecated for chat completions, so send_seed has no effect",
    )


def test_the_warning_is_stored_and_shown_on_the_attempt(setup, fake, experiment, start, alice, org):
    setup("openai", gpt5x_openai)
    arm = ExperimentArm("gpt", "openai", "gpt-5.1", {"max_retries": 0, "temperature": 0.3, "reasoning_effort": "low"})
    do_replace_arms(experiment, [arm])
    experiment.sample_size = 1
    experiment.save()
    run = start(experiment, inference_only=True)
    work_queue()
    (attempt,) = run.attempts.all()
    warning = "temperature was not sent: gpt-5.1 takes it only with reasoning_effort none"
    assert (attempt.status, attempt.warnings) == ("completed", [warning])
    assert "temperature" not in fake.seen[-1].body
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempt.code]))
    assert page.status_code == 200
    assert f'<dt>Warnings</dt><dd><span class="bad">{warning}</span>' in page.content.decode()
    answer = api_client(make_api_key(org, ["read"])).get(f"/api/attempts/{attempt.code}")
    assert answer.status_code == 200 and answer.json()["warnings"] == [warning]
