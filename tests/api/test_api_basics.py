"""The API's shared rules: keys, scopes, the access layer, errors, pagination, throttling, audit."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from experiments.models import Run
from orgs.api_keys import do_revoke_api_key
from orgs.models import ApiKey, AuditEvent
from tests.conftest import api_client, client_for, make_api_key


@pytest.fixture
def run(experiment, start):
    return start(experiment)


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


def test_a_key_reads_its_organisations_run_by_its_public_id(org, run):
    response = api_client(make_api_key(org, ["read"])).get(f"/api/runs/{run.code}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == str(run.code)
    assert body["status"] == run.status
    assert body["progress"]["total"] == run.attempts.count() > 0
    assert [arm["label"] for arm in body["arms"]] == ["oracle", "noisy"]


def test_no_key_a_wrong_key_a_revoked_and_an_expired_key_are_all_401(org, run):
    revoked = make_api_key(org, name="old")
    do_revoke_api_key(ApiKey.objects.get(name="old"))
    expired = make_api_key(org, name="stale", expires_at=timezone.now() + timedelta(seconds=1))
    ApiKey.objects.filter(name="stale").update(expires_at=timezone.now() - timedelta(seconds=1))
    for client in (Client(), api_client("prb_not-a-key"), api_client(revoked), api_client(expired)):
        response = client.get(f"/api/runs/{run.code}")
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Bearer"
        assert error_of(response)["code"] == "unauthenticated"


def test_another_organisations_key_gets_404_as_for_an_unknown_id(org, run, charlie):
    from orgs.models import Organization

    outsider = api_client(make_api_key(Organization.objects.get(slug="other")))
    for path in (f"/api/runs/{run.code}", "/api/runs/not-a-uuid", "/api/runs/00000000-0000-0000-0000-000000000000"):
        response = outsider.get(path)
        assert response.status_code == 404, path
        assert error_of(response)["code"] == "not_found"
    assert outsider.get("/api/runs").json()["items"] == []


def test_a_key_without_the_read_scope_is_refused_with_403(org, run):
    response = api_client(make_api_key(org, ["run"])).get(f"/api/runs/{run.code}")
    assert response.status_code == 403
    assert "read" in error_of(response)["message"]


def test_a_signed_in_member_uses_the_api_with_the_browser_session(org, run, vera, charlie):
    assert client_for(vera).get(f"/api/runs/{run.code}").status_code == 200
    assert client_for(charlie).get(f"/api/runs/{run.code}").status_code == 404


def test_a_bad_key_from_a_signed_in_browser_is_401_not_the_session(org, run, alice):
    raw = make_api_key(org, name="old")
    do_revoke_api_key(ApiKey.objects.get(name="old"))
    browser = client_for(alice)
    for header in (f"Bearer {raw}", "Bearer prb_unknown", "Basic YWxpY2U6cHc="):
        assert browser.get(f"/api/runs/{run.code}", headers={"authorization": header}).status_code == 401
    assert browser.get(f"/api/runs/{run.code}").status_code == 200


def test_runs_are_paged_by_a_signed_cursor_newest_first(org, experiment, start):
    runs = [start(experiment) for _ in range(5)]
    client = api_client(make_api_key(org))
    seen, cursor = [], None
    for _ in range(3):
        page = client.get("/api/runs", {"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [str(run.code) for run in reversed(runs)]
    assert cursor is None


def test_a_forged_cursor_and_a_bad_limit_name_their_field(org, run):
    client = api_client(make_api_key(org))
    forged = client.get("/api/runs", {"cursor": "eyJiZWZvcmUiOjF9:forged"})
    assert forged.status_code == 422
    assert error_of(forged)["field"] == "cursor"
    too_many = client.get("/api/runs", {"limit": 100000})
    assert too_many.status_code == 422
    assert error_of(too_many)["field"] == "limit"


@override_settings(PRBENCH_API_REQUESTS_PER_MINUTE=3)
def test_a_key_is_throttled_in_redis_and_told_when_to_retry(org, run):
    client = api_client(make_api_key(org))
    statuses = [client.get(f"/api/runs/{run.code}").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = client.get(f"/api/runs/{run.code}")
    assert error_of(refused)["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 60
    # Another key has its own allowance.
    assert api_client(make_api_key(org)).get(f"/api/runs/{run.code}").status_code == 200


def test_every_use_of_a_key_is_in_the_audit_log_with_its_status(org, run):
    raw = make_api_key(org, ["read"], name="ci")
    client = api_client(raw)
    client.get(f"/api/runs/{run.code}")
    client.get("/api/runs/00000000-0000-0000-0000-000000000000")
    uses = AuditEvent.objects.filter(org=org, action="api_key.used").order_by("id")
    assert [(event.detail["status"], event.actor_key.name) for event in uses] == [(200, "ci"), (404, "ci")]
    assert all(raw not in str(event.detail) + event.target for event in AuditEvent.objects.all())
    assert "api_key.created" in set(AuditEvent.objects.values_list("action", flat=True))


def test_last_used_is_recorded(org, run):
    raw = make_api_key(org, name="ci")
    assert ApiKey.objects.get(name="ci").last_used_at is None
    api_client(raw).get(f"/api/runs/{run.code}")
    assert ApiKey.objects.get(name="ci").last_used_at is not None


def test_only_the_hash_of_a_key_is_stored(org):
    raw = make_api_key(org, name="ci")
    key = ApiKey.objects.get(name="ci")
    assert raw.startswith(key.prefix) and len(key.prefix) == 12
    assert raw not in str(ApiKey.objects.filter(pk=key.pk).values().get())


def test_the_schema_and_the_docs_are_served(client, db):
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200
    assert "/api/runs/{run_id}" in schema.json()["paths"]
    docs = client.get("/api/docs")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    assert b"cdn" not in docs.content.lower()


def test_runs_list_is_scoped_to_the_keys_organisation(org, run, charlie):
    from orgs.models import Organization

    assert Run.objects.count() == 1
    mine = api_client(make_api_key(org)).get("/api/runs").json()["items"]
    assert [item["id"] for item in mine] == [str(run.code)]
    assert api_client(make_api_key(Organization.objects.get(slug="other"))).get("/api/runs").json()["items"] == []


def test_no_two_api_schemas_share_a_name():
    """The OpenAPI document names components by class name: two schemas called ``ArmOut`` in
    two routers silently became one, and responses were documented with the other's fields."""
    from collections import Counter

    from ninja import Schema

    from prbench.api import api

    api.get_openapi_schema()  # every router imported

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    ours = [
        cls
        for cls in subclasses(Schema)
        if cls.__module__.split(".")[0] in {"experiments", "leaderboards", "orgs", "prbench"}
    ]
    named = Counter(cls.__name__ for cls in ours if "[" not in cls.__name__)
    assert [name for name, count in named.items() if count > 1] == []
