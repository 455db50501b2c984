"""Rebuild a run's summaries (leaderboards/models.py) from its attempts and verdicts, in SQL.

A handful of statements whatever the run's size: one aggregate over the attempts per arm,
one per (arm, task) written with INSERT ... SELECT, one over the verdicts. Python only loops
over the arms, profiles and scores they return.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from evaluation.models import Verdict
from experiments.models import Attempt, Run, RunArm
from leaderboards.aggregation import (
    MODEL_SCORED,
    attempts_fingerprint,
    evaluator_interval,
    evaluator_totals,
    totals_by,
)
from leaderboards.models import ArmEvaluatorSummary, ArmSummary, TaskSummary

TASK_SUMMARY_COLUMNS = ("run_id", "arm_id", "task_id", "scored", "successes")


def refresh_run_summaries(
    run_id: int, on_locked: Callable[[], object] | None = None, *, if_stale: bool = False
) -> bool:
    """Replace the run's summaries with ones aggregated from its attempts and verdicts now.
    Safe to run twice or at once: refreshes of one run take turns (take_refresh_turn). False
    when the run no longer exists. ``on_locked`` runs once the turn is taken (the refresh job
    unmarks the run there, so whatever records after it marks the run again). ``if_stale``:
    only if, once the turn is taken, its summaries no longer match its attempts (a reader that
    waited for another refresh finds it did the work)."""
    with transaction.atomic():
        if not take_refresh_turn(run_id):
            return False
        run = Run.objects.get(pk=run_id)
        if on_locked is not None:
            on_locked()
        if if_stale and not stale_arms(run_id):
            return True
        attempts = Attempt.objects.filter(run_id=run_id)
        # The arms' totals first, with the fingerprint of the attempts they read: the later
        # statements read the attempts again, each as committed when it starts, so one of
        # them may see a write the totals did not. Then the fingerprint stored is older than
        # what the summaries hold, and a reader rebuilds them: stale reads as stale, never fresh.
        totals = {row.pop("arm_id"): row for row in totals_by(attempts, "arm_id", also=attempts_fingerprint())}
        for model in (TaskSummary, ArmEvaluatorSummary, ArmSummary):
            model.objects.filter(run_id=run_id).delete()
        _insert_task_summaries(attempts)
        _create_arm_summaries(run, totals)
        _create_evaluator_summaries(run_id)
    return True


# The namespace of the refreshes' advisory locks (the first key of pg_advisory_xact_lock's pair).
REFRESH_LOCK_SPACE = 0x5052_4253


def take_refresh_turn(run_id: int) -> bool:
    """Make the rest of this transaction the run's one refresh; False when the run is gone.

    Refreshes of a run take turns on an advisory lock, not on the run's row: a refresh of a
    million attempts held that row for seconds, and pausing, resuming or cancelling the run,
    or its end, waited for it. FOR KEY SHARE only keeps the run from being deleted meanwhile,
    and lets every update of its row through. SQLite writes one transaction at a time anyway."""
    if connection.vendor != "postgresql":
        return Run.objects.filter(pk=run_id).exists()
    table = connection.ops.quote_name(Run._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [REFRESH_LOCK_SPACE, run_id])
        cursor.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR KEY SHARE", [run_id])
        return cursor.fetchone() is not None


def stale_arms(run_id: int) -> list[int]:
    """The run's arms whose summary does not describe their attempts as they are now: none
    yet, or attempts recorded, re-priced or judged since it was built. Exact on Postgres
    (the rows' versions, whatever order the writes committed in), however the out-of-date
    mark in Redis went; one pass over the run's attempts (an index scan), with no lock."""
    fingerprint = attempts_fingerprint()
    by_arm = Attempt.objects.filter(run_id=run_id).values("arm_id").annotate(**fingerprint).order_by()
    now = {arm_id: (seen, version) for arm_id, seen, version in by_arm.values_list("arm_id", *fingerprint)}
    stored = {
        arm_id: (seen, version)
        for arm_id, seen, version in ArmSummary.objects.filter(run_id=run_id).values_list(
            "arm_id", "attempts_seen", "attempts_version"
        )
    }
    arms = set(RunArm.objects.filter(run_id=run_id).values_list("pk", flat=True))
    return sorted(arm for arm in arms if stored.get(arm) != now.get(arm, (0, 0)))


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


def _create_arm_summaries(run: Run, totals: dict[int, dict[str, Any]]) -> None:
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
