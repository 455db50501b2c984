"""A run's export as a background job writing a file: what the run page's export buttons and
``POST /api/runs/{id}/exports`` start, so no export of any size depends on a web worker's
timeout (a 1M-attempt JSON export is about half a gigabyte and tens of seconds).

The job writes experiments/exports.py's chunks, as they come, to a part file of its own claim,
then renames it into place: memory stays that of one chunk, and nobody is ever handed a file
still being written. It reports the rows read about once a second (``PROGRESS_EVERY_S``), which
also tells the recovery sweep it is alive. The file is kept for a day (``EXPORT_TTL``); the
sweep then deletes it and marks the row expired, and the page offers to make it again.

Jobs take the row's id and claim it with a conditional update, so a duplicate job does
nothing; a worker that dies mid-export leaves a busy row that stops moving, which the sweep
(``requeue_abandoned_exports``) queues again once Redis no longer holds its job. A late result
from the old claim is not recorded, and its file is removed.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from datasets.background import ABANDONED_AFTER, enqueue_on_commit, job_is_alive
from experiments.exports import EXPORT_FORMATS, MODEL_FORMATS, prepare_export
from experiments.models import EXPORT_BUSY, ExportStatus, Run, RunExport
from experiments.swebench_export import ExportRefused, check_patch_run, check_report_available, select_models

logger = logging.getLogger(__name__)

EXPORT_TTL = timedelta(days=1)
# Far beyond a 1M-attempt JSON export (under a minute on two cores): only a stuck job meets it.
JOB_TIMEOUT_S = 3 * 3600
PROGRESS_EVERY_S = 1.0
STOPPED = "the export stopped unexpectedly (the error is in the worker's log)"
# Formats whose rows are the run's attempts, one each: their progress has a known total.
ATTEMPT_ROW_FORMATS = ("json", "csv")


def export_dir() -> Path:
    path = Path(settings.PRBENCH_EXPORT_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


# A finished export is handed to a new request for the same one only with this much of its day left.
REUSE_LEFT = timedelta(hours=1)


def export_file(export: RunExport) -> Path | None:
    """The finished file, or None when there is none (not written yet, failed, expired)."""
    if export.status != ExportStatus.DONE or not export.path:
        return None
    if export.expires_at is not None and export.expires_at <= timezone.now():
        return None  # its day is over: the sweep may be deleting it now
    path = _stored_path(export)
    return path if path.exists() else None


def _stored_path(export: RunExport) -> Path:
    return export_dir() / export.path


# --- streaming in the request --------------------------------------------------------------


def check_streamable(run: Run, format: str) -> None:
    """ExportRefused for an export too large to write inside a web request: the HTML report
    reads the run's summaries (one small chunk), the rest grow with the run's attempts."""
    if format == "html" or run.total_attempts <= settings.PRBENCH_EXPORT_STREAM_MAX_ATTEMPTS:
        return
    raise ExportRefused(
        f"this run has {run.total_attempts:,} attempts, more than a download in the request may carry "
        f"({settings.PRBENCH_EXPORT_STREAM_MAX_ATTEMPTS:,}): start a background export instead"
    )


def recent_exports(run: Run, limit: int = 5) -> list[RunExport]:
    """The run's latest exports, newest first: what its page lists."""
    return list(run.exports.order_by("-created_at")[:limit])


# --- starting one ----------------------------------------------------------------------------


def export_options(arm: str | None, rep: int | None) -> dict[str, Any]:
    return {key: value for key, value in (("arm", arm), ("rep", rep)) if value is not None}


def check_request_export(run: Run, format: str, options: dict[str, Any]) -> None:
    """ExportRefused, before anything is queued, for what cannot be made as asked; the cheap
    checks only (the rest, found by the job, fails the export with the reason)."""
    if format not in EXPORT_FORMATS:
        raise ExportRefused(f"no such export: {format!r} (one of {', '.join(EXPORT_FORMATS)})")
    if format in MODEL_FORMATS:
        check_patch_run(run)
    if format == "swebench-report":
        check_report_available(run)
    if options:
        if format not in MODEL_FORMATS:
            raise ExportRefused(f"only {' and '.join(MODEL_FORMATS)} export one arm at a time, not {format}")
        select_models(run, options.get("arm"), options.get("rep"))


def do_request_export(run: Run, format: str, options: dict[str, Any], by: Any) -> RunExport:
    """Queue the export, or hand back the same export already queued or being written (a
    double click makes one file); a finished run's export already made is handed back too,
    since the run can no longer change it."""
    same = RunExport.objects.filter(run=run, format=format, options=options)
    reusable = Q(status__in=EXPORT_BUSY)
    if run.is_finished and run.finished_at is not None:
        # A written one with most of its day left: not one about to be deleted under the user.
        reusable |= Q(
            status=ExportStatus.DONE, created_at__gt=run.finished_at, expires_at__gt=timezone.now() + REUSE_LEFT
        )
    existing = same.filter(reusable).order_by("-created_at").first()
    if existing is not None:
        return existing
    with transaction.atomic():
        export = RunExport.objects.create(
            org_id=run.org_id,
            run=run,
            format=format,
            options=options,
            requested_by=by if getattr(by, "is_authenticated", False) else None,
        )
        _enqueue(export)
    return export


def _enqueue(export: RunExport) -> None:
    job_id = f"run-export-{export.pk}-{uuid.uuid4().hex[:12]}"
    RunExport.objects.filter(pk=export.pk).update(job_id=job_id)
    enqueue_on_commit(write_export_job, export.pk, job_id, JOB_TIMEOUT_S)


# --- the job ---------------------------------------------------------------------------------


class Progress:
    """Counts the rows the export has read and writes the count to its row about once a
    second: a write per chunk of a million-attempt export would be thousands of updates."""

    def __init__(self, export_id: int, token: uuid.UUID) -> None:
        self.export_id, self.token = export_id, token
        self.rows = 0
        self.written_at = time.monotonic()

    def __call__(self, rows: int) -> None:
        self.rows += rows
        if time.monotonic() - self.written_at >= PROGRESS_EVERY_S:
            self.written_at = time.monotonic()
            _mark(self.export_id, self.token, rows_written=self.rows)


def write_export_job(export_id: int) -> None:
    """Write the export's file and record it done, or failed with the reason."""
    token = _claim(export_id)
    if token is None:
        return  # queued twice, or taken back from a dead worker and claimed again: done elsewhere
    export = RunExport.objects.select_related("run__org", "run__experiment__dataset").get(pk=export_id)
    progress = Progress(export_id, token)
    part = export_dir() / f"{export.code}.{token.hex}.part"
    try:
        arm, rep = export.options.get("arm"), export.options.get("rep")
        prepared = prepare_export(export.run, export.format, arm, rep, progress)
        _mark(
            export_id,
            token,
            file_name=prepared.filename,
            content_type=prepared.content_type,
            rows_total=_rows_total(export),
        )
        size = _write(prepared.chunks, part)
        final = part.with_name(f"{export.code}.{token.hex[:12]}{Path(prepared.filename).suffix}")
        part.replace(final)
    except ExportRefused as exc:
        _fail(export_id, token, part, str(exc))
        return
    except Exception:
        logger.exception("writing run export %s", export_id)
        _fail(export_id, token, part, STOPPED)
        return
    now = timezone.now()
    if not _end(
        export_id,
        token,
        status=ExportStatus.DONE,
        path=final.name,
        size=size,
        rows_written=progress.rows,
        finished_at=now,
        expires_at=now + EXPORT_TTL,
    ):
        final.unlink(missing_ok=True)  # taken over meanwhile: the export's file is the new claim's


def _write(chunks: Any, path: Path) -> int:
    size = 0
    with path.open("wb", buffering=1024 * 1024) as out:
        for chunk in chunks:
            data = chunk.encode() if isinstance(chunk, str) else chunk
            out.write(data)
            size += len(data)
    return size


def _rows_total(export: RunExport) -> int | None:
    """How many rows the export reads in all, when that is known: one per attempt for the
    attempt formats. A SWE-bench file has a line per finished attempt of its arm: left unknown."""
    if export.format in ATTEMPT_ROW_FORMATS:
        return export.run.attempts.count()
    return None


def _claim(export_id: int) -> uuid.UUID | None:
    token = uuid.uuid4()
    claimed = RunExport.objects.filter(pk=export_id, status=ExportStatus.QUEUED, claim_token=None).update(
        status=ExportStatus.RUNNING, claim_token=token, rows_written=0, updated_at=timezone.now()
    )
    return token if claimed else None


def _mark(export_id: int, token: uuid.UUID, **fields: Any) -> int:
    return RunExport.objects.filter(pk=export_id, claim_token=token).update(updated_at=timezone.now(), **fields)


def _end(export_id: int, token: uuid.UUID, **fields: Any) -> int:
    return _mark(export_id, token, claim_token=None, **fields)


def _fail(export_id: int, token: uuid.UUID, part: Path, error: str) -> None:
    part.unlink(missing_ok=True)
    _end(export_id, token, status=ExportStatus.FAILED, error=error, finished_at=timezone.now())


# --- the recovery sweep's steps (settings.PRBENCH_RECOVERY_STEPS) ------------------------------


def requeue_abandoned_exports(stale_after: timedelta) -> dict[str, int]:
    """``exports_requeued``: busy exports whose row has not moved for ``ABANDONED_AFTER`` (a
    writing job moves it every second) and whose job Redis no longer holds (its worker died,
    or the queue was lost), queued again from the start. The row is reset only if it has not
    moved since it was read, so a job that was alive after all keeps its claim."""
    requeued = 0
    stale = RunExport.objects.filter(status__in=EXPORT_BUSY, updated_at__lt=timezone.now() - ABANDONED_AFTER)
    for export in stale.only("pk", "code", "job_id", "claim_token", "updated_at"):
        if job_is_alive(export.job_id):
            continue
        if export.claim_token is not None:  # the dead claim's half-written file
            (export_dir() / f"{export.code}.{export.claim_token.hex}.part").unlink(missing_ok=True)
        with transaction.atomic():
            reset = RunExport.objects.filter(pk=export.pk, updated_at=export.updated_at).update(
                status=ExportStatus.QUEUED, claim_token=None, rows_written=0, updated_at=timezone.now()
            )
            if reset:
                _enqueue(export)
                requeued += 1
    return {"exports_requeued": requeued}


def expire_exports(stale_after: timedelta) -> dict[str, int]:
    """``exports_expired``: finished exports past their day, their files deleted."""
    expired = 0
    for export in RunExport.objects.filter(status=ExportStatus.DONE, expires_at__lte=timezone.now()):
        if RunExport.objects.filter(pk=export.pk, status=ExportStatus.DONE).update(
            status=ExportStatus.EXPIRED, updated_at=timezone.now()
        ):
            expired += 1
            if export.path:
                _stored_path(export).unlink(missing_ok=True)
    return {"exports_expired": expired}
