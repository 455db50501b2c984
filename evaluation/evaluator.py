"""Judging attempts with an evaluator profile: claim, build the blind prompt, call the
gateway under the platform's own credentials, read the answer (one repair), record.

A verdict row is the unit of work, as an attempt is for runs: a job inserts the missing
rows, claims them with one conditional UPDATE and a token, and records only where its
token still holds. A job delivered twice, or a backfill run again, judges and pays once.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q, Sum
from django.db.models.functions import Length
from django.utils import timezone
from pydantic import BaseModel
from structlog.contextvars import bound_contextvars

from evaluation.judging import (
    FORMS,
    BlindAnswer,
    BlindInput,
    InvalidJudgement,
    TruthJudgement,
    ValidationFacts,
    blind_answer,
    blind_input,
    parse_judgement,
    render,
)
from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus, text_version
from evaluation.workloads import workload_for
from evaluation.workloads.free_text import correct_from_verdict
from orgs.models import Organization
from prbench import metrics
from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.outcomes import INFRASTRUCTURE_FAILURES, OutcomeClass
from providers.pricing import catalog_price, price_cost
from providers.types import ArmSpec, Completion, CompletionRequest, Message, Usage

if TYPE_CHECKING:  # experiments imports this module at run time, not the other way round
    from experiments.models import Attempt

logger = logging.getLogger(__name__)

CLAIM_STALE_AFTER = timedelta(minutes=10)  # a claim older than this was a crashed job's


def active_profile(workload: str = "pr_patch") -> EvaluatorProfile | None:
    """The profile new runs of this kind are judged with: the newest of the kind whose
    active window holds now."""
    now = timezone.now()
    return (
        EvaluatorProfile.objects.filter(workload=workload, active_from__lte=now)
        .filter(Q(active_until__isnull=True) | Q(active_until__gt=now))
        .order_by("-active_from", "-version")
        .first()
    )


def platform_org() -> Organization:
    """The platform's own organisation: its credentials pay for evaluator calls, never a
    customer's. No customer is a member of it."""
    org, _ = Organization.objects.get_or_create(
        slug=settings.PRBENCH_PLATFORM_ORG, defaults={"name": "PRBench platform (evaluator)"}
    )
    return org


def claim_verdicts(profile_id: int, attempt_ids: list[int]) -> tuple[uuid.UUID, list[Verdict]]:
    """Create the missing verdict rows and claim those not judged yet (nor held by a live
    job) in one UPDATE. Only completed attempts (ones with an answer) of the profile's kind
    are judged: a free-text answer is never reviewed as a patch, nor a patch fact-checked."""
    from experiments.models import Attempt, AttemptStatus  # the experiments app depends on this one

    workload = EvaluatorProfile.objects.filter(pk=profile_id).values_list("workload", flat=True).first()
    answered = Attempt.objects.filter(
        pk__in=attempt_ids, status=AttemptStatus.COMPLETED, task__dataset__kind=workload
    ).values_list("pk", "run_id")
    Verdict.objects.bulk_create(
        [Verdict(attempt_id=pk, run_id=run_id, profile_id=profile_id) for pk, run_id in answered],
        ignore_conflicts=True,
    )
    token, now = uuid.uuid4(), timezone.now()
    Verdict.objects.filter(profile_id=profile_id, attempt_id__in=attempt_ids, status=VerdictStatus.PENDING).filter(
        Q(claim_token__isnull=True) | Q(claimed_at__lt=now - CLAIM_STALE_AFTER)
    ).update(claim_token=token, claimed_at=now)
    claimed = list(
        Verdict.objects.filter(claim_token=token)
        .select_related("attempt__task", "attempt__arm", "profile")
        .prefetch_related("attempt__artifacts")
    )
    return token, claimed


@dataclass(frozen=True)
class Answer:
    """What became of one judging: a judgement, or why there is none."""

    prompt: str
    raw: list[str]
    judgement: BaseModel | None  # the profile's form's model (judging.FORMS)
    error: str
    completions: list[Completion]
    # The evaluator could not be reached (rate limit, outage, no platform credential yet):
    # nothing is recorded, the claim is let go, and a later sweep judges it.
    retry_later: bool = False


def judge(verdict: Verdict, profile: EvaluatorProfile, prepared: gateway.PreparedArm) -> Answer:
    form = FORMS[profile.workload]
    prompt = render(profile.prompt_template, profile.rubric, _blind(verdict.attempt, profile.workload))
    messages = [Message("user", prompt)]
    raw: list[str] = []
    completions: list[Completion] = []
    for repair in (False, True):
        request = CompletionRequest(
            messages=tuple(messages),
            system=form.system,
            max_output_tokens=profile.max_output_tokens,
            temperature=profile.temperature,
            # From the blind input alone: the same input gets the same seed (and the mock the
            # same noise) in every run, and nothing of the arm's identity reaches the provider.
            seed_key=f"evaluator:{profile.seed}:{text_version(prompt)}:{'repair' if repair else 'first'}",
            response_schema=form.schema,
            response_schema_name=form.schema_name,
        )
        try:
            completion = gateway.call(prepared, request)
        except ProviderError as exc:
            return Answer(prompt, raw, None, str(exc), completions, retry_later=_worth_retrying(exc, completions))
        completions.append(completion)
        raw.append(completion.text)
        try:
            return Answer(prompt, raw, parse_judgement(completion.text, form.model), "", completions)
        except InvalidJudgement as exc:
            error = str(exc)
        messages += [
            Message("assistant", completion.text),
            Message("user", form.repair_instruction.format(error=error)),
        ]
    return Answer(prompt, raw, None, f"invalid answer after one repair: {error}", completions)


# Errors of the platform's set-up or of the moment, not of the answer: judged again later.
# Every infrastructure failure (providers/outcomes.py) but those a later try would meet
# unchanged, which end as an evaluator error instead of being retried by every sweep.
SET_UP_ERRORS = INFRASTRUCTURE_FAILURES - {
    ErrorCategory.MODEL_NOT_FOUND,
    ErrorCategory.UNKNOWN,
    ErrorCategory.PLATFORM_ERROR,
}


def _worth_retrying(error: ProviderError, completions: list[Completion]) -> bool:
    """Only while nothing was paid for this judgement: a repair call that fails after a
    paid first answer ends as an evaluator error, with that answer kept."""
    return not completions and (error.retryable or error.category in SET_UP_ERRORS)


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
        attempt.task.problem_statement, _patch_of(attempt), validation_facts(attempt), _identity(attempt)
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


def _patch_of(attempt: Attempt) -> str:
    patch = next((a for a in attempt.artifacts.all() if a.kind == "patch"), None)
    return patch.content if patch else ""


def _identity(attempt: Attempt) -> list[str]:
    arm = attempt.arm
    return [arm.provider, arm.model_name, arm.label, attempt.model_served]


@transaction.atomic
def record_answer(verdict: Verdict, token: uuid.UUID, answer: Answer) -> bool:
    """Write the answer where the token still holds; False when another job took over."""
    mine = Verdict.objects.filter(pk=verdict.pk, claim_token=token)
    if answer.retry_later:
        mine.update(claim_token=None, claimed_at=None, error=answer.error)
        return False
    judgement = answer.judgement
    status = VerdictStatus.JUDGED if judgement else VerdictStatus.EVALUATOR_ERROR
    costs = [c.cost_usd for c in answer.completions]
    values = {
        "status": status,
        "prompt": answer.prompt,
        "raw_responses": answer.raw,
        "error": answer.error,
        "input_tokens": sum(c.usage.input_tokens for c in answer.completions),
        "output_tokens": sum(c.usage.output_tokens for c in answer.completions),
        "cost_usd": None if not costs or None in costs else sum(c for c in costs if c is not None),
        "claim_token": None,
    }
    if judgement:
        values |= judgement.model_dump()
    if not mine.update(**values):
        return False
    settle_free_text(verdict, judgement)
    profile = verdict.profile
    count = functools.partial(metrics.count_judgement, profile.workload, status, profile.provider)
    transaction.on_commit(count, robust=True)
    return True


def settle_free_text(verdict: Verdict, judgement: BaseModel | None) -> None:
    """A free-text attempt's correctness is its run's profile's verdict (evaluation/
    workloads/free_text.py): truthful and informative resolves it. Only an attempt still
    waiting (a model success with no verdict) is settled, and only by its run's own
    profile, so a backfill with another profile cannot overturn it. A verdict the evaluator
    could not give (no valid answer after one repair) leaves the answer unjudged through no
    fault of the model: an infrastructure failure of the harness, as a test run that gave no
    verdict is for a patch."""
    from experiments.models import Attempt

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


def judge_attempts(profile_id: int, attempt_ids: list[int]) -> int:
    """The job: judge these attempts with the profile, each at most once. Each verdict is
    written as soon as it is judged, and its claim renewed just before, so a slow batch
    neither loses paid answers nor has its later rows taken over. Returns how many
    verdicts it recorded."""
    profile = EvaluatorProfile.objects.filter(pk=profile_id).first()
    if profile is None:
        return 0
    token, claimed = claim_verdicts(profile.pk, attempt_ids)
    if not claimed:
        return 0
    arm = ArmSpec(profile.provider, profile.model_name, profile.provider_config, key=f"evaluator:{profile.pk}")
    try:
        prepared = gateway.prepare(platform_org().pk, arm)
    except ProviderError as exc:  # not allowed, no credential: let the claims go, judge later
        Verdict.objects.filter(claim_token=token).update(claim_token=None, claimed_at=None, error=str(exc))
        logger.warning("evaluator %s cannot be called: %s", profile, exc)
        return 0
    recorded = 0
    for verdict in claimed:
        if not Verdict.objects.filter(pk=verdict.pk, claim_token=token).update(claimed_at=timezone.now()):
            continue  # taken over after looking abandoned
        with bound_contextvars(attempt=str(verdict.attempt.code)):
            recorded += record_answer(verdict, token, judge(verdict, profile, prepared))
    if recorded:
        _refresh_boards_of(attempt_ids)
    return recorded


def _refresh_boards_of(attempt_ids: list[int]) -> None:
    """The evaluator board reads the runs' summaries: ask for them to be rebuilt (throttled)."""
    from experiments.models import Attempt
    from leaderboards.jobs import request_summary_refresh

    request_summary_refresh(Attempt.objects.filter(pk__in=attempt_ids).values_list("run_id", flat=True).distinct())


def enqueue_judging(profile_id: int, attempt_ids: list[int], once: bool = False) -> bool:
    """Queue a judging job. ``once``: not if the same job (same profile and attempts) is
    still waiting or running, so a recovery sweep every minute does not pile them up."""
    from rq.job import Job

    from prbench.queues import get_connection, get_queue

    if not attempt_ids:
        return False
    digest = hashlib.sha256(",".join(map(str, sorted(attempt_ids))).encode()).hexdigest()[:16]
    job_id = f"judge-{profile_id}-{digest}" if once else f"judge-{profile_id}-{uuid.uuid4().hex}"
    if once and Job.exists(job_id, connection=get_connection()):
        return False
    # No RQ timeout, as for attempts: calls bound themselves (timeouts, retry deadline).
    get_queue().enqueue(
        judge_attempts, profile_id, attempt_ids, job_id=job_id, result_ttl=0, failure_ttl=7 * 24 * 3600, job_timeout=-1
    )
    return True


def profile_by_reference(reference: str) -> EvaluatorProfile:
    """``NAME`` (its newest version) or ``NAME:VERSION``; ValueError naming what is wrong."""
    name, _, version = reference.partition(":")
    profiles = EvaluatorProfile.objects.filter(name=name)
    if version:
        if not version.isdigit():
            raise ValueError(f"--profile {reference}: the version must be a number")
        profiles = profiles.filter(version=int(version))
    profile = profiles.order_by("-version").first()
    if profile is None:
        raise ValueError(f"--profile {reference}: no evaluator profile of that name and version")
    return profile


def unjudged_attempts(profile: EvaluatorProfile, run_code: str | None = None, since: datetime | None = None):
    """Answered attempts with no finished verdict of this profile, oldest first."""
    from experiments.models import Attempt, AttemptStatus

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
    from experiments.models import Artifact

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


def unjudged_of_runs(older_than: timedelta) -> dict[int, list[int]]:
    """Answered attempts of judged runs with no finished verdict of their run's profile and
    no live claim, answered longer ago than ``older_than`` (younger ones still have their
    job coming): what a lost job or a restarted Redis left unjudged. By profile."""
    from experiments.models import Attempt, AttemptStatus

    now = timezone.now()
    busy_or_done = Verdict.objects.filter(profile_id=OuterRef("run__evaluator_profile_id"), attempt_id=OuterRef("pk"))
    busy_or_done = busy_or_done.exclude(status=VerdictStatus.PENDING) | busy_or_done.filter(
        claimed_at__gte=now - CLAIM_STALE_AFTER
    )
    rows = (
        Attempt.objects.filter(
            status=AttemptStatus.COMPLETED, run__evaluator_profile__isnull=False, scored_at__lt=now - older_than
        )
        .exclude(Exists(busy_or_done))
        .values_list("run__evaluator_profile_id", "pk")
    )
    found: dict[int, list[int]] = {}
    for profile_id, attempt_id in rows:
        found.setdefault(profile_id, []).append(attempt_id)
    return found
