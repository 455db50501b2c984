"""The API's answers when something is wrong: who is asking (401 vs 403), what the body says
(422, nothing started), and whether an id exists (one 404 for every outsider).

Clients here check CSRF as a browser's server does (``enforce_csrf_checks=True``): Django's test
client skips the check by default, which hid every difference between a script and a browser.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client, override_settings

from datasets.models import TaskUpload
from experiments.models import Run
from orgs.api_keys import do_revoke_api_key
from orgs.models import ApiKey, Organization
from tests.conftest import make_api_key
from tests.factories import arm
from tests.samples import SWEBENCH_LITE_LINES


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


def script(authorization: str | None = None) -> Client:
    """A client as curl or requests is: no cookies, CSRF checked as in production."""
    return Client(enforce_csrf_checks=True, headers={"authorization": authorization} if authorization else {})


def browser(user, *, with_token: bool) -> Client:
    """A signed-in browser (the docs page, a script in the page): the session cookie, and the
    CSRF cookie with its token in the header when ``with_token``."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    token = _get_new_csrf_string()
    client.cookies["csrftoken"] = token
    if with_token:
        client.defaults["HTTP_X_CSRFTOKEN"] = token
    return client


def upload_form(lines: list[str]) -> dict[str, Any]:
    data = ("\n".join(lines) + "\n").encode()
    return {"format": "swebench", "dataset_name": "lite", "file": SimpleUploadedFile("tasks.jsonl", data)}


# --- a browser session uploads ---------------------------------------------------------------------


def test_a_signed_in_browser_uploads_with_its_csrf_token(alice):
    response = browser(alice, with_token=True).post("/api/datasets/uploads", upload_form(SWEBENCH_LITE_LINES[:2]))
    assert response.status_code == 201, response.content
    assert TaskUpload.objects.get().file_name == "tasks.jsonl"
    assert response.json()["id"] == str(TaskUpload.objects.get().code)


def test_a_browser_upload_keeps_the_size_limit(alice, settings):
    settings.PRBENCH_UPLOAD_MAX_BYTES = 1000
    response = browser(alice, with_token=True).post("/api/datasets/uploads", upload_form(SWEBENCH_LITE_LINES))
    assert response.status_code == 422, response.content
    assert error_of(response)["field"] == "file" and "larger than the upload limit" in error_of(response)["message"]
    assert not TaskUpload.objects.exists()


def test_a_browser_upload_without_its_csrf_token_is_refused(alice, bob):
    response = browser(alice, with_token=False).post("/api/datasets/uploads", upload_form(SWEBENCH_LITE_LINES[:2]))
    assert response.status_code == 403, response.content
    assert error_of(response)["code"] == "forbidden" and "CSRF" in error_of(response)["message"]
    # A member may not upload at all: the role is refused before the body is read.
    member = browser(bob, with_token=True).post("/api/datasets/uploads", upload_form(SWEBENCH_LITE_LINES[:2]))
    assert member.status_code == 403 and "admin" in error_of(member)["message"].lower()
    assert not TaskUpload.objects.exists()


# --- no key, a bad key: 401 on every method --------------------------------------------------------


@pytest.fixture
def revoked_key(org) -> str:
    raw = make_api_key(org, name="old")
    do_revoke_api_key(ApiKey.objects.get(name="old"))
    return raw


def test_no_key_or_a_bad_one_is_401_on_reads_and_writes(org, experiment, start, revoked_key):
    run = start(experiment)
    upload_body = upload_form(SWEBENCH_LITE_LINES[:2])
    requests = [
        ("get", "/api/runs", None),
        ("get", f"/api/runs/{run.code}", None),
        ("get", f"/api/experiments/{experiment.code}/estimate", None),
        ("post", "/api/experiments", "{}"),
        ("put", f"/api/experiments/{experiment.code}", "{}"),
        ("post", f"/api/experiments/{experiment.code}/runs", "{}"),
        ("post", f"/api/runs/{run.code}/cancel", None),
        ("post", f"/api/runs/{run.code}/gate", '{"min_quality_lower_bound": 0.5}'),
        ("post", "/api/datasets/uploads", upload_body),
    ]
    for authorization in (None, f"Bearer {revoked_key}", "Bearer prb_unknown", "Basic YWxpY2U6cHc="):
        client = script(authorization)
        for method, path, body in requests:
            if isinstance(body, dict):
                response = client.post(path, body)
            elif body is not None:
                response = getattr(client, method)(path, body, content_type="application/json")
            else:
                response = getattr(client, method)(path)
            where = (authorization, method, path)
            assert response.status_code == 401, (where, response.content)
            assert response["WWW-Authenticate"] == "Bearer", where
            assert error_of(response)["code"] == "unauthenticated", where
    assert Run.objects.count() == 1 and Run.objects.get().status == "running"
    assert not TaskUpload.objects.exists()


def test_a_bad_key_from_a_signed_in_browser_is_401_on_writes_too(alice, experiment, start, revoked_key):
    run = start(experiment)
    client = browser(alice, with_token=False)
    response = client.post(f"/api/runs/{run.code}/cancel", headers={"authorization": f"Bearer {revoked_key}"})
    assert response.status_code == 401 and error_of(response)["code"] == "unauthenticated"
    assert Run.objects.get().status == "running"


def test_a_session_write_needs_its_csrf_token(alice, experiment, start):
    run = start(experiment)
    refused = browser(alice, with_token=False).post(f"/api/runs/{run.code}/pause")
    assert refused.status_code == 403 and "CSRF" in error_of(refused)["message"]
    assert Run.objects.get().status == "running"
    assert browser(alice, with_token=False).get(f"/api/runs/{run.code}").status_code == 200  # reads need none
    paused = browser(alice, with_token=True).post(f"/api/runs/{run.code}/pause")
    assert paused.status_code == 200, paused.content
    assert Run.objects.get().status == "paused"


# --- bodies are read as they are written ------------------------------------------------------------


@pytest.fixture
def key_client(org) -> Client:
    return script(f"Bearer {make_api_key(org)}")


def post_raw(client: Client, path: str, body: str):
    return client.post(path, body, content_type="application/json")


@pytest.mark.parametrize(
    "body, field, says",
    [
        ("[]", None, "JSON object"),
        ('"str"', None, "JSON object"),
        ("null", None, "JSON object"),
        ("3", None, "JSON object"),
        ('{"inference_only": "yes"}', "inference_only", "boolean"),
        ('{"inference_only": "1"}', "inference_only", "boolean"),
        ('{"inference_only": 1}', "inference_only", "boolean"),
        ('{"seed": true}', "seed", "integer"),
        ('{"seed": "7"}', "seed", "integer"),
        ('{"inference-only": true}', "inference-only", "not permitted"),
    ],
)
def test_a_start_body_that_is_not_what_it_seems_is_422_and_starts_nothing(key_client, experiment, body, field, says):
    response = post_raw(key_client, f"/api/experiments/{experiment.code}/runs", body)
    assert response.status_code == 422, (body, response.content)
    error = error_of(response)
    assert error["code"] == "invalid" and error["field"] == field, (body, error)
    assert says in error["message"], (body, error)
    assert not Run.objects.exists()


def test_no_body_still_starts_with_every_default_and_money_may_be_a_string(key_client, experiment):
    response = post_raw(key_client, f"/api/experiments/{experiment.code}/runs", "")  # documented: all optional
    assert response.status_code == 201, response.content
    assert response.json()["inference_only"] is False and response.json()["seed"] == experiment.sample_seed
    spelled = post_raw(key_client, f"/api/experiments/{experiment.code}/runs", '{"budget_usd": "25.00", "seed": 7}')
    assert spelled.status_code == 201, spelled.content
    assert spelled.json()["budget_usd"] == "25.00" and spelled.json()["seed"] == 7
    assert Run.objects.count() == 2


def test_a_gate_body_that_is_not_what_it_seems_is_422(org, finished_run):
    run = finished_run(arm("model"))
    client = script(f"Bearer {make_api_key(org, ['read'])}")
    for body, field in (
        ("[]", None),
        ("null", None),
        ('{"min_quality_lower_bound": 0.5, "max_p95_latncy": 30}', "max_p95_latncy"),  # misspelt: not ignored
        ('{"min_quality_lower_bound": true}', "min_quality_lower_bound"),
    ):
        response = post_raw(client, f"/api/runs/{run.code}/gate", body)
        assert response.status_code == 422, (body, response.content)
        assert error_of(response)["field"] == field, (body, response.json())
    assert post_raw(client, f"/api/runs/{run.code}/gate", '{"max_p95_latency": 30}').status_code == 200


def test_the_schema_documents_401_and_422_and_strict_bodies(db):
    schema = Client().get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"401", "422"} <= set(operation["responses"]), (method, path)
    bodies = {path: operations.get("post", {}).get("requestBody") for path, operations in schema["paths"].items()}
    start_in = bodies["/api/experiments/{experiment_id}/runs"]
    gate_in = bodies["/api/runs/{run_id}/gate"]
    assert start_in["required"] is False and gate_in["required"] is True  # no body: a start with every default
    start_schema = start_in["content"]["application/json"]["schema"]
    assert start_schema["additionalProperties"] is False
    assert start_schema["properties"]["inference_only"]["type"] == "boolean"
    assert gate_in["content"]["application/json"]["schema"]["additionalProperties"] is False


# --- an outsider cannot tell another organisation's id from an unknown one --------------------------

BODIES = {"put": "{}", "post": "{}"}  # valid for every body schema: the answer is the access layer's
VARYING_HEADERS = {"X-Request-ID"}  # a fresh id per request, whatever it asks


def answer(client: Client, method: str, path: str):
    body = BODIES.get(method)
    response = getattr(client, method)(path, body, content_type="application/json") if body else client.get(path)
    headers = {name: value for name, value in response.headers.items() if name not in VARYING_HEADERS}
    return response.status_code, response.content, headers


@override_settings(PRBENCH_API_REQUESTS_PER_MINUTE=0)
def test_another_organisations_id_answers_exactly_as_an_unknown_one(org, real_ids, charlie):
    outsider = script(f"Bearer {make_api_key(Organization.objects.get(slug='other'))}")
    fixed = {"format": "json"}  # path parameters that are not ids: the same real value both times
    compared = []
    for template, operations in Client().get("/api/openapi.json").json()["paths"].items():
        names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
        ids = [name for name in names if name not in fixed]
        if not ids:
            continue
        for method in operations:
            real = template.format(**fixed, **{name: real_ids[name] for name in ids})
            made_up = template.format(**fixed, **{name: str(uuid.uuid4()) for name in ids})
            theirs, unknown = answer(outsider, method, real), answer(outsider, method, made_up)
            assert theirs[0] == 404, (method, template, theirs)
            assert theirs == unknown, (method, template, json.loads(theirs[1]), json.loads(unknown[1]))
            compared.append((method, template))
    assert len(compared) >= 15, compared  # every {id} path of the document, each method
