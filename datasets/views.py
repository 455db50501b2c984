"""Bringing tasks in from the browser: uploading a task file (its preview, its import) and
mining a repository; a dataset's environments (its recipes, their builds). Owners and admins
change things; the pages poll with htmx while a job runs."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling

from datasets.access import access_dataset, access_mining_job, access_task_upload
from datasets.environments import do_request_builds, used_environment, used_environments
from datasets.forms import FORMAT_LABELS, MiningForm, RecipeForm, TaskUploadForm, UploadSizeLimit
from datasets.history import dataset_versions, recent_imports
from datasets.mining import (
    check_retry_mining,
    check_start_mining,
    do_retry_mining,
    do_start_mining,
    mining_abandoned,
)
from datasets.models import Dataset, DatasetKind
from datasets.recipes import do_set_recipe, recipe_installs
from datasets.uploads import (
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
from evaluation.models import EnvironmentStatus
from evaluation.workloads.wording import wording_for
from orgs.access import access_current_org, membership_for
from orgs.models import Membership
from prbench.htmx import HtmxHttpRequest


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
            return redirect("datasets:upload", code=upload.code)
    else:
        dataset = _into(request)
        form = TaskUploadForm(initial={"dataset_name": dataset.name} if dataset else None)
    datasets = Dataset.objects.filter(org=membership.org).values_list("name", flat=True)
    context = {"form": form, "datasets": datasets, "limit": settings.PRBENCH_UPLOAD_MAX_BYTES}
    return render(request, "datasets/upload_form.html", context)


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
        response = render(request, "datasets/upload_detail.html#upload", context)
        # The finished state is rendered once more (the preview, or the import's outcome).
        return response if upload.is_busy else HttpResponseStopPolling(response.content)
    return render(request, "datasets/upload_detail.html", context)


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
    return redirect("datasets:upload", code=upload.code)


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
    return redirect("datasets:upload", code=upload.code)


@login_required
@require_POST
def upload_discard(request: HttpRequest, code: str) -> HttpResponse:
    upload = access_task_upload(request, code)
    try:
        check_discard_upload(upload)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
        return redirect("datasets:upload", code=upload.code)
    do_discard_upload(upload)
    messages.success(request, f"Discarded {upload.file_name}.")
    return redirect("datasets:list")


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
                return redirect("datasets:mining", code=job.code)
    else:
        dataset = _into(request)
        form = MiningForm(org=org, initial={"dataset_name": dataset.name} if dataset else None)
    datasets = Dataset.objects.filter(org=org, kind=DatasetKind.PR_PATCH).values_list("name", flat=True)
    return render(request, "datasets/mining_form.html", {"form": form, "datasets": datasets})


@login_required
def mining_detail(request: HtmxHttpRequest, code: str) -> HttpResponse:
    job = access_mining_job(request, code)
    context = {
        "job": job,
        "abandoned": mining_abandoned(job),
        "percent": percent_of(job.kept + job.rejected, job.max_candidates),
    }
    if request.htmx:
        response = render(request, "datasets/mining_detail.html#job", context)
        return response if job.is_busy else HttpResponseStopPolling(response.content)
    return render(request, "datasets/mining_detail.html", context)


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
    return redirect("datasets:mining", code=job.code)


@login_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    membership = access_current_org(request)
    datasets = Dataset.objects.filter(org=membership.org).annotate(task_count=Count("tasks"))
    context: dict[str, Any] = {"datasets": datasets, "can_manage": membership.can_manage}
    if membership.can_manage:
        context.update(recent_imports(membership.org_id))
    return render(request, "datasets/dataset_list.html", context)


@login_required
def dataset_detail(request: HttpRequest, code: str) -> HttpResponse:
    dataset = access_dataset(request, code)
    words = wording_for(dataset.kind)
    columns = [
        "code", "external_id", "title", "position", "repo", "base_commit", "fail_to_pass", "quarantined",
        "quarantine_reason", "gold_status", "gold_detail", "dataset_version",
    ]  # fmt: skip
    if words.task_columns:  # a question kind's columns read its payload, its question and category
        columns += ["payload", "problem_statement", "category", "difficulty"]
    tasks = dataset.tasks.only(*columns)
    can_manage = membership_for(request, dataset.org).can_manage
    context: dict[str, Any] = {
        "dataset": dataset,
        "words": words,
        "tasks": tasks,
        "task_rows": [(task, [(column, column.cell(task)) for column in words.task_columns]) for task in tasks]
        if words.task_columns
        else [],
        "versions": dataset_versions(dataset),
        "can_manage": can_manage,
    }
    if can_manage:
        context.update(recent_imports(dataset.org_id, dataset))
    context.update(_environments_context(dataset, can_manage))
    return render(request, "datasets/dataset_detail.html", context)


# --- environments --------------------------------------------------------------------------


def _environments_context(dataset: Dataset, can_manage: bool) -> dict[str, Any]:
    used = used_environments(dataset)
    return {
        "dataset": dataset,
        "recipes": [(recipe, recipe_installs(recipe)) for recipe in dataset.environment_recipes.all()],
        "environments": [
            (env, percent_of(env.record.steps_done, env.record.steps_total) if env.record else 0) for env in used
        ],
        "environments_busy": any(env.is_busy for env in used),  # polled: a worker may come and take them
        "environments_building": any(env.is_busy and not env.waiting_for for env in used),
        "has_repositories": dataset.tasks.exclude(repo="").exists(),
        "can_manage": can_manage,
    }


@login_required
def dataset_environments(request: HtmxHttpRequest, code: str) -> HttpResponse:
    """The dataset's environments section on a page of its own; with htmx, the section alone
    (the detail page polls it while a build is queued or under way)."""
    dataset = access_dataset(request, code)
    context = _environments_context(dataset, membership_for(request, dataset.org).can_manage)
    if request.htmx:
        response = render(request, "datasets/environments.html#environments", context)
        return response if context["environments_busy"] else HttpResponseStopPolling(response.content)
    return render(request, "datasets/environments.html", context)


@login_required
def environment_recipe(request: HttpRequest, code: str) -> HttpResponse:
    """Add a recipe, or edit the one ``?repo=&version=`` names (admins and owners)."""
    dataset = access_dataset(request, code, manage=True)
    if request.method == "POST":
        form = RecipeForm(request.POST, dataset=dataset)
        if form.is_valid():
            assert form.checked is not None
            recipe, created = do_set_recipe(dataset, form.checked)
            messages.success(request, f"{'Added' if created else 'Saved'} the recipe for {recipe}.")
            return redirect(reverse("datasets:environments", args=[dataset.code]))
    else:
        repo, version = request.GET.get("repo"), request.GET.get("version", "")
        existing = dataset.environment_recipes.filter(repo=repo, version=version).first() if repo else None
        initial = RecipeForm.initial_for(existing) if existing else {"repo": repo, "version": version}
        form = RecipeForm(initial=initial, dataset=dataset)
    return render(request, "datasets/environment_recipe.html", {"dataset": dataset, "form": form})


@login_required
@require_POST
def environments_build(request: HttpRequest, code: str) -> HttpResponse:
    dataset = access_dataset(request, code, manage=True)
    retry = request.POST.get("retry") == "1"
    if not dataset.environment_recipes.exists():
        messages.error(request, "The dataset has no environment recipe: add one first.")
    else:
        do_request_builds(dataset, retry=retry)
        messages.success(
            request,
            "Queued: a worker works out which environments the tasks need, then builds "
            "each one it has not built" + (", failed ones again." if retry else "."),
        )
    return redirect(reverse("datasets:environments", args=[dataset.code]))


@login_required
def environment_log(request: HtmxHttpRequest, code: str, key: str) -> HttpResponse:
    """One environment's build and its whole log: only through a key the dataset's tasks carry."""
    dataset = access_dataset(request, code)
    used = used_environment(dataset, key)
    if used is None or used.record is None:
        raise Http404("No such environment")
    record = used.record
    busy = record.status in (EnvironmentStatus.QUEUED, EnvironmentStatus.BUILDING)
    context = {
        "dataset": dataset,
        "environment": record,
        "busy": busy,
        "percent": percent_of(record.steps_done, record.steps_total),
        "recipe_json": json.dumps(record.recipe, indent=2),
        "used_for": used.used_for,
    }
    if request.htmx:
        response = render(request, "datasets/environment_log.html#build", context)
        return response if busy else HttpResponseStopPolling(response.content)
    return render(request, "datasets/environment_log.html", context)
