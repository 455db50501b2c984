"""Who may see and change an experiment, a run or an attempt: on top of ``orgs.access``."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest
from structlog.contextvars import bind_contextvars

from experiments.models import Attempt, Experiment, Run, RunExport
from orgs.access import access_current_org, check_scoped, get_or_404


def access_experiment(request: HttpRequest, code: Any, *, write: bool = False) -> Experiment:
    experiment = get_or_404(Experiment.objects.select_related("org", "dataset"), code=code)
    check_scoped(request, experiment, experiment.org, write)
    return experiment


def access_run(request: HttpRequest, code: Any, *, write: bool = False) -> Run:
    # Its counters in the same query: the run page, its poll and the API show its progress.
    run = get_or_404(Run.objects.select_related("org", "experiment__dataset", "counters"), code=code)
    check_scoped(request, run, run.org, write)
    bind_contextvars(run=str(run.code))
    return run


def access_attempt(request: HttpRequest, code: Any) -> Attempt:
    attempt = get_or_404(Attempt.objects.select_related("run__org", "run__experiment", "task", "arm"), code=code)
    check_scoped(request, attempt, attempt.run.org, write=False)
    bind_contextvars(run=str(attempt.run.code), attempt=str(attempt.code))
    return attempt


def access_run_export(request: HttpRequest, code: Any) -> RunExport:
    """A background export of a run (experiments/run_exports.py): whoever may read the run."""
    export = get_or_404(RunExport.objects.select_related("run__org", "run__experiment"), code=code)
    check_scoped(request, export, export.run.org, write=False)
    bind_contextvars(run=str(export.run.code))
    return export


def access_runs(request: HttpRequest, codes: Iterable[str]) -> dict[str, Run]:
    """The runs of the user's current organisation these public ids name, keyed by the id as
    given. A malformed id, an unknown one and another organisation's run are all simply
    absent, so a caller can only ever say "not found" about them."""
    membership = access_current_org(request)
    wanted = {}
    for code in codes:
        try:
            wanted[uuid.UUID(str(code))] = code
        except ValueError:
            continue
    runs = Run.objects.filter(org=membership.org, code__in=wanted).select_related("experiment__dataset")
    return {wanted[run.code]: run for run in runs}
