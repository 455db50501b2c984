"""A run built row by row (no provider, no sandbox), so every figure of its boards is known."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from evaluation.models import EvaluatorProfile, Verdict
from experiments.models import Attempt, AttemptStatus, Run, RunArm, RunStatus
from providers.errors import ErrorCategory
from providers.outcomes import outcome_class


@dataclass
class ArmPlan:
    label: str
    quality: float  # chance an answer resolves its task
    latency_ms: int
    model_failure_rate: float = 0.0
    infrastructure_failure_rate: float = 0.0
    price: str | None = "0.001"  # per answer; None: unpriced
    cached_rate: float = 0.0


def build_run(experiment, dataset, plans, repetitions=1, seed=5, inference_only=False, verdicts=False):
    """One attempt per (arm, task, repetition) with figures drawn from a seeded generator,
    recorded as the pipeline records them (outcome included)."""
    rng = random.Random(seed)
    run = Run.objects.create(
        org=experiment.org,
        experiment=experiment,
        seed=seed,
        status=RunStatus.COMPLETED,
        inference_only=inference_only,
        config_snapshot={"repetitions": repetitions},
    )
    tasks = list(dataset.tasks.order_by("position"))
    now = timezone.now()
    attempts = []
    arms = {}
    for position, plan in enumerate(plans):
        arms[plan.label] = arm = RunArm.objects.create(
            run=run, label=plan.label, provider="mock", model_name=f"mock-{plan.label}", position=position
        )
        for task in tasks:
            for repetition in range(repetitions):
                attempts.append(_attempt(rng, run, arm, task, repetition, plan, now, inference_only))
    for sequence, attempt in enumerate(attempts):
        attempt.sequence = sequence
    Attempt.objects.bulk_create(attempts)
    run.total_attempts = len(attempts)
    run.save(update_fields=["total_attempts"])
    if verdicts:
        _judge(rng, run)
    return run, arms


def _attempt(rng, run, arm, task, repetition, plan, now, inference_only):
    fields = dict(run=run, arm=arm, task=task, repetition=repetition, queued_at=now - timedelta(minutes=5))
    draw = rng.random()
    if draw < plan.infrastructure_failure_rate:
        return _failed(rng.choice([ErrorCategory.SERVER_ERROR, ErrorCategory.RATE_LIMITED]), fields)
    if draw < plan.infrastructure_failure_rate + plan.model_failure_rate:
        return _failed(ErrorCategory.TIMEOUT, fields)
    cached = rng.random() < plan.cached_rate
    latency = None if cached else max(1, round(rng.gauss(plan.latency_ms, plan.latency_ms / 4)))
    resolved = not inference_only and rng.random() < plan.quality
    return Attempt(
        status=AttemptStatus.COMPLETED,
        outcome=outcome_class("completed"),
        resolved=resolved,
        patch_present=True,
        patch_well_formed=True,
        patch_applied=None if inference_only else resolved or rng.random() < 0.5,
        validated_at=None if inference_only else now,
        fail_to_pass_fraction=None if inference_only else (1.0 if resolved else rng.choice([0.0, 0.5])),
        pass_to_pass_regressions=None if inference_only else (0 if resolved else rng.randint(0, 2)),
        lines_changed=rng.randint(1, 40),
        latency_ms=latency,
        first_token_ms=None if cached else round(latency * 0.3),
        output_tokens_per_s=None if cached else rng.uniform(20, 90),
        response_cached=cached,
        cost_usd=None if plan.price is None else (Decimal(0) if cached else Decimal(plan.price)),
        **fields,
    )


def _failed(category, fields):
    outcome = outcome_class(AttemptStatus.FAILED, category)
    return Attempt(status=AttemptStatus.FAILED, error_category=category, outcome=outcome, **fields)


def _judge(rng, run):
    profile, _ = EvaluatorProfile.objects.get_or_create(
        name="judge", version=1, defaults={"provider": "mock", "model_name": "m"}
    )
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).order_by("sequence")
    Verdict.objects.bulk_create(
        Verdict(
            attempt=attempt,
            run_id=attempt.run_id,  # bulk_create skips the save() that fills it in
            profile=profile,
            status="judged",
            overall=min(100, max(0, round(rng.gauss(80 if attempt.resolved else 45, 10)))),
            rationale=f"SECRET-RATIONALE-{attempt.pk}",
            cost_usd=Decimal("0.0002"),
        )
        for attempt in answered
    )


@pytest.fixture
def built_run(experiment, dataset):
    def build(plans, **options):
        return build_run(experiment, dataset, plans, **options)

    return build
