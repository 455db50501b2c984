"""What each adapter's real SDK puts in the request body, checked by a local server that
refuses what the provider itself refuses, with the provider's own error bodies.

OpenAI answers 400 to ``max_tokens`` on its current models (o-series, gpt-4.1+ reasoning,
gpt-5.x) and to sampling settings on reasoning models; Anthropic refuses a temperature with
extended thinking and a thinking budget that is not below ``max_tokens``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from providers import gateway
from providers.actions import do_test_connection
from providers.errors import ErrorCategory, ProviderError
from providers.registry import arm_errors
from providers.types import ArmSpec, CompletionRequest, Message
from tests.providers.contracts import FAST
from tests.providers.fake_server import Reply
from tests.providers.refusals import (
    ANTHROPIC_OK,
    OPENAI_OK,
    REQUEST,
    call,
    credential_for,
    strict_anthropic,
    strict_openai,
)

# --- the bodies the real SDKs send, per provider kind ---------------------------------------

EXPECTED_BODIES = [
    (
        "openai",
        "gpt-4.1",
        {},
        {
            "model": "gpt-4.1",
            "messages": [
                {"role": "system", "content": "You write patches."},
                {"role": "user", "content": "Fix the bug"},
            ],
            "max_completion_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
            "top_p": 0.9,
            "stop": ["END"],
        },
    ),
    (
        "openai",
        "gpt-5-mini",
        {"reasoning_effort": "low"},
        {
            "model": "gpt-5-mini",
            "messages": [
                {"role": "system", "content": "You write patches."},
                {"role": "user", "content": "Fix the bug"},
            ],
            "max_completion_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
            "reasoning_effort": "low",
        },
    ),
    (
        "azure_openai",
        "o4-mini",
        {"reasoning_effort": "high"},
        {
            "model": "prod-o4",
            "messages": [
                {"role": "system", "content": "You write patches."},
                {"role": "user", "content": "Fix the bug"},
            ],
            "max_completion_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
            "reasoning_effort": "high",
        },
    ),
    (
        "openrouter",
        "openai/o3",
        {"reasoning_effort": "medium"},
        {
            "model": "openai/o3",
            "messages": [
                {"role": "system", "content": "You write patches."},
                {"role": "user", "content": "Fix the bug"},
            ],
            "max_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
            "reasoning": {"effort": "medium"},
            "usage": {"include": True},
        },
    ),
    (
        "openai_compatible",
        "llama3",
        {},
        {
            "model": "llama3",
            "messages": [
                {"role": "system", "content": "You write patches."},
                {"role": "user", "content": "Fix the bug"},
            ],
            "max_tokens": 64,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
            "top_p": 0.9,
            "stop": ["END"],
        },
    ),
    (
        "anthropic",
        "claude-sonnet-4-5",
        {"thinking_budget_tokens": 2048, "max_tokens": 4096},
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,  # the request's own; the arm's max_tokens is the request builder's
            "stream": True,  # streamed by default (config.stream); Anthropic sends usage unasked
            "messages": [{"role": "user", "content": "Fix the bug"}],
            "system": "You write patches.",
            "stop_sequences": ["END"],
            "thinking": {"type": "enabled", "budget_tokens": 2048},
        },
    ),
]


@pytest.mark.parametrize(
    "provider, model, config, body", EXPECTED_BODIES, ids=[f"{p}-{m}" for p, m, _, _ in EXPECTED_BODIES]
)
def test_each_provider_kind_sends_this_body(setup, fake, provider, model, config, body):
    permissive = lambda seen: Reply(200, ANTHROPIC_OK if provider == "anthropic" else OPENAI_OK)  # noqa: E731
    org = setup(provider, permissive)
    completion = call(org, provider, model, **config)
    assert completion.text == "the answer"
    assert fake.seen[-1].body == body
    extra_body = {"usage": {"include": True}, "reasoning": {"effort": "medium"}} if provider == "openrouter" else {}
    assert completion.raw_request | extra_body == body


# --- OpenAI's refusals, replayed -------------------------------------------------------------


@pytest.mark.parametrize(
    "provider, model",
    [("openai", "gpt-5"), ("openai", "o3"), ("openai", "gpt-4.1-mini"), ("azure_openai", "o4-mini")],
)
def test_current_openai_models_are_answered(setup, fake, provider, model):
    org = setup(provider)
    completion = call(org, provider, model)
    assert completion.text == "the answer" and completion.retries == 0
    assert len(fake.seen) == 1 and "max_tokens" not in fake.seen[0].body


def test_the_fake_refuses_max_tokens_as_openai_does(setup, fake):
    """The refusal the tests above rely on is live: max_tokens smuggled in through
    extra_body (past the arm checks, which refuse it) gets OpenAI's 400, mapped to an
    unsupported parameter (a configuration failure, not retried) with its message."""
    org = setup("openai")
    prepared = gateway.prepare(org.pk, ArmSpec("openai", "gpt-4.1", FAST | {"max_retries": 2}))
    smuggled = replace(
        prepared, arm=replace(prepared.arm, config=prepared.arm.config | {"extra_body": {"max_tokens": 64}})
    )
    with pytest.raises(ProviderError) as caught:
        gateway.call(smuggled, REQUEST)
    assert caught.value.category == ErrorCategory.UNSUPPORTED_PARAMETER
    assert "Unsupported parameter: 'max_tokens' is not supported with this model" in caught.value.message
    assert len(fake.seen) == 1 and caught.value.retries == 0


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5.1", "gpt-5-mini"])
def test_reasoning_models_get_no_sampling_settings(setup, fake, model):
    org = setup("openai")
    call(org, "openai", model)
    assert not {"temperature", "top_p", "stop"} & set(fake.seen[-1].body)


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-4o-mini", "gpt-5-chat-latest"])
def test_other_models_keep_their_sampling_settings(setup, fake, model):
    org = setup("openai", lambda seen: Reply(200, OPENAI_OK))
    call(org, "openai", model)
    body = fake.seen[-1].body
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.0, 0.9, ["END"])


# --- the settings, checked at save -----------------------------------------------------------


@pytest.mark.parametrize(
    "provider, model, config, error",
    [
        ("openai", "gpt-4o", {"reasoning_effort": "high"}, "config.reasoning_effort applies to reasoning models only"),
        ("azure_openai", "gpt-4.1", {"reasoning_effort": "low"}, "config.reasoning_effort applies to reasoning"),
        ("openai", "o3", {"reasoning_effort": "extreme"}, "config.reasoning_effort must be one of none, minimal"),
        ("anthropic", "claude-sonnet-4-5", {"reasoning_effort": "low"}, "config.reasoning_effort is not a anthropic"),
        ("anthropic", "claude-sonnet-4-5", {"thinking_budget_tokens": 1023}, "must be a whole number between 1024"),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {"thinking_budget_tokens": 4096},
            "config.thinking_budget_tokens must be less than max_tokens (4096)",
        ),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {"thinking_budget_tokens": 2000, "max_tokens": 2000},
            "config.thinking_budget_tokens must be less than max_tokens (2000)",
        ),
        (
            "anthropic",
            "claude-sonnet-4-5",
            {"thinking_budget_tokens": 2000, "temperature": 0.2},
            "config.temperature is not allowed with thinking_budget_tokens",
        ),
        ("openai", "gpt-5", {"thinking_budget_tokens": 2000}, "config.thinking_budget_tokens is not a openai setting"),
    ],
)
def test_bad_reasoning_settings_are_refused_at_save(provider, model, config, error):
    errors = arm_errors(provider, model, config)
    assert any(error in e for e in errors), errors


@pytest.mark.parametrize(
    "provider, model, config",
    [
        ("openai", "o3", {"reasoning_effort": "high"}),
        ("openai", "gpt-5.1", {"reasoning_effort": "none"}),
        ("azure_openai", "o4-mini", {"reasoning_effort": "minimal"}),
        ("openrouter", "anthropic/claude-sonnet-4.5", {"reasoning_effort": "low"}),
        ("openai_compatible", "gpt-oss-20b", {"reasoning_effort": "low"}),
        ("anthropic", "claude-sonnet-4-5", {"thinking_budget_tokens": 1024}),
        ("anthropic", "claude-opus-4-5", {"thinking_budget_tokens": 16000, "max_tokens": 32000, "top_p": 0.95}),
    ],
)
def test_good_reasoning_settings_are_accepted(provider, model, config):
    assert arm_errors(provider, model, config) == []


# --- Anthropic extended thinking -------------------------------------------------------------


def test_thinking_is_sent_without_temperature_and_its_blocks_are_not_the_answer(setup, fake):
    org = setup("anthropic", strict_anthropic)
    request = CompletionRequest(messages=(Message("user", "Fix the bug"),), max_output_tokens=4096, temperature=0.0)
    completion = call(org, "anthropic", "claude-sonnet-4-5", request, thinking_budget_tokens=2048)
    body = fake.seen[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in body and "top_p" not in body
    assert completion.text == "the answer"
    assert "reason about the bug" not in completion.text
    assert completion.raw_response["content"][0]["type"] == "thinking"  # kept in the record


def test_thinking_with_structured_output_lets_the_model_choose_the_tool(setup, fake):
    org = setup("anthropic", strict_anthropic)
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    request = CompletionRequest(messages=(Message("user", "Answer"),), max_output_tokens=4096, response_schema=schema)
    call(org, "anthropic", "claude-sonnet-4-5", request, thinking_budget_tokens=1024)
    assert fake.seen[-1].body["tool_choice"] == {"type": "auto"}


def test_without_thinking_anthropic_gets_temperature_and_no_thinking(setup, fake):
    org = setup("anthropic", strict_anthropic)
    call(org, "anthropic", "claude-haiku-4-5")
    body = fake.seen[-1].body
    assert "thinking" not in body and body["temperature"] == 0.0


# --- Test connection's default models --------------------------------------------------------


@pytest.mark.parametrize(
    "provider, model",
    [("openai", "gpt-4.1-mini"), ("anthropic", "claude-haiku-4-5"), ("openrouter", "openai/gpt-4.1-mini")],
)
def test_test_connection_asks_a_model_still_served(fake, org, provider, model):
    # OpenRouter takes max_tokens, so only the two strict fakes refuse it.
    fake.responder = {"anthropic": strict_anthropic, "openai": strict_openai}.get(
        provider, lambda seen: Reply(200, OPENAI_OK)
    )
    credential = credential_for(org, provider, fake.url + ("" if provider == "anthropic" else "/v1"))
    report = do_test_connection(org, credential)
    assert report.ok, report.message
    assert fake.seen[-1].body["model"] == model
