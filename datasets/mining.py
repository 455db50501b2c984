"""Mining a repository's history from the datasets page: ``ingest_prs`` as a job.

Only the repositories staff list as MiningSource rows (the admin) are offered, and the
form names one by its row: nobody can point the server at a path or URL of their choosing.
The job runs ``datasets.ingest.ingest``, the command's own code path, and counts its
decisions on its row as each one is saved; a job queued again (a retry after its worker
died) skips the commits already decided, as a re-run of the command does.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from datasets.background import enqueue_on_commit, is_abandoned
from datasets.imports import check_dataset_name, kind_problem
from datasets.ingest import (
    DEFAULT_TEST_COMMAND,
    IngestOptions,
    Skipped,
    TestCommandDoesNotStart,
    check_repository,
    ingest,
)
from datasets.models import MINING_BUSY, Dataset, DatasetKind, MiningJob, MiningSource, MiningStatus
from orgs.models import Organization

logger = logging.getLogger(__name__)

MAX_TASKS_LIMIT = 100  # what one job started from the page may keep ...
MAX_CANDIDATES_LIMIT = 500  # ... and judge: each candidate is gold_runs + 1 sandboxed test runs
# No RQ timeout: its exception would land in the middle of a test run. A job bounds itself
# (max_candidates, each test run's own timeout), and one whose worker died is retried.
JOB_TIMEOUT_S = -1
STOPPED = "the job stopped unexpectedly (the error is in the worker's log); the decisions counted are saved"


def allowed_sources(org: Organization) -> QuerySet[MiningSource]:
    """The repositories the platform lets this organisation mine."""
    return MiningSource.objects.filter(enabled=True).filter(Q(org=None) | Q(org=org))


def check_start_mining(org: Organization, source: MiningSource, dataset_name: str) -> None:
    if not allowed_sources(org).filter(pk=source.pk).exists():
        raise ValidationError(f"repository {source.name!r} is not one the platform allows mining")
    check_dataset_name(dataset_name)
    dataset = Dataset.objects.filter(org=org, name=dataset_name).first()
    if dataset is not None and (problem := kind_problem(dataset, DatasetKind.PR_PATCH)):
        raise ValidationError(problem)
    busy = MiningJob.objects.filter(org=org, source=source, dataset_name=dataset_name, status__in=MINING_BUSY)
    if busy.exists():
        raise ValidationError(f"{source.name} is already being mined into {dataset_name!r}: wait for that job")


@transaction.atomic
def do_start_mining(
    org: Organization, user: Any, source: MiningSource, dataset_name: str, max_tasks: int, max_candidates: int
) -> MiningJob:
    job = MiningJob.objects.create(
        org=org,
        source=source,
        dataset_name=dataset_name,
        max_tasks=max_tasks,
        max_candidates=max_candidates,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    _queue(job)
    return job


def _queue(job: MiningJob) -> None:
    job.job_id = f"mining-{job.pk}-{uuid.uuid4().hex[:12]}"
    MiningJob.objects.filter(pk=job.pk).update(job_id=job.job_id)
    enqueue_on_commit(mine_repository_job, job.pk, job.job_id, JOB_TIMEOUT_S)


def ingest_options(job: MiningJob) -> IngestOptions:
    source = job.source
    return IngestOptions(
        repo_name=source.name,
        source=str(Path(source.path).resolve()),
        branch=source.branch,
        max_tasks=job.max_tasks,
        test_command=list(source.test_command) or list(DEFAULT_TEST_COMMAND),
        max_candidates=job.max_candidates,
    )


def mine_repository_job(job_id: int) -> None:
    """RQ job: mine the source into the dataset, counting each decision on the row."""
    token = uuid.uuid4()
    claimed = MiningJob.objects.filter(pk=job_id, status=MiningStatus.QUEUED, claim_token=None).update(
        status=MiningStatus.RUNNING, claim_token=token, updated_at=timezone.now()
    )
    if not claimed:
        return
    job = MiningJob.objects.select_related("org", "source").get(pk=job_id)
    try:
        options = ingest_options(job)
        check_repository(options.source, options.branch)
        summary = _mine(job, options, token)
    except ValidationError as exc:
        _end(job, token, MiningStatus.FAILED, " ".join(exc.messages))
    except TestCommandDoesNotStart as exc:
        _end(job, token, MiningStatus.FAILED, f"stopped: {exc}")
    except Exception:
        logger.exception("mining job %s", job_id)
        _end(job, token, MiningStatus.FAILED, STOPPED)
    else:
        _end(job, token, MiningStatus.DONE, summary)


def _mine(job: MiningJob, options: IngestOptions, token: uuid.UUID) -> str:
    counts = {"kept": job.kept, "rejected": job.rejected, "skipped": job.skipped}

    def judging(subject: str) -> None:
        _mark(job.pk, token, judging=subject[:300])

    with closing(ingest(job.org, job.dataset_name, options, progress=judging)) as mined:
        for item in mined:
            if isinstance(item, Skipped):
                counts["skipped"] += 1
            else:
                counts["kept" if item.kept else "rejected"] += 1
            if not _mark(job.pk, token, judging="", **counts):
                return "stopped: another job took this one over"
    kept, rejected, skipped = counts["kept"], counts["rejected"], counts["skipped"]
    return f"kept {kept} task(s), rejected {rejected} candidate(s), skipped {skipped} commit(s)"


def _mark(job_id: int, token: uuid.UUID, **fields: Any) -> int:
    return MiningJob.objects.filter(pk=job_id, claim_token=token).update(updated_at=timezone.now(), **fields)


def _end(job: MiningJob, token: uuid.UUID, status: str, message: str) -> None:
    """Record how it ended, and the dataset its decisions went into (none when it made none)."""
    dataset = Dataset.objects.filter(org=job.org, name=job.dataset_name).first()
    ended = {"status": status, "message": message, "dataset": dataset, "finished_at": timezone.now()}
    _mark(job.pk, token, judging="", claim_token=None, **ended)


def mining_abandoned(job: MiningJob) -> bool:
    return is_abandoned(job.is_busy, job.job_id, job.updated_at)


def check_retry_mining(job: MiningJob) -> None:
    if not mining_abandoned(job):
        raise ValidationError("this mining job is not stopped: there is nothing to start again")


def do_retry_mining(job: MiningJob) -> None:
    """Queue an abandoned job again: it goes on from the decisions already saved."""
    reset = MiningJob.objects.filter(pk=job.pk, status=job.status, updated_at=job.updated_at).update(
        status=MiningStatus.QUEUED, claim_token=None, judging="", updated_at=timezone.now()
    )
    if reset:
        with transaction.atomic():
            _queue(job)
