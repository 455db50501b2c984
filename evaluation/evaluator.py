"""Judging attempts with an evaluator profile: claim, build the blind prompt, call the
gateway under the platform's own credentials, read the answer (one repair), record.

A verdict row is the unit of work, as an attempt is for runs: a job inserts the missing
rows, claims them with one conditional UPDATE and a token, and records only where its
token still holds. A job delivered twice, or a backfill run again, judges and pays once.

The attempts belong to the runs side (experiments), which sits above this app: the job that
judges them lives there (experiments/judging.py) and hands this module a ``RunSide``, through
which the judge reads what it may see of an attempt and records what a verdict settles. This
module never imports experiments.
"""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from pydantic import BaseModel
from structlog.contextvars import bound_contextvars

from evaluation.judging import FORMS, BlindAnswer, BlindInput, InvalidJudgement, parse_judgement, render
from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus, text_version
from orgs.models import Organization
from prbench import metrics
from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.outcomes import INFRASTRUCTURE_FAILURES
from providers.types import ArmSpec, Completion, CompletionRequest, Message

logger = logging.getLogger(__name__)

# A claim made before leases (no claimer recorded) older than this was a crashed job's.
CLAIM_STALE_AFTER = timedelta(minutes=10)
# A claim let go to judge later (the evaluator could not be reached): nobody's, and no job is
# known to be coming for it, so the sweep's slow clock (PRBENCH_STALE_AFTER_SECONDS) decides
# when it is tried again rather than every sweep paying a call to an evaluator that is down.
LET_GO = {"claim_token": None, "claimed_at": None, "claimed_by": "", "job_id": ""}


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


@dataclass(frozen=True)
class JudgeInput:
    """What the judge is given of one attempt: the blind input of its kind, and the public
    id its log lines name it by."""

    attempt_code: str
    blind: BlindInput | BlindAnswer


class RunSide(Protocol):
    """The side that owns the attempts (experiments/judging.py implements it): the judge
    reads attempts and settles them only through this."""

    def answered(self, workload: str | None, attempt_ids: list[int]) -> list[tuple[int, int]]:
        """(attempt id, run id) of those of the attempts that were answered (completed) and
        are of this kind: the only ones judged."""
        ...

    def with_attempts(self, verdicts: QuerySet[Verdict]) -> QuerySet[Verdict]:
        """The verdicts with what ``judge_input`` reads of their attempts fetched along."""
        ...

    def judge_input(self, verdict: Verdict, workload: str) -> JudgeInput:
        """What the judge may see of the verdict's attempt, and nothing of who answered."""
        ...

    def settle(self, verdict: Verdict, judgement: BaseModel | None) -> None:
        """What the recorded verdict decides of its attempt, in the recording transaction."""
        ...

    def judged(self, attempt_ids: list[int]) -> None:
        """Verdicts on some of these attempts were recorded (and committed)."""
        ...

    def claimer(self) -> str:
        """This process's lease name, recorded with its claims (raises when the lease is not
        known to hold: a claim under a lapsed lease could be taken over and paid twice)."""
        ...

    def claimer_gone(self) -> Q:
        """Verdicts (filtered on) whose ``claimed_by`` names a process with no live lease."""
        ...


def claimable(runs: RunSide) -> Q:
    """Pending verdicts nobody alive holds: never claimed or let go, claimed by a process whose
    lease lapsed, or (claimed before leases) claimed longer ago than ``CLAIM_STALE_AFTER``."""
    before_leases = Q(claimed_by="", claimed_at__lt=timezone.now() - CLAIM_STALE_AFTER)
    return Q(claim_token__isnull=True) | before_leases | (~Q(claimed_by="") & runs.claimer_gone())


def live_claim(runs: RunSide) -> Q:
    """Pending verdicts a live process holds (the complement of ``claimable``)."""
    return Q(claim_token__isnull=False) & ~claimable(runs)


def claim_verdicts(profile_id: int, attempt_ids: list[int], runs: RunSide) -> tuple[uuid.UUID, list[Verdict]]:
    """Create the missing verdict rows and claim those not judged yet (nor held by a live
    process: ``claimable``) in one UPDATE, under this process's lease. Only completed
    attempts (ones with an answer) of the profile's kind are judged: a free-text answer is
    never reviewed as a patch, nor a patch fact-checked."""
    workload = EvaluatorProfile.objects.filter(pk=profile_id).values_list("workload", flat=True).first()
    Verdict.objects.bulk_create(
        [
            Verdict(attempt_id=pk, run_id=run_id, profile_id=profile_id)
            for pk, run_id in runs.answered(workload, attempt_ids)
        ],
        ignore_conflicts=True,
    )
    token, now, claimer = uuid.uuid4(), timezone.now(), runs.claimer()
    Verdict.objects.filter(profile_id=profile_id, attempt_id__in=attempt_ids, status=VerdictStatus.PENDING).filter(
        claimable(runs)
    ).update(claim_token=token, claimed_at=now, claimed_by=claimer)
    claimed = list(runs.with_attempts(Verdict.objects.filter(claim_token=token).select_related("profile")))
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


def judge(blind: BlindInput | BlindAnswer, profile: EvaluatorProfile, prepared: gateway.PreparedArm) -> Answer:
    form = FORMS[profile.workload]
    prompt = render(profile.prompt_template, profile.rubric, blind)
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


@transaction.atomic
def record_answer(verdict: Verdict, token: uuid.UUID, answer: Answer, runs: RunSide) -> bool:
    """Write the answer where the token still holds; False when another job took over."""
    mine = Verdict.objects.filter(pk=verdict.pk, claim_token=token)
    if answer.retry_later:
        mine.update(**LET_GO, error=answer.error)
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
        "claimed_by": "",
    }
    if judgement:
        values |= judgement.model_dump()
    if not mine.update(**values):
        return False
    runs.settle(verdict, judgement)
    profile = verdict.profile
    count = functools.partial(metrics.count_judgement, profile.workload, status, profile.provider)
    transaction.on_commit(count, robust=True)
    return True


def judge_verdicts(profile_id: int, attempt_ids: list[int], runs: RunSide) -> int:
    """Judge these attempts with the profile, each at most once (the runs side's job,
    experiments/judging.py, calls this). Each verdict is written as soon as it is judged,
    and its claim renewed just before, so a slow batch neither loses paid answers nor has
    its later rows taken over. Returns how many verdicts it recorded."""
    profile = EvaluatorProfile.objects.filter(pk=profile_id).first()
    if profile is None:
        return 0
    token, claimed = claim_verdicts(profile.pk, attempt_ids, runs)
    if not claimed:
        return 0
    arm = ArmSpec(profile.provider, profile.model_name, profile.provider_config, key=f"evaluator:{profile.pk}")
    try:
        prepared = gateway.prepare(platform_org().pk, arm)
    except ProviderError as exc:  # not allowed, no credential: let the claims go, judge later
        Verdict.objects.filter(claim_token=token).update(**LET_GO, error=str(exc))
        logger.warning("evaluator %s cannot be called: %s", profile, exc)
        return 0
    recorded = 0
    for verdict in claimed:
        if not Verdict.objects.filter(pk=verdict.pk, claim_token=token).update(claimed_at=timezone.now()):
            continue  # taken over after looking abandoned
        seen = runs.judge_input(verdict, profile.workload)
        with bound_contextvars(attempt=seen.attempt_code):
            recorded += record_answer(verdict, token, judge(seen.blind, profile, prepared), runs)
    if recorded:
        runs.judged(attempt_ids)
    return recorded


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
