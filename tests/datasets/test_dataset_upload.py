"""Uploading a task file on the datasets page: the preview (rows, kind, mapping, every error
with its line and field) saves nothing; confirming imports all or nothing; owners and admins
only; another organisation's dataset is a 404."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.models import Dataset, TaskInstance, TaskUpload, UploadStatus
from orgs.models import Membership, Role
from tests.cli import run_command
from tests.conftest import client_for, make_user
from tests.datasets.tiny_format import tiny_format  # noqa: F401 (a fixture)
from tests.samples import SWEBENCH_LITE, SWEBENCH_LITE_LINES, edited

UPLOAD = reverse("datasets:upload_new")


@pytest.fixture
def adam(django_user_model, org):
    """An admin of alice's organisation."""
    user = make_user(django_user_model, "adam@example.com")
    Membership.objects.create(user=user, org=org, role=Role.ADMIN)
    return user


def upload(client, lines: list[str] | bytes, name="tasks.jsonl", format="swebench", dataset="lite", **fields):
    data = lines if isinstance(lines, bytes) else ("\n".join(lines) + "\n").encode()
    post = {"format": format, "dataset_name": dataset, **fields, "file": SimpleUploadedFile(name, data)}
    return client.post(UPLOAD, post)


def the_upload() -> TaskUpload:
    return TaskUpload.objects.get()


def nothing_saved() -> bool:
    return not Dataset.objects.exists() and not TaskInstance.objects.exists()


@pytest.mark.usefixtures("tiny_format")
def test_the_form_offers_every_format(alice):
    response = client_for(alice).get(UPLOAD)

    assert response.status_code == 200
    content = response.content.decode()
    assert '<option value="swebench">SWE-bench JSONL (PR tasks)</option>' in content
    assert '<option value="tiny">tiny</option>' in content
    assert 'enctype="multipart/form-data"' in content and "Files up to 64.0\xa0MB" in content


def test_the_preview_shows_the_first_rows_and_the_kind_and_saves_nothing(alice):
    response = upload(client_for(alice), SWEBENCH_LITE_LINES[:12])

    upload_row = the_upload()
    assert response.status_code == 302 and response["Location"] == reverse("datasets:upload", args=[upload_row.code])
    assert upload_row.status == UploadStatus.READY and upload_row.preview["tasks"] == 12
    assert nothing_saved()
    content = client_for(alice).get(response["Location"]).content.decode()
    assert "PR patch <code>pr_patch</code>" in content
    assert "a new dataset, version 1" in content
    assert "First 10 of 12 tasks" in content
    assert content.count("<td>sqlfluff/sqlfluff</td>") == sum(
        "sqlfluff/sqlfluff" in line for line in SWEBENCH_LITE_LINES[:10]
    )
    assert "<th>instance_id</th>" in content and "<td>sqlfluff__sqlfluff-1625</td>" in content
    assert "Import 12 tasks into lite" in content
    assert nothing_saved()


def test_the_preview_shows_every_error_with_its_line_and_field_and_saves_nothing(alice):
    lines = [
        SWEBENCH_LITE_LINES[0],
        edited(2, base_commit="not-a-commit"),
        edited(3, patch=None),
        SWEBENCH_LITE_LINES[3],
    ]

    response = upload(client_for(alice), lines)

    assert response.status_code == 302
    upload_row = the_upload()
    assert upload_row.status == UploadStatus.REJECTED
    assert bytes(upload_row.data) == b""  # nothing more can come of it: its bytes are not kept
    content = client_for(alice).get(response["Location"]).content.decode()
    assert "2 problems: nothing can be imported from this file" in content
    bad_commit = "&#x27;not-a-commit&#x27; is not a hex commit id"
    assert f'<tr><td class="num">2</td><td><code>base_commit</code></td><td>{bad_commit}</td></tr>' in content
    assert '<tr><td class="num">3</td><td><code>patch</code></td><td>missing or empty</td></tr>' in content
    assert "upload_confirm" not in content and "/confirm/" not in content
    assert nothing_saved()


def test_the_preview_names_the_tasks_the_dataset_already_holds(alice, org):
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))

    upload(client_for(alice), [SWEBENCH_LITE_LINES[5], SWEBENCH_LITE_LINES[6]])

    upload_row = the_upload()
    assert upload_row.status == UploadStatus.REJECTED
    assert upload_row.preview["problems"] == [
        f"tasks.jsonl:1: field instance_id: {json.loads(SWEBENCH_LITE_LINES[5])['instance_id']!r} "
        "is already in dataset 'lite'",
        f"tasks.jsonl:2: field instance_id: {json.loads(SWEBENCH_LITE_LINES[6])['instance_id']!r} "
        "is already in dataset 'lite'",
    ]
    assert TaskInstance.objects.count() == 23


@pytest.mark.usefixtures("tiny_format")
def test_a_question_format_shows_its_mapping_and_its_kinds_checks(alice):
    data = b"q1\tWho wrote Hamlet?\tShakespeare\tliterature\nq2\tWhat is 2 + 2?\t \tmaths\n"

    upload(client_for(alice), data, name="quiz.tsv", format="tiny", dataset="quiz", field_map="question=prompt")

    upload_row = the_upload()
    assert upload_row.status == UploadStatus.REJECTED
    content = client_for(alice).get(reverse("datasets:upload", args=[upload_row.code])).content.decode()
    assert "Question and answer (Jeopardy style) <code>qa_exact</code>" in content
    assert "<code>question</code> ← <code>prompt</code>" in content
    # The kind's own payload check, as do_import_questions makes it, with line and field.
    assert '<tr><td class="num">2</td><td><code>answer</code></td><td>missing or empty</td></tr>' in content
    assert "<td>Who wrote Hamlet?</td><td>literature</td>" in content
    assert nothing_saved()


@pytest.mark.usefixtures("tiny_format")
def test_a_question_file_cannot_go_into_a_dataset_of_another_kind(alice, org):
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))

    upload(client_for(alice), b"q1\tWho?\tMe\n", name="quiz.tsv", format="tiny", dataset="lite")

    assert the_upload().preview["problems"] == [
        "dataset 'lite' holds PR patch tasks; this file's are qa_exact: import it into a dataset of its own"
    ]


def test_a_question_format_from_main_imports_through_the_page(alice, org):
    """HumanEval's own file (gzipped, as published) through the same page and the same parser."""
    data = (SWEBENCH_LITE.parents[1] / "humaneval" / "HumanEval.jsonl.gz").read_bytes()
    client = client_for(alice)

    upload(client, data, name="HumanEval.jsonl.gz", format="humaneval", dataset="HumanEval")

    upload_row = the_upload()
    assert upload_row.status == UploadStatus.READY, upload_row.preview["problems"]
    assert upload_row.preview["kind"] == "code_exec" and upload_row.lines_total == 0  # no lines in gzip bytes
    page = client.get(reverse("datasets:upload", args=[upload_row.code])).content.decode()
    assert "<td>HumanEval/0</td>" in page and "<th>entry_point</th>" in page
    client.post(reverse("datasets:upload_confirm", args=[upload_row.code]))
    dataset = Dataset.objects.get(org=org, name="HumanEval")
    assert dataset.kind == "code_exec" and dataset.tasks.count() == upload_row.preview["tasks"] > 0


def test_confirming_imports_the_whole_file(alice, org):
    client = client_for(alice)
    upload(client, SWEBENCH_LITE_LINES)
    upload_row = the_upload()

    response = client.post(reverse("datasets:upload_confirm", args=[upload_row.code]))

    assert response.status_code == 302
    upload_row.refresh_from_db()
    assert upload_row.status == UploadStatus.IMPORTED and upload_row.imported == 23 and upload_row.version == 1
    assert bytes(upload_row.data) == b""  # kept only until the import ends
    dataset = Dataset.objects.get(org=org, name="lite")
    assert upload_row.dataset == dataset and dataset.tasks.count() == 23 and dataset.version == 1
    assert list(dataset.tasks.values_list("position", flat=True)) == list(range(23))
    content = client.get(response["Location"]).content.decode()
    assert "Imported 23 tasks into" in content and "as version 1" in content


def test_confirming_twice_imports_once(alice):
    client = client_for(alice)
    upload(client, SWEBENCH_LITE_LINES[:4])
    confirm = reverse("datasets:upload_confirm", args=[the_upload().code])

    client.post(confirm)
    response = client.post(confirm)

    assert response.status_code == 302
    assert TaskInstance.objects.count() == 4
    assert "only a checked file with no problem can be imported" in client.get(response["Location"]).content.decode()


def test_a_dataset_changed_since_the_preview_imports_nothing(alice, org):
    client = client_for(alice)
    upload(client, SWEBENCH_LITE_LINES[:6])
    upload_row = the_upload()
    assert upload_row.status == UploadStatus.READY
    # Meanwhile the same tasks come in from the command line.
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))
    before = TaskInstance.objects.count()

    client.post(reverse("datasets:upload_confirm", args=[upload_row.code]))

    upload_row.refresh_from_db()
    assert upload_row.status == UploadStatus.FAILED
    assert upload_row.problems[0].startswith("tasks.jsonl:1: field instance_id:")
    assert TaskInstance.objects.count() == before and Dataset.objects.get(name="lite").version == 1
    content = client.get(reverse("datasets:upload", args=[upload_row.code])).content.decode()
    assert "The import did not go through, and saved nothing" in content
    assert '<td class="num">1</td><td><code>instance_id</code></td>' in content


def test_a_file_over_the_limit_is_refused_with_a_clear_error(alice, settings):
    settings.PRBENCH_UPLOAD_MAX_BYTES = 100_000

    response = upload(client_for(alice), SWEBENCH_LITE_LINES)  # 295 KB

    assert response.status_code == 200
    assert response.context["form"].too_large  # stopped as it came in, not read whole first
    assert "The file is larger than the upload limit of 97.7\xa0KB (100,000 bytes)" in response.content.decode()
    assert not TaskUpload.objects.exists() and nothing_saved()


def test_a_field_mapping_is_refused_for_swebench(alice):
    response = upload(client_for(alice), SWEBENCH_LITE_LINES[:2], field_map="question=prompt")

    assert response.status_code == 200
    assert "A field mapping and a kind are for generic JSONL/CSV files, not SWE-bench" in response.content.decode()
    assert not TaskUpload.objects.exists()


def test_an_admin_may_upload(adam):
    response = upload(client_for(adam), SWEBENCH_LITE_LINES[:2])

    assert response.status_code == 302 and the_upload().status == UploadStatus.READY


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_members_and_viewers_cannot_upload(who, request, alice):
    client = client_for(request.getfixturevalue(who))

    assert client.get(UPLOAD).status_code == 403
    assert upload(client, SWEBENCH_LITE_LINES[:2]).status_code == 403
    assert not TaskUpload.objects.exists() and nothing_saved()


@pytest.mark.parametrize("who", ["bob", "vera"])
def test_members_and_viewers_cannot_see_or_confirm_an_upload(who, request, alice):
    upload(client_for(alice), SWEBENCH_LITE_LINES[:2])
    code = the_upload().code
    client = client_for(request.getfixturevalue(who))

    assert client.get(reverse("datasets:upload", args=[code])).status_code == 403
    for action in ("upload_confirm", "upload_discard", "upload_retry"):
        assert client.post(reverse(f"datasets:{action}", args=[code])).status_code == 403
    assert the_upload().status == UploadStatus.READY and nothing_saved()


def test_it_checks_ownership(alice, charlie, org):
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))
    dataset = Dataset.objects.get()
    upload(client_for(alice), SWEBENCH_LITE_LINES[:2], dataset="other")
    code = the_upload().code
    client = client_for(charlie)

    assert client.get(f"{UPLOAD}?dataset={dataset.code}").status_code == 404
    assert client.get(f"{reverse('datasets:mining_new')}?dataset={dataset.code}").status_code == 404
    assert client.get(reverse("datasets:upload", args=[code])).status_code == 404
    for action in ("upload_confirm", "upload_discard", "upload_retry"):
        assert client.post(reverse(f"datasets:{action}", args=[code])).status_code == 404
    assert the_upload().status == UploadStatus.READY and TaskInstance.objects.count() == 23


def test_the_datasets_pages_offer_the_upload_to_owners_only(alice, bob, org):
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))
    dataset = Dataset.objects.get()
    into = f"{UPLOAD}?dataset={dataset.code}"

    owner_list = client_for(alice).get(reverse("datasets:list")).content.decode()
    owner_page = client_for(alice).get(reverse("datasets:detail", args=[dataset.code])).content.decode()
    member_list = client_for(bob).get(reverse("datasets:list")).content.decode()
    member_page = client_for(bob).get(reverse("datasets:detail", args=[dataset.code])).content.decode()

    assert UPLOAD in owner_list and into in owner_page
    assert UPLOAD not in member_list and UPLOAD not in member_page
    assert "manage.py" not in owner_list
    assert client_for(alice).get(into).content.decode().count('value="lite"') >= 1


def test_discarding_an_upload(alice):
    client = client_for(alice)
    upload(client, SWEBENCH_LITE_LINES[:2])

    response = client.post(reverse("datasets:upload_discard", args=[the_upload().code]))

    assert response.status_code == 302 and response["Location"] == reverse("datasets:list")
    assert not TaskUpload.objects.exists() and nothing_saved()
