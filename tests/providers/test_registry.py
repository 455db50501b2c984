"""The provider list lives in providers/registry.py alone: a provider added there is a choice of
every provider field and writes no migration."""

import io

import pytest
from django.core.management import call_command

from providers import registry
from providers.adapters.spec import ProviderSpec
from providers.models import AllowedProvider, Price, ProviderCredential

FAKE = ProviderSpec(name="fakecorp", label="FakeCorp", adapter="providers.adapters.mock.adapter.MockAdapter")


@pytest.fixture
def fake_provider(monkeypatch):
    monkeypatch.setattr(registry, "PROVIDERS", (*registry.PROVIDERS, FAKE))
    monkeypatch.setitem(registry.ADAPTERS, FAKE.name, FAKE.adapter)


def test_a_new_provider_is_a_choice_of_every_provider_field(fake_provider):
    for model in (ProviderCredential, AllowedProvider, Price):
        assert ("fakecorp", "FakeCorp") in list(model._meta.get_field("provider").choices)
    assert ProviderCredential(provider="fakecorp").get_provider_display() == "FakeCorp"


@pytest.mark.django_db
def test_a_new_provider_needs_no_migration(fake_provider):
    out = io.StringIO()
    call_command("makemigrations", "providers", check=True, dry_run=True, stdout=out)  # exits 1 on a change
    assert "No changes detected" in out.getvalue()


def test_each_adapter_is_registered_under_its_own_name():
    for spec in registry.PROVIDERS:
        assert registry.adapter_class(spec.name).name == spec.name


def test_a_replay_is_not_offered_for_credentials_allowlists_or_prices():
    assert "replay" in registry.provider_names()
    assert "replay" not in registry.offered_providers()
