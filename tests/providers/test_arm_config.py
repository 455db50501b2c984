"""Arm settings are declared per adapter: routing keys, unknown keys and ill-typed values
are refused at save, with the key named, by the spec (apply_experiment) and the web form."""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.actions import SpecError, check_experiment_spec
from experiments.models import Experiment
from providers.adapters.config import ROUTING_KEYS
from providers.registry import provider_names
from tests.conftest import client_for
from tests.forms import form_data

HTTP_PROVIDERS = ["anthropic", "azure_openai", "openai", "openai_compatible", "openrouter"]
OPENAI_FAMILY = ["azure_openai", "openai", "openai_compatible", "openrouter"]
# The providers a request is made to: a replay arm takes no sampling settings at all.
CALLING_PROVIDERS = [provider for provider in provider_names() if provider != "replay"]
# The providers a model answers: a team's agent service (http_agent) samples as it likes.
SAMPLING_PROVIDERS = [provider for provider in CALLING_PROVIDERS if provider != "http_agent"]

# (providers, config, the error naming the key)
BAD_SETTINGS = [
    (provider_names(), {"qualty": 0.5}, "config.qualty is not a {provider} setting"),
    (SAMPLING_PROVIDERS, {"temperature": "hot"}, "config.temperature must be a number between 0 and 2"),
    (SAMPLING_PROVIDERS, {"temperature": 7}, "config.temperature must be a number between 0 and 2"),
    (SAMPLING_PROVIDERS, {"max_tokens": 0}, "config.max_tokens must be a whole number between 1 and"),
    (SAMPLING_PROVIDERS, {"max_tokens": 1.5}, "config.max_tokens must be a whole number between 1 and"),
    (SAMPLING_PROVIDERS, {"top_p": True}, "config.top_p must be a number between 0 and 1"),
    (CALLING_PROVIDERS, {"max_retries": 99}, "config.max_retries must be a whole number between 0 and 20"),
    (CALLING_PROVIDERS, {"max_concurrency": 0}, "config.max_concurrency must be a whole number between 1 and 1024"),
    (HTTP_PROVIDERS, {"timeout_read_s": -1}, "config.timeout_read_s must be a positive number of seconds"),
    (HTTP_PROVIDERS, {"timeout_connect_s": "5"}, "config.timeout_connect_s must be a positive number of seconds"),
    (HTTP_PROVIDERS, {"extra_body": [1]}, "config.extra_body must be an object"),
    (HTTP_PROVIDERS, {"extra_body": {"model": "gpt-5"}}, "config.extra_body may not set model"),
    (
        HTTP_PROVIDERS,
        {"extra_body": {"models": ["x"], "route": "fallback"}},
        "config.extra_body may not set models, route",
    ),
    (HTTP_PROVIDERS, {"extra_body": {"base_url": "http://x"}}, "config.extra_body may not set base_url"),
    (OPENAI_FAMILY, {"send_seed": "yes"}, "config.send_seed must be true or false"),
    (OPENAI_FAMILY, {"structured_output": 1}, "config.structured_output must be true or false"),
    (["anthropic"], {"send_seed": True}, "config.send_seed is not a anthropic setting"),
    (["mock"], {"timeout_read_s": 5}, "config.timeout_read_s is not a mock setting"),
    (["mock"], {"mode": "turbo"}, "config.mode must be one of oracle, noisy"),
    (["mock"], {"quality": 2}, "config.quality must be a number between 0.0 and 1.0"),
    (["mock"], {"failure_category": "meltdown"}, "config.failure_category must be one of"),
    (["http_agent"], {"temperature": 0}, "config.temperature is not a http_agent setting"),
    (["http_agent"], {"deadline_s": -1}, "config.deadline_s must be a positive number of seconds"),
    (["http_agent"], {"timeout_read_s": "5"}, "config.timeout_read_s must be a positive number of seconds"),
    (["replay"], {"temperature": 0}, "config.temperature is not a replay setting (known: predictions)"),
    (["replay"], {}, "config.predictions is required (import_predictions sets it)"),
    (["replay"], {"predictions": "7"}, "config.predictions must be a whole number between 1 and"),
]
CASES = [(provider, config, error.format(provider=provider)) for ps, config, error in BAD_SETTINGS for provider in ps]


def spec(dataset, provider: str, config: dict) -> dict:
    arm = {"label": "a", "provider": provider, "model_name": "m", "config": config}
    return {"name": "e", "dataset": dataset.name, "arms": [arm]}


def spec_errors(org, raw) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check_experiment_spec(org, raw)
    return caught.value.messages


def test_every_routing_key_is_refused_for_every_provider_in_a_spec(org, dataset):
    tried = 0
    for provider in provider_names():
        for key in sorted(ROUTING_KEYS):
            errors = spec_errors(org, spec(dataset, provider, {key: "http://127.0.0.1:9/v1"}))
            assert errors == [
                f"arms[0].config.{key} is not an arm setting: where requests go, and with which identity, "
                "belongs to the credential an owner or admin set up; choose one by name with `credential`"
            ], (provider, key)
            tried += 1
    assert tried == len(provider_names()) * len(ROUTING_KEYS)


def test_every_routing_key_is_refused_in_the_web_form(bob, org, dataset):
    client = client_for(bob)
    for provider in ("openai_compatible", "azure_openai", "openai", "anthropic"):
        config = {key: "http://127.0.0.1:9/v1" for key in ROUTING_KEYS}
        arm = {"label": "rogue", "provider": provider, "model_name": "m", "config": config}
        response = client.post(reverse("experiments:create"), form_data(dataset, [arm]))
        assert response.status_code == 200
        content = response.content.decode()
        for key in ROUTING_KEYS:
            assert f"Arm &#x27;rogue&#x27;: config.{key} is not an arm setting" in content, (provider, key)
    assert not Experiment.objects.exists()


@pytest.mark.parametrize("provider, config, error", CASES)
def test_bad_settings_are_refused_in_a_spec_with_the_key_named(org, dataset, provider, config, error):
    errors = spec_errors(org, spec(dataset, provider, config))
    assert any(e.startswith("arms[0].") and error in e for e in errors), errors


def test_bad_settings_are_refused_in_the_web_form(bob, org, dataset):
    client = client_for(bob)
    for provider, config, error in CASES:
        arm = {"label": "typo", "provider": provider, "model_name": "m", "config": config}
        response = client.post(reverse("experiments:create"), form_data(dataset, [arm]))
        assert response.status_code == 200
        assert f"Arm 'typo': {error}" in response.content.decode().replace("&#x27;", "'"), (provider, config)
    assert not Experiment.objects.exists()


def test_declared_settings_are_accepted(org, dataset):
    raw = spec(dataset, "openai", {"temperature": 0.2, "max_tokens": 128, "extra_body": {"user": "ci"}})
    assert check_experiment_spec(org, raw).arms[0].config["max_tokens"] == 128
