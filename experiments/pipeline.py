"""Execute one attempt: call the model, validate the patch, score it, record it.

The attempt row is the unit of work. A worker claims it with a conditional update and
gets a token; the result is written only if that token still holds, so a slow worker
whose attempt was re-queued after looking abandoned cannot count it a second time.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from evaluation.patches import extract_patch
from evaluation.scoring import score_pr_attempt
from evaluation.validation import ValidationResult, ValidationStatus, validate_patch
from experiments.models import (
    ATTEMPT_TERMINAL,
    Artifact,
    ArtifactKind,
    Attempt,
    AttemptStatus,
    Run,
    RunStatus,
)
from experiments.prompts import build_request
from providers import gateway
from providers.errors import ErrorCategory, ProviderError
from providers.types import ArmSpec, Completion, CompletionRequest

logger = logging.getLogger(__name__)


def claim_attempt(attempt_id: int) -> uuid.UUID | None:
    token = uuid.uuid4()
    # The run's status goes in an EXISTS, not a join: a join makes Django write
    # "id IN (subquery)", and Postgres re-checks only that outer condition after waiting on
    # the row lock, so two workers could both claim the same queued attempt.
    run_is_running = Exists(Run.objects.filter(pk=OuterRef("run_id"), status=RunStatus.RUNNING))
    claimed = (
        Attempt.objects.filter(pk=attempt_id, status=AttemptStatus.QUEUED)
        .filter(run_is_running)
        .update(status=AttemptStatus.RUNNING, claim_token=token, started_at=timezone.now(), claims=F("claims") + 1)
    )
    return token if claimed else None


def process_attempt(attempt_id: int) -> bool:
    """Run the attempt if it is still waiting for a worker. Returns whether it ran."""
    token = claim_attempt(attempt_id)
    if token is None:
        return False
    try:
        _execute(attempt_id, token)
    except Exception as exc:
        # Whatever broke (a bad config the checks missed, a sandbox error), the attempt ends
        # as a scored failure instead of jamming its batch and the run for ever.
        logger.exception("attempt %s crashed", attempt_id)
        error = ProviderError(ErrorCategory.UNKNOWN, f"the platform failed on this attempt: {type(exc).__name__}")
        record_failure(attempt_id, token, None, error)
    return True


def _execute(attempt_id: int, token: uuid.UUID) -> None:
    attempt = Attempt.objects.select_related("run", "task", "arm").get(pk=attempt_id)
    request = build_request(attempt)
    arm = ArmSpec(attempt.arm.provider, attempt.arm.model_name, attempt.arm.config, key=f"run-arm:{attempt.arm_id}")
    try:
        completion = gateway.complete(attempt.run.org_id, arm, request)
    except ProviderError as error:
        record_failure(attempt_id, token, request, error)
        return
    responded_at = timezone.now()
    patch = extract_patch(completion.text)
    validation = None if attempt.run.inference_only else _validate(attempt, patch)
    record_completion(attempt_id, token, request, completion, patch, validation, responded_at)


def _validate(attempt: Attempt, patch: str) -> ValidationResult:
    task = attempt.task
    return validate_patch(task.repo_files, patch, task.test_command, settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS)


def request_record(request: CompletionRequest) -> dict:
    record = asdict(request)
    record.pop("reference_output")  # the gold answer is never part of what a model was sent
    return record


@transaction.atomic
def record_completion(
    attempt_id: int,
    token: uuid.UUID,
    request: CompletionRequest,
    completion: Completion,
    patch: str,
    validation: ValidationResult | None,
    responded_at,
) -> bool:
    score = score_pr_attempt(patch, validation)
    now = timezone.now()
    updated = _still_ours(attempt_id, token).update(
        status=AttemptStatus.COMPLETED,
        request=request_record(request),
        raw_response=completion.raw_response,
        output=completion.text,
        model_served=completion.model_served,
        provider_request_id=completion.request_id,
        finish_reason=completion.finish_reason,
        input_tokens=completion.usage.input_tokens,
        output_tokens=completion.usage.output_tokens,
        cached_tokens=completion.usage.cached_tokens,
        latency_ms=completion.latency_ms,
        cost_usd=completion.cost_usd,
        cost_source=completion.cost_source if completion.cost_usd is not None else "",
        retries=completion.retries,
        retry_log=list(completion.retry_log),
        patch_present=score.patch_present,
        patch_applied=score.applied,
        resolved=score.resolved,
        lines_changed=score.lines_changed,
        responded_at=responded_at,
        validated_at=now if validation else None,
        scored_at=now,
    )
    if not updated:
        return False
    artifacts = [Artifact(attempt_id=attempt_id, kind=ArtifactKind.PATCH, content=patch)]
    if validation:
        artifacts.append(
            Artifact(
                attempt_id=attempt_id,
                kind=ArtifactKind.VALIDATION,
                status=validation.status,
                content=validation.log,
                duration_ms=validation.duration_ms,
            )
        )
    elif patch:
        artifacts.append(Artifact(attempt_id=attempt_id, kind=ArtifactKind.VALIDATION, status=ValidationStatus.SKIPPED))
    Artifact.objects.bulk_create(artifacts)
    return True


def record_failure(attempt_id: int, token: uuid.UUID, request: CompletionRequest | None, error: ProviderError) -> bool:
    return bool(
        _still_ours(attempt_id, token).update(
            status=AttemptStatus.FAILED,
            request=request_record(request) if request else {},
            error_category=error.category,
            error_message=error.message[:2000],
            retries=error.retries,
            retry_log=error.retry_log,
            scored_at=timezone.now(),
        )
    )


def _still_ours(attempt_id: int, token: uuid.UUID):
    return Attempt.objects.filter(pk=attempt_id, claim_token=token, status=AttemptStatus.RUNNING)


def finish_run_if_done(run_id: int) -> str | None:
    """Mark a running run finished once every attempt is terminal. Safe to call any time:
    each worker calls it after committing, so the last one to finish always sees all."""
    attempts = Attempt.objects.filter(run_id=run_id)
    if attempts.exclude(status__in=ATTEMPT_TERMINAL).exists():
        return None
    status = RunStatus.COMPLETED if attempts.filter(status=AttemptStatus.COMPLETED).exists() else RunStatus.FAILED
    finished = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(status=status, finished_at=timezone.now())
    return status if finished else None
