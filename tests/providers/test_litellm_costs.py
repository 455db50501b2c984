"""What a call costs, checked against LiteLLM's cost_per_token figures computed from its
price file (tests/data/litellm, LiteLLM 1.110.2), not from its library or from our catalog.

``litellm_cost`` below follows ``generic_cost_per_token`` and ``_get_token_base_cost`` in
LiteLLM 1.110.2's litellm/litellm_core_utils/llm_cost_calc/utils.py: a prompt longer than an
``*_above_<N>k_tokens`` threshold bills every token at the tier's rate where the tier has one
(at the plain rate where it has none); a missing cache read or write rate is the input
rate; 1-hour cache writes use ``cache_creation_input_token_cost_above_1hr`` (its tier's when
past the threshold), else the cache write rate; reasoning tokens are output unless
``output_cost_per_reasoning_token`` prices them.
"""

from __future__ import annotations

import json
import re
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from providers.models import Price
from providers.pricing import catalog_price, forget_catalog, price_cost
from providers.types import Usage
from tests.samples import LITELLM_PRICES

pytestmark = pytest.mark.django_db

MICRO_DOLLAR = Decimal("0.000001")
TIER = re.compile(r"^input_cost_per_token_above_(\d+k?)_tokens$")


def litellm_cost(entry: dict, usage: Usage) -> float:
    rates = {
        "input": entry["input_cost_per_token"],
        "output": entry["output_cost_per_token"],
        "read": entry.get("cache_read_input_token_cost"),
        "write": entry.get("cache_creation_input_token_cost"),
    }
    hour_key = "cache_creation_input_token_cost_above_1hr"
    for key in entry:
        if (match := TIER.match(key)) and usage.input_tokens > int(match[1].rstrip("k")) * 1000:
            tier = f"_above_{match[1]}_tokens"
            rates["input"] = entry.get(f"input_cost_per_token{tier}", rates["input"])
            rates["output"] = entry.get(f"output_cost_per_token{tier}", rates["output"])
            rates["read"] = entry.get(f"cache_read_input_token_cost{tier}", rates["read"])
            rates["write"] = entry.get(f"cache_creation_input_token_cost{tier}", rates["write"])
            if f"{hour_key}{tier}" in entry:
                hour_key = f"{hour_key}{tier}"
    read = rates["input"] if rates["read"] is None else rates["read"]
    write = rates["input"] if rates["write"] is None else rates["write"]
    hour = entry.get(hour_key, write)
    reasoning = entry.get("output_cost_per_reasoning_token", rates["output"])
    uncached = usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens
    five_minute_writes = usage.cache_write_tokens - usage.cache_write_1h_tokens
    prompt = uncached * rates["input"] + usage.cached_tokens * read + five_minute_writes * write
    prompt += usage.cache_write_1h_tokens * hour
    completion = (usage.output_tokens - usage.reasoning_tokens) * rates["output"] + usage.reasoning_tokens * reasoning
    return prompt + completion


USAGES = [
    # Anthropic: 5-minute and 1-hour cache writes, cache reads, thinking inside the output.
    (
        "anthropic",
        "claude-opus-4-6",
        Usage(
            71_000,
            3_000,
            cached_tokens=50_000,
            cache_write_tokens=20_000,
            cache_write_1h_tokens=15_000,
            reasoning_tokens=2_000,
        ),
    ),
    ("anthropic", "claude-opus-4-7", Usage(188_107, 393, cache_write_tokens=188_086, cache_write_1h_tokens=188_086)),
    (
        "anthropic",
        "claude-sonnet-4-5",
        Usage(12_000, 800, cached_tokens=4_000, cache_write_tokens=6_000, cache_write_1h_tokens=1_000),
    ),
    ("anthropic", "claude-sonnet-4-6", Usage(1_234, 5_678, reasoning_tokens=5_000)),
    ("anthropic", "claude-haiku-4-5-20251001", Usage(9_999, 1, cache_write_tokens=9_000, cache_write_1h_tokens=9_000)),
    # OpenAI's long-context tier: past 272k every token costs the tier's price, at 272k not yet.
    ("openai", "gpt-5.4", Usage(300_000, 5_000, cached_tokens=100_000, reasoning_tokens=4_000)),
    ("openai", "gpt-5.4", Usage(272_000, 5_000, cached_tokens=100_000, reasoning_tokens=4_000)),
    ("openai", "gpt-5.4", Usage(272_001, 1)),
    ("openai", "gpt-5.5", Usage(400_000, 20_000, cached_tokens=399_000)),
    ("openai", "gpt-6-astra", Usage(500_000, 10_000, cached_tokens=100_000, cache_write_tokens=50_000)),
    ("openai", "gpt-6-astra", Usage(100_000, 10_000, cached_tokens=10_000, cache_write_tokens=50_000)),
    ("azure/", "gpt-5.4", Usage(280_000, 2_000, cached_tokens=1_000)),
    ("openai", "o3", Usage(1_117, 1_100, cached_tokens=1_024, reasoning_tokens=1_024)),
    ("openai", "o4-mini-deep-research", Usage(50_000, 30_000, reasoning_tokens=25_000)),
    ("openai", "gpt-5.2-pro", Usage(3_000, 40_000, cached_tokens=2_000, reasoning_tokens=39_000)),
]


@pytest.fixture
def imported():
    Price.objects.all().delete()
    call_command("prices", "import", str(LITELLM_PRICES), "--valid-from", "2026-11-01", stdout=StringIO())
    forget_catalog()
    return json.loads(LITELLM_PRICES.read_text())


@pytest.mark.parametrize("provider,model,usage", USAGES)
def test_costs_match_litellms_figures_from_the_file_to_the_micro_dollar(imported, provider, model, usage):
    entry = imported["azure/" + model] if provider == "azure/" else imported[model]
    ours = {"azure/": "azure_openai"}.get(provider, provider)
    price = catalog_price(ours, model, date(2026, 11, 2))
    cost, parts = price_cost(usage, price)
    expected = Decimal(repr(litellm_cost(entry, usage)))
    assert abs(cost - expected) < MICRO_DOLLAR, (cost, expected, parts)


def test_one_hour_writes_are_their_own_part_of_the_cost(imported):
    usage = Usage(20_000, 0, cache_write_tokens=20_000, cache_write_1h_tokens=15_000)
    _, parts = price_cost(usage, catalog_price("anthropic", "claude-opus-4-6", date(2026, 11, 2)))
    # 5,000 written for 5 minutes at $6.25 and 15,000 for an hour at $10, per million.
    assert parts == {"input": "0E-8", "output": "0E-8", "cache write": "0.03125000", "cache write 1h": "0.15000000"}
