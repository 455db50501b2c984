"""Writes with side effects. ``check_*`` validates and raises; ``do_*`` assumes valid input
and is atomic. Views and commands call these, never the models directly."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from datasets.models import Dataset, TaskInstance
from datasets.recipes import CheckedRecipe, check_recipe, do_set_recipes
from evaluation.evaluator import active_profile
from evaluation.models import EvaluatorProfile
from evaluation.workloads import workload_for, workload_kinds
from evaluation.workloads.base import EXAMPLES, QUESTION
from experiments.attempt_queue import enqueue_attempts
from experiments.bulk import insert_rows
from experiments.misconfigured import do_retry_misconfigured_arms, misconfigured_arms
from experiments.models import (
    Allocation,
    Attempt,
    AttemptStatus,
    ContextMode,
    Experiment,
    ModelArm,
    Run,
    RunArm,
    RunStatus,
    SampleStrategy,
    Strata,
)
from experiments.pipeline import finish_run_if_done, observe_run_duration
from experiments.planner import attempt_order, sample_tasks
from experiments.prompts import prompt_version
from experiments.replay import experiment_arm_problems
from experiments.signals import announce_run_changed
from orgs.models import Organization
from prbench.inputs import (
    ARM_CONFIG_MAX_BYTES,
    DESCRIPTION_MAX,
    LABEL_MAX,
    NAME_MAX,
    PROMPT_TEMPLATE_MAX,
    document_problems,
    normalised_newlines,
    text_errors,
    text_problem,
)
from providers import gateway
from providers.policy import arm_credential_problems, served_model

# --- experiments -------------------------------------------------------------------------


@dataclass
class ArmSpec:
    label: str
    provider: str
    model_name: str
    config: dict[str, Any] = field(default_factory=dict)
    credential: str = ""  # the org's credential for the provider, by name ("": its only one)


@dataclass
class ExperimentSpec:
    name: str
    dataset: Dataset
    arms: list[ArmSpec]
    description: str = ""
    sample_size: int | None = None
    sample_strategy: str = SampleStrategy.RANDOM
    stratify_by: str = ""
    allocation: str = Allocation.PROPORTIONAL
    seed: int = 0
    repetitions: int = 1
    prompt_template: str | None = None
    prompt_builtin: str = ""  # the built-in prompt (name@version) prompt_template is; "" for one's own
    few_shot_dataset: Dataset | None = None
    few_shot_k: int = 0
    context_mode: str = ContextMode.ORACLE
    include_quarantined: bool = False
    budget_usd: Decimal | None = None
    response_cache: bool = False
    grading: str = ""  # one of the dataset kind's grading modes; "": the kind's default
    # Environment recipes for the dataset's repositories (datasets/recipes.py), set with the
    # experiment; left out of a spec, the dataset's recipes stay as they are.
    environments: list[CheckedRecipe] = field(default_factory=list)


class SpecError(ValidationError):
    """Carries every problem found, each prefixed with the field it concerns."""

    @property
    def field(self) -> str | None:
        """The spec field the first problem names (``arms[1].model_name``), None when it names
        none (the document as a whole)."""
        return spec_field_of(self.messages[0]) if self.messages else None


# "arms[1].model_name: ...", "few_shot.k: ...", "arms[0].credential must be ..."
_FIELD_PATH = re.compile(r"(?P<path>[A-Za-z_]\w*(?:\[\d+\])?(?:\.\w+(?:\[\d+\])?)*)(?P<end>:| )")


def spec_field_of(problem: str) -> str | None:
    found = _FIELD_PATH.match(problem)
    if found is None:
        return None
    top = re.split(r"[.\[]", found["path"], maxsplit=1)[0]
    # "name: unknown field" names an unknown field too; a bare word before a space is only a
    # field when the spec has it ("the spec must be ...", "top level: ..." are not).
    return found["path"] if found["end"] == ":" or top in SPEC_FIELDS else None


MODEL_MAX = NAME_MAX
SEED_LIMIT = 2**62
SPEC_FIELDS = {
    "name",
    "description",
    "dataset",
    "sample_size",
    "sample_strategy",
    "stratify_by",
    "allocation",
    "seed",
    "repetitions",
    "prompt_template",
    "template",
    "few_shot",
    "context_mode",
    "include_quarantined",
    "budget_usd",
    "response_cache",
    "grading",
    "arms",
    "environments",
}
ARM_FIELDS = {"label", "provider", "model_name", "credential", "config"}


def check_experiment_spec(org: Organization, raw: Any) -> ExperimentSpec:
    """Validate a JSON/YAML experiment spec completely, naming every offending field."""
    if not isinstance(raw, dict):
        raise SpecError(["the spec must be a mapping of fields"])
    # First what no field check should meet: non-text keys, NUL, NaN, dates, deep nesting.
    unstorable = document_problems(raw)
    if unstorable:
        raise SpecError(unstorable)
    errors = [f"{key}: unknown field" for key in sorted(set(raw) - SPEC_FIELDS)]
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        errors.append(f"name: required, a non-empty string of at most {NAME_MAX} characters")
    else:
        errors += text_errors(name, "name", NAME_MAX)
    dataset = None
    if not isinstance(raw.get("dataset"), str):
        errors.append("dataset: required, the name of one of the organisation's datasets")
    else:
        dataset = Dataset.objects.filter(org=org, name=raw["dataset"]).first()
        if dataset is None:
            errors.append(f"dataset: no dataset named {raw['dataset']!r} in this organisation")
    errors += _int_field_errors(raw, "sample_size", minimum=1, maximum=1_000_000, optional=True)
    errors += _int_field_errors(raw, "seed", minimum=-SEED_LIMIT, maximum=SEED_LIMIT)
    errors += _int_field_errors(raw, "repetitions", minimum=1, maximum=100)
    strategy = raw.get("sample_strategy", SampleStrategy.RANDOM)
    if strategy not in SampleStrategy.values:
        errors.append(f"sample_strategy: must be one of {', '.join(SampleStrategy.values)}")
    stratify_by, allocation, sampling_errors = check_strata(raw, strategy)
    errors += sampling_errors
    errors += text_errors(raw.get("description", ""), "description", DESCRIPTION_MAX, multiline=True)
    context_mode = raw.get("context_mode", ContextMode.ORACLE)
    if context_mode not in ContextMode.values:
        errors.append(f"context_mode: must be one of {', '.join(ContextMode.values)}")
    for flag in ("include_quarantined", "response_cache"):
        if not isinstance(raw.get(flag, False), bool):
            errors.append(f"{flag}: must be true or false")
    if dataset is not None and (problem := grading_problem(dataset.kind, raw.get("grading"))):
        errors.append(f"grading: {problem}")
    template = raw.get("prompt_template")
    if isinstance(template, str):
        template = raw["prompt_template"] = normalised_newlines(template)
    if template is not None:
        errors += [f"prompt_template: {e}" for e in prompt_template_errors(template)]
    builtin, few_shot, prompt_errors = check_prompt_choices(org, raw, dataset)
    errors += prompt_errors
    budget_usd, problem = parse_budget_usd(raw.get("budget_usd"))
    if problem:
        errors.append(f"budget_usd: {problem}")
    arms, arm_errors = _check_arms(org, raw.get("arms"))
    errors += arm_errors
    environments, environment_errors = check_spec_environments(dataset, raw.get("environments"))
    errors += environment_errors
    flagged = {error.split(":")[0] for error in arm_errors}  # said once per field is enough
    errors += [
        e for i, a in enumerate(arms) for e in arm_text_errors(a, f"arms[{i}]") if e.split(":")[0] not in flagged
    ]
    if errors:
        raise SpecError(errors)
    assert dataset is not None and isinstance(name, str)
    return ExperimentSpec(
        name=name.strip(),
        dataset=dataset,
        arms=arms,
        description=str(raw.get("description", "")),
        sample_size=raw.get("sample_size"),
        sample_strategy=strategy,
        stratify_by=stratify_by,
        allocation=allocation,
        seed=raw.get("seed", 0),
        repetitions=raw.get("repetitions", 1),
        prompt_template=builtin_prompt(dataset.kind, builtin) if builtin else template,
        prompt_builtin=builtin,
        few_shot_dataset=few_shot[0] if few_shot else None,
        few_shot_k=few_shot[1] if few_shot else 0,
        context_mode=context_mode,
        include_quarantined=raw.get("include_quarantined", False),
        budget_usd=budget_usd,
        response_cache=raw.get("response_cache", False),
        grading=raw.get("grading") or "",
        environments=environments,
    )


def check_spec_environments(dataset: Dataset | None, raw: Any) -> tuple[list[CheckedRecipe], list[str]]:
    """A spec's ``environments``: recipes for its dataset's repositories, each checked as the
    dataset page and ``manage.py environments set`` check one, one per repository version."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], ["environments: must be a list of recipes (repo, version, python, packages, ...)"]
    if dataset is None:
        return [], []  # the dataset's own error says why
    checked, errors, seen = [], [], set()
    for index, entry in enumerate(raw):
        where = f"environments[{index}]"
        try:
            recipe = check_recipe(dataset, entry, where)
        except ValidationError as exc:
            errors += exc.messages
            continue
        if (recipe.repo, recipe.version) in seen:
            errors.append(f"{where}.version: a second recipe for {recipe.repo} {recipe.version or '(every version)'}")
        seen.add((recipe.repo, recipe.version))
        checked.append(recipe)
    return checked, errors


FEW_SHOT_MAX = 20


def builtin_prompt(kind: str, name: str) -> str:
    return workload_for(kind).builtin_prompts[name]


def check_prompt_choices(
    org: Organization, raw: dict, dataset: Dataset | None
) -> tuple[str, tuple[Dataset, int] | None, list[str]]:
    """``template`` (a built-in prompt of the dataset's kind, by name@version, instead of
    ``prompt_template``) and ``few_shot`` ({dataset, k}: a dev split of the same kind, not the
    evaluated one): which prompt the experiment asks with, checked against each other."""
    errors: list[str] = []
    builtin = raw.get("template") or ""
    known = workload_for(dataset.kind).builtin_prompts if dataset else {}
    if builtin and raw.get("prompt_template") is not None:
        errors.append("template: give a built-in template or a prompt_template, not both")
    elif builtin and dataset and builtin not in known:
        shown = ", ".join(sorted(known)) or "none"
        errors.append(f"template: {str(builtin)[:60]!r} is not a built-in prompt for {dataset.kind} (known: {shown})")
    few_shot, few_shot_errors = _check_few_shot(org, raw.get("few_shot"), dataset)
    errors += few_shot_errors
    if errors or dataset is None:
        return str(builtin), few_shot, errors
    text = known[builtin] if builtin else raw.get("prompt_template") or workload_for(dataset.kind).default_prompt
    field = "template" if builtin else "prompt_template"
    errors += [f"{field}: {problem}" for problem in workload_for(dataset.kind).template_errors(text)]
    if few_shot and EXAMPLES not in text:
        errors.append(f"{field}: a few-shot experiment's prompt needs {EXAMPLES} where its examples go")
    elif not few_shot and EXAMPLES in text:
        errors.append(f"{field}: {EXAMPLES} needs few_shot (a dev split to draw the examples from)")
    return str(builtin), few_shot, errors


def _check_few_shot(
    org: Organization, raw: Any, dataset: Dataset | None
) -> tuple[tuple[Dataset, int] | None, list[str]]:
    if raw is None:
        return None, []
    if not isinstance(raw, dict) or set(raw) != {"dataset", "k"}:
        return None, ["few_shot: must be a mapping with dataset (a dev split's name) and k (how many examples)"]
    k = raw["k"]
    errors = []
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= FEW_SHOT_MAX:
        errors.append(f"few_shot.k: must be a whole number from 1 to {FEW_SHOT_MAX}")
    dev = Dataset.objects.filter(org=org, name=raw["dataset"]).first() if isinstance(raw["dataset"], str) else None
    if dev is None:
        errors.append("few_shot.dataset: must name one of the organisation's datasets")
    elif dataset is not None and dev.pk == dataset.pk:
        errors.append("few_shot.dataset: the examples must come from another dataset than the evaluated one")
    elif dataset is not None and dev.kind != dataset.kind:
        errors.append(f"few_shot.dataset: {dev.name!r} holds {dev.kind} tasks, the experiment's are {dataset.kind}")
    if errors:
        return None, errors
    assert dev is not None
    return (dev, k), []


def check_strata(raw: dict, strategy: str) -> tuple[str, str, list[str]]:
    """``stratify_by`` (``category``, ``difficulty``, or both as a list or "a,b") and
    ``allocation``: required and allowed only with ``sample_strategy: stratified``."""
    errors = []
    given = raw.get("stratify_by", "")
    parts = given if isinstance(given, list) else str(given).split(",") if isinstance(given, str) else None
    stratify_by = ""
    if parts is None or not all(isinstance(part, str) for part in parts):
        errors.append("stratify_by: must be category, difficulty, or both (a list or 'category,difficulty')")
    else:
        chosen = {part.strip() for part in parts if part.strip()}
        if not chosen <= {Strata.CATEGORY, Strata.DIFFICULTY}:
            errors.append(f"stratify_by: {', '.join(sorted(chosen))!r} is not category, difficulty, or both")
        else:
            stratify_by = ",".join(name for name in ("category", "difficulty") if name in chosen)
    allocation = raw.get("allocation", Allocation.PROPORTIONAL)
    if allocation not in Allocation.values:
        errors.append(f"allocation: must be one of {', '.join(Allocation.values)}")
    if strategy == SampleStrategy.STRATIFIED and not stratify_by and not errors:
        errors.append("stratify_by: a stratified sample needs its strata (category, difficulty, or both)")
    if strategy != SampleStrategy.STRATIFIED and stratify_by:
        errors.append("stratify_by: only a stratified sample (sample_strategy: stratified) has strata")
    return stratify_by, str(allocation), errors


# A budget is a deliberate limit in dollars and cents: under a cent it could not pay for one
# call, and a million is beyond any benchmark (and far inside the database column).
BUDGET_MIN_USD = Decimal("0.01")
BUDGET_MAX_USD = Decimal(1_000_000)


def parse_budget_usd(raw: Any) -> tuple[Decimal | None, str]:
    """A budget in USD from a spec, a form or a command line: the amount (None: no budget;
    an empty value means none), or what is wrong with it. The one check for all three."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None, ""
    problem = (
        f"must be an amount in USD from {BUDGET_MIN_USD} to {BUDGET_MAX_USD:,}, with at most 2 decimals (e.g. 25.50)"
    )
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str, Decimal)):
        return None, problem
    try:
        # str() first: 12.3 in YAML is a float, and Decimal(12.3) is 12.300000000000000710…
        amount = Decimal(str(raw).strip())
    except InvalidOperation:
        return None, problem
    if (
        not amount.is_finite()
        or not BUDGET_MIN_USD <= amount <= BUDGET_MAX_USD
        or amount != amount.quantize(BUDGET_MIN_USD)
    ):
        return None, problem
    return amount.quantize(BUDGET_MIN_USD), ""


def arm_text_errors(arm: ArmSpec, where: str) -> list[str]:
    """Hygiene of what an arm stores, on top of its provider's own checks: names without
    control characters, a config of bounded size."""
    errors = text_errors(arm.label, f"{where}.label", LABEL_MAX)
    errors += text_errors(arm.model_name, f"{where}.model_name", MODEL_MAX)
    size = len(json.dumps(arm.config))
    if size > ARM_CONFIG_MAX_BYTES:
        errors.append(f"{where}.config: {size:,} bytes as JSON; at most {ARM_CONFIG_MAX_BYTES:,} are allowed")
    return errors


def grading_problem(kind: str, grading: Any) -> str | None:
    """Why ``grading`` is not a grading mode of the dataset's kind ("" and None: its default)."""
    if grading in (None, ""):
        return None
    modes = workload_for(kind).grading_modes
    if not modes:
        return f"{kind} tasks are graded one way only; leave grading out"
    if grading not in modes:
        return f"must be one of {', '.join(modes)}"
    return None


def grading_mode(kind: str, chosen: str) -> str:
    """The mode answers are graded in: the one chosen, else the kind's default ("" for a
    kind graded one way)."""
    modes = workload_for(kind).grading_modes
    return chosen or (modes[0] if modes else "")


def prompt_template_errors(template: Any) -> list[str]:
    """What is wrong with a template whatever its dataset (which placeholders the dataset's
    kind can fill is checked with the dataset: ``check_prompt_choices``)."""
    if not isinstance(template, str) or not template.strip():
        return ["must be a non-empty string"]
    if problem := text_problem(template, PROMPT_TEMPLATE_MAX, multiline=True):
        return [problem]
    if QUESTION not in template:
        return [f"must contain {QUESTION}"]
    return []


def prompt_for_kind(template: str, kind: str) -> str:
    """The template an experiment on a ``kind`` dataset asks with when the form holds
    ``template``: empty, or a kind's default left as the form pre-filled it (the dataset was
    changed after), means the kind's own default; anything else is the customer's and stays
    (the placeholder check then says what this kind cannot fill)."""
    text = normalised_newlines(template or "").strip()
    if not text or text in {workload_for(other).default_prompt.strip() for other in workload_kinds()}:
        return workload_for(kind).default_prompt
    return normalised_newlines(template)


def _int_field_errors(
    raw: dict, key: str, *, minimum: int, maximum: int | None = None, optional: bool = False
) -> list[str]:
    if key not in raw or (optional and raw[key] is None):
        return []
    value = raw[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum or (maximum and value > maximum):
        upper = f" and at most {maximum}" if maximum else ""
        return [f"{key}: must be an integer of at least {minimum}{upper}"]
    return []


def _check_arms(org: Organization, raw_arms: Any) -> tuple[list[ArmSpec], list[str]]:
    if not isinstance(raw_arms, list) or not raw_arms:
        return [], ["arms: required, a non-empty list"]
    arms, errors, labels = [], [], set()
    for index, raw in enumerate(raw_arms):
        where = f"arms[{index}]"
        if not isinstance(raw, dict):
            errors.append(f"{where}: must be a mapping")
            continue
        errors += [f"{where}.{key}: unknown field" for key in sorted(set(raw) - ARM_FIELDS)]
        label = raw.get("label")
        if not isinstance(label, str) or not label.strip() or len(label) > LABEL_MAX:
            errors.append(f"{where}.label: required, a non-empty string of at most {LABEL_MAX} characters")
        elif label in labels:
            errors.append(f"{where}.label: {label!r} is used by another arm")
        else:
            labels.add(label)
        model_name = raw.get("model_name", "")
        if not isinstance(model_name, str) or len(model_name) > MODEL_MAX:
            errors.append(f"{where}.model_name: must be a string of at most {MODEL_MAX} characters")
        config = raw.get("config", {})
        provider = str(raw.get("provider", ""))
        errors += [f"{where}.{e}" for e in experiment_arm_problems(org.pk, provider, str(model_name), config)]
        credential, problems = arm_credential_problems(org.pk, provider, raw.get("credential", ""))
        errors += [f"{where}.{e} (arm {label!r})" for e in problems]
        arms.append(ArmSpec(str(label), str(raw.get("provider")), str(raw.get("model_name")), config, credential))
    return arms, errors


def check_experiment_name_free(org: Organization, name: str, experiment: Experiment | None = None) -> None:
    """An experiment's name is unique in its organisation (``experiment``: the one being renamed)."""
    clash = Experiment.objects.filter(org=org, name=name)
    if experiment is not None:
        clash = clash.exclude(pk=experiment.pk)
    if clash.exists():
        raise ValidationError("Another experiment in this organisation has that name.")


@transaction.atomic
def do_apply_experiment(org: Organization, spec: ExperimentSpec, user: Any = None) -> tuple[Experiment, bool]:
    """Create or update the experiment named in the spec; its arms become exactly the spec's."""
    experiment = Experiment.objects.select_for_update().filter(org=org, name=spec.name).first()
    return do_save_experiment(org, spec, user, experiment), experiment is None


@transaction.atomic
def do_save_experiment(
    org: Organization, spec: ExperimentSpec, user: Any = None, experiment: Experiment | None = None
) -> Experiment:
    if experiment is None:
        experiment = Experiment(org=org, created_by=user)
    else:
        # Only the row lock matters: a concurrent start_run waits until this save commits.
        Experiment.objects.select_for_update().only("pk").get(pk=experiment.pk)
    experiment.name = spec.name
    experiment.description = spec.description
    experiment.dataset = spec.dataset
    experiment.sample_size = spec.sample_size
    experiment.sample_strategy = spec.sample_strategy
    experiment.stratify_by = spec.stratify_by
    experiment.allocation = spec.allocation
    experiment.sample_seed = spec.seed
    experiment.repetitions = spec.repetitions
    experiment.context_mode = spec.context_mode
    experiment.include_quarantined = spec.include_quarantined
    experiment.budget_usd = spec.budget_usd
    experiment.response_cache = spec.response_cache
    experiment.grading = grading_mode(spec.dataset.kind, spec.grading)
    if spec.prompt_template is not None:
        experiment.prompt_template = spec.prompt_template
        experiment.prompt_builtin = spec.prompt_builtin
    elif experiment.pk is None:
        experiment.prompt_template = workload_for(spec.dataset.kind).default_prompt
    experiment.few_shot_dataset = spec.few_shot_dataset
    experiment.few_shot_k = spec.few_shot_k
    experiment.save()
    do_replace_arms(experiment, spec.arms)
    do_set_recipes(spec.dataset, spec.environments)
    return experiment


def do_replace_arms(experiment: Experiment, arms: list[ArmSpec]) -> None:
    # Runs keep their own RunArm snapshot, so replacing an experiment's arms is safe.
    experiment.arms.all().delete()
    ModelArm.objects.bulk_create(
        ModelArm(
            experiment=experiment,
            position=i,
            label=a.label,
            provider=a.provider,
            model_name=a.model_name,
            credential_name=a.credential,
            config=a.config,
        )
        for i, a in enumerate(arms)
    )


# --- runs --------------------------------------------------------------------------------


def runnable_tasks(experiment: Experiment) -> QuerySet[TaskInstance]:
    """The dataset's tasks a run may use: flaky (quarantined) ones only when asked for, and
    none of a version later than the one read with the dataset (a run records that one)."""
    tasks = experiment.dataset.tasks.filter(dataset_version__lte=experiment.dataset.version)
    return tasks if experiment.include_quarantined else tasks.filter(quarantined=False)


def sampled_task_ids(experiment: Experiment, seed: int) -> list[int]:
    """The tasks a run of the experiment with this seed uses, in dataset order: what
    ``do_start_run`` runs and the estimate prices. One query, of ids and strata only."""
    rows = list(runnable_tasks(experiment).values_list("pk", "category", "difficulty"))
    fields = experiment.stratify_by.split(",") if experiment.stratify_by else []
    index = {"category": 1, "difficulty": 2}

    def stratum(row: tuple) -> tuple:
        return tuple(row[index[name]] for name in fields)

    sample = sample_tasks(
        rows, experiment.sample_size, experiment.sample_strategy, seed, stratum, experiment.allocation
    )
    return [row[0] for row in sample]


def repository_problems(experiment: Experiment, validating: bool) -> list[str]:
    """What stops the dataset's repository tasks from being run: a repository with no
    configured source (needed to validate, and to show files in the prompt), or no test
    command to validate with."""
    dataset = experiment.dataset
    repo_tasks = dataset.tasks.exclude(repo="")
    repos = sorted(set(repo_tasks.values_list("repo", flat=True)))
    problems = []
    if validating or "{{repository}}" in experiment.prompt_template:
        problems += [
            f"dataset {dataset.name!r}: repository {repo} has no source to clone it from "
            "(import_tasks --repo-source OWNER/NAME=PATH_OR_URL)"
            for repo in repos
            if not dataset.repo_sources.get(repo)
        ]
    if validating and repos and not dataset.test_command and repo_tasks.filter(test_command=[]).exists():
        problems.append(
            f"dataset {dataset.name!r} has repository tasks but no test command to validate them with "
            "(set the dataset's test command, or start an inference-only run)"
        )
    return problems


def check_start_run(experiment: Experiment, inference_only: bool = False, budget_usd: Decimal | None = None) -> None:
    arms = list(experiment.arms.all())
    errors = []
    if not arms:
        errors.append("the experiment has no arms")
    for arm in arms:
        problems = experiment_arm_problems(experiment.org_id, arm.provider, arm.model_name, arm.config)
        problems += arm_credential_problems(experiment.org_id, arm.provider, arm.credential_name)[1]
        errors += [f"arm {arm.label!r}: {e}" for e in problems]
    if not errors:
        errors += unenforceable_budget_problems(experiment, arms, budget_usd)
    if not runnable_tasks(experiment).exists():
        errors.append(f"dataset {experiment.dataset.name!r} has no tasks that are not quarantined")
    errors += repository_problems(experiment, validating=not inference_only)
    if experiment.sample_size == 0:
        errors.append("the sample size is 0")
    kind = experiment.dataset.kind
    errors += [f"prompt template: {e}" for e in workload_for(kind).template_errors(experiment.prompt_template)]
    if workload_for(kind).verdict_decides and active_profile(kind) is None:
        errors.append(f"no evaluator profile for {kind} answers is active, and only its verdicts can score them")
    if errors:
        raise ValidationError(errors)


def _judged_by(kind: str) -> EvaluatorProfile | None:
    return active_profile(kind) if workload_for(kind).judged_by_evaluator else None


def unenforceable_budget_problems(
    experiment: Experiment, arms: list[ModelArm], budget_usd: Decimal | None
) -> list[str]:
    """A budget holds only calls whose price is known before they are made: with one, every
    arm needs a catalog price (or, for the mock, configured prices)."""
    budgets = [name for name, amount in (("run", budget_usd), ("experiment", experiment.budget_usd)) if amount]
    if not budgets:
        return []
    which = " and ".join(f"the {name} budget" for name in budgets)
    return [
        f"arm {arm.label!r}: {arm.provider}/{arm.model_name} has no known price, so {which} cannot be enforced "
        "(add a price to the catalog, or start the run without a budget)"
        for arm in arms
        if gateway.arm_price(arm.provider, _served(experiment, arm), arm.config) is None
    ]


def _served(experiment: Experiment, arm: ModelArm) -> str:
    return served_model(experiment.org_id, arm.provider, arm.model_name, arm.credential_name)


@transaction.atomic
def do_start_run(
    experiment: Experiment,
    user: Any = None,
    seed: int | None = None,
    inference_only: bool = False,
    budget_usd: Decimal | None = None,
) -> Run:
    """Materialise every attempt in one transaction; work is queued once it commits."""
    # Lock and re-read the experiment so the snapshot, the arms and the sample agree even if
    # someone saves the experiment at the same moment.
    experiment = Experiment.objects.select_for_update().select_related("dataset", "org").get(pk=experiment.pk)
    seed = experiment.sample_seed if seed is None else seed
    # The version read with the dataset bounds the tasks sampled below (runnable_tasks): an
    # import committing in between adds tasks of a later version, which this run neither
    # samples nor claims to have used.
    version = experiment.dataset.version
    now = timezone.now()
    run = Run.objects.create(
        org=experiment.org,
        experiment=experiment,
        seed=seed,
        status=RunStatus.RUNNING,
        inference_only=inference_only,
        budget_usd=budget_usd,
        dataset_version=version,
        config_snapshot=_snapshot(experiment),
        # Only kinds the evaluator judges (a PR patch, free text) get their kind's active profile.
        evaluator_profile=_judged_by(experiment.dataset.kind),
        created_by=user,
        started_at=now,
    )
    run_arms = RunArm.objects.bulk_create(
        RunArm(
            run=run,
            label=a.label,
            provider=a.provider,
            model_name=a.model_name,
            credential_name=a.credential_name,
            config=a.config,
            position=a.position,
        )
        for a in experiment.arms.all()
    )
    task_ids = sampled_task_ids(experiment, seed)
    cells = [(task_id, arm, rep) for task_id in task_ids for arm in run_arms for rep in range(experiment.repetitions)]
    # insert_rows, not bulk_create: preparing every field of thousands of model instances
    # in Python took most of the time between "start" and the first provider call.
    insert_rows(
        Attempt,
        [
            {"run_id": run.pk, "task_id": task_id, "arm_id": arm.pk, "repetition": rep, "sequence": i, "queued_at": now}
            for i, (task_id, arm, rep) in enumerate(attempt_order(cells, seed))
        ],
    )
    attempt_ids = list(run.attempts.order_by("sequence").values_list("pk", flat=True))
    run.total_attempts = len(attempt_ids)
    run.save(update_fields=["total_attempts"])
    transaction.on_commit(lambda: enqueue_attempts(run.pk, attempt_ids))
    return run


def few_shot_snapshot(experiment: Experiment) -> dict | None:
    """Where a run's few-shot examples come from, as it records it: the dev split by id (and
    name, for a reader), and how many; None without."""
    if experiment.few_shot_dataset_id is None or not experiment.few_shot_k:
        return None
    dataset = experiment.few_shot_dataset
    assert dataset is not None
    return {"dataset_id": dataset.pk, "dataset": dataset.name, "k": experiment.few_shot_k}


def _snapshot(experiment: Experiment) -> dict:
    return {
        "name": experiment.name,
        "dataset": experiment.dataset.name,
        "sample_size": experiment.sample_size,
        "sample_strategy": experiment.sample_strategy,
        "stratify_by": experiment.stratify_by,
        "allocation": experiment.allocation,
        "sample_seed": experiment.sample_seed,
        "repetitions": experiment.repetitions,
        "prompt_template": experiment.prompt_template,
        "prompt_version": prompt_version(experiment.prompt_template),
        "prompt_builtin": experiment.prompt_builtin,
        "few_shot": few_shot_snapshot(experiment),
        "context_mode": experiment.context_mode,
        "include_quarantined": experiment.include_quarantined,
        "response_cache": experiment.response_cache,
        # What the task's kind reads when it grades (evaluation.workloads.base.Context.grading).
        "grading": _grading_settings(experiment),
        "arms": [
            {
                "label": a.label,
                "provider": a.provider,
                "model_name": a.model_name,
                "credential": a.credential_name,
                "config": a.config,
            }
            for a in experiment.arms.all()
        ],
    }


def _grading_settings(experiment: Experiment) -> dict:
    mode = grading_mode(experiment.dataset.kind, experiment.grading)
    return {"grading": mode} if mode else {}


def check_run_transition(run: Run, action: str) -> None:
    allowed = {
        "pause": (RunStatus.RUNNING,),
        "resume": (RunStatus.PAUSED,),
        "cancel": (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED),
    }
    if action not in allowed:
        raise ValidationError(f"unknown action {action!r}: choose pause, resume or cancel")
    if action == "resume" and can_retry_misconfigured(run):
        return
    if run.status not in allowed[action]:
        raise ValidationError(f"cannot {action} a run that is {run.status}")


def do_pause_run(run: Run) -> bool:
    # Attempts already claimed finish; queued ones stay queued and workers skip them.
    return bool(Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(status=RunStatus.PAUSED))


def can_retry_misconfigured(run: Run) -> bool:
    """A run that went on, or finished, with an arm stopped as misconfigured can be resumed:
    that arm's attempts are tried again (experiments/misconfigured.py)."""
    return run.status in RESUMABLE_FOR_ARMS and misconfigured_arms(run).exists()


# A paused run resumes as always; a running or finished one only to retry a stopped arm.
RESUMABLE_FOR_ARMS = (RunStatus.PAUSED, RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED)


@transaction.atomic
def do_resume_run(run: Run) -> bool:
    if not Run.objects.filter(pk=run.pk, status=RunStatus.PAUSED).update(status=RunStatus.RUNNING):
        if not can_retry_misconfigured(run):
            return False
        # Finished because the arm was stopped: running again, until its attempts are done.
        Run.objects.filter(pk=run.pk, status__in=RESUMABLE_FOR_ARMS).update(status=RunStatus.RUNNING, finished_at=None)
    retried = do_retry_misconfigured_arms(run)
    queued = list(run.attempts.filter(status=AttemptStatus.QUEUED).order_by("sequence").values_list("pk", flat=True))
    transaction.on_commit(lambda: (enqueue_attempts(run.pk, queued), finish_run_if_done(run.pk)))
    if retried:  # their not-called failures left the counts: the boards are rebuilt
        transaction.on_commit(functools.partial(announce_run_changed, run.pk), robust=True)
    return True


@transaction.atomic
def do_cancel_run(run: Run, by: Any = None) -> bool:
    """Cancel the run; ``by``: the person who asked, for its page to say."""
    active = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED)
    cancelled_by = by if getattr(by, "is_authenticated", False) else None
    if not Run.objects.filter(pk=run.pk, status__in=active).update(
        status=RunStatus.CANCELLED, finished_at=timezone.now(), cancelled_by=cancelled_by
    ):
        return False
    run.attempts.filter(status=AttemptStatus.QUEUED).update(status=AttemptStatus.CANCELLED)
    observe_run_duration(run.pk)
    transaction.on_commit(functools.partial(announce_run_changed, run.pk), robust=True)
    return True


def do_run_action(run: Run, action: str, by: Any = None) -> bool:
    """Pause, resume or cancel the run; ``by``: who asked (a cancelled run names them)."""
    if action == "cancel":
        return do_cancel_run(run, by)
    return {"pause": do_pause_run, "resume": do_resume_run}[action](run)
