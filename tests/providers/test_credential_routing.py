"""A stored key only ever travels to the endpoint it was saved with.

A member builds an arm of every provider kind with every setting the adapters read, and
runs it through the real pipeline and gateway, with the real SDKs, against two local
servers: the credential's endpoint and a "foreign" one that only counts. Then the same with
every routing key written straight into the arm rows, past the save-time checks, as an old
row could hold them. The foreign server must see nothing, ever.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from experiments.models import Experiment, ModelArm, RunArm
from providers.adapters.config import AGENT_KEYS, ROUTING_KEYS
from providers.models import ProviderCredential
from providers.registry import adapter_class, provider_names
from tests.conftest import client_for, work_queue
from tests.forms import form_data
from tests.providers.contracts import anthropic_body, openai_body
from tests.providers.fake_server import FakeProvider, Reply

KEY = "sk-rt-Q7vXz2LmN9pWc4Hk8Jd3Ty6B"

# A valid value for every setting any adapter declares: a new setting without a sample
# here fails test_every_declared_setting_has_a_sample, so it is exercised below too.
SAMPLES = {
    "max_retries": 0,
    "retry_base_ms": 1,
    "retry_deadline_s": 30,
    "timeout_total_s": 30,
    "max_concurrency": 2,
    "max_tokens": 64,
    "temperature": 0.5,
    "top_p": 0.9,
    "timeout_connect_s": 5,
    "timeout_read_s": 10,
    "extra_body": {"metadata": {"user_id": "prbench-test"}},
    "stream": True,
    "send_seed": True,
    "structured_output": True,
    "mode": "oracle",
    "quality": 1.0,
    "failure_rate": 0,
    "latency_ms": 0,
    "jitter_ms": 0,
    "price_input_per_mtok": 1,
    "price_output_per_mtok": 2,
    "invalid": "never",
    "failure_category": "server_error",
    "agent_fault": "none",
    "reasoning_effort": "low",
    "thinking_budget_tokens": 1024,
    "predictions": 1,
    "deadline_s": 60,
    "solver": "single_turn",
    "max_turns": 10,
    "max_output_tokens_per_turn": 512,
    "max_attempt_tokens": 100_000,
    "max_attempt_cost_usd": 1.0,
    "tools": "all",
    "agent_prompt": "agent-v1",
    "tool_output_chars": 4000,
}
# Valid only with a reasoning model, or without temperature and with more max_tokens:
# exercised in test_request_params.py instead of in every arm here. The agent's settings
# are valid only on an agent arm, which runs a loop: exercised in the agent tests.
REASONING_SETTINGS = {"reasoning_effort", "thinking_budget_tokens"}
LEFT_OUT = REASONING_SETTINGS | set(AGENT_KEYS)


def full_config(provider: str) -> dict:
    return {name: SAMPLES[name] for name in adapter_class(provider).config_keys if name not in LEFT_OUT}


# provider -> model, path suffix of the credential's base URL, api-version, deployments,
# reply body, the path the endpoint must see
WIRES = {
    "openai": ("gpt-4o", "/v1", "", {}, openai_body(), "/v1/chat/completions"),
    "openrouter": ("openai/gpt-4o", "/v1", "", {}, openai_body(), "/v1/chat/completions"),
    "openai_compatible": ("llama3", "/v1", "", {}, openai_body(), "/v1/chat/completions"),
    "azure_openai": (
        "gpt-4o",
        "",
        "2024-10-21",
        {"gpt-4o": "prod-4o"},
        openai_body(),
        "/openai/deployments/prod-4o/chat/completions",
    ),
    "anthropic": ("claude-sonnet", "", "", {}, anthropic_body(), "/v1/messages"),
    "mock": ("mock-oracle", None, "", {}, None, None),
}


def routing_config(foreign: FakeProvider) -> dict:
    """Every routing key an old row could hold, each pointing at the foreign server."""
    url = foreign.url
    values = {
        "base_url": url + "/v1",
        "api_base": url + "/v1",
        "base": url,
        "url": url,
        "host": url,
        "endpoint": url,
        "azure_endpoint": url,
        "api_version": "1999-01-01",
        "deployment": "evil-deployment",
        "deployment_name": "evil-deployment",
        "azure_deployment": "evil-deployment",
        "deployments": {"gpt-4o": "evil-deployment"},
        "organization": "org-evil",
        "project": "proj-evil",
        "api_key": "sk-arm-own-key",
        "azure_ad_token": "evil-token",
        "azure_ad_token_provider": url,
        "auth_token": "evil-token",
        "default_headers": {"X-Evil": "1", "Host": "foreign"},
        "extra_headers": {"X-Evil": "1"},
        "headers": {"X-Evil": "1"},
        "default_query": {"evil": "1"},
        "extra_query": {"evil": "1"},
        "proxy": url,
        "proxies": {"all://": url},
        "http_client": url,
        "websocket_base_url": url.replace("http", "ws"),
        "credential": "evil",
    }
    assert set(values) == ROUTING_KEYS  # every routing key is tried
    # Body fields that would change the model behind the allowlist's back, or route.
    return values | {"extra_body": {"model": "evil-model", "models": ["evil-model"], "base_url": url}}


@pytest.fixture
def endpoint():
    server = FakeProvider()
    yield server
    server.close()


@pytest.fixture
def foreign():
    server = FakeProvider()
    server.default = Reply(200, openai_body("FOREIGN"))
    yield server
    server.close()


def credential_for(org, provider: str, endpoint: FakeProvider) -> None:
    _, suffix, api_version, deployments, body, _ = WIRES[provider]
    if suffix is None:
        return  # the mock needs no credential
    endpoint.default = Reply(200, body)
    credential = ProviderCredential(
        org=org,
        provider=provider,
        name="the endpoint",
        base_url=endpoint.url + suffix,
        api_version=api_version,
        deployments=deployments,
    )
    credential.set_api_key(KEY)
    credential.save()


def member_builds_arm(bob, dataset, provider: str) -> Experiment:
    """Bob, a member, saves an experiment with one arm through the web form."""
    arm = {"label": provider, "provider": provider, "model_name": WIRES[provider][0], "config": full_config(provider)}
    response = client_for(bob).post(
        reverse("experiments:create"), form_data(dataset, [arm], sample_size="2", repetitions="1")
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return Experiment.objects.get(org=dataset.org, name="Shootout")


def assert_only_the_endpoint_was_called(provider, endpoint, foreign, run) -> None:
    assert foreign.seen == []
    assert run.attempts.count() == 2
    if provider == "mock":
        assert endpoint.seen == []
        return
    assert len(endpoint.seen) == 2
    for seen in endpoint.seen:
        assert seen.path.split("?")[0] == WIRES[provider][5]
        identity = seen.headers.get("authorization", "") + seen.headers.get("api-key", "")
        assert KEY in identity + seen.headers.get("x-api-key", "")
        assert "x-evil" not in seen.headers and "openai-organization" not in seen.headers
        assert "openai-project" not in seen.headers and "evil" not in seen.path
        assert seen.body["model"] == WIRES[provider][0] or provider == "azure_openai"
        assert "models" not in seen.body and "base_url" not in seen.body
        if provider == "azure_openai":
            assert "api-version=2024-10-21" in seen.path


def test_every_declared_setting_has_a_sample():
    for provider in provider_names():
        assert set(adapter_class(provider).config_keys) <= set(SAMPLES), provider
        assert adapter_class(provider).config_errors("m", full_config(provider)) == []


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_a_member_built_arm_calls_only_the_credentials_endpoint(provider, bob, org, dataset, endpoint, foreign, start):
    credential_for(org, provider, endpoint)
    experiment = member_builds_arm(bob, dataset, provider)
    arm = experiment.arms.get()
    assert arm.config == full_config(provider)
    assert arm.credential_name == ("" if provider == "mock" else "the endpoint")
    run = start(experiment, inference_only=True)
    work_queue()
    assert_only_the_endpoint_was_called(provider, endpoint, foreign, run)
    assert set(run.attempts.values_list("status", flat=True)) == {"completed"}


@pytest.mark.parametrize("provider", sorted(WIRES))
def test_routing_keys_in_old_rows_are_ignored(provider, bob, org, dataset, endpoint, foreign, start):
    credential_for(org, provider, endpoint)
    experiment = member_builds_arm(bob, dataset, provider)
    hostile = full_config(provider) | routing_config(foreign)
    # Straight into the rows, past every save-time check, as an old row could hold them.
    ModelArm.objects.filter(experiment=experiment).update(config=hostile)
    run = start(experiment, inference_only=True)
    assert RunArm.objects.get(run=run).config == hostile
    RunArm.objects.filter(run=run).update(config=hostile | {"base_url": foreign.url + "/v2"})
    work_queue()
    assert_only_the_endpoint_was_called(provider, endpoint, foreign, run)
    assert set(run.attempts.values_list("status", flat=True)) == {"completed"}
