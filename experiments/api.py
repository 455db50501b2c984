"""The JSON API's experiments, runs and attempts (mounted by prbench/api.py).

Endpoints are thin: they reach objects through ``orgs.access`` and change them through
``experiments.actions`` (and the upload and estimate modules), exactly as the pages and the
commands do. An experiment's body is the spec document ``manage.py apply_experiment`` reads,
checked by the same ``check_experiment_spec``; an upload's is the browser's form, checked by
the same ``TaskUploadForm``.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from ninja import Field, Header, Query, Router, Schema, Status
from ninja.errors import HttpError

from experiments.access import access_experiment, access_run
from experiments.actions import (
    SEED_LIMIT,
    ExperimentSpec,
    SpecError,
    check_experiment_name_free,
    check_experiment_spec,
    check_run_transition,
    check_start_run,
    do_run_action,
    do_save_experiment,
    do_start_run,
    few_shot_snapshot,
    parse_budget_usd,
)
from experiments.estimate import estimate_run
from experiments.idempotency import IDEMPOTENCY_KEY_TTL, IdempotencyConflict, StartChoices, start_run_once
from experiments.models import Allocation, ContextMode, Experiment, ModelArm, Run, SampleStrategy
from experiments.progress import judging_progress, run_progress
from orgs.access import access_current_org, check_role, membership_for
from orgs.api_auth import READ, RUN, actor
from orgs.models import Organization
from prbench.api_support import (
    COMMON_ERRORS,
    MAX_LIMIT,
    ErrorBody,
    JsonBody,
    JsonDecimal,
    Page,
    json_body,
    paginate,
    read_body,
)
from prbench.inputs import load_spec
from providers.registry import provider_names

router = Router(tags=["runs"])


class Judging(Schema):
    """The run's evaluator at work: ``judged`` of the ``answered`` attempts have a verdict.
    Until ``finished``, a completed run's evaluator board is not final."""

    judged: int
    answered: int
    finished: bool


class Progress(Schema):
    total: int
    queued: int
    running: int
    completed: int
    failed: int
    cancelled: int
    percent: int
    judging: Judging | None = None  # None: the run has no evaluator


class ArmOut(Schema):
    label: str
    provider: str
    model: str


class RunOut(Schema):
    id: UUID
    experiment: UUID
    experiment_name: str
    status: str
    seed: int
    inference_only: bool
    budget_usd: Decimal | None
    dataset_version: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    url: str
    arms: list[ArmOut]
    progress: Progress | None = None
    # Provider calls paid twice: sent again after their worker died mid-call (with progress).
    repeat_calls: int | None = None


def run_out(run: Run, *, with_progress: bool) -> RunOut:
    progress, repeat_calls = None, None
    if with_progress:
        counted = run_progress(run)
        repeat_calls = counted.repeat_calls
        judging = judging_progress(run, counted)
        progress = Progress(
            total=counted.total,
            queued=counted.queued,
            running=counted.running,
            completed=counted.completed,
            failed=counted.failed,
            cancelled=counted.cancelled,
            percent=counted.percent,
            judging=Judging(judged=judging.judged, answered=judging.answered, finished=judging.finished)
            if judging
            else None,
        )
    return RunOut(
        id=run.code,
        experiment=run.experiment.code,
        experiment_name=run.experiment.name,
        status=run.status,
        seed=run.seed,
        inference_only=run.inference_only,
        budget_usd=run.budget_usd,
        dataset_version=run.dataset_version,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        url=reverse("experiments:run", args=[run.code]),
        arms=[ArmOut(label=arm.label, provider=arm.provider, model=arm.model_name) for arm in run.arms.all()],
        progress=progress,
        repeat_calls=repeat_calls,
    )


@router.get("/runs", response={200: Page[RunOut], **COMMON_ERRORS}, auth=READ, summary="List the organisation's runs")
def list_runs(
    request: HttpRequest, cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT)
) -> Page[RunOut]:
    org = access_current_org(request).org
    queryset = Run.objects.filter(org=org).select_related("experiment").prefetch_related("arms")
    rows, next_cursor = paginate(queryset, cursor, limit)
    return Page[RunOut](items=[run_out(run, with_progress=False) for run in rows], next_cursor=next_cursor)


@router.get("/runs/{run_id}", response={200: RunOut, **COMMON_ERRORS}, auth=READ, summary="A run, with its progress")
def get_run(request: HttpRequest, run_id: str) -> RunOut:
    return run_out(access_run(request, run_id), with_progress=True)


# --- experiments -------------------------------------------------------------------------------


class ArmDoc(Schema):
    label: str
    provider: str = Field(description=", ".join(provider_names()))
    model_name: str = Field(description="The provider's own model id")
    credential: str = Field("", description="The organisation's credential for the provider, by name")
    config: dict[str, Any] = Field(default_factory=dict, description="temperature, max_tokens, deployment, ...")


class FewShotDoc(Schema):
    dataset: str = Field(description="A dev split's name")
    k: int = Field(description="How many solved examples a prompt shows")


class RecipeDoc(Schema):
    """An environment recipe for one of the dataset's repositories (datasets/recipes.py)."""

    repo: str = Field(description="owner/name, as the dataset's tasks name it")
    version: str = Field("", description="The tasks' version; empty: every version without its own")
    python: str = Field(description='The interpreter, e.g. "3.11"')
    packages: list[str] = Field(default_factory=list, description="Requirement specifiers installed first")
    requirements: list[str] = Field(default_factory=list, description="Requirements files in the repository")
    project: str = Field("-e .", description='How the project is installed: "-e .", "-e .[test]", "" for not')
    pre_install: list[str] = Field(default_factory=list, description="Shell commands run in the checkout first")
    system_packages: list[str] = Field(default_factory=list, description="What the worker machine must have")
    test_command: list[str] = Field(default_factory=list, description="The tests' argv; {python}: the environment's")
    test_env: dict[str, str] = Field(default_factory=dict, description="Variables the tests run with")
    exclude_newer: str = Field("", description="Install what the package index held at this date (ISO)")
    checkout_build: str = Field(
        "", description="A shell command building the project in its checkout, run again after each patch"
    )
    source: str = Field("", description="Where the recipe came from")


class ExperimentSpecDoc(Schema):
    """The experiment spec: the same document ``manage.py apply_experiment`` reads."""

    name: str
    dataset: str = Field(description="The name of one of the organisation's datasets")
    arms: list[ArmDoc]
    description: str = ""
    sample_size: int | None = Field(None, description="Empty: every task")
    sample_strategy: str = Field(SampleStrategy.RANDOM, description=", ".join(SampleStrategy.values))
    stratify_by: str | list[str] = Field("", description="category, difficulty, or both")
    allocation: str = Field(Allocation.PROPORTIONAL, description=", ".join(Allocation.values))
    seed: int = 0
    repetitions: int = 1
    prompt_template: str | None = Field(None, description="One's own prompt (left out: kept, or the kind's default)")
    template: str | None = Field(None, description="A built-in prompt of the dataset's kind, by name@version")
    few_shot: FewShotDoc | None = None
    context_mode: str = Field(ContextMode.ORACLE, description=", ".join(ContextMode.values))
    include_quarantined: bool = False
    budget_usd: Decimal | None = Field(None, description="A limit on all its runs' spend together")
    response_cache: bool = False
    grading: str = Field("", description="One of the dataset kind's grading modes ('': its default)")
    environments: list[RecipeDoc] | None = Field(
        None, description="Sets these recipes for the dataset's repositories (admin keys); left out, they stay"
    )


class ExperimentOut(Schema):
    id: UUID
    dataset_id: UUID
    created_at: datetime
    updated_at: datetime
    url: str
    spec: ExperimentSpecDoc = Field(description="What PUT takes back, changed or not")


def experiment_spec_doc(experiment: Experiment) -> ExperimentSpecDoc:
    few_shot = few_shot_snapshot(experiment)
    return ExperimentSpecDoc(
        name=experiment.name,
        dataset=experiment.dataset.name,
        arms=[
            ArmDoc(
                label=arm.label,
                provider=arm.provider,
                model_name=arm.model_name,
                credential=arm.credential_name,
                config=arm.config,
            )
            for arm in experiment.arms.all()
        ],
        description=experiment.description,
        sample_size=experiment.sample_size,
        sample_strategy=experiment.sample_strategy,
        stratify_by=experiment.stratify_by,
        allocation=experiment.allocation,
        seed=experiment.sample_seed,
        repetitions=experiment.repetitions,
        # A built-in prompt is named, not copied: the spec takes one or the other.
        prompt_template=None if experiment.prompt_builtin else experiment.prompt_template,
        template=experiment.prompt_builtin or None,
        few_shot=FewShotDoc(dataset=few_shot["dataset"], k=few_shot["k"]) if few_shot else None,
        context_mode=experiment.context_mode,
        include_quarantined=experiment.include_quarantined,
        budget_usd=experiment.budget_usd,
        response_cache=experiment.response_cache,
        environments=None,  # recipes belong to the dataset: a spec read back leaves them as they are
        grading=experiment.grading,
    )


def experiment_out(experiment: Experiment) -> ExperimentOut:
    return ExperimentOut(
        id=experiment.code,
        dataset_id=experiment.dataset.code,
        created_at=experiment.created_at,
        updated_at=experiment.updated_at,
        url=reverse("experiments:detail", args=[experiment.code]),
        spec=experiment_spec_doc(experiment),
    )


def _experiments(org_id: int) -> QuerySet[Experiment]:
    return (
        Experiment.objects.filter(org_id=org_id)
        .select_related("dataset", "few_shot_dataset")
        .prefetch_related(Prefetch("arms", queryset=ModelArm.objects.order_by("position")))
    )


# JSON, or the YAML of a spec file as it is (Content-Type application/yaml).
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
SPEC_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ExperimentSpecDoc"}},
            "application/yaml": {"schema": {"$ref": "#/components/schemas/ExperimentSpecDoc"}},
        },
    }
}


def _checked_spec(request: HttpRequest, org: Organization) -> ExperimentSpec:
    """The request's spec, through the spec file's own reader and checks (apply_experiment's):
    every problem in the message, the first one's spec field as the error's field."""
    name = "request.yaml" if request.content_type in YAML_TYPES else "request.json"
    raw = load_spec(request.body, name)
    try:
        spec = check_experiment_spec(org, raw)
    except SpecError as exc:
        raise ValidationError({exc.field or "__all__": exc.messages}) from None
    if spec.environments:  # a dataset's recipes are for those who manage it, as on its page
        check_role(membership_for(request, org), manage=True)
    return spec


def _name_conflict(org: Organization, name: str, experiment: Experiment | None) -> None:
    try:
        check_experiment_name_free(org, name, experiment)
    except ValidationError as exc:
        raise HttpError(409, "; ".join(exc.messages)) from None


@router.get(
    "/experiments",
    response={200: Page[ExperimentOut], **COMMON_ERRORS},
    auth=READ,
    summary="List the organisation's experiments",
    tags=["experiments"],
)
def list_experiments(
    request: HttpRequest, cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT)
) -> Page[ExperimentOut]:
    org = access_current_org(request).org
    rows, next_cursor = paginate(_experiments(org.pk), cursor, limit)
    return Page[ExperimentOut](items=[experiment_out(e) for e in rows], next_cursor=next_cursor)


@router.post(
    "/experiments",
    response={201: ExperimentOut, 409: ErrorBody, **COMMON_ERRORS},
    auth=RUN,
    summary="Create an experiment from a spec (409: the name is taken)",
    tags=["experiments"],
    openapi_extra=SPEC_BODY,
)
def create_experiment(request: HttpRequest) -> Status[ExperimentOut]:
    org = access_current_org(request, write=True).org
    spec = _checked_spec(request, org)
    _name_conflict(org, spec.name, None)
    try:
        experiment = do_save_experiment(org, spec, actor(request))
    except IntegrityError:  # created by a concurrent request since the check
        raise HttpError(409, "Another experiment in this organisation has that name.") from None
    return Status(201, experiment_out(_experiments(org.pk).get(pk=experiment.pk)))


@router.get(
    "/experiments/{experiment_id}",
    response={200: ExperimentOut, **COMMON_ERRORS},
    auth=READ,
    summary="An experiment, as its spec",
    tags=["experiments"],
)
def get_experiment(request: HttpRequest, experiment_id: str) -> ExperimentOut:
    experiment = access_experiment(request, experiment_id)
    return experiment_out(_experiments(experiment.org_id).get(pk=experiment.pk))


@router.put(
    "/experiments/{experiment_id}",
    response={200: ExperimentOut, 409: ErrorBody, **COMMON_ERRORS},
    auth=RUN,
    summary="Replace an experiment's spec (its arms become the spec's; runs keep their own)",
    tags=["experiments"],
    openapi_extra=SPEC_BODY,
)
def update_experiment(request: HttpRequest, experiment_id: str) -> ExperimentOut:
    experiment = access_experiment(request, experiment_id, write=True)
    spec = _checked_spec(request, experiment.org)
    _name_conflict(experiment.org, spec.name, experiment)
    try:
        do_save_experiment(experiment.org, spec, actor(request), experiment)
    except IntegrityError:
        raise HttpError(409, "Another experiment in this organisation has that name.") from None
    return experiment_out(_experiments(experiment.org_id).get(pk=experiment.pk))


# --- estimating and starting runs ---------------------------------------------------------------


class ArmEstimateOut(Schema):
    label: str
    provider: str
    model: str
    attempts: int
    input_tokens: int
    output_ceiling_tokens: int
    max_cost_usd: Decimal | None = Field(description="None: the model's price is unknown")
    likely_cost_usd: Decimal | None = Field(description="From the mean output of its earlier answers, when any")
    earlier_answers: int


class EstimateOut(Schema):
    tasks: int
    repetitions: int
    attempts: int
    input_tokens: int
    output_ceiling_tokens: int
    max_cost_usd: Decimal = Field(description="Of the priced arms (see unpriced)")
    likely_cost_usd: Decimal
    unpriced: list[str] = Field(description="Arms whose price is unknown")
    arms: list[ArmEstimateOut]
    problems: list[str] = Field(description="Why a run could not start now (empty: it can)")


@router.get(
    "/experiments/{experiment_id}/estimate",
    response={200: EstimateOut, **COMMON_ERRORS},
    auth=RUN,
    summary="What a run would cost, per arm, and whether it can start",
    tags=["runs"],
)
def estimate(
    request: HttpRequest,
    experiment_id: str,
    seed: int | None = Query(None, ge=-SEED_LIMIT, le=SEED_LIMIT),
    inference_only: bool = False,
) -> EstimateOut:
    experiment = access_experiment(request, experiment_id, write=True)
    figures = estimate_run(experiment, seed)
    try:
        check_start_run(experiment, inference_only=inference_only)
        problems: list[str] = []
    except ValidationError as exc:
        problems = exc.messages
    return EstimateOut(
        tasks=figures.tasks,
        repetitions=figures.repetitions,
        attempts=figures.attempts,
        input_tokens=figures.input_tokens,
        output_ceiling_tokens=figures.output_ceiling_tokens,
        max_cost_usd=figures.max_cost,
        likely_cost_usd=figures.likely_cost,
        unpriced=figures.unpriced,
        arms=[
            ArmEstimateOut(
                label=arm.label,
                provider=arm.provider,
                model=arm.model_name,
                attempts=arm.attempts,
                input_tokens=arm.input_tokens,
                output_ceiling_tokens=arm.output_ceiling_tokens,
                max_cost_usd=arm.max_cost,
                likely_cost_usd=arm.likely_cost,
                earlier_answers=arm.earlier_answers,
            )
            for arm in figures.arms
        ],
        problems=problems,
    )


class StartRunIn(JsonBody):
    seed: int | None = Field(default=None, ge=-SEED_LIMIT, le=SEED_LIMIT, description="Default: the experiment's")
    inference_only: bool = Field(default=False, description="Skip patch validation")
    budget_usd: JsonDecimal | None = Field(default=None, description="A hard limit on this run's spend")


IDEMPOTENCY_KEY_HELP = (
    "Send the same key when retrying: the run the first request started is returned (200), not a "
    "second one; the same key with another body is a 409. A key may be reused after "
    f"{IDEMPOTENCY_KEY_TTL.total_seconds() / 3600:g} hours."
)

IDEMPOTENCY_KEY_HEADER = Header(
    None, alias="Idempotency-Key", max_length=255, pattern=r"^[!-~]+$", description=IDEMPOTENCY_KEY_HELP
)


@router.post(
    "/experiments/{experiment_id}/runs",
    response={201: RunOut, 200: RunOut, 409: ErrorBody, **COMMON_ERRORS},
    auth=RUN,
    summary="Start a run (201), or return the run an earlier request with this Idempotency-Key started (200)",
    tags=["runs"],
    openapi_extra=json_body(StartRunIn, required=False),
)
def start_run(
    request: HttpRequest, experiment_id: str, idempotency_key: str | None = IDEMPOTENCY_KEY_HEADER
) -> Status[RunOut]:
    experiment = access_experiment(request, experiment_id, write=True)
    # Every choice of a start has a default: no body is a start with them all.
    choices = read_body(request, StartRunIn, empty_means_defaults=True)
    budget_usd, problem = parse_budget_usd(choices.budget_usd)
    if problem:
        raise ValidationError({"budget_usd": problem})
    start = StartChoices(seed=choices.seed, inference_only=choices.inference_only, budget_usd=budget_usd)
    if idempotency_key is None:
        check_start_run(experiment, inference_only=start.inference_only, budget_usd=start.budget_usd)
        run = do_start_run(experiment, actor(request), start.seed, start.inference_only, start.budget_usd)
        started = True
    else:
        try:
            run, started = start_run_once(experiment, actor(request), idempotency_key, start)
        except IdempotencyConflict as exc:
            raise HttpError(409, str(exc)) from None
    return Status(201 if started else 200, run_out(_run(run.pk), with_progress=True))


# --- pausing, resuming, cancelling ---------------------------------------------------------------


def _run(pk: int) -> Run:
    return Run.objects.select_related("experiment").prefetch_related("arms").get(pk=pk)


def _transition(request: HttpRequest, run_id: str, action: str) -> RunOut:
    run = access_run(request, run_id, write=True)
    try:
        check_run_transition(run, action)
    except ValidationError as exc:
        raise HttpError(409, "; ".join(exc.messages)) from None
    if not do_run_action(run, action, by=actor(request)):
        raise HttpError(409, f"the run changed while it was asked to {action}: read it again")
    return run_out(_run(run.pk), with_progress=True)


TRANSITION_RESPONSES: dict[int, Any] = {200: RunOut, 409: ErrorBody, **COMMON_ERRORS}


@router.post(
    "/runs/{run_id}/pause",
    response=TRANSITION_RESPONSES,
    auth=RUN,
    summary="Pause a running run: attempts under way finish, queued ones wait (409 unless running)",
)
def pause_run(request: HttpRequest, run_id: str) -> RunOut:
    return _transition(request, run_id, "pause")


@router.post(
    "/runs/{run_id}/resume",
    response=TRANSITION_RESPONSES,
    auth=RUN,
    summary="Resume a paused run (409 unless paused)",
)
def resume_run(request: HttpRequest, run_id: str) -> RunOut:
    return _transition(request, run_id, "resume")


@router.post(
    "/runs/{run_id}/cancel",
    response=TRANSITION_RESPONSES,
    auth=RUN,
    summary="Cancel a run: its queued attempts are cancelled (409 once it has finished)",
)
def cancel_run(request: HttpRequest, run_id: str) -> RunOut:
    return _transition(request, run_id, "cancel")
