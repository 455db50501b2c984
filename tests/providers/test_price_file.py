"""``prices import`` and ``prices snapshot`` on LiteLLM's file as published.

tests/data/litellm/model_prices_and_context_window.json is LiteLLM 1.110.2's
``litellm/model_prices_and_context_window_backup.json`` (the repository's
model_prices_and_context_window.json), trimmed to 59 entries with every shape it has: the
``sample_spec``, ``alias_of`` entries without a provider, other providers, our providers'
embeddings, images, audio, realtime and video, Azure's regional variants, unpriced entries,
1-hour cache writes, a long-context tier, and entries whose values nest.
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from providers.management.commands import prices as prices_command
from providers.models import Price
from providers.price_import import SNAPSHOT, usable_entries
from providers.pricing import catalog_price, forget_catalog
from tests.samples import LITELLM_PRICES

pytestmark = pytest.mark.django_db

DAY = "2026-11-01"


def run(*args) -> str:
    out = StringIO()
    call_command("prices", *args, stdout=out)
    forget_catalog()
    return out.getvalue()


@pytest.fixture
def empty_catalog():
    Price.objects.all().delete()  # so that every priced entry is a row the import adds


def test_the_published_file_imports_and_counts_what_it_skips_by_reason(empty_catalog):
    output = run("import", str(LITELLM_PRICES), "--valid-from", DAY)
    assert "36 price(s) for our providers: 36 added, 0 changed, 0 unchanged; 23 entries skipped" in output
    for line in [
        "skipped 7: another provider",
        "skipped 7: not a chat model (embedding, image, audio ...)",
        "skipped 3: no litellm_provider (an alias_of entry or the like)",
        "skipped 3: a regional or deployment-type variant (priced per deployment)",
        "skipped 2: no per-token input and output price",
        "skipped 1: LiteLLM's sample_spec (documentation, not a model)",
    ]:
        assert line in output
    opus = Price.objects.get(provider="anthropic", model_pattern="claude-opus-4-6", valid_from=date(2026, 11, 1))
    assert (opus.input_per_mtok, opus.cache_write_per_mtok, opus.cache_write_1h_per_mtok) == (5, Decimal("6.25"), 10)
    gpt = Price.objects.get(provider="openai", model_pattern="gpt-5.4", valid_from=date(2026, 11, 1))
    assert gpt.long_context_above_tokens == 272_000
    assert (gpt.long_input_per_mtok, gpt.long_output_per_mtok, gpt.long_cached_input_per_mtok) == (
        5,
        Decimal("22.5"),
        Decimal("0.5"),
    )
    assert Price.objects.filter(provider="azure_openai", model_pattern="gpt-5.4").exists()
    assert not Price.objects.filter(model_pattern__contains="/").exclude(provider="openrouter").exists()


def test_a_malformed_row_is_skipped_and_named_and_the_rest_imports(tmp_path, empty_catalog):
    published = json.loads(LITELLM_PRICES.read_text())
    published["claude-opus-4-7"]["input_cost_per_token"] = "5e-06"  # a string where a number goes
    published["gpt-9"] = ["openai"]
    path = tmp_path / "model_prices_and_context_window.json"
    path.write_text(json.dumps(published))
    output = run("import", str(path), "--valid-from", DAY)
    assert "skipped 2: malformed" in output
    assert (
        'malformed: $["claude-opus-4-7"].input_cost_per_token: expected a number of USD per token, got "5e-06"'
        in output
    )
    assert 'malformed: $["gpt-9"]: expected an object of prices, got list' in output
    day = date(2026, 11, 1)
    assert not Price.objects.filter(model_pattern="claude-opus-4-7", valid_from=day).exists()
    assert Price.objects.filter(provider="anthropic", model_pattern="claude-opus-4-6", valid_from=day).exists()


def squeeze(line: str) -> str:
    return " ".join(line.split())


def test_dry_run_prints_the_table_of_changes_and_writes_nothing(tmp_path):
    published = json.loads(LITELLM_PRICES.read_text())
    published["gpt-5.2"]["input_cost_per_token"] = 1.5e-06  # a price cut
    published["gpt-7"] = published["gpt-5.2"] | {"output_cost_per_token": 2e-05}  # a new model
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(published))
    before = list(Price.objects.values_list("pk", "provider", "model_pattern", "input_per_mtok", "valid_from"))
    output = run("import", str(path), "--dry-run")
    assert list(Price.objects.values_list("pk", "provider", "model_pattern", "input_per_mtok", "valid_from")) == before
    assert ": 1 added, 1 changed, 35 unchanged;" in output and "dry run: nothing written" in output
    rows = {line.split()[1]: line for line in output.splitlines() if line.startswith(("added", "changed", "unchanged"))}
    assert squeeze(rows["openai/gpt-5.2"]) == "changed openai/gpt-5.2 1.75 / 0.175 / - / 14 -> 1.5 / 0.175 / - / 14"
    assert squeeze(rows["openai/gpt-7"]) == "added openai/gpt-7 - -> 1.5 / 0.175 / - / 20"
    assert rows["anthropic/claude-opus-4-6"].split()[0] == "unchanged"
    assert "(1h cache write 10)" in rows["anthropic/claude-opus-4-6"]
    assert "(above 272000 tokens: 5 / 0.5 / - / 22.5)" in rows["openai/gpt-5.4"]


def test_snapshot_writes_the_entries_that_import_as_published(tmp_path, monkeypatch):
    target = tmp_path / "litellm_prices.json"
    monkeypatch.setattr(prices_command, "SNAPSHOT", target)
    output = run("snapshot", str(LITELLM_PRICES))
    assert f"wrote 36 of 59 entries to {target}" in output
    written = json.loads(target.read_text())
    published = json.loads(LITELLM_PRICES.read_text())
    assert written == {model_id: published[model_id] for model_id in written}
    assert "sample_spec" not in written and "azure/gpt-5.4" in written


def test_the_shipped_snapshot_is_the_usable_part_of_a_published_file():
    shipped = json.loads(SNAPSHOT.read_text())
    assert usable_entries(shipped) == shipped
    published = json.loads(LITELLM_PRICES.read_text())
    # Where the fixture and the snapshot share an entry, it is the same as published.
    assert all(shipped[model_id] == entry for model_id, entry in usable_entries(published).items())


@pytest.mark.parametrize(
    "provider,model,input_per_mtok,output_per_mtok",
    [
        ("openai", "gpt-5.1", "1.25", "10"),
        ("openai", "gpt-5.1-2025-11-13", "1.25", "10"),
        ("openai", "gpt-5.2", "1.75", "14"),
        ("openai", "gpt-5.2-2025-12-11", "1.75", "14"),
        ("openai", "gpt-5.4-2026-03-05", "2.5", "15"),
        ("openai", "gpt-5.5", "5", "30"),
        ("openai", "o3-2025-04-16", "2", "8"),
        ("openai", "o3-pro", "20", "80"),
        ("openai", "o4-mini-2025-04-16", "1.1", "4.4"),
        ("anthropic", "claude-opus-4-5-20251101", "5", "25"),
        ("anthropic", "claude-opus-4-6", "5", "25"),
        ("anthropic", "claude-opus-4-7-20260416", "5", "25"),
        ("anthropic", "claude-sonnet-4-5-20250929", "3", "15"),
        ("anthropic", "claude-sonnet-4-6", "3", "15"),
        ("anthropic", "claude-haiku-4-5-20251001", "1", "5"),
        ("azure_openai", "gpt-5.4", "2.5", "15"),
    ],
)
def test_a_fresh_install_prices_todays_models(provider, model, input_per_mtok, output_per_mtok):
    price = catalog_price(provider, model, date.today())
    assert price is not None, f"{provider}/{model} has no price"
    assert (price.input_per_mtok, price.output_per_mtok) == (Decimal(input_per_mtok), Decimal(output_per_mtok))
