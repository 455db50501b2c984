"""``manage.py prices import``: LiteLLM's price file into dated catalog rows."""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from providers.models import Price
from providers.pricing import catalog_price, forget_catalog
from tests.providers.fake_server import FakeProvider, Reply

pytestmark = pytest.mark.django_db

DAY = "2026-03-01"
PRICE_FILE = {
    "sample_spec": {"litellm_provider": "one of https://docs.litellm.ai/docs/providers", "mode": "chat"},
    "gpt-4o": {  # unchanged from the shipped figures
        "litellm_provider": "openai",
        "mode": "chat",
        "input_cost_per_token": 2.5e-06,
        "output_cost_per_token": 1e-05,
        "cache_read_input_token_cost": 1.25e-06,
    },
    "gpt-5": {  # a price cut
        "litellm_provider": "openai",
        "mode": "chat",
        "input_cost_per_token": 1e-06,
        "output_cost_per_token": 8e-06,
        "cache_read_input_token_cost": 1e-07,
    },
    "claude-opus-9": {  # new
        "litellm_provider": "anthropic",
        "mode": "chat",
        "input_cost_per_token": 5e-06,
        "output_cost_per_token": 2.5e-05,
        "cache_read_input_token_cost": 5e-07,
        "cache_creation_input_token_cost": 6.25e-06,
    },
    "azure/gpt-9-nano": {  # new, under our provider name and without LiteLLM's prefix
        "litellm_provider": "azure",
        "mode": "chat",
        "input_cost_per_token": 5e-08,
        "output_cost_per_token": 4e-07,
    },
    "azure/eu/gpt-9-nano": {
        "litellm_provider": "azure",
        "mode": "chat",
        "input_cost_per_token": 5.5e-08,
        "output_cost_per_token": 4.4e-07,
    },
    "text-embedding-3-large": {
        "litellm_provider": "openai",
        "mode": "embedding",
        "input_cost_per_token": 1.3e-07,
        "output_cost_per_token": 0,
    },
    "gemini-2.5-pro": {
        "litellm_provider": "vertex_ai-language-models",
        "mode": "chat",
        "input_cost_per_token": 1.25e-06,
        "output_cost_per_token": 1e-05,
    },
}


def run_import(*args) -> str:
    out = StringIO()
    call_command("prices", "import", *args, stdout=out)
    forget_catalog()
    return out.getvalue()


@pytest.fixture
def price_file(tmp_path):
    path = tmp_path / "model_prices_and_context_window.json"
    path.write_text(json.dumps(PRICE_FILE))
    return path


def test_it_works(price_file):
    before = Price.objects.count()
    output = run_import(str(price_file), "--valid-from", DAY)
    assert Price.objects.count() == before + 3
    gpt5 = Price.objects.get(provider="openai", model_pattern="gpt-5", valid_from=date(2026, 3, 1))
    assert (gpt5.input_per_mtok, gpt5.output_per_mtok, gpt5.cached_input_per_mtok) == (1, 8, Decimal("0.1"))
    assert "LiteLLM" in gpt5.source
    opus = Price.objects.get(provider="anthropic", model_pattern="claude-opus-9")
    assert (opus.input_per_mtok, opus.cache_write_per_mtok) == (5, Decimal("6.25"))
    assert Price.objects.filter(provider="azure_openai", model_pattern="gpt-9-nano").count() == 1
    assert not Price.objects.filter(model_pattern__in=["text-embedding-3-large", "gemini-2.5-pro", "eu/gpt-9-nano"])
    assert "4 price(s) for our providers: 2 added, 1 changed, 1 unchanged; 4 entries skipped" in output
    assert "openai/gpt-5" in output and "1.25 / 0.125 / - / 10 -> 1 / 0.1 / - / 8" in output
    # The old price stays in force before the new row's date: history is not rewritten.
    assert catalog_price("openai", "gpt-5", date(2026, 2, 28)).input_per_mtok == Decimal("1.25")
    assert catalog_price("openai", "gpt-5-2026-04-01", date(2026, 3, 2)).input_per_mtok == Decimal("1")


def test_importing_the_same_file_twice_changes_nothing(price_file):
    run_import(str(price_file), "--valid-from", DAY)
    count = Price.objects.count()
    output = run_import(str(price_file), "--valid-from", "2026-04-01")
    assert Price.objects.count() == count
    assert "0 added, 0 changed, 4 unchanged" in output


def test_dry_run_writes_nothing(price_file):
    before = list(Price.objects.values_list("pk", "provider", "model_pattern", "input_per_mtok", "valid_from"))
    output = run_import(str(price_file), "--dry-run")
    assert list(Price.objects.values_list("pk", "provider", "model_pattern", "input_per_mtok", "valid_from")) == before
    assert "2 added, 1 changed, 1 unchanged" in output and "dry run: nothing written" in output


def test_the_shipped_snapshot_is_already_in_the_catalog():
    output = run_import("snapshot", "--dry-run")
    assert ": 0 added, 0 changed," in output


@pytest.mark.parametrize(
    "entry,message",
    [
        (
            {"litellm_provider": "openai", "input_cost_per_token": "cheap", "output_cost_per_token": 1e-05},
            '$["gpt-9"].input_cost_per_token: expected a number of USD per token, got "cheap"',
        ),
        (
            {"litellm_provider": "openai", "input_cost_per_token": -1e-06, "output_cost_per_token": 1e-05},
            '$["gpt-9"].input_cost_per_token: -1e-06 is out of range',
        ),
        (
            {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": True},
            '$["gpt-9"].output_cost_per_token: expected a number of USD per token, got true',
        ),
        (
            {"litellm_provider": 7, "input_cost_per_token": 1e-06},
            '$["gpt-9"].litellm_provider: expected a provider name',
        ),
        (["openai"], '$["gpt-9"]: expected an object of prices, got list'),
    ],
)
def test_a_malformed_row_is_skipped_and_named_by_its_json_path(tmp_path, entry, message):
    # The file as published has rows we cannot read; the good ones import all the same.
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-5": PRICE_FILE["gpt-5"], "gpt-9": entry}))
    output = run_import(str(path), "--valid-from", DAY)
    assert f"malformed: {message}" in output and "skipped 1: malformed" in output
    assert not Price.objects.filter(model_pattern="gpt-9").exists()
    assert Price.objects.filter(model_pattern="gpt-5", valid_from=date(2026, 3, 1)).exists()


def test_an_alias_without_a_provider_is_skipped_not_malformed(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-5": PRICE_FILE["gpt-5"], "bedrock/claude-opus-latest": {"alias_of": "x"}}))
    output = run_import(str(path), "--valid-from", DAY)
    assert "skipped 1: no litellm_provider (an alias_of entry or the like)" in output and "malformed" not in output


def test_a_file_that_is_not_json_or_not_an_object_is_refused(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"gpt-5": {"litellm_provider": "openai",\n  oops}')
    with pytest.raises(CommandError, match="not JSON: Expecting property name enclosed in double quotes at line 2"):
        run_import(str(path))
    path.write_text("[1, 2]")
    with pytest.raises(CommandError, match=r"\$: expected a JSON object"):
        run_import(str(path))
    with pytest.raises(CommandError, match="No such file"):
        run_import(str(path) + ".missing")
    with pytest.raises(CommandError, match="expected a date as YYYY-MM-DD"):
        run_import(str(path), "--valid-from", "March")


@pytest.fixture
def price_server():
    server = FakeProvider()
    yield server
    server.close()


def test_a_url_is_fetched_through_the_egress_client(price_server):
    price_server.script(Reply(200, PRICE_FILE))
    url = price_server.url + "/BerriAI/litellm/main/model_prices_and_context_window.json"
    output = run_import(url, "--valid-from", DAY)
    assert price_server.seen[-1].path == "/BerriAI/litellm/main/model_prices_and_context_window.json"
    assert "2 added, 1 changed, 1 unchanged" in output
    assert Price.objects.filter(provider="anthropic", model_pattern="claude-opus-9").exists()


def test_a_url_the_egress_policy_refuses_is_not_fetched(price_server, settings):
    settings.PRBENCH_ALLOWED_PRIVATE_NETWORKS = ()
    before = Price.objects.count()
    with pytest.raises(CommandError, match="not a public internet address"):
        run_import(price_server.url + "/prices.json")
    assert price_server.seen == [] and Price.objects.count() == before


def test_a_failed_download_is_reported(price_server):
    price_server.script(Reply(404, "Not Found"))
    with pytest.raises(CommandError, match="HTTP 404"):
        run_import(price_server.url + "/prices.json")


def test_a_deeply_nested_file_is_refused_by_name(tmp_path):
    """Python's JSON parser recurses once per level: 100,000 nested arrays ended in RecursionError."""
    path = tmp_path / "prices.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    before = Price.objects.count()

    with pytest.raises(CommandError) as excinfo:
        run_import(str(path))

    assert str(excinfo.value) == (
        f"{path}: nested more than 64 levels deep; expected a JSON object of model id -> prices"
    )
    assert Price.objects.count() == before
