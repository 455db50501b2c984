"""Shared bits of the experiments commands."""

from __future__ import annotations

import sys
import time

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from rq import Worker
from tqdm import tqdm

from experiments.models import Run
from experiments.progress import run_progress
from experiments.worker import AttemptWorker
from orgs.models import Organization
from prbench.queues import get_connection, worker_queues


def run_by_code(code: str, org: Organization | None = None) -> Run:
    """The run with that public id; with ``org``, only that organisation's (another
    organisation's run gets the very message an id nobody has gets)."""
    runs = Run.objects.select_related("experiment__dataset", "org")
    try:
        return (runs if org is None else runs.filter(org=org)).get(code=code)
    except (Run.DoesNotExist, ValidationError, ValueError):
        raise CommandError(f"no run with id {code!r}") from None


def wait_for_run(run: Run, poll_seconds: float = 0.5) -> Run:
    """Show a progress bar until the run finishes. With no worker listening, work the
    queue in this process so ``start_run --wait`` also works on a bare machine."""
    if not Worker.all(connection=get_connection()):
        print("No RQ worker is running: executing the run in this process.", file=sys.stderr)
        AttemptWorker(worker_queues(), connection=get_connection()).work(burst=True)
    with tqdm(total=run.total_attempts, unit="attempt", file=sys.stderr, dynamic_ncols=True) as bar:
        while True:
            run.refresh_from_db(fields=["status", "finished_at"])
            progress = run_progress(run)
            bar.update(progress.done - bar.n)
            bar.set_postfix(failed=progress.failed, running=progress.running, status=run.status)
            if run.is_finished:
                return run
            time.sleep(poll_seconds)
