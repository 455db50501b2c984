"""A large upload is checked and imported by RQ jobs (a real worker drains the test queue):
the page follows its progress by htmx and stops polling when it ends; a job run twice
imports once; a job whose worker died can be started again."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from datasets import uploads
from datasets.models import Dataset, TaskInstance, TaskUpload, UploadStatus
from prbench.queues import get_queue
from tests.conftest import client_for, work_queue
from tests.samples import SWEBENCH_LITE_LINES

UPLOAD = reverse("datasets:upload_new")


@pytest.fixture
def queued(settings):
    """Every upload goes to the queue, however small."""
    settings.PRBENCH_UPLOAD_INLINE_MAX_BYTES = 0


@pytest.fixture
def owner(alice):
    return client_for(alice)


def post_file(client, lines=SWEBENCH_LITE_LINES):
    data = ("\n".join(lines) + "\n").encode()
    file = SimpleUploadedFile("lite.jsonl", data)
    return client.post(UPLOAD, {"format": "swebench", "dataset_name": "lite", "file": file})


def polled(client, upload: TaskUpload):
    return client.get(reverse("datasets:upload", args=[upload.code]), HTTP_HX_REQUEST="true")


def test_a_large_file_is_checked_and_imported_by_the_worker_with_progress(
    owner, queued, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(uploads, "PROGRESS_EVERY_S", 0)  # every line's progress is written
    seen: list[tuple[str, int]] = []  # what the page's poll shows while the job reads the file
    report = uploads._progress

    def watched(upload_id, token):
        write = report(upload_id, token)

        def each_line(lines, read):
            write(lines, read)
            row = TaskUpload.objects.get(pk=upload_id)
            seen.append((row.status, row.lines_read))
            if lines == 12:  # half-way: the page as the browser polls it
                page = polled(owner, row)
                assert page.status_code == 200 and "line 12 of 23 read" in page.content.decode()
                assert 'hx-trigger="every 1s"' in page.content.decode()

        return each_line

    monkeypatch.setattr(uploads, "_progress", watched)
    with django_capture_on_commit_callbacks(execute=True):
        post_file(owner)
    upload = TaskUpload.objects.get()
    assert upload.status == UploadStatus.CHECKING and upload.job_id in get_queue().get_job_ids()
    waiting = polled(owner, upload)
    assert waiting.status_code == 200 and "Waiting for a worker" in waiting.content.decode()

    work_queue()

    upload.refresh_from_db()
    assert upload.status == UploadStatus.READY and upload.preview["tasks"] == 23 and not TaskInstance.objects.exists()
    assert seen == [("checking", n) for n in range(1, 24)]
    done = polled(owner, upload)
    assert done.status_code == 286  # htmx stops polling: the preview is shown once more
    assert "First 10 of 23 tasks" in done.content.decode()

    seen.clear()
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(reverse("datasets:upload_confirm", args=[upload.code]))
    upload.refresh_from_db()
    assert upload.status == UploadStatus.IMPORTING and upload.claim_token is None
    work_queue()

    upload.refresh_from_db()
    assert upload.status == UploadStatus.IMPORTED and upload.imported == 23 and upload.lines_read == 23
    assert seen == [("importing", n) for n in range(1, 24)]
    assert Dataset.objects.get().tasks.count() == 23
    assert polled(owner, upload).status_code == 286


def test_a_job_run_twice_imports_once(owner, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_file(owner, SWEBENCH_LITE_LINES[:5])
    upload = TaskUpload.objects.get()
    get_queue().enqueue(uploads.check_upload_job, upload.pk)  # a duplicate of the check
    work_queue()
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(reverse("datasets:upload_confirm", args=[upload.code]))
    get_queue().enqueue(uploads.import_upload_job, upload.pk)  # and of the import

    work_queue()
    uploads.import_upload_job(upload.pk)  # and once more, after both

    upload.refresh_from_db()
    assert upload.status == UploadStatus.IMPORTED and upload.imported == 5
    assert TaskInstance.objects.count() == 5 and Dataset.objects.get().version == 1


def test_an_abandoned_import_can_be_started_again(owner, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_file(owner, SWEBENCH_LITE_LINES[:5])
    work_queue()
    upload = TaskUpload.objects.get()
    # Its import was claimed by a worker that then died: the claim stays, Redis forgot the job.
    dead_claim = uuid.uuid4()
    long_ago = timezone.now() - timedelta(minutes=5)
    TaskUpload.objects.filter(pk=upload.pk).update(
        status=UploadStatus.IMPORTING, claim_token=dead_claim, job_id="task-upload-gone", updated_at=long_ago
    )
    page = owner.get(reverse("datasets:upload", args=[upload.code])).content.decode()
    assert "stopped without finishing" in page and reverse("datasets:upload_retry", args=[upload.code]) in page

    with django_capture_on_commit_callbacks(execute=True):
        owner.post(reverse("datasets:upload_retry", args=[upload.code]))
    work_queue()

    upload.refresh_from_db()
    assert upload.status == UploadStatus.IMPORTED and TaskInstance.objects.count() == 5
    # The dead worker's claim can record nothing any more.
    uploads._end(upload.pk, dead_claim, status=UploadStatus.FAILED, problems=["late"])
    upload.refresh_from_db()
    assert upload.status == UploadStatus.IMPORTED and upload.problems == []


def test_a_job_that_is_queued_is_not_abandoned(owner, queued, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        post_file(owner, SWEBENCH_LITE_LINES[:5])
    TaskUpload.objects.update(updated_at=timezone.now() - timedelta(minutes=5))
    upload = TaskUpload.objects.get()

    response = owner.post(reverse("datasets:upload_retry", args=[upload.code]))

    assert response.status_code == 302
    assert "not stopped" in owner.get(response["Location"]).content.decode()
    assert len(get_queue().get_job_ids()) == 1
