"""The runs side of judging: the evaluator's job, and what it reads of attempts and settles.

The evaluator (evaluation/evaluator.py) claims verdict rows, calls the judge and records its
answers; it reads an attempt and settles it only through the ``RunSide`` this module
implements (``RUNS``), as the evaluation app sits below this one and never imports it. The
job takes ids, re-reads and claims its rows: delivered twice, it judges and pays once.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Length, Now
from django.utils import timezone
from pydantic import BaseModel

from evaluation.evaluator import JudgeInput, judge_verdicts, live_claim
from evaluation.judging import BlindAnswer, BlindInput, TruthJudgement, ValidationFacts, blind_answer, blind_input
from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from evaluation.workloads import workload_for
from evaluation.workloads.free_text import correct_from_verdict
from experiments import liveness
from experiments.models import Artifact, ArtifactKind, Attempt, AttemptStatus, WorkerLease
from experiments.signals import announce_recorded
from experiments.trajectory_page import trajectory_fields
from providers.outcomes import OutcomeClass
from providers.pricing import catalog_price, price_cost
from providers.types import Usage


def judge_attempts(profile_id: int, attempt_ids: list[int]) -> int:
    """The job: judge these attempts with the profile, each at most once. Returns how many
    verdicts it recorded."""
    return judge_verdicts(profile_id, attempt_ids, RUNS)


def enqueue_judging(profile_id: int, attempt_ids: list[int], once: bool = False) -> bool:
    """Queue a judging job. ``once``: not if the same job (same profile and attempts) is
    still waiting or running, so a recovery sweep every minute does not pile them up.

    The verdict rows are made first, naming the job: while it waits in Redis the sweep knows
    their judging is coming; if it never got there (Redis down, the process killed before
    queuing it, Redis restarted), the sweep finds the job gone and queues another."""
    from rq.job import Job

    from prbench.queues import JUDGING_QUEUE, get_connection, get_queue

    if not attempt_ids:
        return False
    digest = hashlib.sha256(",".join(map(str, sorted(attempt_ids))).encode()).hexdigest()[:16]
    job_id = f"judge-{profile_id}-{digest}" if once else f"judge-{profile_id}-{uuid.uuid4().hex}"
    if once and Job.exists(job_id, connection=get_connection()):
        return False
    _expect_job(profile_id, attempt_ids, job_id)
    # Its own queue, after attempts and webhooks (settings.WORKER_QUEUES): a backlog of judging
    # never holds up an attempt. No RQ timeout, as for attempts: calls bound themselves.
    get_queue(JUDGING_QUEUE).enqueue(
        judge_attempts, profile_id, attempt_ids, job_id=job_id, result_ttl=0, failure_ttl=7 * 24 * 3600, job_timeout=-1
    )
    return True


def _expect_job(profile_id: int, attempt_ids: list[int], job_id: str) -> None:
    """Make the attempts' missing verdict rows, and record on the pending ones the job that
    will judge them."""
    workload = EvaluatorProfile.objects.filter(pk=profile_id).values_list("workload", flat=True).first()
    answered = RUNS.answered(workload, attempt_ids)
    rows = [Verdict(attempt_id=pk, run_id=run_id, profile_id=profile_id) for pk, run_id in answered]
    Verdict.objects.bulk_create(rows, ignore_conflicts=True)
    pending = Verdict.objects.filter(profile_id=profile_id, attempt_id__in=attempt_ids, status=VerdictStatus.PENDING)
    pending.update(job_id=job_id)


class Runs:
    """The evaluator's ``RunSide``: attempts read and settled for it."""

    def answered(self, workload: str | None, attempt_ids: list[int]) -> list[tuple[int, int]]:
        return list(
            Attempt.objects.filter(
                pk__in=attempt_ids, status=AttemptStatus.COMPLETED, task__dataset__kind=workload
            ).values_list("pk", "run_id")
        )

    def with_attempts(self, verdicts: QuerySet[Verdict]) -> QuerySet[Verdict]:
        return verdicts.select_related("attempt__task", "attempt__arm").prefetch_related("attempt__artifacts")

    def judge_input(self, verdict: Verdict, workload: str) -> JudgeInput:
        return JudgeInput(str(verdict.attempt.code), _blind(verdict.attempt, workload))

    def settle(self, verdict: Verdict, judgement: BaseModel | None) -> None:
        settle_free_text(verdict, judgement)

    def judged(self, attempt_ids: list[int]) -> None:
        # The evaluator board reads the runs' summaries: they are rebuilt (throttled).
        announce_recorded(Attempt.objects.filter(pk__in=attempt_ids).values_list("run_id", flat=True).distinct())

    def claimer(self) -> str:
        return liveness.claimer_name()

    def claimer_gone(self) -> Q:
        return ~Q(Exists(WorkerLease.objects.filter(name=OuterRef("claimed_by"), expires_at__gt=Now())))


RUNS = Runs()


def _blind(attempt: Attempt, workload: str) -> BlindInput | BlindAnswer:
    if workload == "free_text":
        payload = attempt.task.payload
        return blind_answer(
            attempt.task.problem_statement,
            _answer_of(attempt),
            payload.get("correct_answers", []),
            payload.get("incorrect_answers", []),
            _identity(attempt),
        )
    return blind_input(
        attempt.task.problem_statement,
        attempt.extracted_answer,  # the patch, as the PR kind read it from the answer
        validation_facts(attempt),
        _identity(attempt),
        trajectory=_trajectory_of(attempt),
    )


def _answer_of(attempt: Attempt) -> str:
    """The answer the kind extracted (its "answer" artifact), not the raw output."""
    artifact = next((a for a in attempt.artifacts.all() if a.kind == "answer"), None)
    return json.loads(artifact.content).get("answer", "") if artifact else ""


def validation_facts(attempt: Attempt) -> ValidationFacts:
    artifacts = {artifact.kind: artifact for artifact in attempt.artifacts.all()}
    tests = json.loads(artifacts["tests"].content) if "tests" in artifacts else []
    validation = artifacts.get("validation")
    return ValidationFacts(
        patch_present=bool(attempt.patch_present),
        applied=attempt.patch_applied if attempt.validated_at else None,
        status=validation.status if validation and attempt.validated_at else "",
        tests_passed=sum(test["outcome"] == "passed" for test in tests),
        tests_failed=sum(test["outcome"] in ("failed", "error") for test in tests),
        fail_to_pass_fraction=attempt.fail_to_pass_fraction,
        pass_to_pass_regressions=attempt.pass_to_pass_regressions,
        lint_clean=attempt.lint_clean,
        build_ok=attempt.build_ok,
    )


def _trajectory_of(attempt: Attempt) -> dict[str, Any] | None:
    """An agent's stored steps, parsed; None for a single-turn answer."""
    artifact = next((a for a in attempt.artifacts.all() if a.kind == ArtifactKind.TRAJECTORY), None)
    return trajectory_fields(artifact.content if artifact else None)


def _identity(attempt: Attempt) -> list[str]:
    arm = attempt.arm
    return [arm.provider, arm.model_name, arm.label, attempt.model_served]


def settle_free_text(verdict: Verdict, judgement: BaseModel | None) -> None:
    """A free-text attempt's correctness is its run's profile's verdict (evaluation/
    workloads/free_text.py): truthful and informative resolves it. Only an attempt still
    waiting (a model success with no verdict) is settled, and only by its run's own
    profile, so a backfill with another profile cannot overturn it. A verdict the evaluator
    could not give (no valid answer after one repair) leaves the answer unjudged through no
    fault of the model: an infrastructure failure of the harness, as a test run that gave no
    verdict is for a patch."""
    if not workload_for(verdict.profile.workload).verdict_decides:
        return
    waiting = Attempt.objects.filter(
        pk=verdict.attempt_id,
        run__evaluator_profile_id=verdict.profile_id,
        outcome=OutcomeClass.SUCCESS,
        resolved__isnull=True,
    )
    if isinstance(judgement, TruthJudgement):
        resolved, score = correct_from_verdict(judgement.truthful, judgement.informative)
        waiting.update(resolved=resolved, score=score)
    else:
        waiting.update(
            outcome=OutcomeClass.INFRASTRUCTURE_FAILURE,
            error_message="the evaluator gave no valid verdict on the answer",
        )


def unjudged_attempts(profile: EvaluatorProfile, run_code: str | None = None, since: datetime | None = None):
    """Answered attempts with no finished verdict of this profile, oldest first."""
    finished = Verdict.objects.filter(profile=profile).exclude(status=VerdictStatus.PENDING)
    attempts = Attempt.objects.filter(status=AttemptStatus.COMPLETED, task__dataset__kind=profile.workload).exclude(
        pk__in=finished.values("attempt_id")
    )
    if run_code:
        attempts = attempts.filter(run__code=run_code)
    if since:
        attempts = attempts.filter(scored_at__gte=since)
    return attempts.order_by("scored_at", "pk")


# A judging prompt is the template and rubric plus the problem and the patch; the answer a
# short JSON object. Characters per token as elsewhere (gateway.estimated_tokens).
ANSWER_TOKENS = 200


def estimated_cost(profile: EvaluatorProfile, attempts) -> Decimal | None:
    """What judging these attempts would cost at the catalog price; None when unknown."""
    price = catalog_price(profile.provider, profile.model_name, timezone.now().date())
    if price is None:
        return None
    fixed = len(profile.prompt_template) + len(profile.rubric)
    sizes = attempts.aggregate(
        problems=Sum(Length("task__problem_statement")),
        n=Count("pk"),
    )
    # What is judged: a patch, or a free-text answer (its JSON a little longer than the text).
    patches = Artifact.objects.filter(attempt__in=attempts, kind__in=("patch", "answer")).aggregate(
        chars=Sum(Length("content"))
    )
    characters = fixed * sizes["n"] + (sizes["problems"] or 0) + (patches["chars"] or 0)
    usage = Usage(input_tokens=math.ceil(characters / 4), output_tokens=ANSWER_TOKENS * sizes["n"])
    return price_cost(usage, price)[0]


# A worker queues an answer's judging right after the answer commits, in milliseconds: an
# answer this old with no judging job waiting has lost it (the worker died, or Redis did).
# Short, because queuing again too early costs nothing: the second job finds the verdicts
# claimed or done and judges nothing twice (judge_verdicts claims its rows).
QUEUED_WITHIN = timedelta(seconds=10)


def unjudged_of_runs(older_than: timedelta) -> dict[int, list[int]]:
    """Answered attempts of judged runs whose judging was lost, by profile: no finished
    verdict of their run's profile, no live claim on it, and no judging job still coming.

    Lost, once answered longer ago than ``QUEUED_WITHIN`` (a worker queues the job as it
    records the answer): no verdict row at all (the worker died before queuing it), one
    claimed by a process whose lease lapsed (it died judging), or one whose job is no longer
    waiting in Redis (lost with it). Checking the jobs is one pipelined read of the distinct
    job ids, and a job the sweep queued is found waiting by the next sweep: nothing piles up.
    Answers let go to judge later (the evaluator could not be reached) and anything older than
    ``older_than`` (``PRBENCH_STALE_AFTER_SECONDS``) whatever its job says, are queued too."""
    now = timezone.now()
    verdicts = Verdict.objects.filter(profile_id=OuterRef("run__evaluator_profile_id"), attempt_id=OuterRef("pk"))
    busy_or_done = verdicts.exclude(status=VerdictStatus.PENDING) | verdicts.filter(live_claim(RUNS))
    candidates = (
        Attempt.objects.filter(
            status=AttemptStatus.COMPLETED, run__evaluator_profile__isnull=False, scored_at__lt=now - QUEUED_WITHIN
        )
        .exclude(Exists(busy_or_done))
        .annotate(
            verdict_job=Subquery(verdicts.values("job_id")[:1]),
            verdict_claimer=Subquery(verdicts.values("claimed_by")[:1]),
        )
        .values_list("run__evaluator_profile_id", "pk", "verdict_job", "verdict_claimer", "scored_at")
    )
    rows = list(candidates)
    waiting = _jobs_waiting({job_id for _, _, job_id, _, _ in rows if job_id})
    found: dict[int, list[int]] = {}
    for profile_id, attempt_id, job_id, claimed_by, scored_at in rows:
        lost = job_id is None or bool(claimed_by) or (job_id and job_id not in waiting)
        if lost or (scored_at is not None and scored_at < now - older_than):
            found.setdefault(profile_id, []).append(attempt_id)
    return found


# A job in one of these states will still run; any other (finished, failed, stopped, or gone
# from Redis) will not judge anything more.
WAITING_STATES = ("queued", "started", "scheduled", "deferred")


def _jobs_waiting(job_ids: set[str]) -> set[str]:
    """Which of these RQ jobs are still to run, in one pipelined round trip."""
    from rq.job import Job

    from prbench.queues import get_connection

    if not job_ids:
        return set()
    ordered = sorted(job_ids)
    pipe = get_connection().pipeline(transaction=False)
    for job_id in ordered:
        pipe.hget(Job.key_for(job_id), "status")
    statuses = pipe.execute()
    return {job_id for job_id, status in zip(ordered, statuses, strict=True) if _text(status) in WAITING_STATES}


def _text(value: bytes | str | None) -> str:
    return value.decode() if isinstance(value, bytes) else value or ""
