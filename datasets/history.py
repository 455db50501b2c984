"""How a dataset came to be: its versions, and the uploads and mining jobs that fed it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count

from datasets.models import Dataset, MiningJob, TaskUpload


@dataclass(frozen=True)
class DatasetVersion:
    number: int
    added: int  # tasks this version added
    tasks: int  # tasks in the dataset as of this version: its own and every earlier one's


def dataset_versions(dataset: Dataset) -> list[DatasetVersion]:
    """Each version that added tasks, newest first (one GROUP BY over the dataset's tasks)."""
    added = dict(dataset.tasks.order_by().values_list("dataset_version").annotate(n=Count("*")))
    versions, running = [], 0
    for number in sorted(added):
        running += added[number]
        versions.append(DatasetVersion(number, added[number], running))
    return versions[::-1]


def recent_imports(org_id: int, dataset: Dataset | None = None) -> dict[str, Any]:
    """The uploads and mining jobs the datasets pages list for admins and owners (all of the
    organisation's, or those into one dataset), newest first."""
    uploads = TaskUpload.objects.filter(org_id=org_id).defer("data").select_related("created_by", "dataset")
    jobs = MiningJob.objects.filter(org_id=org_id).select_related("source", "created_by", "dataset")
    if dataset is not None:
        uploads, jobs = uploads.filter(dataset_name=dataset.name), jobs.filter(dataset_name=dataset.name)
    return {"uploads": uploads[:20], "mining_jobs": jobs[:20]}
