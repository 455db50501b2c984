"""Usage and cost from real response shapes, through the gateway and the real SDKs, against
a local server; and the parts of the cost stored on the attempt and shown on its page."""

from __future__ import annotations

import json
import time
from datetime import date
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.urls import reverse

from experiments.actions import ArmSpec as ExperimentArm
from experiments.actions import ExperimentSpec, do_save_experiment
from experiments.models import AttemptStatus
from orgs.models import Organization
from providers import gateway
from providers.models import Price, ProviderCredential
from providers.types import ArmSpec, CompletionRequest, Message
from tests.conftest import client_for, work_queue
from tests.providers.fake_server import Reply, sse
from tests.providers.sse_fixtures import anthropic_block

KEY = "sk-live-PRICING-0123456789abcdef"
REQUEST = CompletionRequest(messages=(Message("user", "Fix the bug"),), max_output_tokens=64)
FAST = {"max_retries": 0, "timeout_read_s": 5}
SUFFIX = {"anthropic": "", "openai": "/v1", "openrouter": "/v1"}


def anthropic_body(usage):
    # The shape of Anthropic's prompt-caching example: the cached prefix is written on the
    # first call and counted apart from input_tokens.
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "diff --git a/x b/x"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def openai_body(usage, model="o3-2025-04-16"):
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}],
        "usage": usage,
    }


CACHE_WRITE_USAGE = {
    "input_tokens": 21,
    "cache_creation_input_tokens": 188086,
    "cache_read_input_tokens": 0,
    "output_tokens": 393,
}


def credential(org, provider, fake):
    row = ProviderCredential(org=org, provider=provider, base_url=fake.url + SUFFIX[provider])
    row.set_api_key(KEY)
    row.save()


@pytest.fixture
def org_for(db, fake):
    def make(provider):
        org = Organization.objects.create(slug=f"pricing-{provider}", name="Pricing")
        credential(org, provider, fake)
        return org

    return make


def call(org, provider, model):
    return gateway.complete(org.pk, ArmSpec(provider, model, FAST), REQUEST)


def test_anthropic_cache_writes_are_counted_and_charged(org_for, fake):
    org = org_for("anthropic")
    fake.script(Reply(200, anthropic_body(CACHE_WRITE_USAGE)))
    completion = call(org, "anthropic", "claude-sonnet-4-5-20250929")
    usage = completion.usage
    assert (usage.input_tokens, usage.cache_write_tokens, usage.cached_tokens) == (188107, 188086, 0)
    # 21 x $3 + 188,086 x $3.75 + 393 x $15, per million: the write alone is 99% of it.
    assert completion.cost_usd == Decimal("0.71128050") and completion.cost_source == "catalog"
    assert completion.cost_breakdown == {"input": "0.00006300", "output": "0.00589500", "cache write": "0.70532250"}


def test_anthropic_cache_reads_are_part_of_the_prompt(org_for, fake):
    org = org_for("anthropic")
    usage = {
        "input_tokens": 50,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 188086,
        "output_tokens": 393,
    }
    fake.script(Reply(200, anthropic_body(usage)))
    completion = call(org, "anthropic", "claude-sonnet-4-5-20250929")
    assert (completion.usage.input_tokens, completion.usage.cached_tokens) == (188136, 188086)
    assert completion.cost_breakdown["cache read"] == "0.05642580"


def test_openai_reasoning_tokens_are_recorded_and_billed_as_output(org_for, fake):
    org = org_for("openai")
    usage = {
        "prompt_tokens": 1117,
        "completion_tokens": 1100,
        "total_tokens": 2217,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 1024,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    fake.script(Reply(200, openai_body(usage)))
    completion = call(org, "openai", "o3-2025-04-16")  # priced by the o3 row
    assert (completion.usage.reasoning_tokens, completion.usage.cache_write_tokens) == (1024, 0)
    # 93 x $2 + 1,024 cached x $0.50 + 1,100 out x $8.
    assert completion.cost_usd == Decimal("0.00949800")
    assert completion.cost_breakdown == {"input": "0.00018600", "output": "0.00880000", "cache read": "0.00051200"}


def openrouter_usage(**extra):
    return {
        "prompt_tokens": 194,
        "completion_tokens": 2,
        "total_tokens": 196,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    } | extra


@pytest.mark.parametrize(
    "usage,cost,breakdown",
    [
        # Bring your own key: OpenRouter's 5% fee, plus what the provider charged the key.
        (
            openrouter_usage(cost=0.0000306, is_byok=True, cost_details={"upstream_inference_cost": 0.000612}),
            "0.0006426",
            {"OpenRouter fee": "0.0000306", "upstream": "0.000612"},
        ),
        # No is_byok in the body, but an upstream cost: still both.
        (
            openrouter_usage(cost=0.0000306, cost_details={"upstream_inference_cost": 0.000612}),
            "0.0006426",
            {"OpenRouter fee": "0.0000306", "upstream": "0.000612"},
        ),
        # OpenRouter's credits: usage.cost is the whole spend.
        (
            openrouter_usage(cost=0.000612, is_byok=False, cost_details={"upstream_inference_cost": None}),
            "0.000612",
            {"OpenRouter": "0.000612"},
        ),
        (openrouter_usage(cost=0.000612), "0.000612", {"OpenRouter": "0.000612"}),
    ],
)
def test_openrouter_cost_includes_the_upstream_spend(org_for, fake, usage, cost, breakdown):
    org = org_for("openrouter")
    fake.script(Reply(200, openai_body(usage, model="openai/gpt-4o-mini")))
    completion = call(org, "openrouter", "openai/gpt-4o-mini")
    assert completion.cost_usd == Decimal(cost) and completion.cost_source == "provider"
    assert completion.cost_breakdown == breakdown


def test_openrouter_byok_without_the_upstream_figure_falls_back_to_its_list_price(org_for, fake, openrouter_list):
    org = org_for("openrouter")
    body = openai_body(openrouter_usage(cost=0.0000306, is_byok=True), model="anthropic/claude-sonnet-4.6")
    fake.script(Reply(200, body))
    completion = call(org, "openrouter", "anthropic/claude-sonnet-4.6")
    # The fee alone would be a twentieth of the spend: 194 x $3 + 2 x $15 instead.
    assert completion.cost_usd == Decimal("0.00061200") and completion.cost_source == "catalog"


def test_a_catalog_row_outranks_openrouters_list(org_for, fake, openrouter_list):
    Price.objects.create(
        provider="openrouter",
        model_pattern="anthropic/claude-sonnet-4.6",
        input_per_mtok=1,
        output_per_mtok=1,
        valid_from=date(2025, 1, 1),
        source="negotiated",
    )
    assert gateway.arm_price("openrouter", "anthropic/claude-sonnet-4.6", {}).source == "negotiated"


def test_the_shipped_fallback_list_prices_nothing(db, settings, tmp_path):
    settings.VAR_DIR = tmp_path  # no list fetched: the fallback's figures were written from memory
    assert gateway.arm_price("openrouter", "anthropic/claude-opus-4.5", {}) is None


def test_the_attempt_keeps_each_part_and_its_page_shows_them(org, alice, dataset, fake, start):
    credential(org, "anthropic", fake)
    fake.default = Reply(200, anthropic_body(CACHE_WRITE_USAGE))
    arm = ExperimentArm("opus", "anthropic", "claude-opus-4-5-20251101", dict(FAST))
    spec = ExperimentSpec(name="Cache", dataset=dataset, arms=[arm], sample_size=2, seed=3)
    run = start(do_save_experiment(org, spec, alice), inference_only=True)
    work_queue()
    attempts = run.attempts.all()
    assert [a.status for a in attempts] == [AttemptStatus.COMPLETED] * 2
    attempt = attempts[0]
    assert (attempt.input_tokens, attempt.cache_write_tokens, attempt.reasoning_tokens) == (188107, 188086, 0)
    # Opus 4.5: 21 x $5 + 188,086 x $6.25 + 393 x $25.
    assert attempt.cost_usd == Decimal("1.18546750")
    assert attempt.cost_breakdown == {"input": "0.00010500", "output": "0.00982500", "cache write": "1.17553750"}

    response = client_for(alice).get(reverse("experiments:attempt", args=[attempt.code]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "188086 cache write" in page
    assert "cache write $1.175538" in page and "output $0.009825" in page

    # Re-pricing from the stored counts gives the same parts.
    attempts.update(cost_usd=None, cost_breakdown={}, cost_source="")
    call_command("recompute_costs", "--run", str(run.code))
    attempt.refresh_from_db()
    assert attempt.cost_usd == Decimal("1.18546750") and attempt.cost_breakdown["cache write"] == "1.17553750"


# Anthropic's usage with the 1-hour cache (prompt-caching docs, "1-hour cache duration") and
# extended thinking's output_tokens_details, as the Messages API returns them.
ONE_HOUR_USAGE = {
    "input_tokens": 2_048,
    "cache_creation_input_tokens": 248,
    "cache_read_input_tokens": 1_800,
    "cache_creation": {"ephemeral_5m_input_tokens": 48, "ephemeral_1h_input_tokens": 200},
    "output_tokens": 503,
    "output_tokens_details": {"thinking_tokens": 480},
    "service_tier": "standard",
}


def test_anthropic_one_hour_writes_and_thinking_are_recorded_and_priced(org_for, fake):
    org = org_for("anthropic")
    fake.script(Reply(200, anthropic_body(ONE_HOUR_USAGE)))
    completion = call(org, "anthropic", "claude-opus-4-6")
    usage = completion.usage
    assert (usage.input_tokens, usage.cached_tokens, usage.cache_write_tokens) == (4_096, 1_800, 248)
    assert (usage.cache_write_1h_tokens, usage.reasoning_tokens, usage.output_tokens) == (200, 480, 503)
    # Opus 4.6: 2,048 x $5 + 1,800 read x $0.50 + 48 written for 5 minutes x $6.25 + 200 for
    # an hour x $10 + 503 out x $25 (thinking is output), per million.
    assert completion.cost_breakdown == {
        "input": "0.01024000",
        "output": "0.01257500",
        "cache read": "0.00090000",
        "cache write": "0.00030000",
        "cache write 1h": "0.00200000",
    }
    assert completion.cost_usd == Decimal("0.02601500")


def test_openrouter_cache_writes_are_recorded(org_for, fake):
    org = org_for("openrouter")
    usage = openrouter_usage(
        cost=0.0061,
        prompt_tokens_details={"cached_tokens": 0, "cache_write_tokens": 1_500, "audio_tokens": 0},
    )
    fake.script(Reply(200, openai_body(usage, model="anthropic/claude-sonnet-4.5")))
    completion = call(org, "openrouter", "anthropic/claude-sonnet-4.5")
    assert (completion.usage.input_tokens, completion.usage.cache_write_tokens) == (194, 1_500)
    assert completion.cost_usd == Decimal("0.0061") and completion.cost_source == "provider"


def test_the_attempt_keeps_one_hour_writes(org, alice, dataset, fake, start):
    credential(org, "anthropic", fake)
    fake.default = Reply(200, anthropic_body(ONE_HOUR_USAGE))
    arm = ExperimentArm("opus", "anthropic", "claude-opus-4-6", dict(FAST))
    spec = ExperimentSpec(name="Hour", dataset=dataset, arms=[arm], sample_size=1, seed=3)
    run = start(do_save_experiment(org, spec, alice), inference_only=True)
    work_queue()
    attempt = run.attempts.get()
    assert (attempt.cache_write_tokens, attempt.cache_write_1h_tokens, attempt.reasoning_tokens) == (248, 200, 480)
    assert attempt.cost_usd == Decimal("0.02601500")
    attempt.cost_usd, attempt.cost_breakdown = None, {}
    attempt.save()
    call_command("recompute_costs", "--run", str(run.code))
    attempt.refresh_from_db()
    assert attempt.cost_usd == Decimal("0.02601500") and attempt.cost_breakdown["cache write 1h"] == "0.00200000"


# OpenRouter's /api/v1/models entry for a model, with its cache prices, as `models refresh`
# stores it. LiteLLM's file no longer lists OpenRouter at all.
OPENROUTER_LIST = {
    "data": [
        {
            "id": "anthropic/claude-sonnet-4.6",
            "name": "Anthropic: Claude Sonnet 4.6",
            "context_length": 1000000,
            "pricing": {
                "prompt": "0.000003",
                "completion": "0.000015",
                "request": "0",
                "image": "0",
                "web_search": "0.01",
                "internal_reasoning": "0",
                "input_cache_read": "0.0000003",
                "input_cache_write": "0.00000375",
            },
        },
        {"id": "openrouter/auto", "name": "Auto Router", "pricing": {"prompt": "-1", "completion": "-1"}},
    ]
}


@pytest.fixture
def openrouter_list(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    (tmp_path / "model_catalog.json").write_text(json.dumps({"fetched_at": time.time()} | OPENROUTER_LIST))


def test_openrouter_is_priced_from_its_own_model_list_when_it_reports_no_cost(org_for, fake, openrouter_list):
    org = org_for("openrouter")
    usage = openrouter_usage(prompt_tokens_details={"cached_tokens": 100, "cache_write_tokens": 50})
    fake.script(Reply(200, openai_body(usage, model="anthropic/claude-sonnet-4.6")))
    completion = call(org, "openrouter", "anthropic/claude-sonnet-4.6")
    # 44 x $3 + 100 read x $0.30 + 50 written x $3.75 + 2 out x $15, per million.
    assert completion.cost_source == "catalog"
    assert completion.cost_breakdown == {
        "input": "0.00013200",
        "output": "0.00003000",
        "cache read": "0.00003000",
        "cache write": "0.00018750",
    }
    assert completion.cost_usd == Decimal("0.00037950")


def test_openrouters_reported_cost_wins_over_its_list(org_for, fake, openrouter_list):
    org = org_for("openrouter")
    fake.script(Reply(200, openai_body(openrouter_usage(cost=0.00061), model="anthropic/claude-sonnet-4.6")))
    completion = call(org, "openrouter", "anthropic/claude-sonnet-4.6")
    assert completion.cost_usd == Decimal("0.00061") and completion.cost_source == "provider"


def test_openrouters_list_is_what_its_arms_are_estimated_at(db, openrouter_list):
    price = gateway.arm_price("openrouter", "anthropic/claude-sonnet-4.6", {})
    assert (price.input_per_mtok, price.cache_write_per_mtok, price.output_per_mtok) == (3, Decimal("3.75"), 15)
    assert price.source.startswith("OpenRouter model list (catalog fetched less than an hour ago")
    assert gateway.arm_price("openrouter", "openrouter/auto", {}) is None  # a variable price is no price


def test_a_streamed_answer_keeps_one_hour_writes_and_thinking(org_for, fake):
    # message_start carries the prompt side (cache_creation split by lifetime), message_delta
    # the final output count and its thinking part, as Anthropic's streaming docs show.
    start = anthropic_body(ONE_HOUR_USAGE | {"output_tokens": 1}) | {"content": [], "stop_reason": None}
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}}
    final = {"output_tokens": 503, "output_tokens_details": {"thinking_tokens": 480}}
    events = [
        sse({"type": "message_start", "message": start}, "message_start"),
        *anthropic_block(0, {"type": "text", "text": ""}, [{"type": "text_delta", "text": "diff --git a/x b/x"}]),
        sse(delta | {"usage": final}, "message_delta"),
        sse({"type": "message_stop"}, "message_stop"),
    ]
    org = org_for("anthropic")
    fake.script(Reply(events=events))
    completion = call(org, "anthropic", "claude-opus-4-6")
    usage = completion.usage
    assert (usage.cache_write_1h_tokens, usage.reasoning_tokens, usage.output_tokens) == (200, 480, 503)
    assert completion.cost_usd == Decimal("0.02601500")
