"""The JSON API's experiments, datasets, runs and attempts (mounted by prbench/api.py).

Endpoints are thin: they reach objects through ``orgs.access`` and change them through
``experiments.actions``, exactly as the pages do.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from uuid import UUID

from django.http import HttpRequest
from django.urls import reverse
from ninja import Query, Router, Schema

from experiments.models import Run
from experiments.progress import run_progress
from orgs.access import access_current_org, access_run
from prbench.api_support import COMMON_ERRORS, MAX_LIMIT, READ, Page, paginate

router = Router(tags=["runs"])


class Progress(Schema):
    total: int
    queued: int
    running: int
    completed: int
    failed: int
    cancelled: int
    percent: int


class ArmOut(Schema):
    label: str
    provider: str
    model: str


class RunOut(Schema):
    id: UUID
    experiment: UUID
    experiment_name: str
    status: str
    seed: int
    inference_only: bool
    budget_usd: Decimal | None
    dataset_version: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str
    arms: list[ArmOut]
    progress: Progress | None = None


def run_out(run: Run, *, with_progress: bool) -> RunOut:
    progress = None
    if with_progress:
        counted = run_progress(run)
        progress = Progress(
            total=counted.total,
            queued=counted.queued,
            running=counted.running,
            completed=counted.completed,
            failed=counted.failed,
            cancelled=counted.cancelled,
            percent=counted.percent,
        )
    return RunOut(
        id=run.code,
        experiment=run.experiment.code,
        experiment_name=run.experiment.name,
        status=run.status,
        seed=run.seed,
        inference_only=run.inference_only,
        budget_usd=run.budget_usd,
        dataset_version=run.dataset_version,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        url=reverse("experiments:run", args=[run.code]),
        arms=[ArmOut(label=arm.label, provider=arm.provider, model=arm.model_name) for arm in run.arms.all()],
        progress=progress,
    )


@router.get("/runs", response={200: Page[RunOut], **COMMON_ERRORS}, auth=READ, summary="List the organisation's runs")
def list_runs(
    request: HttpRequest, cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT)
) -> Page[RunOut]:
    org = access_current_org(request).org
    queryset = Run.objects.filter(org=org).select_related("experiment").prefetch_related("arms")
    rows, next_cursor = paginate(queryset, cursor, limit)
    return Page[RunOut](items=[run_out(run, with_progress=False) for run in rows], next_cursor=next_cursor)


@router.get("/runs/{run_id}", response={200: RunOut, **COMMON_ERRORS}, auth=READ, summary="A run, with its progress")
def get_run(request: HttpRequest, run_id: str) -> RunOut:
    return run_out(access_run(request, run_id), with_progress=True)
