import json
import os
import time

import pytest
from django.core.management import CommandError, call_command

from providers import catalog
from tests.providers.fake_server import FakeProvider, Reply

LIVE = {
    "data": [
        {
            "id": "acme/coder-1",
            "name": "Acme Coder 1",
            "context_length": 65536,
            "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        },
        {"id": "acme/free", "name": "Acme Free", "pricing": {"prompt": "0", "completion": "0"}},
        {"name": "no id: skipped"},
    ]
}


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.fixture
def live(settings):
    server = FakeProvider()
    settings.PRBENCH_OPENROUTER_MODELS_URL = server.url + "/api/v1/models"
    yield server
    server.close()


def run(*args):
    from io import StringIO

    out = StringIO()
    call_command("models", *args, stdout=out)
    return out.getvalue()


def test_refresh_caches_the_live_list(var_dir, live):
    live.default = Reply(200, LIVE)
    assert "cached 2 models" in run("refresh")
    assert live.seen[-1].path == "/api/v1/models"
    models, source = catalog.models()
    assert source == "cache" and [m.id for m in models] == ["acme/coder-1", "acme/free"]
    assert "$1 in / $2 out" in run("info", "acme/coder-1")
    assert "context length: 65536" in run("info", "acme/coder-1")


def test_a_failed_refresh_keeps_the_fallback(var_dir, live):
    live.default = Reply(502, {"error": "bad gateway"})
    with pytest.raises(CommandError, match="could not fetch the model list: HTTPStatusError"):
        run("refresh")
    live.close()
    with pytest.raises(CommandError, match="ConnectError"):
        run("refresh")
    assert catalog.models()[1] == "fallback" and catalog.info("openai/gpt-5") is not None


def age_cache_by(seconds: float) -> None:
    then = time.time() - seconds
    os.utime(catalog.cache_path(), (then, then))


def test_a_stale_cache_is_still_served_with_its_age(var_dir, live):
    live.default = Reply(200, LIVE)
    run("refresh")
    age_cache_by(3 * 86400 + 60)

    listing = catalog.listing()
    assert listing.source == "cache" and listing.stale
    assert [m.id for m in listing.models] == ["acme/coder-1", "acme/free"]
    out = run("search", "acme")
    assert "acme/coder-1" in out and "catalog fetched 3 days ago" in out
    assert "run `manage.py models refresh` to update it" in out
    assert "catalog fetched 3 days ago" in run("info", "acme/coder-1")
    assert catalog.info("openai/gpt-5") is None  # the shipped list is not mixed in


def test_a_fresh_cache_shows_its_age_without_asking_for_a_refresh(var_dir, live):
    live.default = Reply(200, LIVE)
    run("refresh")
    age_cache_by(5 * 3600 + 60)
    out = run("search", "acme")
    assert "(from the cache: catalog fetched 5 hours ago)" in out and "refresh" not in out


def test_a_copied_cache_keeps_its_recorded_age(var_dir, live):
    """A cache copied onto a machine gets a new mtime; the fetch time recorded inside wins."""
    live.default = Reply(200, LIVE)
    run("refresh")
    data = json.loads(catalog.cache_path().read_text())
    catalog.cache_path().write_text(json.dumps(data | {"fetched_at": time.time() - 10 * 86400}))
    assert "catalog fetched 10 days ago" in run("search", "acme")


def test_refreshing_a_stale_cache_makes_it_fresh(var_dir, live):
    live.default = Reply(200, LIVE)
    run("refresh")
    age_cache_by(2 * 86400)
    assert catalog.listing().stale
    live.default = Reply(200, {"data": LIVE["data"] + [{"id": "acme/coder-2", "name": "Acme Coder 2"}]})

    assert "cached 3 models" in run("refresh")

    assert [r.path for r in live.seen] == ["/api/v1/models", "/api/v1/models"]
    listing = catalog.listing()
    assert not listing.stale and catalog.info("acme/coder-2") is not None
    assert "catalog fetched less than an hour ago" in run("info", "acme/coder-2")


def test_no_cache_means_the_shipped_fallback(var_dir):
    assert not catalog.cache_path().exists()
    listing = catalog.listing()
    assert listing.source == "fallback" and listing.stale
    out = run("search", "claude")
    assert "anthropic/claude-opus-4.5" in out and "anthropic/claude-haiku-4.5" in out
    assert "(from the fallback: shipped catalog from 2025-11 (no list fetched yet);" in out
    assert "run `manage.py models refresh`" in out


@pytest.mark.parametrize("cache", ["not json", json.dumps({"data": "nope"}), json.dumps({"fetched_at": 1, "data": []})])
def test_an_unusable_cache_means_the_shipped_fallback(var_dir, cache):
    catalog.cache_path().write_text(cache)
    assert catalog.models()[1] == "fallback"


def test_the_shipped_fallback_lists_current_models_only(var_dir):
    shipped = catalog.listing().models
    ids = {m.id for m in shipped}
    for current in ["openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-4.1", "openai/o3", "openai/o4-mini",
                    "anthropic/claude-opus-4.5", "anthropic/claude-sonnet-4.5", "anthropic/claude-haiku-4.5",
                    "google/gemini-2.5-pro"]:  # fmt: skip
        assert current in ids
    # Retired by Anthropic: suggesting them would only produce failed attempts.
    assert not ids & {"anthropic/claude-sonnet-4", "anthropic/claude-opus-4", "anthropic/claude-3.5-haiku"}
    for model in shipped:
        assert model.variable_price or (model.input_per_mtok or 0) > 0 < (model.output_per_mtok or 0), model.id


VARIABLE = {
    "data": [
        {"id": "openrouter/auto", "name": "Auto Router", "pricing": {"prompt": "-1", "completion": "-1"}},
        {"id": "acme/half", "name": "Acme Half", "pricing": {"prompt": "0.000001", "completion": "-1"}},
        {"id": "acme/odd", "name": "Acme Odd", "pricing": {"prompt": "NaN", "completion": "Infinity"}},
    ]
}


def test_a_variable_price_shows_as_variable(var_dir, live):
    live.default = Reply(200, VARIABLE)
    assert "cached 3 models" in run("refresh")

    auto = catalog.info("openrouter/auto")
    assert auto is not None and auto.variable_price
    assert auto.input_per_mtok is None and auto.output_per_mtok is None  # never -1,000,000
    half = catalog.info("acme/half")
    assert half is not None and half.variable_price and half.output_per_mtok is None
    assert "price per million tokens: variable price" in run("info", "openrouter/auto")
    out = run("search", "*")
    assert "openrouter/auto" in out and "-1" not in out and "1000000" not in out
    assert "acme/half" in out and out.count("variable price") == 2
    assert "acme/odd" in out and "price unknown" in out and "NaN" not in out


def test_the_shipped_auto_router_is_variable(var_dir):
    assert "price per million tokens: variable price" in run("info", "openrouter/auto")


def test_search_and_info(var_dir):
    out = run("search", "claude")
    assert "anthropic/claude-sonnet-4.5" in out and "$3 in / $15 out per Mtok" in out
    assert "openai/gpt-5-mini" in run("search", "openai/*mini")
    with pytest.raises(CommandError, match="no model 'nope/nope' in the catalog \\(shipped catalog"):
        run("info", "nope/nope")
