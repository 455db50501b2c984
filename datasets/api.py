"""The JSON API's datasets and task uploads (mounted by prbench/api.py).

Endpoints are thin: they reach objects through ``datasets.access`` and change them through
the upload module, exactly as the pages and the commands do; an upload's body is the browser's
form, checked by the same ``TaskUploadForm``.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from ninja import Field, Query, Router, Schema, Status
from ninja.errors import HttpError

from datasets.access import access_dataset, access_task_upload
from datasets.formats import format_names
from datasets.forms import TaskUploadForm, UploadSizeLimit
from datasets.history import dataset_versions
from datasets.models import Dataset, DatasetKind, TaskUpload, UploadStatus
from datasets.uploads import (
    check_confirm_upload,
    do_confirm_upload,
    do_upload,
    percent_of,
    split_problem,
    upload_abandoned,
)
from orgs.access import access_current_org
from orgs.api_auth import ADMIN, READ, actor, check_session_csrf
from prbench.api_support import COMMON_ERRORS, MAX_LIMIT, ErrorBody, Page, paginate
from prbench.inputs import NAME_MAX

router = Router(tags=["datasets"])


# --- datasets ----------------------------------------------------------------------------------


class DatasetOut(Schema):
    id: UUID
    name: str
    kind: str
    description: str
    task_count: int
    version: int
    created_at: datetime
    url: str


class DatasetVersionOut(Schema):
    number: int
    added: int = Field(description="Tasks this version added")
    tasks: int = Field(description="Tasks in the dataset as of this version")


class DatasetDetailOut(DatasetOut):
    versions: list[DatasetVersionOut]


def dataset_out(dataset: Dataset, task_count: int) -> DatasetOut:
    return DatasetOut(
        id=dataset.code,
        name=dataset.name,
        kind=dataset.kind,
        description=dataset.description,
        task_count=task_count,
        version=dataset.version,
        created_at=dataset.created_at,
        url=reverse("datasets:detail", args=[dataset.code]),
    )


@router.get(
    "/datasets",
    response={200: Page[DatasetOut], **COMMON_ERRORS},
    auth=READ,
    summary="List the organisation's datasets",
    tags=["datasets"],
)
def list_datasets(
    request: HttpRequest, cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT)
) -> Page[DatasetOut]:
    org = access_current_org(request).org
    rows, next_cursor = paginate(Dataset.objects.filter(org=org).annotate(task_count=Count("tasks")), cursor, limit)
    items = [dataset_out(dataset, dataset.task_count) for dataset in rows]  # type: ignore[attr-defined]
    return Page[DatasetOut](items=items, next_cursor=next_cursor)


# --- task uploads (declared before /datasets/{dataset_id}, whose id would otherwise match "uploads")


class ImportProblem(Schema):
    line: int | None = Field(description="The file's line, when the problem is one line's")
    field: str | None = Field(description="The task field the problem is about, when it names one")
    message: str


class UploadOut(Schema):
    id: UUID
    status: str = Field(description=f"One of {', '.join(UploadStatus.values)}")
    file_name: str
    format: str
    dataset_name: str
    dataset: UUID | None = Field(description="The dataset it was imported into, once imported")
    size: int = Field(description="Bytes uploaded")
    lines_total: int
    lines_read: int
    percent: int = Field(description="How far the running check or import has read the file")
    saving: bool = Field(description="Read and checked: the tasks are being saved")
    abandoned: bool = Field(description="Its job stopped (a worker died): start it again in the browser")
    kind: str = Field(description="The kind of task the check found in the file ('' until known)")
    tasks: int | None = Field(description="Tasks the check read")
    columns: list[str]
    rows: list[list[str]] = Field(description="The first tasks as the importer read them")
    errors: list[ImportProblem] = Field(description="Why the file cannot be imported, by line and field")
    imported: int
    version: int | None = Field(description="The dataset version the import made")
    created_at: datetime
    finished_at: datetime | None
    url: str


def upload_out(upload: TaskUpload) -> UploadOut:
    preview = upload.preview or {}
    problems = [split_problem(text) for text in [*preview.get("problems", []), *upload.problems]]
    return UploadOut(
        id=upload.code,
        status=upload.status,
        file_name=upload.file_name,
        format=upload.format,
        dataset_name=upload.dataset_name,
        dataset=upload.dataset.code if upload.dataset else None,
        size=upload.size,
        lines_total=upload.lines_total,
        lines_read=upload.lines_read,
        percent=percent_of(upload.lines_read, upload.lines_total),
        saving=upload.saving,
        abandoned=upload_abandoned(upload),
        kind=preview.get("kind") or upload.kind,
        tasks=preview.get("tasks"),
        columns=preview.get("columns", []),
        rows=preview.get("rows", []),
        errors=[
            ImportProblem(line=int(p["line"]) if p["line"] else None, field=p["field"] or None, message=p["message"])
            for p in problems
        ],
        imported=upload.imported,
        version=upload.version,
        created_at=upload.created_at,
        finished_at=upload.finished_at,
        url=reverse("datasets:upload", args=[upload.code]),
    )


def _uploads(org_id: int) -> QuerySet[TaskUpload]:
    return TaskUpload.objects.filter(org_id=org_id).defer("data").select_related("dataset")


# The form the browser posts (datasets/forms.py TaskUploadForm checks it, for both).
UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["format", "dataset_name", "file"],
                    "properties": {
                        "format": {"type": "string", "enum": format_names(), "description": "What the file is"},
                        "dataset_name": {
                            "type": "string",
                            "maxLength": NAME_MAX,
                            "description": "One of the organisation's datasets (the file's tasks become its next "
                            "version), or a new name",
                        },
                        "field_map": {
                            "type": "string",
                            "description": "Generic JSONL/CSV: the kind's fields from the file's, "
                            "e.g. question=prompt,answer=target",
                        },
                        "kind": {
                            "type": "string",
                            "enum": ["", *(k for k in DatasetKind.values if k != DatasetKind.PR_PATCH)],
                            "description": "Generic JSONL/CSV: the kind of task it holds",
                        },
                        "file": {"type": "string", "format": "binary", "description": "The task file"},
                    },
                }
            }
        },
    }
}


@router.post(
    "/datasets/uploads",
    response={201: UploadOut, **COMMON_ERRORS},
    auth=ADMIN,
    summary="Upload a task file: it is checked (a job for a large file), then waits for confirmation",
    tags=["datasets"],
    openapi_extra=UPLOAD_BODY,
)
@csrf_exempt  # checked below, once the size limit is in place: the CSRF check reads the body
def create_upload(request: HttpRequest) -> Status[UploadOut]:
    membership = access_current_org(request, manage=True)  # refused before a byte of the file is read
    limit = UploadSizeLimit(request, settings.PRBENCH_UPLOAD_MAX_BYTES)
    request.upload_handlers.insert(0, limit)
    check_session_csrf(request)
    try:
        form = TaskUploadForm(request.POST, request.FILES, too_large=limit.refused)
    except MultiPartParserError as exc:  # Django would answer an undocumented 400
        raise ValidationError({"file": f"the multipart body cannot be read: {exc}"}) from None
    if not form.is_valid():
        raise ValidationError(form.errors.as_data())
    upload = do_upload(membership.org, actor(request), form.uploaded_file())
    return Status(201, upload_out(_uploads(membership.org_id).get(pk=upload.pk)))


@router.get(
    "/datasets/uploads",
    response={200: Page[UploadOut], **COMMON_ERRORS},
    auth=ADMIN,
    summary="List the organisation's task uploads, newest first",
    tags=["datasets"],
)
def list_uploads(
    request: HttpRequest, cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT)
) -> Page[UploadOut]:
    membership = access_current_org(request, manage=True)
    rows, next_cursor = paginate(_uploads(membership.org_id), cursor, limit)
    return Page[UploadOut](items=[upload_out(upload) for upload in rows], next_cursor=next_cursor)


@router.get(
    "/datasets/uploads/{upload_id}",
    response={200: UploadOut, **COMMON_ERRORS},
    auth=ADMIN,
    summary="A task upload: its status, progress, preview and errors",
    tags=["datasets"],
)
def get_upload(request: HttpRequest, upload_id: str) -> UploadOut:
    return upload_out(access_task_upload(request, upload_id))


@router.post(
    "/datasets/uploads/{upload_id}/confirm",
    response={202: UploadOut, 409: ErrorBody, **COMMON_ERRORS},
    auth=ADMIN,
    summary="Import a checked upload (a job for a large file); 409 unless it is ready",
    tags=["datasets"],
)
def confirm_upload(request: HttpRequest, upload_id: str) -> Status[UploadOut]:
    upload = access_task_upload(request, upload_id)
    try:
        check_confirm_upload(upload)
    except ValidationError as exc:
        raise HttpError(409, "; ".join(exc.messages)) from None
    do_confirm_upload(upload)
    return Status(202, upload_out(_uploads(upload.org_id).get(pk=upload.pk)))


@router.get(
    "/datasets/{dataset_id}",
    response={200: DatasetDetailOut, **COMMON_ERRORS},
    auth=READ,
    summary="A dataset, with its versions",
    tags=["datasets"],
)
def get_dataset(request: HttpRequest, dataset_id: str) -> DatasetDetailOut:
    dataset = access_dataset(request, dataset_id)
    versions = dataset_versions(dataset)
    summary = dataset_out(dataset, versions[0].tasks if versions else 0)
    return DatasetDetailOut(
        **summary.model_dump(),
        versions=[DatasetVersionOut(number=v.number, added=v.added, tasks=v.tasks) for v in versions],
    )
