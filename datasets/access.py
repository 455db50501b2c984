"""Who may see and change a dataset, an upload or a mining job: on top of ``orgs.access``."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from datasets.models import Dataset, MiningJob, TaskUpload
from orgs.access import check_scoped, get_or_404


def access_dataset(request: HttpRequest, code: Any, *, write: bool = False, manage: bool = False) -> Dataset:
    """``manage``: bringing tasks into it (an upload, mining) is for admins and owners."""
    dataset = get_or_404(Dataset.objects.select_related("org"), code=code)
    check_scoped(request, dataset, dataset.org, write, manage)
    return dataset


def access_task_upload(request: HttpRequest, code: Any) -> TaskUpload:
    """An uploaded task file (its preview, its import): admins and owners only. Its bytes
    are left unread."""
    upload = get_or_404(TaskUpload.objects.select_related("org", "dataset").defer("data"), code=code)
    check_scoped(request, upload, upload.org, write=True, manage=True)
    return upload


def access_mining_job(request: HttpRequest, code: Any) -> MiningJob:
    job = get_or_404(MiningJob.objects.select_related("org", "source", "dataset"), code=code)
    check_scoped(request, job, job.org, write=True, manage=True)
    return job
