"""Rebuild a run's summaries (leaderboards/models.py) from its attempts and verdicts, in SQL.

A handful of statements whatever the run's size: one aggregate over the attempts per arm,
one per (arm, task) written with INSERT ... SELECT, one over the verdicts. Python only loops
over the arms, profiles and scores they return.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from evaluation.models import Verdict
from experiments.models import Attempt, Run
from leaderboards.aggregation import MODEL_SCORED, evaluator_interval, evaluator_totals, totals_by
from leaderboards.models import ArmEvaluatorSummary, ArmSummary, TaskSummary

TASK_SUMMARY_COLUMNS = ("run_id", "arm_id", "task_id", "scored", "successes")


def refresh_run_summaries(run_id: int, on_locked: Callable[[], object] | None = None) -> bool:
    """Replace the run's summaries with ones aggregated from its attempts and verdicts now.
    Safe to run twice or at once: refreshes of one run take turns on its row. False when
    the run no longer exists. ``on_locked`` runs once the row is held (the refresh job
    unmarks the run there: whoever finds it unmarked then waits for this refresh, see
    ``wait_for_refresh``)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return False
        if on_locked is not None:
            on_locked()
        for model in (TaskSummary, ArmEvaluatorSummary, ArmSummary):
            model.objects.filter(run_id=run_id).delete()
        attempts = Attempt.objects.filter(run_id=run_id)
        _insert_task_summaries(attempts)
        _create_arm_summaries(run, attempts)
        _create_evaluator_summaries(run_id)
    return True


def wait_for_refresh(run_id: int) -> None:
    """Return once no refresh of the run is under way: one holds the run's row until its
    summaries are committed, so taking the row (and letting it go) waits for it."""
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run_id).exists()


def _insert_task_summaries(attempts: QuerySet[Attempt]) -> None:
    scored = (
        attempts.filter(MODEL_SCORED)
        .values("run_id", "arm_id", "task_id")
        .annotate(scored=Count("id"), successes=Count("id", filter=Q(resolved=True)))
        .values_list(*TASK_SUMMARY_COLUMNS)
        .order_by()
    )
    select, params = scored.query.sql_with_params()
    columns = ", ".join(connection.ops.quote_name(name) for name in TASK_SUMMARY_COLUMNS)
    table = connection.ops.quote_name(TaskSummary._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) {select}", params)


def _create_arm_summaries(run: Run, attempts: QuerySet[Attempt]) -> None:
    totals = {row.pop("arm_id"): row for row in totals_by(attempts, "arm_id")}
    scored_tasks = dict(TaskSummary.objects.filter(run=run).values_list("arm_id").annotate(Count("task_id")).order_by())
    now = timezone.now()
    summaries = []
    for arm_id in run.arms.values_list("pk", flat=True):
        arm_totals = totals.get(arm_id, {})
        causes = arm_totals.pop("infrastructure_causes", {})
        configuration_causes = arm_totals.pop("configuration_causes", {})
        summaries.append(
            ArmSummary(
                run=run,
                arm_id=arm_id,
                refreshed_at=now,
                scored_tasks=scored_tasks.get(arm_id, 0),
                infrastructure_causes={cause: count for cause, count in causes.items() if count},
                configuration_causes={cause: count for cause, count in configuration_causes.items() if count},
                **arm_totals,
            )
        )
    ArmSummary.objects.bulk_create(summaries)


def _create_evaluator_summaries(run_id: int) -> None:
    summaries = []
    for group in evaluator_totals(Verdict.objects.filter(attempt__run_id=run_id)):
        arm_id = group["attempt__arm_id"]
        # Stored, not drawn at each page view: two thousand resamples per arm and profile.
        interval = evaluator_interval(group)
        summaries.append(
            ArmEvaluatorSummary(
                run_id=run_id,
                arm_id=arm_id,
                profile_id=group["profile_id"],
                judged=group["judged"],
                errors=group["errors"],
                overall_sum=group["overall_sum"],
                overall_counts=group["scores"],
                ci_low=interval[0] if interval else None,
                ci_high=interval[1] if interval else None,
                cost_usd=group["cost"],
                unpriced=group["unpriced"],
            )
        )
    ArmEvaluatorSummary.objects.bulk_create(summaries)
