"""An arm that is misconfigured stops being called.

When an arm's first calls in a run all fail with the same configuration failure (the provider
refused our request or the arm's settings: providers/outcomes.py), every further call would
fail the same way. After ``STOP_AFTER`` of them, with no answer, the arm is marked on its
RunArm row, once, by a conditional UPDATE in the transaction that records the last of them:
two workers cannot both decide, and a crashed worker leaves the decision behind. Its queued
attempts then end ``arm_misconfigured`` without a call (here, and at claim time for any that
come back to the queue later: experiments/pipeline.py), a configuration failure, never scored
and never paid; the run's other arms go on.

Resuming the run (``do_retry_misconfigured_arms``) takes the arm's settings again from the
experiment's arm of the same label, clears the mark and queues those attempts again; the
calls already made stay as they were recorded, so nothing is paid twice.
"""

from __future__ import annotations

import functools

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, QuerySet, Value
from django.utils import timezone

from experiments.models import Attempt, AttemptStatus, ModelArm, Run, RunArm
from experiments.signals import announce_chunk_recorded
from prbench import metrics
from providers.errors import ErrorCategory
from providers.outcomes import CONFIGURATION_FAILURES, OutcomeClass

# How many calls in a row, all failing the same configuration way with no answer among them,
# stop an arm: enough that one odd refusal does not, few enough that little is spent waiting.
STOP_AFTER = 5
# The failures a call to the provider ended in (not the ones this module records itself).
CALLED_CONFIGURATION_FAILURES = CONFIGURATION_FAILURES - {ErrorCategory.ARM_MISCONFIGURED}
NOT_CALLED_PREFIX = f"not called: this arm's first {STOP_AFTER} calls all failed with "
CHANGE_SETTINGS = "; change the arm's settings, then resume the run"


def not_called_message(category: str, message: str) -> str:
    """What each attempt the arm no longer calls says, and the run page after the arm's label."""
    return f"{NOT_CALLED_PREFIX}{category}: {message}{CHANGE_SETTINGS}"


def stop_misconfigured_arms(arm_ids: set[int]) -> None:
    """In the transaction that recorded configuration failures of these arms: stop each arm
    whose failures now reach ``STOP_AFTER`` of one kind with no answer, and end its queued
    attempts without a call."""
    for arm_id in arm_ids:
        cause = _repeated_failure(arm_id)
        if cause and _decide(arm_id, *cause):
            _end_queued_attempts(arm_id, not_called_message(*cause))


def _repeated_failure(arm_id: int) -> tuple[str, str] | None:
    """The (category, message) the arm's calls failed with ``STOP_AFTER`` times or more."""
    repeated = (
        Attempt.objects.filter(
            arm_id=arm_id, status=AttemptStatus.FAILED, error_category__in=CALLED_CONFIGURATION_FAILURES
        )
        .values_list("error_category", "error_message")
        .annotate(times=Count("pk"))
        .filter(times__gte=STOP_AFTER)
        .order_by("-times")
        .first()
    )
    return (repeated[0], repeated[1]) if repeated else None


def _decide(arm_id: int, category: str, message: str) -> bool:
    """Mark the arm, unless it is marked already or one of its calls was answered: the
    conditional UPDATE is the decision, so it is made once whatever runs at the same time."""
    answered = Attempt.objects.filter(arm_id=OuterRef("pk"), status=AttemptStatus.COMPLETED)
    return bool(
        RunArm.objects.filter(pk=arm_id, misconfigured_at__isnull=True)
        .exclude(Exists(answered))
        .update(misconfigured_at=timezone.now(), misconfigured_error=category, misconfigured_message=message)
    )


def _end_queued_attempts(arm_id: int, note: str) -> None:
    # Locked: a claim waiting on them finds them no longer queued, so these are the ones ended.
    queued = Attempt.objects.filter(arm_id=arm_id, status=AttemptStatus.QUEUED).select_for_update()
    ended = list(queued.values_list("pk", flat=True))
    provider = RunArm.objects.values_list("provider", flat=True).get(pk=arm_id)
    count = Attempt.objects.filter(pk__in=ended).update(**not_called(Value(note)))
    # Failed without a call, in the record's transaction: into the boards' summaries with it.
    announce_chunk_recorded(ended)
    row = (AttemptStatus.FAILED, OutcomeClass.CONFIGURATION_FAILURE, ErrorCategory.ARM_MISCONFIGURED, provider)
    transaction.on_commit(functools.partial(metrics.count_attempts_finished, [row] * count), robust=True)


def not_called(note) -> dict:
    """The columns of an attempt ended without a call because its arm is misconfigured."""
    return {
        "status": AttemptStatus.FAILED,
        "outcome": OutcomeClass.CONFIGURATION_FAILURE,
        "error_category": ErrorCategory.ARM_MISCONFIGURED,
        "error_message": note,
        "scored_at": timezone.now(),
    }


def misconfigured_arms(run: Run) -> QuerySet[RunArm]:
    return run.arms.filter(misconfigured_at__isnull=False)


def misconfigured_of(run: Run) -> list[RunArm]:
    """The same arms from ``run.arms.all()``: the run page prefetches the run's arms once for
    everything it shows of them."""
    return [arm for arm in run.arms.all() if arm.misconfigured_at is not None]


def do_retry_misconfigured_arms(run: Run) -> list[int]:
    """In the resume's transaction: each stopped arm takes the settings of the experiment's arm
    of the same label as they are now (a RunArm is the run's snapshot; the person was told to
    change them), is no longer marked, and its not-called attempts are queued again. Returns
    their ids. The failed calls stay recorded as they were: nothing is called or paid twice."""
    stopped = list(misconfigured_arms(run).select_for_update())
    current = {arm.label: arm for arm in ModelArm.objects.filter(experiment_id=run.experiment_id)}
    for arm in stopped:
        _take_settings(arm, current.get(arm.label))
    retried = Attempt.objects.filter(
        arm__in=stopped, status=AttemptStatus.FAILED, error_category=ErrorCategory.ARM_MISCONFIGURED
    )
    ids = list(retried.values_list("pk", flat=True))
    retried.update(
        status=AttemptStatus.QUEUED,
        outcome="",
        error_category="",
        error_message="",
        scored_at=None,
        claim_token=None,
        claimed_by="",
        started_at=None,
    )
    return ids


def _take_settings(arm: RunArm, current: ModelArm | None) -> None:
    """The experiment's arm of the same label, if it still has one; else the arm as it was
    (the org's credential may have been what changed)."""
    if current is not None:
        arm.provider, arm.model_name = current.provider, current.model_name
        arm.credential_name, arm.config = current.credential_name, current.config
    arm.misconfigured_at, arm.misconfigured_error, arm.misconfigured_message = None, "", ""
    arm.save(
        update_fields=[
            "provider",
            "model_name",
            "credential_name",
            "config",
            "misconfigured_at",
            "misconfigured_error",
            "misconfigured_message",
        ]
    )
