"""The experiment form suggests model ids that fit each arm's provider: native ids for
direct providers, OpenRouter's catalog ids for OpenRouter arms, and says how old the catalog is."""

import json
import os
import re
import time

import pytest
from django.urls import reverse

from providers import catalog
from tests.conftest import client_for
from tests.forms import form_data


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


def datalist(page: str, dom_id: str) -> dict[str, str]:
    """The options of one datalist: id -> label ("" when none)."""
    match = re.search(rf'<datalist id="{re.escape(dom_id)}">(.*?)</datalist>', page, re.S)
    assert match, f"no datalist {dom_id}"
    options = re.findall(r'<option value="([^"]*)"(?: label="([^"]*)")?>', match.group(1))
    return dict(options)


def list_of(page: str, field: str) -> str:
    tag = re.search(rf'<input[^>]*name="{re.escape(field)}"[^>]*>', page)
    assert tag, field
    found = re.search(r'list="([^"]*)"', tag.group(0))
    assert found, tag.group(0)
    return found.group(1)


def test_each_provider_has_its_own_suggestions(bob, var_dir):
    response = client_for(bob).get(reverse("experiments:create"))

    assert response.status_code == 200
    page = response.content.decode()
    openai = datalist(page, "model-suggestions-openai")
    assert list(openai) == [
        "gpt-5",
        "gpt-5-mini",
        "gpt-5-nano",
        "gpt-4.1",
        "gpt-4.1-mini",
        "o3",
        "o4-mini",
        "gpt-4o",
        "gpt-4o-mini",
    ]
    assert datalist(page, "model-suggestions-azure_openai") == openai
    assert list(datalist(page, "model-suggestions-anthropic")) == [
        "claude-opus-4-5",
        "claude-sonnet-4-5",
        "claude-haiku-4-5",
        "claude-opus-4-1",
    ]
    openrouter = datalist(page, "model-suggestions-openrouter")
    assert "anthropic/claude-opus-4.5" in openrouter and "claude-opus-4-5" not in openrouter
    assert openrouter["anthropic/claude-opus-4.5"] == "Anthropic: Claude Opus 4.5 · $5 in / $25 out per Mtok"
    assert openrouter["openrouter/auto"] == "Auto Router · variable price"
    every = datalist(page, "model-suggestions")
    assert {"gpt-5", "claude-haiku-4-5", "openai/gpt-5"} <= set(every)
    # The one row offered on a new experiment is a mock arm: it gets every id.
    assert list_of(page, "arms-0-model_name") == "model-suggestions"
    assert "shipped catalog from 2025-11 (no list fetched yet)" in page


def test_each_arm_row_points_at_its_providers_list(bob, dataset, var_dir):
    arms = [
        {"label": provider, "provider": provider, "model_name": "m"}
        for provider in ["openai", "anthropic", "azure_openai", "openrouter", "mock", "openai_compatible"]
    ]
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, arms, name=""))

    assert response.status_code == 200  # refused (no name), so the rows are shown again
    page = response.content.decode()
    assert [list_of(page, f"arms-{i}-model_name") for i in range(len(arms))] == [
        "model-suggestions-openai",
        "model-suggestions-anthropic",
        "model-suggestions-azure_openai",
        "model-suggestions-openrouter",
        "model-suggestions",
        "model-suggestions",
    ]


def test_the_edit_page_points_saved_arms_at_their_lists(bob, experiment, var_dir):
    arm = next(iter(experiment.arms.all()))  # the page's first row
    arm.provider, arm.model_name = "anthropic", "claude-haiku-4-5"
    arm.save()
    page = client_for(bob).get(reverse("experiments:edit", args=[experiment.code])).content.decode()
    rows = re.findall(r'name="(arms-\d+-model_name)"', page)
    assert list_of(page, rows[0]) == "model-suggestions-anthropic"
    assert list_of(page, rows[-1]) == "model-suggestions"  # the mock arm


def test_the_form_says_how_old_the_catalog_is(bob, var_dir):
    body = {
        "fetched_at": time.time(),
        "data": [{"id": "acme/coder-1", "name": "Acme Coder 1", "pricing": {"prompt": "-1", "completion": "-1"}}],
    }
    catalog.cache_path().write_text(json.dumps(body))
    then = time.time() - 4 * 86400
    os.utime(catalog.cache_path(), (then, then))

    page = client_for(bob).get(reverse("experiments:create")).content.decode()

    assert datalist(page, "model-suggestions-openrouter") == {"acme/coder-1": "Acme Coder 1 · variable price"}
    assert "catalog fetched 4 days ago; run `manage.py models refresh` to update it" in page
