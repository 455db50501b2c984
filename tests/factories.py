"""Builders of the objects tests share (arms, datasets, runs, attempts, credentials), each
written once: a module that needs one imports it from here, never from another test module."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from datasets.models import Dataset, TaskInstance
from evaluation.models import EvaluatorProfile, Verdict
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.models import Artifact, ArtifactKind, Attempt, AttemptStatus, Run, RunArm, RunStatus
from experiments.trajectory import Ended, Step, Trajectory
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from providers.outcomes import OutcomeClass, outcome_class
from tests.cli import run_command

# --- arms ------------------------------------------------------------------------------------------

ZERO_LATENCY_ARMS = [
    ArmSpec(
        "oracle", "mock", "mock-oracle", {"mode": "oracle", "price_input_per_mtok": 3, "price_output_per_mtok": 15}
    ),
    ArmSpec(
        "noisy",
        "mock",
        "mock-noisy",
        {"mode": "noisy", "quality": 0.5, "price_input_per_mtok": 1, "price_output_per_mtok": 2},
    ),
]

PRICED = {"price_input_per_mtok": 3, "price_output_per_mtok": 15}
FAST_MOCK = {"max_concurrency": 256, "max_retries": 0}


def arm(label: str, mode: str = "oracle", quality: float = 1.0, **config) -> ArmSpec:
    """A priced mock arm, never retried, as the CI gate's runs use."""
    return ArmSpec(label, "mock", f"mock-{label}", {"mode": mode, "quality": quality, **FAST_MOCK, **PRICED, **config})


def credential(org, provider="openai", name="default", base_url="", key="sk-test-000000000000", **fields):
    made = ProviderCredential(org=org, provider=provider, name=name, base_url=base_url, **fields)
    if key:
        made.set_api_key(key)
    made.save()
    return made


# --- datasets and tasks ----------------------------------------------------------------------------


def import_file(org, fmt, path, *options, dataset="qa"):
    return run_command("import_tasks", "--org", org.slug, "--dataset", dataset, "--format", fmt, *options, str(path))


def import_as(org, fmt: str, path, name: str) -> Dataset:
    run_command("import_tasks", "--org", org.slug, "--dataset", name, "--format", fmt, str(path))
    return Dataset.objects.get(org=org, name=name)


def ingest_textkit(org, repo, *extra):
    return run_command("ingest_prs", "--org", org.slug, "--dataset", "textkit", "--repo", str(repo), *extra)


def make_tasks(dataset, count: int) -> list[TaskInstance]:
    return [
        TaskInstance.objects.create(dataset=dataset, external_id=f"extra-{i}", position=100 + i, problem_statement="x")
        for i in range(count)
    ]


# --- replayed predictions (import_predictions) -----------------------------------------------------

SYSTEM = "20240402_sweagent_gpt4"
# A patch that applies and changes nothing the tests look at: answered, not resolved.
HARMLESS = "--- a/{path}\n+++ b/{path}\n@@ -1 +1,2 @@\n {first}\n+# replayed\n"


def published_line(instance_id: str, patch: str | None, system: str = SYSTEM) -> str:
    """One line as published predictions files write it (json.dumps' own spacing, this key order)."""
    return json.dumps({"instance_id": instance_id, "model_name_or_path": system, "model_patch": patch})


def harmless_patch(task) -> str:
    path, content = next(
        (path, content)
        for path, content in sorted(task.repo_files.items())
        if content.strip() and not path.startswith("tests") and path != "conftest.py"
    )
    return HARMLESS.format(path=path, first=content.splitlines()[0])


def predictions_file(tmp_path, tasks, name="all_preds.jsonl"):
    """Gold for the first task, a harmless patch for the second, null for the third, nothing
    for the fourth, and a prediction for an instance the dataset does not have."""
    lines = [
        published_line(tasks[0].external_id, tasks[0].gold_patch),
        published_line(tasks[1].external_id, harmless_patch(tasks[1])),
        published_line(tasks[2].external_id, None),
        published_line("astropy__astropy-12907", "diff --git a/x b/x\n"),
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def import_into(experiment, path, label="agent"):
    return run_command(
        "import_predictions", "--org", experiment.org.slug, "--experiment", experiment.name, "--arm", label, path
    )


# --- runs and attempts -----------------------------------------------------------------------------


def record(run, arm, tasks, resolved: set[int]) -> None:
    Attempt.objects.bulk_create(
        Attempt(
            run=run,
            arm=arm,
            task=task,
            sequence=index,
            status=AttemptStatus.COMPLETED,
            outcome=OutcomeClass.SUCCESS,
            resolved=index in resolved,
            patch_present=True,
            queued_at=run.created_at,
        )
        for index, task in enumerate(tasks)
    )


def run_in_every_state(org, dataset, alice, repetitions: int):
    """A running run of 2 arms on the 12 tasks, each ``repetitions`` times, in every state
    by sequence: a tenth failed through the provider (an infrastructure failure), a tenth
    timed out (the model's failure), a tenth still queued, the rest answered, with latencies
    and costs that tie so the order needs its tie-breaker; a tenth of the answers the
    validation harness gave no verdict on (answered, yet the infrastructure's failure)."""
    spec = ExperimentSpec(
        name=f"x{repetitions}", dataset=dataset, arms=list(ZERO_LATENCY_ARMS), repetitions=repetitions
    )
    run = do_start_run(do_save_experiment(org, spec, alice), alice)
    attempts = list(run.attempts.all())
    for attempt in attempts:
        kind = attempt.sequence % 10
        if kind == 0:
            attempt.status, attempt.error_category = AttemptStatus.FAILED, ErrorCategory.RATE_LIMITED
        elif kind == 1:
            attempt.status, attempt.error_category = AttemptStatus.FAILED, ErrorCategory.TIMEOUT
        elif kind != 2:
            attempt.status = AttemptStatus.COMPLETED
            attempt.latency_ms = 100 * (attempt.sequence % 7) + 100
            attempt.cost_usd = Decimal(attempt.sequence % 5) / 1000
        harness_failed = kind == 3
        # As the recorder stores it.
        attempt.outcome = outcome_class(attempt.status, attempt.error_category, harness_failed=harness_failed)
    run.attempts.bulk_update(attempts, ["status", "error_category", "outcome", "latency_ms", "cost_usd"])
    return run


# A run built row by row (no provider, no sandbox), so every figure of its boards is known.
@dataclass
class ArmPlan:
    label: str
    quality: float  # chance an answer resolves its task
    latency_ms: int
    model_failure_rate: float = 0.0
    infrastructure_failure_rate: float = 0.0
    price: str | None = "0.001"  # per answer; None: unpriced
    cached_rate: float = 0.0
    model_name: str = ""  # "mock-<label>" when empty
    agent: bool = False  # config solver "agent": each answer draws its turns, tool calls and tokens
    tokens: bool = False  # each answer draws its tokens (an agent's always do)


# A strong arm that fails a fifth of its attempts, and a weaker, cheaper one.
STRONG_AND_WEAK = [
    ArmPlan("strong", quality=0.8, latency_ms=900, model_failure_rate=0.1, infrastructure_failure_rate=0.1),
    ArmPlan("weak", quality=0.3, latency_ms=300, price="0.0004"),
]


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
            run=run,
            label=plan.label,
            provider="mock",
            model_name=plan.model_name or f"mock-{plan.label}",
            position=position,
            config={"solver": "agent"} if plan.agent else {},
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
    if plan.agent:
        turns = rng.randint(1, 12)
        fields |= {"turns": turns, "tool_calls": rng.randint(turns - 1, 2 * turns)}
    if plan.agent or plan.tokens:
        fields |= {"input_tokens": rng.randint(1000, 60_000), "output_tokens": rng.randint(50, 4000)}
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


# --- an agent's trajectory -------------------------------------------------------------------------

# The test run's output in the trajectory below: longer than a page sends inline.
LONG_TEST_OUTPUT = "".join(f"tests/test_wrap.py::test_case_{n} PASSED\n" for n in range(200)) + "LAST-LINE-OF-OUTPUT"


def agent_trajectory() -> Trajectory:
    """Three turns, as the agent loop stores them: a file read (recovered after a restart),
    a malformed call beside a long test run, and the submit."""
    return Trajectory(
        prompt_version="agent-v1",
        system="You are fixing a bug with tools.",
        ended=Ended.SUBMITTED,
        malformed_calls=1,
        steps=[
            Step(
                turn=1,
                sent=[{"role": "user", "content": "Fix wrap(): it breaks lines one character too early."}],
                text="Let me read the file.",
                tool_calls=[{"id": "c1", "name": "read_file", "arguments": {"path": "textkit/wrap.py", "start": 1}}],
                results=[{"id": "c1", "content": "def wrap(text, width):", "is_error": False, "ms": 3}],
                input_tokens=1200,
                output_tokens=40,
                latency_ms=800,
                cost_usd="0.0012",
                finish_reason="tool_calls",
                recovered=True,
            ),
            Step(
                turn=2,
                sent=[
                    {"role": "user", "content": "", "tool_results": [{"id": "c1", "content": "def wrap(text, width):"}]}
                ],
                tool_calls=[
                    {"id": "c2", "name": "replace_text", "arguments": {}, "malformed": '{"path": "textkit/wrap.py", '},
                    {"id": "c3", "name": "run_tests", "arguments": {}},
                ],
                results=[
                    {"id": "c2", "content": "error: the arguments are not a JSON object", "is_error": True, "ms": 0},
                    {"id": "c3", "content": LONG_TEST_OUTPUT, "is_error": False, "ms": 5400, "truncated": True},
                ],
                input_tokens=1500,
                output_tokens=60,
                latency_ms=900,
                cost_usd="0.0016",
                finish_reason="tool_calls",
            ),
            Step(
                turn=3,
                sent=[{"role": "user", "content": "", "tool_results": []}],
                text="Submitting.",
                tool_calls=[{"id": "c4", "name": "submit", "arguments": {}}],
                results=[{"id": "c4", "content": "submitted", "is_error": False, "ms": 1}],
                input_tokens=9000,
                output_tokens=20,
                latency_ms=700,
                cost_usd=None,
                finish_reason="tool_calls",
            ),
        ],
    )


def give_trajectory(attempt: Attempt, trajectory: Trajectory | None = None) -> Trajectory:
    """Record ``trajectory`` (``agent_trajectory()`` by default) as the attempt's, as the loop does."""
    trajectory = trajectory or agent_trajectory()
    Artifact.objects.create(attempt=attempt, kind=ArtifactKind.TRAJECTORY, content=trajectory.to_json())
    Attempt.objects.filter(pk=attempt.pk).update(turns=len(trajectory.steps), tool_calls=trajectory.tool_call_count)
    attempt.refresh_from_db()
    return trajectory
