import json
import os
import time

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from providers import catalog
from tests.conftest import client_for
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
    assert catalog.models()[1] == "fallback" and catalog.info("openai/gpt-4o") is not None


def test_a_stale_cache_falls_back(var_dir, live):
    live.default = Reply(200, LIVE)
    run("refresh")
    stale = time.time() - catalog.TTL_S - 1
    data = json.loads(catalog.cache_path().read_text())
    catalog.cache_path().write_text(json.dumps(data | {"fetched_at": stale}))
    assert catalog.models()[1] == "fallback"
    assert os.path.exists(catalog.cache_path())


def test_search_and_info(var_dir):
    out = run("search", "claude")
    assert "anthropic/claude-sonnet-4" in out and "(from the fallback)" in out
    assert "openai/gpt-4o-mini" in run("search", "openai/*mini")
    with pytest.raises(CommandError, match="no model 'nope/nope'"):
        run("info", "nope/nope")


def test_the_experiment_form_suggests_catalog_ids(bob, var_dir):
    page = client_for(bob).get(reverse("experiments:create")).content.decode()
    assert '<datalist id="model-suggestions">' in page and 'value="anthropic/claude-sonnet-4"' in page
    assert 'list="model-suggestions"' in page
