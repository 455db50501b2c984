"""Task files uploaded on the datasets page: stored, checked (the preview an owner sees
before anything is saved), confirmed, imported.

The check and the import read the file with the command line's code (datasets/imports.py)
and write nothing but their own row until the import's one transaction. Each is a job that
claims the row with a conditional update and records its outcome only while it holds the
claim, so running one twice (a duplicate job, a retry racing a slow worker) does its work
once. A file up to PRBENCH_UPLOAD_INLINE_MAX_BYTES is checked and imported in the request;
a larger one is an RQ job whose progress (lines read) the page follows.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from datasets.background import enqueue_on_commit, is_abandoned
from datasets.formats import FormatOptions
from datasets.imports import (
    Progress,
    TaskFile,
    check_task_file,
    count_lines,
    do_import_task_file,
    parse_task_file,
)
from datasets.models import TaskUpload, UploadStatus
from datasets.swebench import TaskFileRejected
from orgs.models import Organization

logger = logging.getLogger(__name__)

JOB_TIMEOUT_S = 30 * 60  # a 64 MiB file is read twice and saved once well within this
PROGRESS_EVERY_S = 0.5  # how often a job writes how far it has read
STOPPED = "the job stopped unexpectedly (the error is in the worker's log); nothing was imported"
FINAL = (UploadStatus.REJECTED, UploadStatus.IMPORTED, UploadStatus.FAILED)
DISCARDABLE = (UploadStatus.READY, UploadStatus.REJECTED, UploadStatus.FAILED)


@dataclass(frozen=True)
class UploadedFile:
    """What the upload form hands over, checked: the file, its format and where it goes."""

    name: str
    data: bytes
    format: str
    dataset_name: str
    field_map: dict[str, str] = field(default_factory=dict)
    kind: str = ""


def task_file(upload: TaskUpload) -> TaskFile:
    options = FormatOptions(dict(upload.field_map), upload.kind)
    return TaskFile(format=upload.format, name=upload.file_name, dataset_name=upload.dataset_name, options=options)


def do_upload(org: Organization, user: Any, uploaded: UploadedFile) -> TaskUpload:
    """Keep the file and start its check: in this request when it is small, else as a job."""
    upload = TaskUpload.objects.create(
        org=org,
        dataset_name=uploaded.dataset_name,
        format=uploaded.format,
        field_map=uploaded.field_map,
        kind=uploaded.kind,
        file_name=uploaded.name,
        data=uploaded.data,
        size=len(uploaded.data),
        sha256=hashlib.sha256(uploaded.data).hexdigest(),
        lines_total=count_lines(uploaded.data),
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    _start(upload, check_upload_job)
    return upload


def _start(upload: TaskUpload, job: Callable[[int], None]) -> None:
    if upload.size <= settings.PRBENCH_UPLOAD_INLINE_MAX_BYTES:
        job(upload.pk)
        return
    job_id = f"task-upload-{upload.pk}-{uuid.uuid4().hex[:12]}"
    TaskUpload.objects.filter(pk=upload.pk).update(job_id=job_id)
    enqueue_on_commit(job, upload.pk, job_id, JOB_TIMEOUT_S)


PROBLEM = re.compile(r"^(?:.*?):(?P<line>\d+): (?:field (?P<field>[^:]+): )?(?P<message>.*)$", re.DOTALL)


def split_problem(text: str) -> dict[str, str]:
    """An importer's "file:line N: field F: what" as its line, field and message, for the
    page's table and the API (a problem of the whole file, with no line, keeps its text as
    the message)."""
    found = PROBLEM.match(text)
    if found is None:
        return {"line": "", "field": "", "message": text}
    return {"line": found["line"], "field": found["field"] or "", "message": found["message"]}


def percent_of(done: int, total: int) -> int:
    return min(100, round(100 * done / total)) if total else 0


# --- the jobs ------------------------------------------------------------------------------


def check_upload_job(upload_id: int) -> None:
    """Read and check the file; keep its preview (first rows, kind, every problem found)."""
    token = _claim(upload_id, UploadStatus.CHECKING)
    if token is None:
        return
    upload = TaskUpload.objects.select_related("org").get(pk=upload_id)
    try:
        source = io.BytesIO(bytes(upload.data))
        preview, _ = check_task_file(upload.org, task_file(upload), source, _progress(upload_id, token))
    except Exception:
        logger.exception("checking task upload %s", upload_id)
        _end(upload_id, token, status=UploadStatus.FAILED, problems=[STOPPED])
        return
    if preview.problems:  # nothing can come of this file: its bytes are not kept
        _end(upload_id, token, status=UploadStatus.REJECTED, preview=preview.as_json())
    else:
        _end(upload_id, token, status=UploadStatus.READY, preview=preview.as_json())


def import_upload_job(upload_id: int) -> None:
    """Import the confirmed file, all or nothing: read again, then saved in one transaction
    that checks the dataset again under its lock and marks the row imported."""
    token = _claim(upload_id, UploadStatus.IMPORTING)
    if token is None:
        return
    upload = TaskUpload.objects.select_related("org").get(pk=upload_id)
    spec = task_file(upload)
    try:
        tasks = parse_task_file(spec, io.BytesIO(bytes(upload.data)), _progress(upload_id, token))
        _mark(upload_id, token, lines_read=upload.lines_total, saving=True)
        with transaction.atomic():
            if not TaskUpload.objects.select_for_update().filter(pk=upload_id, claim_token=token).exists():
                return  # taken over by a retry: that job records the outcome
            report = do_import_task_file(upload.org, spec, tasks)
            _end(
                upload_id,
                token,
                status=UploadStatus.IMPORTED,
                dataset=report.dataset,
                imported=report.imported,
                version=report.version,
            )
    except TaskFileRejected as exc:  # the file was checked: only a changed parser gets here
        _end(upload_id, token, status=UploadStatus.FAILED, problems=exc.problems)
    except ValidationError as exc:  # the dataset changed since the check (a task imported since, ...)
        _end(upload_id, token, status=UploadStatus.FAILED, problems=exc.messages)
    except Exception:
        logger.exception("importing task upload %s", upload_id)
        _end(upload_id, token, status=UploadStatus.FAILED, problems=[STOPPED])


def _claim(upload_id: int, status: str) -> uuid.UUID | None:
    token = uuid.uuid4()
    claimed = TaskUpload.objects.filter(pk=upload_id, status=status, claim_token=None).update(
        claim_token=token, lines_read=0, saving=False, updated_at=timezone.now()
    )
    return token if claimed else None


def _mark(upload_id: int, token: uuid.UUID, **fields: Any) -> int:
    return TaskUpload.objects.filter(pk=upload_id, claim_token=token).update(updated_at=timezone.now(), **fields)


def _end(upload_id: int, token: uuid.UUID, *, status: str, **fields: Any) -> None:
    """Record the outcome (if the claim is still ours) and let go of the row; the file's
    bytes go once nothing more can be done with them."""
    if status in FINAL:
        fields.update(data=b"", finished_at=timezone.now())
    _mark(upload_id, token, status=status, claim_token=None, saving=False, **fields)


def _progress(upload_id: int, token: uuid.UUID) -> Progress:
    last = 0.0

    def report(lines: int, read: int) -> None:
        nonlocal last
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            _mark(upload_id, token, lines_read=lines)

    return report


# --- what the owner does next --------------------------------------------------------------


def check_confirm_upload(upload: TaskUpload) -> None:
    if upload.status != UploadStatus.READY:
        raise ValidationError(
            f"this upload is {upload.get_status_display()}: only a checked file with no problem can be imported"
        )


def do_confirm_upload(upload: TaskUpload) -> None:
    """Import it (a second confirmation, a double click, finds it importing and does nothing)."""
    if TaskUpload.objects.filter(pk=upload.pk, status=UploadStatus.READY).update(
        status=UploadStatus.IMPORTING, updated_at=timezone.now()
    ):
        _start(upload, import_upload_job)


def upload_abandoned(upload: TaskUpload) -> bool:
    return is_abandoned(upload.is_busy, upload.job_id, upload.updated_at)


def check_retry_upload(upload: TaskUpload) -> None:
    if not upload_abandoned(upload):
        raise ValidationError("this upload is not stopped: there is nothing to start again")


def do_retry_upload(upload: TaskUpload) -> None:
    """Queue the abandoned check or import again; nothing of it was saved (the import is one
    transaction). Unless the row moved meanwhile: then its job was alive after all."""
    job = check_upload_job if upload.status == UploadStatus.CHECKING else import_upload_job
    reset = TaskUpload.objects.filter(pk=upload.pk, status=upload.status, updated_at=upload.updated_at).update(
        claim_token=None, lines_read=0, saving=False, updated_at=timezone.now()
    )
    if reset:
        _start(upload, job)


def check_discard_upload(upload: TaskUpload) -> None:
    if upload.status not in DISCARDABLE:
        raise ValidationError(f"an upload that is {upload.get_status_display()} cannot be discarded")


def do_discard_upload(upload: TaskUpload) -> None:
    TaskUpload.objects.filter(pk=upload.pk, status__in=DISCARDABLE).delete()
