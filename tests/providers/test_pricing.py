from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import AttemptStatus
from providers.models import Price
from providers.price_patterns import match_rank
from providers.pricing import catalog_cost, catalog_price, cost_for, cost_parts, forget_catalog, price_cost
from providers.types import Usage
from tests.conftest import work_queue

USAGE = Usage(input_tokens=1_000_000, output_tokens=500_000, cached_tokens=200_000)


def test_cost_charges_cached_input_at_the_cached_price():
    assert cost_for(USAGE, Decimal("2.50"), Decimal("10"), Decimal("1.25")) == Decimal("7.25000000")
    assert cost_for(USAGE, Decimal("2.50"), Decimal("10")) == Decimal("7.50000000")


@pytest.mark.django_db
def test_the_seeded_catalog_prices_common_models():
    assert catalog_price("openai", "gpt-4o", date.today()).output_per_mtok == Decimal("10")
    assert catalog_price("anthropic", "claude-sonnet-4-20250514", date.today()).input_per_mtok == Decimal("3")
    assert catalog_cost("openai", "gpt-unknown-9", USAGE, date.today()) is None


@pytest.mark.django_db
def test_the_most_specific_pattern_and_the_price_in_force_win():
    Price.objects.create(
        provider="openai", model_pattern="gpt-4o*", input_per_mtok=9, output_per_mtok=9, valid_from=date(2025, 1, 1)
    )
    Price.objects.create(
        provider="openai", model_pattern="gpt-4o", input_per_mtok=5, output_per_mtok=20, valid_from=date(2030, 1, 1)
    )
    forget_catalog()
    assert catalog_price("openai", "gpt-4o", date(2026, 6, 1)).input_per_mtok == Decimal("2.5")  # exact beats glob
    assert catalog_price("openai", "gpt-4o", date(2030, 6, 1)).input_per_mtok == Decimal("5")  # newer price in force
    assert catalog_price("openai", "gpt-4o-audio", date(2026, 6, 1)).input_per_mtok == Decimal("9")


def test_unknown_prices_stay_unknown_and_can_be_recomputed(experiment, django_capture_on_commit_callbacks):
    do_replace_arms(experiment, [ArmSpec("unpriced", "mock", "mock-new-model", {"mode": "oracle"})])
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, inference_only=True)
    work_queue()
    attempts = run.attempts.filter(status=AttemptStatus.COMPLETED)
    assert attempts.count() == 4
    assert set(attempts.values_list("cost_usd", "cost_source")) == {(None, "")}

    Price.objects.create(
        provider="mock",
        model_pattern="mock-new-*",
        input_per_mtok=1,
        output_per_mtok=2,
        valid_from=timezone.now().date() - timedelta(days=1),
    )
    call_command("recompute_costs", "--run", str(run.code))
    for attempt in attempts.all():
        expected = (Decimal(attempt.input_tokens) + 2 * Decimal(attempt.output_tokens)) / 1_000_000
        assert attempt.cost_usd == expected.quantize(Decimal("0.00000001")) and attempt.cost_source == "catalog"


# What each family costs per million tokens (input, output) from the shipped snapshot: the
# exact id, a dated snapshot of it (priced by the family's row), and the ids a glob used to
# mis-price.
FAMILIES = [
    ("openai", "gpt-5", "1.25", "10"),
    ("openai", "gpt-5-2025-08-07", "1.25", "10"),
    ("openai", "gpt-5-mini-2025-08-07", "0.25", "2"),
    ("openai", "gpt-5-nano", "0.05", "0.4"),
    ("openai", "gpt-5.1", "1.25", "10"),
    ("openai", "gpt-4.1-2025-04-14", "2", "8"),
    ("openai", "gpt-4.1-mini-2025-04-14", "0.4", "1.6"),
    ("openai", "gpt-4.1-nano-2025-04-14", "0.1", "0.4"),
    ("openai", "gpt-4o", "2.5", "10"),
    ("openai", "gpt-4o-2024-11-20", "2.5", "10"),
    ("openai", "gpt-4o-2024-05-13", "5", "15"),
    ("openai", "gpt-4o-mini-2024-07-18", "0.15", "0.6"),
    ("openai", "o3-2025-04-16", "2", "8"),
    ("openai", "o3-mini-2025-01-31", "1.1", "4.4"),
    ("openai", "o4-mini-2025-04-16", "1.1", "4.4"),
    ("openai", "o4-mini-deep-research", "2", "8"),
    ("openai", "o4-mini-deep-research-2025-06-26", "2", "8"),
    ("anthropic", "claude-opus-4-5-20251101", "5", "25"),
    ("anthropic", "claude-opus-4-5", "5", "25"),
    ("anthropic", "claude-opus-4-1-20250805", "15", "75"),
    ("anthropic", "claude-opus-4-20250514", "15", "75"),
    ("anthropic", "claude-sonnet-4-5-20250929", "3", "15"),
    ("anthropic", "claude-sonnet-4-20250514", "3", "15"),
    ("anthropic", "claude-haiku-4-5-20251001", "1", "5"),
    ("anthropic", "claude-3-7-sonnet-20250219", "3", "15"),
    ("anthropic", "claude-3-5-haiku-20241022", "0.8", "4"),
    ("azure_openai", "gpt-5", "1.25", "10"),
    ("azure_openai", "gpt-4.1-2025-04-14", "2", "8"),
    ("azure_openai", "gpt-4o-mini", "0.15", "0.6"),
    ("azure_openai", "o4-mini", "1.1", "4.4"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("provider,model,price_in,price_out", FAMILIES)
def test_each_family_is_priced_by_its_own_row(provider, model, price_in, price_out):
    price = catalog_price(provider, model, date.today())
    assert price is not None, model
    assert (price.input_per_mtok, price.output_per_mtok) == (Decimal(price_in), Decimal(price_out))


@pytest.mark.django_db
@pytest.mark.parametrize(
    "provider,model",
    [
        ("anthropic", "claude-opus-9-9"),  # a newer model is unknown, not an older family's price
        ("openai", "o4-mini-turbo"),
        ("openai", "gpt-4.1-2025-04-14-ft"),  # not a dated snapshot: the date is not the end
        ("openai", "gpt-4.1-preview"),
    ],
)
def test_an_unlisted_model_is_unknown_rather_than_caught_by_a_broader_row(provider, model):
    assert catalog_price(provider, model, date.today()) is None


def test_match_rank_prefers_exact_then_snapshot_family_then_glob():
    assert (
        match_rank("gpt-4.1", "gpt-4.1")
        > match_rank("gpt-4.1", "gpt-4.1-2025-04-14")
        > match_rank("gpt-4.1*", "gpt-4.1")
    )
    assert match_rank("claude-opus-4", "claude-opus-4-5-20251101") is None  # 4-5 is a model, not a date
    assert match_rank("claude-opus-4-5", "claude-opus-4-5-20251101") is not None
    assert match_rank("gpt-4.1", "gpt-4.1-mini") is None
    assert match_rank("o4-mini*", "o4-mini-deep-research") < match_rank(
        "o4-mini-deep-research", "o4-mini-deep-research"
    )


@pytest.mark.django_db
def test_an_explicit_row_beats_a_glob_however_long():
    Price.objects.create(
        provider="openai",
        model_pattern="o4-mini-deep-research*",
        input_per_mtok=99,
        output_per_mtok=99,
        valid_from=date(2025, 1, 1),
    )
    forget_catalog()
    assert catalog_price("openai", "o4-mini-deep-research-2025-06-26", date.today()).input_per_mtok == Decimal("2")


@pytest.mark.django_db
def test_the_recorded_opus_4_5_answer_costs_what_anthropic_charges():
    # The replay from the issue: $0.0655 at Opus 4's price, $0.0218 at Opus 4.5's.
    usage = Usage(input_tokens=1_860, output_tokens=500)
    assert catalog_cost("anthropic", "claude-opus-4-5-20251101", usage, date.today()) == Decimal("0.0218")


@pytest.mark.django_db
def test_cache_writes_and_reads_are_charged_at_their_own_prices():
    usage = Usage(input_tokens=10_000, output_tokens=1_000, cached_tokens=2_000, cache_write_tokens=4_000)
    price = catalog_price("anthropic", "claude-sonnet-4-5-20250929", date.today())
    total, parts = price_cost(usage, price)
    # 4,000 plain input at $3, 2,000 read at $0.30, 4,000 written at $3.75, 1,000 out at $15.
    assert parts == {
        "input": "0.01200000",
        "output": "0.01500000",
        "cache read": "0.00060000",
        "cache write": "0.01500000",
    }
    assert total == Decimal("0.04260000")


def test_reasoning_tokens_are_output_unless_priced_apart():
    usage = Usage(input_tokens=0, output_tokens=1_000_000, reasoning_tokens=600_000)
    assert cost_for(usage, Decimal(1), Decimal(8)) == Decimal(8)
    parts = cost_parts(usage, Decimal(1), Decimal(8), price_reasoning_per_mtok=Decimal(4))
    assert parts["output"] == Decimal("3.2") and parts["reasoning"] == Decimal("2.4")
