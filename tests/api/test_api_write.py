"""The API's write side: datasets (uploads through their jobs), experiments from specs, runs
estimated, started (idempotently), paused, resumed and cancelled, each through the browser's
access layer and actions."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from datasets.models import Dataset, TaskInstance, TaskUpload, UploadStatus
from experiments import idempotency
from experiments.models import ApiIdempotencyKey, Experiment, Run, RunStatus
from orgs.models import Organization
from tests.conftest import api_client, client_for, make_api_key, work_queue
from tests.samples import SWEBENCH_LITE_LINES, edited

SPEC = {
    "name": "API duel",
    "dataset": "Demo: small Python bugs",  # load_demo_dataset's
    "sample_size": 3,
    "seed": 5,
    "arms": [
        {"label": "oracle", "provider": "mock", "model_name": "mock-oracle", "config": {"mode": "oracle"}},
        {"label": "noisy", "provider": "mock", "model_name": "mock-noisy", "config": {"mode": "noisy"}},
    ],
}


@pytest.fixture
def key(org, alice):
    from orgs.api_keys import do_create_api_key

    return do_create_api_key(org, "ci", ["read", "run", "admin"], None, user=alice)[1]


@pytest.fixture
def client(key):
    return api_client(key)


@pytest.fixture
def outsider(charlie):
    return api_client(make_api_key(Organization.objects.get(slug="other")))


@pytest.fixture
def read_only(org):
    return api_client(make_api_key(org, ["read"], name="dashboard"))


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


def post_json(client: Client, path: str, body: object, **headers: str):
    return client.post(path, json.dumps(body), content_type="application/json", headers=headers)


def start_run(client: Client, experiment, body: object = None, key: str | None = None):
    headers = {"Idempotency-Key": key} if key else {}
    return post_json(client, f"/api/experiments/{experiment.code}/runs", body or {}, **headers)


# --- runs: start, idempotency, transitions ---------------------------------------------------------


def test_a_run_started_with_a_key_is_worked_to_completion(
    client, experiment, alice, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = start_run(client, experiment, {"seed": 3}, key="ci-build-41")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert response.json()["id"] == str(run.code) and run.seed == 3
    assert run.created_by == alice  # the key's maker, as the doer

    work_queue()

    done = client.get(f"/api/runs/{run.code}").json()
    assert done["status"] == RunStatus.COMPLETED
    assert done["progress"]["completed"] == done["progress"]["total"] == 4 * 2  # the fixture's sample, both arms


def test_the_same_key_and_body_twice_give_the_same_run(client, experiment, dataset):
    first = start_run(client, experiment, {"seed": 3, "inference_only": False}, key="retry-me")
    again = start_run(client, experiment, {"seed": 3}, key="retry-me")  # the same start, its default spelled out
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert Run.objects.count() == 1 and ApiIdempotencyKey.objects.count() == 1


def test_the_same_key_with_another_body_or_experiment_is_a_conflict(client, experiment, org, alice):
    start_run(client, experiment, {"seed": 3}, key="k1")
    other_seed = start_run(client, experiment, {"seed": 4}, key="k1")
    assert other_seed.status_code == 409
    assert error_of(other_seed)["code"] == "conflict" and "Idempotency-Key" in error_of(other_seed)["message"]
    twin = post_json(client, "/api/experiments", {**SPEC, "name": "twin"}).json()
    other_experiment = start_run(client, Experiment.objects.get(code=twin["id"]), {"seed": 3}, key="k1")
    assert other_experiment.status_code == 409
    assert Run.objects.count() == 1


def test_a_key_older_than_a_day_may_be_used_again(client, experiment):
    first = start_run(client, experiment, key="nightly")
    ApiIdempotencyKey.objects.update(created_at=timezone.now() - timedelta(hours=25))
    second = start_run(client, experiment, {"seed": 9}, key="nightly")
    assert second.status_code == 201 and second.json()["id"] != first.json()["id"]
    assert Run.objects.count() == 2
    assert ApiIdempotencyKey.objects.get().run == Run.objects.get(code=second.json()["id"])


def test_keys_are_per_organisation(client, experiment, org, charlie):
    start_run(client, experiment, key="shared-name")
    assert ApiIdempotencyKey.objects.filter(org=org, key="shared-name").exists()
    other = Organization.objects.get(slug="other")
    assert not ApiIdempotencyKey.objects.filter(org=other).exists()


def test_without_a_key_every_start_starts(client, experiment):
    assert [start_run(client, experiment).status_code for _ in range(2)] == [201, 201]
    assert Run.objects.count() == 2 and not ApiIdempotencyKey.objects.exists()


def test_a_bad_start_names_its_field_and_starts_nothing(client, experiment):
    for body, field in (
        ({"budget_usd": "12.345"}, "budget_usd"),
        ({"seed": 2**63}, "seed"),
        ({"inference_only": "perhaps"}, "inference_only"),
    ):
        response = start_run(client, experiment, body, key="bad")
        assert response.status_code == 422, body
        assert error_of(response)["field"] == field
    bad_key = start_run(client, experiment, key="has a space")
    assert bad_key.status_code == 422 and error_of(bad_key)["field"] == "Idempotency-Key"
    assert not Run.objects.exists() and not ApiIdempotencyKey.objects.exists()


def test_a_run_that_cannot_start_is_422_and_keeps_no_key(client, experiment):
    experiment.arms.all().delete()
    response = start_run(client, experiment, key="no-arms")
    assert response.status_code == 422 and "no arms" in error_of(response)["message"]
    assert not Run.objects.exists() and not ApiIdempotencyKey.objects.exists()


@pytest.mark.django_db(transaction=True)  # each request runs on its own thread, with its own connection
def test_two_concurrent_starts_with_one_key_start_one_run(org, experiment, monkeypatch):
    """The first request holds the key's row (uncommitted) while it starts its run; the second
    blocks on the unique index meanwhile, then finds the first one's run."""
    raw = make_api_key(org, name="ci")
    inside, go = threading.Event(), threading.Event()
    real_start = idempotency.do_start_run

    def held_start(*args, **kwargs):
        if not inside.is_set():
            inside.set()
            go.wait(30)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(idempotency, "do_start_run", held_start)
    responses: dict[str, object] = {}

    def request(name: str) -> None:
        try:
            responses[name] = start_run(api_client(raw), experiment, {"seed": 1}, key="same")
        finally:
            connection.close()

    first = threading.Thread(target=request, args=("first",))
    first.start()
    assert inside.wait(30)
    second = threading.Thread(target=request, args=("second",))
    second.start()
    assert waiting_on_a_lock(), "the second request should wait on the first one's key"
    go.set()
    first.join(30)
    second.join(30)

    statuses = sorted(r.status_code for r in responses.values())
    assert statuses == [200, 201]
    ids = {r.json()["id"] for r in responses.values()}
    assert ids == {str(Run.objects.get().code)}
    assert ApiIdempotencyKey.objects.count() == 1


def waiting_on_a_lock() -> bool:
    """Whether another connection of this database waits for a lock, polled for a while."""
    for _ in range(300):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return True
        time.sleep(0.05)
    return False


def test_pause_resume_and_cancel(client, alice, experiment, start, django_capture_on_commit_callbacks):
    run = start(experiment)
    path = f"/api/runs/{run.code}"

    paused = client.post(f"{path}/pause")
    assert paused.status_code == 200 and paused.json()["status"] == RunStatus.PAUSED
    assert Run.objects.get().status == RunStatus.PAUSED
    assert client.post(f"{path}/pause").status_code == 409
    with django_capture_on_commit_callbacks(execute=True):
        resumed = client.post(f"{path}/resume")
    assert resumed.status_code == 200 and Run.objects.get().status == RunStatus.RUNNING
    cancelled = client.post(f"{path}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["progress"]["cancelled"] > 0
    assert Run.objects.get().status == RunStatus.CANCELLED
    assert Run.objects.get().cancelled_by == alice  # the key's maker, as the run page says
    for action in ("pause", "resume", "cancel"):
        refused = client.post(f"{path}/{action}")
        assert refused.status_code == 409, action
        assert error_of(refused) == {
            "code": "conflict",
            "message": f"cannot {action} a run that is cancelled",
            "field": None,
        }


def test_the_estimate_prices_each_arm_and_says_whether_it_can_start(client, experiment):
    response = client.get(f"/api/experiments/{experiment.code}/estimate", {"seed": 2})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["tasks"] == 4 and body["attempts"] == 8
    assert [arm["label"] for arm in body["arms"]] == ["oracle", "noisy"]
    assert all(arm["max_cost_usd"] is not None for arm in body["arms"]) and body["unpriced"] == []
    assert body["problems"] == []
    assert not Run.objects.exists()


# --- experiments ------------------------------------------------------------------------------------


def test_an_experiment_is_created_read_and_updated_from_its_spec(client, dataset, org):
    created = post_json(client, "/api/experiments", SPEC)
    assert created.status_code == 201, created.content
    experiment = Experiment.objects.get(org=org, name="API duel")
    assert [arm.label for arm in experiment.arms.order_by("position")] == ["oracle", "noisy"]
    assert experiment.sample_size == 3 and experiment.sample_seed == 5
    spec = client.get(f"/api/experiments/{experiment.code}").json()["spec"]
    assert spec["name"] == "API duel" and spec["dataset"] == dataset.name and len(spec["arms"]) == 2

    spec.update(repetitions=2, arms=spec["arms"][:1], description="one arm, twice")  # what GET gave, changed
    updated = client.put(f"/api/experiments/{experiment.code}", json.dumps(spec), content_type="application/json")
    assert updated.status_code == 200, updated.content
    experiment.refresh_from_db()
    assert experiment.repetitions == 2 and experiment.arms.count() == 1
    assert updated.json()["spec"]["description"] == "one arm, twice"


def test_a_yaml_spec_is_read_as_apply_experiment_reads_it(client, dataset):
    yaml = (
        "name: From YAML\n"
        "dataset: 'Demo: small Python bugs'\n"
        "arms:\n"
        "  - {label: a, provider: mock, model_name: mock-oracle}\n"
    )
    response = client.post("/api/experiments", yaml, content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert Experiment.objects.filter(name="From YAML").exists()


def test_an_invalid_spec_names_the_field_and_creates_nothing(client, dataset):
    broken = {**SPEC, "arms": [SPEC["arms"][0], {**SPEC["arms"][1], "model_name": 42}]}
    response = post_json(client, "/api/experiments", broken)
    assert response.status_code == 422
    error = error_of(response)
    assert error["field"] == "arms[1].model_name" and "arms[1].model_name: must be a string" in error["message"]
    for body, field in (
        ({**SPEC, "dataset": "nope"}, "dataset"),
        ({**SPEC, "colour": "blue"}, "colour"),
        ({**SPEC, "few_shot": {"dataset": SPEC["dataset"], "k": 0}}, "few_shot.k"),
        ([1, 2], None),
    ):
        response = post_json(client, "/api/experiments", body)
        assert response.status_code == 422 and error_of(response)["field"] == field, body
    not_json = client.post("/api/experiments", "{", content_type="application/json")
    assert not_json.status_code == 422
    assert not Experiment.objects.exists()


def test_an_update_with_an_invalid_spec_changes_nothing(client, experiment):
    response = client.put(
        f"/api/experiments/{experiment.code}",
        json.dumps({**SPEC, "repetitions": 0}),
        content_type="application/json",
    )
    assert response.status_code == 422 and error_of(response)["field"] == "repetitions"
    experiment.refresh_from_db()
    assert experiment.name == "Mock duel" and experiment.repetitions == 1 and experiment.arms.count() == 2


def test_a_taken_name_is_a_conflict(client, experiment):
    taken = post_json(client, "/api/experiments", {**SPEC, "name": "Mock duel"})
    assert taken.status_code == 409 and Experiment.objects.count() == 1
    other = Experiment.objects.get(code=post_json(client, "/api/experiments", SPEC).json()["id"])
    renamed = client.put(
        f"/api/experiments/{other.code}", json.dumps({**SPEC, "name": "Mock duel"}), content_type="application/json"
    )
    assert renamed.status_code == 409
    other.refresh_from_db()
    assert other.name == "API duel"


def test_experiments_are_listed_newest_first(client, experiment):
    second = post_json(client, "/api/experiments", SPEC).json()
    page = client.get("/api/experiments", {"limit": 1}).json()
    assert [item["id"] for item in page["items"]] == [second["id"]] and page["next_cursor"]
    rest = client.get("/api/experiments", {"cursor": page["next_cursor"]}).json()
    assert [item["id"] for item in rest["items"]] == [str(experiment.code)] and rest["next_cursor"] is None


def test_listing_experiments_costs_the_same_queries_however_many_there_are(client, experiment):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/api/experiments").status_code == 200
        return len(captured)

    queries()  # the key's first use records when it was last used: not the list's cost
    one = queries()
    for n in range(3):
        post_json(client, "/api/experiments", {**SPEC, "name": f"more {n}"})
    assert queries() == one


# --- datasets and uploads ---------------------------------------------------------------------------


def test_datasets_are_listed_with_their_task_counts_and_versions(client, dataset):
    listed = client.get("/api/datasets").json()["items"]
    assert [(d["name"], d["task_count"], d["version"]) for d in listed] == [
        (dataset.name, dataset.tasks.count(), dataset.version)
    ]
    detail = client.get(f"/api/datasets/{dataset.code}").json()
    assert detail["kind"] == dataset.kind and detail["versions"][0]["tasks"] == dataset.tasks.count()


def post_upload(client: Client, lines: list[str], **fields: str):
    data = ("\n".join(lines) + "\n").encode()
    form = {"format": "swebench", "dataset_name": "lite", **fields, "file": SimpleUploadedFile("tasks.jsonl", data)}
    return client.post("/api/datasets/uploads", form)


@pytest.fixture
def queued(settings):
    """Every upload is checked and imported by a job, however small."""
    settings.PRBENCH_UPLOAD_INLINE_MAX_BYTES = 0


def test_an_upload_is_checked_confirmed_and_imported_by_the_worker(
    client, org, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_upload(client, SWEBENCH_LITE_LINES)
    assert response.status_code == 201, response.content
    upload = response.json()
    assert upload["status"] == UploadStatus.CHECKING
    path = f"/api/datasets/uploads/{upload['id']}"
    assert client.post(f"{path}/confirm").status_code == 409  # not checked yet

    work_queue()

    checked = client.get(path).json()
    assert checked["status"] == UploadStatus.READY and checked["tasks"] == 23 and checked["errors"] == []
    assert checked["kind"] == "pr_patch" and checked["rows"] and "instance_id" in checked["columns"]
    assert not TaskInstance.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        confirmed = client.post(f"{path}/confirm")
    assert confirmed.status_code == 202 and confirmed.json()["status"] == UploadStatus.IMPORTING

    work_queue()

    imported = client.get(path).json()
    dataset = Dataset.objects.get(org=org, name="lite")
    assert imported["status"] == UploadStatus.IMPORTED and imported["imported"] == 23
    assert imported["dataset"] == str(dataset.code) and dataset.tasks.count() == 23
    assert client.post(f"{path}/confirm").status_code == 409
    assert [item["id"] for item in client.get("/api/datasets/uploads").json()["items"]] == [upload["id"]]


def test_a_broken_files_errors_are_named_by_line_and_field(client):
    response = post_upload(
        client, [SWEBENCH_LITE_LINES[0], edited(2, base_commit="not-a-commit"), edited(3, patch=None)]
    )
    assert response.status_code == 201
    upload = response.json()
    assert upload["status"] == UploadStatus.REJECTED
    assert [(e["line"], e["field"]) for e in upload["errors"]] == [(2, "base_commit"), (3, "patch")]
    assert "not a hex commit id" in upload["errors"][0]["message"]
    assert not TaskInstance.objects.exists()
    confirm = client.post(f"/api/datasets/uploads/{upload['id']}/confirm")
    assert confirm.status_code == 409 and not Dataset.objects.exists()


def test_the_upload_forms_rules_name_their_field(client):
    mapped = post_upload(client, SWEBENCH_LITE_LINES[:2], field_map="question=prompt")
    assert mapped.status_code == 422 and "not SWE-bench" in error_of(mapped)["message"]
    no_format = post_upload(client, SWEBENCH_LITE_LINES[:2], format="")
    assert no_format.status_code == 422 and error_of(no_format)["field"] == "format"
    no_file = client.post("/api/datasets/uploads", {"format": "swebench", "dataset_name": "lite"})
    assert no_file.status_code == 422 and error_of(no_file)["field"] == "file"
    unreadable = client.post("/api/datasets/uploads", b"--x\r\n", content_type="multipart/form-data")  # no boundary
    assert unreadable.status_code == 422 and error_of(unreadable)["field"] == "file"
    assert not TaskUpload.objects.exists()


def test_a_file_over_the_limit_is_refused_and_not_kept(client, settings):
    settings.PRBENCH_UPLOAD_MAX_BYTES = 1000
    response = post_upload(client, SWEBENCH_LITE_LINES)
    assert response.status_code == 422 and error_of(response)["field"] == "file"
    assert "larger than the upload limit" in error_of(response)["message"]
    assert not TaskUpload.objects.exists()


# --- who may -----------------------------------------------------------------------------------------


def test_an_outsider_gets_404_and_changes_nothing(outsider, experiment, start, dataset, client):
    run = start(experiment)
    upload = post_upload(client, SWEBENCH_LITE_LINES[:2]).json()
    paths = [
        ("get", f"/api/experiments/{experiment.code}"),
        ("put", f"/api/experiments/{experiment.code}"),
        ("get", f"/api/experiments/{experiment.code}/estimate"),
        ("post", f"/api/experiments/{experiment.code}/runs"),
        ("post", f"/api/runs/{run.code}/cancel"),
        ("get", f"/api/datasets/{dataset.code}"),
        ("get", f"/api/datasets/uploads/{upload['id']}"),
        ("post", f"/api/datasets/uploads/{upload['id']}/confirm"),
    ]
    for method, path in paths:
        if method == "get":
            response = outsider.get(path)
        else:
            response = getattr(outsider, method)(path, json.dumps(SPEC), content_type="application/json")
        assert response.status_code == 404, (method, path)
    assert outsider.get("/api/experiments").json()["items"] == []
    assert outsider.get("/api/datasets").json()["items"] == []
    assert Run.objects.get().status == RunStatus.RUNNING and Run.objects.count() == 1
    assert TaskUpload.objects.get().status == UploadStatus.READY
    assert Experiment.objects.get().name == "Mock duel"


def test_a_read_only_key_is_refused_every_write(read_only, experiment, start, org):
    run = start(experiment)
    refused = [
        post_json(read_only, "/api/experiments", SPEC),
        read_only.put(f"/api/experiments/{experiment.code}", json.dumps(SPEC), content_type="application/json"),
        start_run(read_only, experiment, key="x"),
        read_only.post(f"/api/runs/{run.code}/pause"),
        read_only.get(f"/api/experiments/{experiment.code}/estimate"),
        post_upload(read_only, SWEBENCH_LITE_LINES[:2]),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert Run.objects.count() == 1 and Run.objects.get().status == RunStatus.RUNNING
    assert Experiment.objects.count() == 1 and not TaskUpload.objects.exists()


def test_a_run_key_cannot_upload(org):
    response = post_upload(api_client(make_api_key(org, ["read", "run"])), SWEBENCH_LITE_LINES[:2])
    assert response.status_code == 403 and "admin" in error_of(response)["message"]
    assert not TaskUpload.objects.exists()


def test_a_viewer_and_a_member_in_the_browser_get_their_roles_rights(vera, bob, experiment, start):
    run = start(experiment)
    viewer, member = client_for(vera), client_for(bob)
    assert viewer.post(f"/api/runs/{run.code}/pause").status_code == 403
    assert start_run(viewer, experiment).status_code == 403
    assert post_json(viewer, "/api/experiments", SPEC).status_code == 403
    assert viewer.get(f"/api/experiments/{experiment.code}").status_code == 200
    assert post_upload(member, SWEBENCH_LITE_LINES[:2]).status_code == 403  # owners and admins only, as in the browser
    assert member.post(f"/api/runs/{run.code}/pause").status_code == 200
    assert Run.objects.count() == 1 and not TaskUpload.objects.exists()
