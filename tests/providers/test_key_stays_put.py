"""A stored key only goes where it was saved for: pointing a credential elsewhere (base_url,
api_version, deployments) takes the key typed again, on every path that can edit one."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from orgs.models import AuditEvent
from providers.actions import check_credential, do_save_credential
from providers.models import ProviderCredential
from tests.conftest import client_for
from tests.providers.fake_server import FakeProvider, Reply

KEY = "sk-live-STAYSPUT-0a1b2c3d4e5f"
AZURE_KEY = "azure-key-STAYSPUT-77665544"
REFUSED = "api_key: enter the key again to change where this credential points"


@pytest.fixture
def saved_at():
    """The endpoint the key was saved for."""
    server = FakeProvider()
    server.default = Reply(401, {"error": {"message": "Incorrect API key provided"}})
    yield server
    server.close()


@pytest.fixture
def elsewhere():
    """Another listener, on another port: where someone would like the key to go."""
    server = FakeProvider()
    yield server
    server.close()


def post_credential(client, org, **fields):
    data = {"provider": "openai", "name": "default", "api_key": "", "api_version": "", "deployments": ""} | fields
    return client.post(reverse("providers:save_credential", args=[org.code]), data)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.wsgi_request._messages]


def test_moving_the_endpoint_without_the_key_is_refused_and_sends_nothing(alice, org, saved_at, elsewhere):
    client = client_for(alice)
    post_credential(client, org, api_key=KEY, base_url=saved_at.url + "/v1")
    credential = ProviderCredential.objects.get(org=org)
    events = AuditEvent.objects.count()
    response = post_credential(client, org, credential=str(credential.code), base_url=elsewhere.url + "/v1")
    assert response.status_code == 302
    assert any(f"{REFUSED} (base_url changed)" in m for m in messages_of(response)), messages_of(response)
    credential.refresh_from_db()
    assert credential.base_url == saved_at.url + "/v1" and credential.api_key() == KEY
    assert AuditEvent.objects.count() == events  # nothing changed, nothing to record
    # Test connection still goes where the key was saved for, and the other listener hears nothing.
    client.post(reverse("providers:test_connection", args=[org.code, credential.code]), {"model": ""})
    assert elsewhere.seen == []
    assert len(saved_at.seen) == 1 and KEY in saved_at.seen[0].headers["authorization"]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"base_url": "https://evil.example.net"}, "base_url"),
        ({"base_url": ""}, "base_url"),  # back to the provider's default is somewhere else too
        ({"api_version": "2099-01-01"}, "api_version"),
        ({"deployments": json.dumps({"gpt-4o": "someone-elses"})}, "deployments"),
        ({"deployments": "{}"}, "deployments"),
        ({"base_url": "https://evil.example.net", "api_version": "2099-01-01"}, "base_url, api_version"),
    ],
)
def test_every_part_of_the_endpoint_needs_the_key(alice, org, change, field):
    client = client_for(alice)
    azure = {
        "provider": "azure_openai",
        "base_url": "https://acme.openai.azure.com",
        "api_version": "2024-10-21",
        "deployments": json.dumps({"gpt-4o": "prod-4o"}),
    }
    post_credential(client, org, api_key=AZURE_KEY, **azure)
    credential = ProviderCredential.objects.get(org=org)
    response = post_credential(client, org, credential=str(credential.code), **(azure | change))
    assert any(f"{REFUSED} ({field} changed)" in m for m in messages_of(response)), messages_of(response)
    credential.refresh_from_db()
    assert (credential.base_url, credential.api_version, credential.deployments) == (
        "https://acme.openai.azure.com",
        "2024-10-21",
        {"gpt-4o": "prod-4o"},
    )
    # With the key typed again the same change is saved.
    response = post_credential(client, org, credential=str(credential.code), api_key=AZURE_KEY, **(azure | change))
    assert any("Saved the azure_openai credential" in m for m in messages_of(response)), messages_of(response)


def test_with_the_key_entered_again_it_moves_and_the_move_is_audited(alice, org, saved_at, elsewhere):
    client = client_for(alice)
    post_credential(client, org, api_key=KEY, base_url=saved_at.url + "/v1")
    credential = ProviderCredential.objects.get(org=org)
    new_key = "sk-live-NEWPLACE-99887766"
    response = post_credential(
        client, org, credential=str(credential.code), api_key=new_key, base_url=elsewhere.url + "/v1"
    )
    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.base_url == elsewhere.url + "/v1" and credential.api_key() == new_key
    event = AuditEvent.objects.filter(org=org, action="credential.updated").get()
    assert event.actor_user == alice
    assert event.detail["endpoint_before"] == {"base_url": saved_at.url + "/v1", "api_version": "", "deployments": {}}
    assert event.detail["endpoint_after"] == {"base_url": elsewhere.url + "/v1", "api_version": "", "deployments": {}}
    assert event.detail["key_replaced"] is True
    logged = json.dumps(list(AuditEvent.objects.filter(org=org).values("target", "detail")))
    assert KEY not in logged and new_key not in logged and KEY[:-4] not in logged
    page = client.get(reverse("orgs:audit", args=[org.code])).content.decode()
    assert saved_at.url in page and elsewhere.url in page and new_key not in page


def test_changing_only_the_name_or_limits_keeps_the_key(alice, org, saved_at):
    client = client_for(alice)
    post_credential(client, org, api_key=KEY, base_url=saved_at.url + "/v1")
    credential = ProviderCredential.objects.get(org=org)
    response = post_credential(
        client, org, credential=str(credential.code), name="prod", base_url=saved_at.url + "/v1",
        requests_per_minute="60", tokens_per_minute="90000",
    )  # fmt: skip
    assert any("Saved the openai credential 'prod'" in m for m in messages_of(response)), messages_of(response)
    credential.refresh_from_db()
    assert (credential.name, credential.requests_per_minute, credential.api_key()) == ("prod", 60, KEY)
    event = AuditEvent.objects.filter(org=org, action="credential.updated").get()
    assert "endpoint_before" not in event.detail and event.detail["key_replaced"] is False


def test_a_credential_without_a_key_moves_freely(alice, org):
    """Nothing stored, nothing to carry: a keyless self-hosted server just changes address."""
    client = client_for(alice)
    post_credential(client, org, provider="openai_compatible", base_url="https://gpu-a.acme.example/v1")
    credential = ProviderCredential.objects.get(org=org)
    post_credential(
        client, org, provider="openai_compatible", credential=str(credential.code),
        base_url="https://gpu-b.acme.example/v1",
    )  # fmt: skip
    credential.refresh_from_db()
    assert credential.base_url == "https://gpu-b.acme.example/v1" and credential.api_key() == ""


def test_a_move_saved_meanwhile_is_not_undone_by_a_stale_form(alice, org):
    """The form was checked against the row as it was; someone moved the credential (with its
    key) before this save. Saving the stale endpoint would carry the new key back: refused."""
    post_credential(client_for(alice), org, api_key=KEY, base_url="https://a.example.com/v1")
    stale = ProviderCredential.objects.get(org=org)
    values = check_credential(org, {"name": "default", "base_url": "https://a.example.com/v1"}, stale)
    moved = ProviderCredential.objects.get(pk=stale.pk)
    moved.set_api_key("sk-live-MOVEDKEY-11223344")
    moved.base_url = "https://b.example.com/v1"
    moved.save()
    with pytest.raises(ValidationError, match="base_url changed"):
        do_save_credential(org, values, stale, user=alice)
    moved.refresh_from_db()
    assert moved.base_url == "https://b.example.com/v1"


def test_the_admin_cannot_move_a_saved_key(alice, org, saved_at, elsewhere):
    post_credential(client_for(alice), org, api_key=KEY, base_url=saved_at.url + "/v1")
    alice.is_staff = alice.is_superuser = True
    alice.save()
    credential = ProviderCredential.objects.get(org=org)
    url = reverse("admin:providers_providercredential_change", args=[credential.pk])
    form = {
        "org": org.pk,
        "provider": "openai_compatible",
        "name": "renamed",
        "base_url": elsewhere.url + "/v1",
        "api_version": "2099-01-01",
        "deployments": '{"gpt-4o": "x"}',
        "requests_per_minute": "",
        "tokens_per_minute": "",
    }
    response = client_for(alice).post(url, form)
    assert response.status_code == 302
    credential.refresh_from_db()
    assert credential.name == "renamed"  # what does not decide where the key goes is still editable
    assert (credential.provider, credential.base_url, credential.api_version, credential.deployments) == (
        "openai",
        saved_at.url + "/v1",
        "",
        {},
    )
    client_for(alice).post(reverse("providers:test_connection", args=[org.code, credential.code]), {"model": ""})
    assert elsewhere.seen == [] and len(saved_at.seen) == 1


def test_the_command_cannot_move_a_saved_key(org, saved_at, elsewhere):
    """The command only adds: a second ``add`` of the same name is refused, not an edit."""
    call_command(
        "credentials", "add", "--org", "acme", "--provider", "openai", "--name", "default",
        "--base-url", saved_at.url + "/v1", "--key-stdin", stdin=io.StringIO(KEY), stdout=io.StringIO(),
    )  # fmt: skip
    with pytest.raises(CommandError, match="already has a openai credential named 'default'"):
        call_command(
            "credentials", "add", "--org", "acme", "--provider", "openai", "--name", "default",
            "--base-url", elsewhere.url + "/v1", stdout=io.StringIO(),
        )  # fmt: skip
    credential = ProviderCredential.objects.get(org=org)
    assert credential.base_url == saved_at.url + "/v1" and credential.api_key() == KEY
