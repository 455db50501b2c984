from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import AttemptStatus
from providers.models import Price
from providers.pricing import catalog_cost, catalog_price, cost_for, forget_catalog
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
