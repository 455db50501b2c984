"""API keys in the browser and at the command line, and the owners' audit log."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils import timezone

from orgs.models import ApiKey, AuditEvent, Organization
from tests.conftest import api_client, client_for

PROVIDER_KEY = "sk-live-AUDITCHECK-0a1b2c3d4e5f"


def keys_url(org) -> str:
    return reverse("orgs:api_keys", args=[org.code])


def create_in_browser(client, org, **fields):
    data = {"name": "ci", "scopes": ["read", "run"], "expires_at": ""} | fields
    return client.post(keys_url(org), data)


def test_an_owner_creates_a_key_sees_it_once_and_it_works(alice, org):
    client = client_for(alice)
    response = create_in_browser(client, org)
    assert response.status_code == 200
    key = ApiKey.objects.get(org=org, name="ci")
    raw = response.context["raw_key"]
    assert raw.startswith(key.prefix) and raw in response.content.decode()
    assert key.scopes == ["read", "run"] and key.created_by == alice
    again = client.get(keys_url(org)).content.decode()
    assert raw not in again and f"{key.prefix}…" in again
    assert api_client(raw).get("/api/runs").status_code == 200


def test_a_bad_key_form_names_the_field_and_creates_nothing(alice, org):
    client = client_for(alice)
    for fields, words in (
        ({"scopes": ["read", "sudo"]}, "unknown scope 'sudo'"),
        ({"scopes": []}, "at least one scope"),
        ({"name": ""}, "name"),
        ({"expires_at": "2020-01-01"}, "in the future"),
        ({"expires_at": "tomorrow"}, "is not a date"),
    ):
        response = create_in_browser(client, org, **fields)
        assert response.status_code == 422, fields
        assert words in response.context["key_error"], (fields, response.context["key_error"])
    assert not ApiKey.objects.exists()


def test_an_expiry_date_is_the_last_day_the_key_works(alice, org):
    day = (timezone.now() + timedelta(days=3)).date()
    create_in_browser(client_for(alice), org, expires_at=day.isoformat())
    key = ApiKey.objects.get(name="ci")
    assert key.expires_at.date() == day + timedelta(days=1) and key.status == "active"


def test_revoking_in_the_browser_stops_the_key(alice, org):
    client = client_for(alice)
    raw = create_in_browser(client, org).context["raw_key"]
    key = ApiKey.objects.get(name="ci")
    response = client.post(reverse("orgs:revoke_api_key", args=[org.code, key.code]))
    assert response.status_code == 302
    assert api_client(raw).get("/api/runs").status_code == 401
    assert "revoked" in client.get(keys_url(org)).content.decode()


def test_members_and_viewers_cannot_manage_keys_and_outsiders_get_404(alice, bob, vera, charlie, org):
    create_in_browser(client_for(alice), org)
    key = ApiKey.objects.get(name="ci")
    for user in (bob, vera):
        client = client_for(user)
        assert client.get(keys_url(org)).status_code == 403
        assert create_in_browser(client, org, name="mine").status_code == 403
        assert client.post(reverse("orgs:revoke_api_key", args=[org.code, key.code])).status_code == 403
    outsider = client_for(charlie)
    assert outsider.get(keys_url(org)).status_code == 404
    assert outsider.post(reverse("orgs:revoke_api_key", args=[org.code, key.code])).status_code == 404
    other = Organization.objects.get(slug="other")
    assert outsider.post(reverse("orgs:revoke_api_key", args=[other.code, key.code])).status_code == 404
    assert ApiKey.objects.get(pk=key.pk).status == "active" and ApiKey.objects.count() == 1


def test_the_command_creates_lists_and_revokes_and_prints_the_key_once(org, capsys):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "api_keys", "create", "--org", org.slug, "--name", "ci", "--scopes", "read,run", stdout=out, stderr=err
    )
    raw = out.getvalue().strip()
    assert raw.startswith("prb_") and "\n" not in raw and raw not in err.getvalue()
    assert api_client(raw).get("/api/runs").status_code == 200
    listing = io.StringIO()
    call_command("api_keys", "list", "--org", org.slug, stdout=listing)
    assert "ci\t" + raw[:12] + "…\tread,run\texpires never" in listing.getvalue() and raw not in listing.getvalue()
    call_command("api_keys", "revoke", "--org", org.slug, "--name", "ci", stdout=io.StringIO())
    assert api_client(raw).get("/api/runs").status_code == 401
    actions = list(AuditEvent.objects.order_by("id").values_list("action", "actor_user"))
    assert actions[0] == ("api_key.created", None) and actions[-1] == ("api_key.revoked", None)


@pytest.mark.parametrize(
    "arguments, words",
    [
        (["--scopes", "read,root"], "scopes: unknown scope 'root'"),
        (["--expires", "2001-01-01"], "expires_at: the expiry must be in the future"),
        (["--name", " "], "name: name must not be empty"),
    ],
)
def test_the_command_refuses_bad_input_by_field(org, arguments, words):
    base = {"--name": "ci"}
    argv = ["api_keys", "create", "--org", org.slug, *[part for pair in base.items() for part in pair], *arguments]
    with pytest.raises(CommandError, match=words):
        call_command(*argv, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiKey.objects.exists()


def test_the_command_refuses_a_second_live_key_of_the_same_name_and_an_unknown_org(org):
    call_command("api_keys", "create", "--org", org.slug, "--name", "ci", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="already exists"):
        call_command(
            "api_keys", "create", "--org", org.slug, "--name", "ci", stdout=io.StringIO(), stderr=io.StringIO()
        )
    with pytest.raises(CommandError, match="org: no organisation"):
        call_command("api_keys", "list", "--org", "nope", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no live key named 'other'"):
        call_command("api_keys", "revoke", "--org", org.slug, "--name", "other", stdout=io.StringIO())


def test_credential_and_allowlist_changes_are_audited_without_the_key(alice, org):
    client = client_for(alice)
    data = {"provider": "openai", "name": "prod", "api_key": PROVIDER_KEY, "base_url": "", "api_version": ""}
    client.post(reverse("providers:save_credential", args=[org.code]), data | {"deployments": ""})
    client.post(reverse("providers:allow", args=[org.code]), {"provider": "mock", "model_patterns": "mock-*\n"})
    client.post(reverse("providers:disallow", args=[org.code, "mock"]))
    from providers.models import ProviderCredential

    credential = ProviderCredential.objects.get(org=org)
    client.post(reverse("providers:delete_credential", args=[org.code, credential.code]))
    events = list(AuditEvent.objects.filter(org=org).order_by("id"))
    assert [event.action for event in events] == [
        "credential.created",
        "allowlist.added",
        "allowlist.removed",
        "credential.deleted",
    ]
    assert all(event.actor_user == alice for event in events)
    assert events[0].detail["key_replaced"] is True
    page = client.get(reverse("orgs:audit", args=[org.code])).content.decode()
    assert "credential.created" in page and "openai credential &#x27;prod&#x27;" in page
    assert PROVIDER_KEY not in page and PROVIDER_KEY[-8:] not in page
    assert PROVIDER_KEY not in str(list(AuditEvent.objects.values()))


def test_only_owners_read_the_audit_log_and_outsiders_get_404(alice, bob, vera, charlie, org):
    from orgs.models import Membership, Role

    url = reverse("orgs:audit", args=[org.code])
    assert client_for(alice).get(url).status_code == 200
    Membership.objects.filter(user=bob).update(role=Role.ADMIN)
    assert client_for(bob).get(url).status_code == 403
    assert client_for(vera).get(url).status_code == 403
    assert client_for(charlie).get(url).status_code == 404


def test_the_audit_log_shows_what_a_key_did(alice, org, experiment, start):
    run = start(experiment)
    client = client_for(alice)
    raw = create_in_browser(client, org).context["raw_key"]
    api_client(raw).get(f"/api/runs/{run.code}")
    page = client.get(reverse("orgs:audit", args=[org.code])).content.decode()
    assert "api_key.used" in page and f"/api/runs/{run.code}" in page and "status: 200" in page
    assert raw not in page


def test_the_sweep_prunes_old_key_uses_and_keeps_every_change(org, settings):
    from orgs import audit
    from prbench.recovery import run_recovery_sweep

    settings.PRBENCH_AUDIT_KEY_USES_DAYS = 90
    long_ago, lately = timezone.now() - timedelta(days=91), timezone.now() - timedelta(days=89)
    for at in (long_ago, lately):
        for action in ("api_key.used", "api_key.created", "credential.deleted"):
            event = audit.record(org, action, target="key ci (prb_0123456…)")
            AuditEvent.objects.filter(pk=event.pk).update(at=at)
    report = run_recovery_sweep()
    assert report["audit_pruned"] == 1
    kept = set(AuditEvent.objects.values_list("action", "at"))
    assert ("api_key.used", long_ago) not in kept and ("api_key.used", lately) in kept
    assert {("api_key.created", long_ago), ("credential.deleted", long_ago)} <= kept
    settings.PRBENCH_AUDIT_KEY_USES_DAYS = 0  # keep them all
    AuditEvent.objects.filter(action="api_key.used").update(at=long_ago)
    assert run_recovery_sweep()["audit_pruned"] == 0 and AuditEvent.objects.filter(action="api_key.used").exists()
