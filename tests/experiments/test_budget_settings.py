"""A budget holds whatever an arm's settings say: each call reserves the output its request,
as the adapter finally sends it, can be billed for (every answer it asks for, each up to its
token ceiling), and what no budget can price is refused when the arm is saved.

Every provider kind runs through its real adapter and SDK against a local server that bills
what it was asked for, as a provider does when every answer runs to its limit: ``n`` (or
``best_of``) answers, each as long as the largest token ceiling in the body.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import date
from decimal import Decimal
from typing import Any

import pytest

from experiments.actions import ArmSpec, SpecError, check_experiment_spec, do_replace_arms
from experiments.models import AttemptStatus
from prbench.queues import get_connection
from providers import gateway
from providers.budget import Budget, run_budget_key
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price, ProviderCredential
from providers.outcomes import OutcomeClass
from providers.registry import arm_errors
from providers.types import ArmSpec as GatewayArm
from providers.types import CompletionRequest, Message
from tests.conftest import work_queue
from tests.providers.fake_server import FakeProvider, Reply, Seen

INPUT_PER_MTOK, OUTPUT_PER_MTOK = Decimal(2), Decimal(10)
MAX_TOKENS = 2000  # $0.02 of output a call: a budget of $0.05 pays for two calls and not a third
TINY_BUDGET = Decimal("0.05")
QUIET = {"max_retries": 0, "stream": False, "timeout_read_s": 5}


def asked_output_tokens(body: dict) -> int:
    """What a provider bills when every answer it was asked for runs to the limit."""
    ceiling = max(body.get(field, 0) for field in ("max_tokens", "max_completion_tokens"))
    return ceiling * max(body.get("n", 1), body.get("best_of", 1))


def prompt_tokens(body: dict) -> int:
    """The prompt as the gateway estimates it (~4 characters a token), so the input side of
    every bill is exactly what was reserved for it and only the output side is on trial."""
    messages = body["messages"]
    system = body.get("system") or next((m["content"] for m in messages if m["role"] == "system"), "")
    text = "\n".join([system, *(m["content"] for m in messages if m["role"] != "system")])
    return math.ceil(len(text) / 4)


def bill_what_was_asked(seen: Seen) -> Reply:
    body, output = seen.body, asked_output_tokens(seen.body)
    if "anthropic-version" in seen.headers:
        return Reply(
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "no diff"}],
                "stop_reason": "max_tokens",
                "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens(body), "output_tokens": output},
            },
        )
    count = max(body.get("n", 1), body.get("best_of", 1))
    choice = {"message": {"role": "assistant", "content": "no diff"}, "finish_reason": "length"}
    return Reply(
        200,
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": body["model"],
            "choices": [{"index": i} | choice for i in range(count)],
            "usage": {
                "prompt_tokens": prompt_tokens(body),
                "completion_tokens": output,
                "total_tokens": prompt_tokens(body) + output,
            },
        },
    )


@pytest.fixture
def server():
    fake = FakeProvider()
    fake.responder = bill_what_was_asked
    yield fake
    fake.close()


MODELS = {
    "openai": "gpt-5",
    "azure_openai": "o4-mini",
    "openrouter": "openai/o3",
    "openai_compatible": "qwen3-coder",
    "anthropic": "claude-budget-test",
}
PROVIDERS = list(MODELS)


@pytest.fixture
def priced(org, server):
    """Every provider kind with a credential pointing at the fake and a catalog price: the
    only one, so a seeded row (a snapshot's price, a cache-write price) does not change it."""
    Price.objects.filter(provider__in=MODELS).delete()
    for provider, model in MODELS.items():
        openai_path = "" if provider in ("anthropic", "azure_openai") else "/v1"
        extra = {"api_version": "2024-10-21"} if provider == "azure_openai" else {}
        credential = ProviderCredential(org=org, provider=provider, base_url=server.url + openai_path, **extra)
        credential.set_api_key("sk-test-budget-settings-0000")
        credential.save()
        Price.objects.create(
            provider=provider,
            model_pattern=model,
            input_per_mtok=INPUT_PER_MTOK,
            output_per_mtok=OUTPUT_PER_MTOK,
            valid_from=date(2024, 1, 1),
        )


# Each provider's costliest settings, costliest first: what the security sweep used (more
# answers per call and a larger token ceiling, slipped in through extra_body), then the
# costliest the arm's own settings allow (the most reasoning, at the arm's max_tokens).
COSTLIEST: dict[str, list[dict[str, Any]]] = {
    "openai": [
        {"reasoning_effort": "xhigh", "extra_body": {"n": 10, "max_completion_tokens": 100_000}},
        {"reasoning_effort": "xhigh", "extra_body": {"user": "ci", "verbosity": "high"}},
    ],
    "azure_openai": [
        {"reasoning_effort": "high", "extra_body": {"n": 10, "max_completion_tokens": 100_000}},
        {"reasoning_effort": "high", "extra_body": {"user": "ci"}},
    ],
    "openrouter": [
        {"reasoning_effort": "high", "extra_body": {"n": 10, "max_tokens": 100_000}},
        {"reasoning_effort": "high", "extra_body": {"provider": {"order": ["openai"]}, "transforms": []}},
    ],
    "openai_compatible": [
        {"reasoning_effort": "high", "extra_body": {"n": 10, "best_of": 10, "max_tokens": 100_000}},
        {"reasoning_effort": "high", "extra_body": {"top_k": 20, "repetition_penalty": 1.1}},
    ],
    "anthropic": [
        {"thinking_budget_tokens": MAX_TOKENS - 1, "extra_body": {"max_tokens": 100_000}},
        {"thinking_budget_tokens": MAX_TOKENS - 1, "extra_body": {"metadata": {"user_id": "ci"}}},
    ],
}


def costliest_accepted(provider: str) -> dict:
    """The costliest settings the one arm check (form, spec, API and command alike) accepts."""
    for settings in COSTLIEST[provider]:
        config = QUIET | {"max_tokens": MAX_TOKENS} | settings
        if not arm_errors(provider, MODELS[provider], config):
            return config
    raise AssertionError(f"no {provider} settings accepted")


@pytest.fixture
def six_calls(experiment, priced):
    """One task asked six times: every call of an arm has the same prompt and costs the same."""
    experiment.sample_size, experiment.repetitions = 1, 6
    experiment.save()
    return experiment


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_costliest_accepted_settings_never_pass_a_tiny_run_budget(six_calls, server, start, provider):
    config = costliest_accepted(provider)
    do_replace_arms(six_calls, [ArmSpec("costly", provider, MODELS[provider], config)])

    run = start(six_calls, inference_only=True, budget_usd=TINY_BUDGET)
    work_queue()

    attempts = run.attempts.all()
    spent = sum(a.cost_usd or 0 for a in attempts)
    assert server.seen, "no call was made: the budget was never put to the test"
    assert spent <= TINY_BUDGET, f"{provider} spent ${spent} against a ${TINY_BUDGET} run budget"
    assert Decimal(int(get_connection().get(run_budget_key(run.pk)))) / 10**9 <= TINY_BUDGET
    made = attempts.filter(status=AttemptStatus.COMPLETED).count()
    assert made == len(server.seen) == 2  # each call reserved its whole ceiling: two fit, a third would not
    assert attempts.filter(error_category=ErrorCategory.BUDGET_EXCEEDED).count() == 4


# --- refused at save, with the field named ---------------------------------------------------

REFUSED_BODIES = [
    ({"n": 10}, "n"),
    ({"best_of": 3}, "best_of"),
    ({"num_completions": 3}, "num_completions"),
    ({"max_tokens": 100_000}, "max_tokens"),
    ({"max_completion_tokens": 100_000}, "max_completion_tokens"),
    ({"max_output_tokens": 100_000}, "max_output_tokens"),
    ({"min_tokens": 100_000}, "min_tokens"),
    ({"reasoning_effort": "high"}, "reasoning_effort"),
    ({"reasoning": {"effort": "high", "max_tokens": 100_000}}, "reasoning"),
    ({"thinking": {"type": "enabled", "budget_tokens": 50_000}}, "thinking"),
    ({"google": {"thinking_config": {"thinking_budget": 50_000}}}, "google.thinking_config"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools"),
    ({"web_search_options": {}}, "web_search_options"),
    ({"plugins": [{"id": "web"}]}, "plugins"),
    ({"mcp_servers": []}, "mcp_servers"),
    ({"data_sources": []}, "data_sources"),
    ({"service_tier": "priority"}, "service_tier"),
    ({"n": 2, "max_tokens": 9, "user": "ci"}, "max_tokens, n"),
]
COST_REFUSAL = (
    "(each changes what a call can cost past what a budget can hold it to: output length and reasoning are "
    "the arm's own settings, and tools, search and other tiers are not priced)"
)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("extra_body", "named"), REFUSED_BODIES, ids=[named for _, named in REFUSED_BODIES])
def test_settings_a_budget_cannot_price_are_refused_naming_the_field(provider, extra_body, named):
    errors = arm_errors(provider, MODELS[provider], {"extra_body": extra_body})
    assert errors == [f"config.extra_body may not set {named} {COST_REFUSAL}"]


def test_the_spec_refuses_them_too(org, dataset):
    arm = {"label": "a", "provider": "openai", "model_name": "gpt-5", "config": {"extra_body": {"n": 10}}}
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, {"name": "e", "dataset": dataset.name, "arms": [arm]})
    assert f"arms[0].config.extra_body may not set n {COST_REFUSAL}" in refused.value.messages


def test_openrouter_web_search_by_model_suffix_is_refused():
    errors = arm_errors("openrouter", "openai/gpt-4o:online", {})
    assert errors == [
        "model_name openai/gpt-4o:online: the :online suffix turns on OpenRouter's web search, billed per "
        "result beyond tokens, which a budget cannot hold a call to"
    ]


def test_a_json_schema_naming_such_fields_is_not_a_setting():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "tools": {"type": "array"}}}
    body = {"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}
    assert arm_errors("openai", "gpt-5", {"extra_body": body | {"metadata": {"n": "1"}}}) == []


# --- an arm saved before the refusal ---------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_arm_saved_before_the_refusal_makes_no_call(six_calls, server, start, provider):
    """Its extra_body is neither sent nor silently dropped (which would run another arm under
    its name): its attempts fail as the platform's configuration error, unscored and unpaid."""
    config = QUIET | {"max_tokens": MAX_TOKENS} | COSTLIEST[provider][0]
    do_replace_arms(six_calls, [ArmSpec("old", provider, MODELS[provider], config)])  # as written before the check

    run = start(six_calls, inference_only=True, budget_usd=TINY_BUDGET)
    work_queue()

    assert server.seen == []
    attempts = run.attempts.all()
    assert {(a.status, a.error_category, a.outcome) for a in attempts} == {
        (AttemptStatus.FAILED, ErrorCategory.PLATFORM_ERROR, OutcomeClass.INFRASTRUCTURE_FAILURE)
    }
    assert all(a.cost_usd in (None, 0) for a in attempts)
    assert all(a.error_message.startswith("config.extra_body may not set") for a in attempts)


# --- the gateway reserves for the request as sent -------------------------------------------

REQUEST = CompletionRequest(messages=(Message("user", "x" * 399),), max_output_tokens=MAX_TOKENS)
PROMPT_COST = 100 * INPUT_PER_MTOK / 1_000_000  # 400 characters with the empty system prompt


def spend(key: str = "prbench:budget:test") -> Decimal:
    return Decimal(int(get_connection().get(key) or 0)) / 10**9


def past_the_checks(org, provider: str, config: dict) -> gateway.PreparedArm:
    """The arm as prepared, then given settings no check saw: a setting added to an adapter
    later, say, that raises the count or the ceiling of what it sends."""
    prepared = gateway.prepare(org.pk, GatewayArm(provider, MODELS[provider], QUIET | {"max_tokens": MAX_TOKENS}))
    return replace(prepared, arm=replace(prepared.arm, config=prepared.arm.config | config))


SMUGGLED = [
    ("openai", {"extra_body": {"n": 4}}, 4 * MAX_TOKENS),
    ("azure_openai", {"extra_body": {"max_completion_tokens": 3 * MAX_TOKENS}}, 3 * MAX_TOKENS),
    ("openrouter", {"extra_body": {"n": 2, "max_tokens": 2 * MAX_TOKENS}}, 4 * MAX_TOKENS),
    ("openai_compatible", {"extra_body": {"best_of": 3}}, 3 * MAX_TOKENS),
    ("anthropic", {"extra_body": {"max_tokens": 5 * MAX_TOKENS}}, 5 * MAX_TOKENS),
]


@pytest.mark.parametrize(("provider", "config", "billed"), SMUGGLED, ids=[p for p, _, _ in SMUGGLED])
def test_the_reservation_counts_what_the_request_asks_for(org, priced, server, provider, config, billed):
    arm = past_the_checks(org, provider, config)
    most = PROMPT_COST + billed * OUTPUT_PER_MTOK / 1_000_000
    just_short = replace(arm, budgets=(Budget("prbench:budget:test", "run budget", most - Decimal("0.000001")),))

    with pytest.raises(ProviderError) as refused:
        gateway.call(just_short, REQUEST)

    assert refused.value.category == ErrorCategory.BUDGET_EXCEEDED
    assert f"this call may cost up to ${most.normalize()}" in refused.value.message
    assert server.seen == []

    enough = replace(arm, budgets=(Budget("prbench:budget:test", "run budget", most),))
    completion = gateway.call(enough, REQUEST)
    assert completion.cost_usd == most and spend() == most  # billed all it asked for, and no more than reserved


@pytest.mark.parametrize("ceiling", [None, 0, "4096", 1.5])
def test_a_request_without_a_bounded_ceiling_is_not_made(org, priced, server, ceiling):
    arm = past_the_checks(org, "openai", {"extra_body": {"max_completion_tokens": ceiling}})
    budgeted = replace(arm, budgets=(Budget("prbench:budget:test", "run budget", Decimal(100)),))

    with pytest.raises(ProviderError) as refused:
        gateway.call(budgeted, REQUEST)

    assert refused.value.category == ErrorCategory.PLATFORM_ERROR
    assert refused.value.message == (
        f"the request's max_completion_tokens is {ceiling!r}, not a positive whole number, so what the call "
        "can cost has no bound and it was not made"
    )
    assert server.seen == []
