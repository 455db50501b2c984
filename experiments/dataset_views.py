"""Bringing tasks in from the browser: uploading a task file (its preview, its import) and
mining a repository. Owners and admins only; the pages poll with htmx while a job runs."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from experiments.dataset_forms import FORMAT_LABELS, MiningForm, TaskUploadForm, UploadSizeLimit
from experiments.mining import (
    check_retry_mining,
    check_start_mining,
    do_retry_mining,
    do_start_mining,
    mining_abandoned,
)
from experiments.models import Dataset, DatasetKind
from experiments.uploads import (
    check_confirm_upload,
    check_discard_upload,
    check_retry_upload,
    do_confirm_upload,
    do_discard_upload,
    do_retry_upload,
    do_upload,
    percent_of,
    split_problem,
    upload_abandoned,
)
from experiments.views import HtmxHttpRequest
from orgs.access import access_current_org, access_dataset, access_mining_job, access_task_upload
from orgs.models import Membership


def _into(request: HttpRequest) -> Dataset | None:
    """The dataset a link asks to add to (``?dataset=CODE``): another organisation's is a 404."""
    code = request.GET.get("dataset")
    return access_dataset(request, code, manage=True) if code else None


# --- uploads -------------------------------------------------------------------------------


@csrf_exempt  # checked below, once the size limit is in place: the CSRF check reads the body
@login_required
def upload_new(request: HttpRequest) -> HttpResponse:
    membership = access_current_org(request, manage=True)  # refused before a byte of the file is read
    limit = UploadSizeLimit(request, settings.PRBENCH_UPLOAD_MAX_BYTES)
    request.upload_handlers.insert(0, limit)
    return _upload_form(request, membership, limit)


@csrf_protect
def _upload_form(request: HttpRequest, membership: Membership, limit: UploadSizeLimit) -> HttpResponse:
    if request.method == "POST":
        form = TaskUploadForm(request.POST, request.FILES, too_large=limit.refused)
        if form.is_valid():
            upload = do_upload(membership.org, request.user, form.uploaded_file())
            return redirect("experiments:upload", code=upload.code)
    else:
        dataset = _into(request)
        form = TaskUploadForm(initial={"dataset_name": dataset.name} if dataset else None)
    datasets = Dataset.objects.filter(org=membership.org).values_list("name", flat=True)
    context = {"form": form, "datasets": datasets, "limit": settings.PRBENCH_UPLOAD_MAX_BYTES}
    return render(request, "experiments/upload_form.html", context)


@login_required
def upload_detail(request: HtmxHttpRequest, code: str) -> HttpResponse:
    upload = access_task_upload(request, code)
    preview = upload.preview
    context = {
        "upload": upload,
        "preview": preview,
        "format_label": FORMAT_LABELS.get(upload.format, upload.format),
        "kind_label": dict(DatasetKind.choices).get(preview.get("kind", ""), ""),
        "problems": [split_problem(text) for text in preview.get("problems", [])],
        "failures": [split_problem(text) for text in upload.problems],
        "abandoned": upload_abandoned(upload),
        "percent": percent_of(upload.lines_read, upload.lines_total),
    }
    if request.htmx:
        response = render(request, "experiments/upload_detail.html#upload", context)
        # The finished state is rendered once more (the preview, or the import's outcome).
        return response if upload.is_busy else HttpResponseStopPolling(response.content)
    return render(request, "experiments/upload_detail.html", context)


@login_required
@require_POST
def upload_confirm(request: HttpRequest, code: str) -> HttpResponse:
    upload = access_task_upload(request, code)
    try:
        check_confirm_upload(upload)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        do_confirm_upload(upload)
    return redirect("experiments:upload", code=upload.code)


@login_required
@require_POST
def upload_retry(request: HttpRequest, code: str) -> HttpResponse:
    upload = access_task_upload(request, code)
    try:
        check_retry_upload(upload)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        do_retry_upload(upload)
    return redirect("experiments:upload", code=upload.code)


@login_required
@require_POST
def upload_discard(request: HttpRequest, code: str) -> HttpResponse:
    upload = access_task_upload(request, code)
    try:
        check_discard_upload(upload)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("experiments:upload", code=upload.code)
    do_discard_upload(upload)
    messages.success(request, f"Discarded {upload.file_name}.")
    return redirect("experiments:datasets")


# --- mining --------------------------------------------------------------------------------


@login_required
def mining_new(request: HttpRequest) -> HttpResponse:
    membership = access_current_org(request, manage=True)
    org = membership.org
    if request.method == "POST":
        form = MiningForm(request.POST, org=org)
        if form.is_valid():
            data = form.cleaned_data
            try:
                check_start_mining(org, data["source"], data["dataset_name"])
            except ValidationError as exc:
                form.add_error(None, exc)
            else:
                job = do_start_mining(
                    org, request.user, data["source"], data["dataset_name"], data["max_tasks"], data["max_candidates"]
                )
                return redirect("experiments:mining", code=job.code)
    else:
        dataset = _into(request)
        form = MiningForm(org=org, initial={"dataset_name": dataset.name} if dataset else None)
    datasets = Dataset.objects.filter(org=org, kind=DatasetKind.PR_PATCH).values_list("name", flat=True)
    return render(request, "experiments/mining_form.html", {"form": form, "datasets": datasets})


@login_required
def mining_detail(request: HtmxHttpRequest, code: str) -> HttpResponse:
    job = access_mining_job(request, code)
    context = {
        "job": job,
        "abandoned": mining_abandoned(job),
        "percent": percent_of(job.kept + job.rejected, job.max_candidates),
    }
    if request.htmx:
        response = render(request, "experiments/mining_detail.html#job", context)
        return response if job.is_busy else HttpResponseStopPolling(response.content)
    return render(request, "experiments/mining_detail.html", context)


@login_required
@require_POST
def mining_retry(request: HttpRequest, code: str) -> HttpResponse:
    job = access_mining_job(request, code)
    try:
        check_retry_mining(job)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        do_retry_mining(job)
    return redirect("experiments:mining", code=job.code)
