"""An arm chooses one of the organisation's credentials by name; old arms' endpoints move
into named credentials (the data migration)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.urls import reverse

from experiments.actions import ArmSpec, SpecError, check_experiment_spec, check_start_run, do_save_experiment
from experiments.actions import ExperimentSpec as Spec
from experiments.models import Experiment, ModelArm, Run, RunArm
from orgs.models import Organization
from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.models import ProviderCredential
from providers.types import ArmSpec as GatewayArm
from providers.types import CompletionRequest, Message
from tests.conftest import client_for
from tests.factories import credential
from tests.forms import form_data
from tests.providers.contracts import openai_body
from tests.providers.fake_server import FakeProvider, Reply


def raw_spec(dataset, **arm) -> dict:
    return {"name": "e", "dataset": dataset.name, "arms": [{"label": "gpt", "model_name": "gpt-4o"} | arm]}


def spec_errors(org, raw) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check_experiment_spec(org, raw)
    return caught.value.messages


def test_the_only_credential_is_optional_and_pinned(org, dataset):
    credential(org, name="prod")
    spec = check_experiment_spec(org, raw_spec(dataset, provider="openai"))
    assert spec.arms[0].credential == "prod"
    experiment = do_save_experiment(org, spec)
    assert experiment.arms.get().credential_name == "prod"


def test_several_credentials_need_a_name(org, dataset):
    credential(org, name="prod")
    credential(org, name="staging")
    assert spec_errors(org, raw_spec(dataset, provider="openai")) == [
        "arms[0].credential: the organisation has 2 openai credentials, so the arm must name one: prod, staging "
        "(arm 'gpt')"
    ]
    spec = check_experiment_spec(org, raw_spec(dataset, provider="openai", credential="staging"))
    assert spec.arms[0].credential == "staging"


def test_an_unknown_credential_name_is_refused_naming_the_field(org, dataset):
    credential(org, name="prod")
    credential(Organization.objects.create(slug="else", name="Else"), name="theirs")
    for name, error in [
        ("nope", "arms[0].credential: the organisation has no openai credential named 'nope'; it has: prod"),
        ("theirs", "arms[0].credential: the organisation has no openai credential named 'theirs'; it has: prod"),
        (7, "arms[0].credential must be a string: the name of one of the organisation's credentials"),
    ]:
        assert spec_errors(org, raw_spec(dataset, provider="openai", credential=name)) == [f"{error} (arm 'gpt')"]
    assert spec_errors(org, raw_spec(dataset, provider="mock", credential="prod")) == [
        "arms[0].credential: the mock provider uses no credential (arm 'gpt')"
    ]


def test_the_form_offers_the_orgs_credentials_and_checks_the_choice(bob, org, dataset):
    credential(org, name="prod")
    credential(org, name="staging")
    credential(org, provider="anthropic", name="claude")
    credential(Organization.objects.create(slug="else", name="Else"), name="theirs")
    client = client_for(bob)
    page = client.get(reverse("experiments:create")).content.decode()
    assert "none needed by mock" in page and "theirs" not in page  # the page's one row is a mock arm
    arm = {"label": "gpt", "provider": "openai", "model_name": "gpt-4o"}
    response = client.post(reverse("experiments:create"), form_data(dataset, [arm]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "must name one: prod, staging" in page
    # An openai row offers the organisation's openai credentials: not another provider's, nor another org's.
    assert '<option value="prod">prod</option>' in page and '<option value="staging">staging</option>' in page
    assert '<option value="claude">' not in page and "theirs" not in page
    data = form_data(dataset, [arm]) | {"arms-0-credential": "claude"}  # another provider's name
    assert (
        "no openai credential named &#x27;claude&#x27;"
        in client.post(reverse("experiments:create"), data).content.decode()
    )
    assert not Experiment.objects.exists()
    data = form_data(dataset, [arm]) | {"arms-0-credential": "staging"}
    assert client.post(reverse("experiments:create"), data).status_code == 302
    assert ModelArm.objects.get().credential_name == "staging"


def test_a_run_snapshots_the_credential_and_the_gateway_resolves_it_by_name(org, dataset, start):
    prod, staging = FakeProvider(), FakeProvider()
    try:
        for server in (prod, staging):
            server.default = Reply(200, openai_body())
        credential(org, name="prod", base_url=prod.url + "/v1", key="sk-prod-1111111111")
        credential(org, name="staging", base_url=staging.url + "/v1", key="sk-staging-2222222222")
        arm = ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 0}, credential="staging")
        experiment = do_save_experiment(org, Spec(name="e", dataset=dataset, arms=[arm], sample_size=1))
        run = start(experiment, inference_only=True)
        assert RunArm.objects.get(run=run).credential_name == "staging"
        assert run.config_snapshot["arms"][0]["credential"] == "staging"
        request = CompletionRequest(messages=(Message("user", "hi"),))
        gateway.complete(org.pk, GatewayArm("openai", "gpt-4o", {"max_retries": 0}, credential="prod"), request)
        assert len(prod.seen) == 1 and "sk-prod-1111111111" in prod.seen[0].headers["authorization"]
        assert staging.seen == []
        with pytest.raises(ProviderError) as caught:  # two credentials, no name: no guessing
            gateway.complete(org.pk, GatewayArm("openai", "gpt-4o", {"max_retries": 0}), request)
        assert caught.value.category == ErrorCategory.AUTHENTICATION
        assert "must name one: prod, staging" in caught.value.message
        assert len(prod.seen) == 1 and staging.seen == []
    finally:
        prod.close()
        staging.close()


def test_starting_a_run_refuses_an_arm_whose_credential_is_gone(org, dataset):
    made = credential(org, name="prod")
    arm = ArmSpec("gpt", "openai", "gpt-4o", {}, credential="prod")
    experiment = do_save_experiment(org, Spec(name="e", dataset=dataset, arms=[arm]))
    made.delete()
    with pytest.raises(Exception) as caught:
        check_start_run(experiment, inference_only=True)
    assert "arm 'gpt': credential: the organisation has no openai credential named 'prod'" in str(caught.value)
    assert not Run.objects.exists()


# --- the data migration -------------------------------------------------------------------

migration = importlib.import_module("experiments.migrations.0012_move_arm_endpoints")


def old_arm(experiment, label, provider, config, model_name="m"):
    """An arm as rows held it before credentials had names: endpoints in its config."""
    return ModelArm.objects.create(
        experiment=experiment, label=label, provider=provider, model_name=model_name, config=config
    )


def test_the_migration_moves_arm_endpoints_into_keyless_named_credentials(org, dataset, start):
    own = credential(
        org, provider="openai_compatible", base_url="https://llm.acme.internal/v1", key="sk-own-3333333333"
    )
    azure = credential(
        org, provider="azure_openai", base_url="https://acme.openai.azure.com", api_version="2024-10-21",
        deployments={"gpt-4o": "prod-4o"}, key="sk-azure-444444444",
    )  # fmt: skip
    credential(org, provider="openai", name="default")
    experiment = do_save_experiment(org, Spec(name="old", dataset=dataset, arms=[]))
    gpu = old_arm(experiment, "gpu", "openai_compatible", {"base_url": "http://gpu-box:8000/v1", "temperature": 0.1})
    gpu2 = old_arm(experiment, "gpu2", "openai_compatible", {"base_url": "http://gpu-box:8000/v1"})
    same = old_arm(experiment, "same", "openai_compatible", {"base_url": "https://llm.acme.internal/v1"})
    plain = old_arm(experiment, "plain", "openai_compatible", {"max_tokens": 10})
    merged = old_arm(experiment, "mini", "azure_openai", {"deployment": "prod-mini"}, model_name="gpt-4o-mini")
    clash = old_arm(experiment, "clash", "azure_openai", {"deployment": "other-4o"}, model_name="gpt-4o")
    ignored = old_arm(experiment, "ignored", "openai", {"base_url": "https://evil.example", "organization": "x"})
    mock = old_arm(experiment, "mock", "mock", {"mode": "oracle", "base_url": "http://x"})
    run = start(experiment, inference_only=True)
    run_arm = RunArm.objects.get(run=run, label="gpu")

    migration.move_arm_endpoints(apps, None)

    def arm(row):
        row.refresh_from_db()
        return row.credential_name, row.config

    assert arm(gpu) == ("migrated: gpu-box:8000", {"temperature": 0.1})
    assert arm(gpu2) == ("migrated: gpu-box:8000", {})  # one credential per distinct endpoint
    assert arm(same) == ("default", {})  # the org's own credential already points there
    assert arm(plain) == ("default", {"max_tokens": 10})  # pinned: the org now has two
    assert arm(merged) == ("default", {})
    assert arm(ignored) == ("default", {})  # never read before, so nothing to move
    assert arm(mock) == ("", {"mode": "oracle"})
    assert arm(run_arm) == ("migrated: gpu-box:8000", {"temperature": 0.1})
    migrated = ProviderCredential.objects.get(org=org, provider="openai_compatible", name="migrated: gpu-box:8000")
    assert migrated.base_url == "http://gpu-box:8000/v1"
    assert migrated.api_key_encrypted == "" and migrated.api_key() == ""  # never the org's key
    azure.refresh_from_db()
    assert azure.deployments == {"gpt-4o": "prod-4o", "gpt-4o-mini": "prod-mini"}
    name, config = arm(clash)
    assert config == {} and name == "migrated: acme.openai.azure.com"
    moved = ProviderCredential.objects.get(org=org, provider="azure_openai", name=name)
    assert (moved.base_url, moved.api_version, moved.deployments) == (
        "https://acme.openai.azure.com",
        "2024-10-21",
        {"gpt-4o": "other-4o"},
    )
    assert moved.api_key_encrypted == ""
    own.refresh_from_db()
    assert own.api_key() == "sk-own-3333333333"
    assert ProviderCredential.objects.filter(org=org).count() == 5
    migration.move_arm_endpoints(apps, None)  # running it again changes nothing
    assert ProviderCredential.objects.filter(org=org).count() == 5
    assert arm(gpu) == ("migrated: gpu-box:8000", {"temperature": 0.1})
