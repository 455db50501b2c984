"""What a run tells its organisation's webhooks: ``run.completed``, ``run.failed`` and
``run.budget_exceeded``.

Each is queued by the code that makes the transition, in its transaction (see
``orgs.webhooks.queue_event``), so it is sent once per run however often that code runs. The
payload holds ids, counts, money and times that are cheap to read at that moment: never an
answer, a patch, the evaluator's rationale or anything secret.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.urls import reverse

from experiments.budgets import budget_status
from experiments.models import AttemptStatus, Run, RunStatus
from orgs.models import WebhookEvent
from orgs.webhooks import queue_event

FINISHED_EVENTS: dict[str, str] = {
    RunStatus.COMPLETED: WebhookEvent.RUN_COMPLETED,
    RunStatus.FAILED: WebhookEvent.RUN_FAILED,
}


def queue_run_finished(run_id: int, status: str) -> None:
    """Call in the transaction that set the run's final status (cancelling sends nothing)."""
    event = FINISHED_EVENTS.get(status)
    if event is not None:
        run = _run(run_id)
        queue_event(run.org_id, event, run.code, lambda: run_data(run))


def queue_budget_exceeded(run_id: int) -> None:
    """Call in the transaction that recorded an attempt a budget refused: the first such
    attempt of the run sends the event, later ones find it queued already."""
    run = _run(run_id)
    queue_event(run.org_id, WebhookEvent.RUN_BUDGET_EXCEEDED, run.code, lambda: run_data(run, with_budget=True))


def _run(run_id: int) -> Run:
    return Run.objects.select_related("org", "experiment").get(pk=run_id)


def run_data(run: Run, with_budget: bool = False) -> dict:
    """The payload's body: one aggregate over the run's attempts (and one for its budgets)."""
    totals = run.attempts.aggregate(
        total=Count("id"),
        **{status: Count("id", filter=Q(status=status)) for status in AttemptStatus.values},
        cost=Sum("cost_usd"),
    )
    data = {
        "org": run.org.slug,
        "run": {
            "id": str(run.code),
            "status": run.status,
            "url": settings.PRBENCH_BASE_URL + reverse("experiments:run", args=[run.code]),
            "experiment": {"id": str(run.experiment.code), "name": run.experiment.name},
            "attempts": {key: totals[key] for key in ("total", *AttemptStatus.values)},
            "cost_usd": _money(totals["cost"] or Decimal(0)),
            "created_at": _time(run.created_at),
            "started_at": _time(run.started_at),
            "finished_at": _time(run.finished_at),
        },
    }
    if with_budget:
        budget = budget_status(run)
        data["budget"] = {
            "run_limit_usd": _money(budget.run_limit),
            "run_spent_usd": _money(budget.run_spent),
            "experiment_limit_usd": _money(budget.experiment_limit),
            "experiment_spent_usd": _money(budget.experiment_spent),
            "attempts_not_made": budget.not_made,
        }
    return data


def _money(amount: Decimal | None) -> str | None:
    # A string, as JSON numbers would lose a decimal amount's exactness in most parsers.
    return None if amount is None else str(amount)


def _time(moment) -> str | None:
    return moment.isoformat() if moment else None
