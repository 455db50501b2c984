"""What each adapter's real SDK puts in the request body, checked by a local server that
refuses what the provider itself refuses, with the provider's own error bodies.

OpenAI answers 400 to ``max_tokens`` on its current models (o-series, gpt-4.1+ reasoning,
gpt-5.x) and to sampling settings on reasoning models; Anthropic refuses a temperature with
extended thinking and a thinking budget that is not below ``max_tokens``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from orgs.models import Organization
from providers import gateway
from providers.actions import do_test_connection
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.registry import arm_errors
from providers.types import ArmSpec, CompletionRequest, Message
from tests.providers.fake_server import FakeProvider, Reply, Seen

KEY = "sk-live-SECRET-0123456789abcdef"
REQUEST = CompletionRequest(
    messages=(Message("user", "Fix the bug"),),
    system="You write patches.",
    max_output_tokens=64,
    temperature=0.0,
    top_p=0.9,
    stop=("END",),
)
FAST = {"max_retries": 0, "timeout_read_s": 5}

# OpenAI's answer to max_tokens on a current model, as the API sends it.
MAX_TOKENS_REFUSED = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    }
}


def openai_refusal(param: str) -> dict:
    return {
        "error": {
            "message": f"Unsupported parameter: '{param}' is not supported with this model.",
            "type": "invalid_request_error",
            "param": param,
            "code": "unsupported_parameter",
        }
    }


def anthropic_refusal(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


OPENAI_OK = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "served",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}
ANTHROPIC_OK = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "served",
    "content": [
        {"type": "thinking", "thinking": "Let me reason about the bug first.", "signature": "EqQBCkYIAxgC"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "text", "text": "the answer"},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 11, "output_tokens": 70},
}


def strict_openai(seen: Seen) -> Reply:
    """A current OpenAI model: max_tokens refused always, sampling refused by reasoning models."""
    if "max_tokens" in seen.body:
        return Reply(400, MAX_TOKENS_REFUSED)
    if seen.body["model"].startswith(("o", "gpt-5", "prod-")):
        for param in ("temperature", "top_p", "stop"):
            if param in seen.body:
                return Reply(400, openai_refusal(param))
    return Reply(200, OPENAI_OK)


def strict_anthropic(seen: Seen) -> Reply:
    thinking = seen.body.get("thinking")
    if thinking and "temperature" in seen.body:
        return Reply(400, anthropic_refusal("`temperature` may only be set to 1 when thinking is enabled."))
    if thinking and thinking["budget_tokens"] >= seen.body["max_tokens"]:
        return Reply(400, anthropic_refusal("`max_tokens` must be greater than `thinking.budget_tokens`."))
    if thinking and seen.body.get("tool_choice", {}).get("type") in ("tool", "any"):
        return Reply(400, anthropic_refusal("Thinking may not be enabled when tool_choice forces tool use."))
    return Reply(200, ANTHROPIC_OK)


@pytest.fixture
def fake():
    server = FakeProvider()
    yield server
    server.close()


def credential_for(org: Organization, provider: str, base_url: str) -> ProviderCredential:
    extra = {"api_version": "2024-10-21", "deployments": {"o4-mini": "prod-o4"}} if provider == "azure_openai" else {}
    credential = ProviderCredential(org=org, provider=provider, base_url=base_url, **extra)
    credential.set_api_key(KEY)
    credential.save()
    return credential


@pytest.fixture
def setup(fake, org):
    def make(provider: str, responder=strict_openai) -> Organization:
        fake.responder = responder
        credential_for(org, provider, fake.url + ("" if provider in ("anthropic", "azure_openai") else "/v1"))
        return org

    return make


def call(org, provider, model, request=REQUEST, **config):
    return gateway.complete(org.pk, ArmSpec(provider, model, FAST | config), request)


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
