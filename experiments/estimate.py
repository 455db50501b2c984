"""What a run of an experiment may cost, per arm, before it starts.

Tokens: the prompts of the tasks the run would sample, rendered by the pipeline's own
builder and counted by the gateway's rule (about four characters a token), and each arm's
output ceiling (its ``max_tokens``) for every attempt. Prices: the ones the gateway would
use. The maximum is what the budgets reserve; the "likely" figure replaces the ceiling by the
mean output of the same model's earlier answers on the same dataset, when there are some.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from decimal import Decimal

from django.db.models import Avg, Count, Q

from datasets.models import TaskInstance
from evaluation.workloads.base import EXAMPLES
from experiments.actions import few_shot_snapshot, sampled_task_ids
from experiments.context import DEFAULT_BUDGET_CHARS
from experiments.few_shot import examples_for
from experiments.models import Attempt, AttemptStatus, ContextMode, Experiment, ModelArm, Run
from experiments.prompts import DEFAULT_MAX_OUTPUT_TOKENS, prompt_request, render_prompt
from providers.gateway import arm_price, estimated_prompt_tokens
from providers.policy import served_model
from providers.pricing import ceiling_cost

ZERO = Decimal(0)


@dataclass(frozen=True)
class ArmEstimate:
    label: str
    provider: str
    model_name: str
    attempts: int
    input_tokens: int
    output_ceiling_tokens: int
    max_cost: Decimal | None  # None: the price is unknown
    earlier_answers: int = 0  # how many earlier answers the likely figure is the mean of
    likely_output_tokens: int | None = None
    likely_cost: Decimal | None = None


@dataclass(frozen=True)
class RunEstimate:
    tasks: int
    repetitions: int
    arms: list[ArmEstimate]

    @property
    def attempts(self) -> int:
        return sum(arm.attempts for arm in self.arms)

    @property
    def input_tokens(self) -> int:
        return sum(arm.input_tokens for arm in self.arms)

    @property
    def output_ceiling_tokens(self) -> int:
        return sum(arm.output_ceiling_tokens for arm in self.arms)

    @property
    def max_cost(self) -> Decimal:
        """Of the priced arms only: see ``unpriced``."""
        return sum((arm.max_cost for arm in self.arms if arm.max_cost is not None), ZERO)

    @property
    def likely_cost(self) -> Decimal:
        """Each priced arm's likely cost, or its maximum when it has no history."""
        return sum((_likely_or_max(arm) for arm in self.arms if arm.max_cost is not None), ZERO)

    @property
    def unpriced(self) -> list[str]:
        return [arm.label for arm in self.arms if arm.max_cost is None]


def _likely_or_max(arm: ArmEstimate) -> Decimal:
    return arm.likely_cost if arm.likely_cost is not None else arm.max_cost or ZERO


def estimate_run(experiment: Experiment, seed: int | None = None) -> RunEstimate:
    """The estimate for a run with this seed (default: the experiment's), sampling the same
    tasks ``do_start_run`` would."""
    seed = experiment.sample_seed if seed is None else seed
    sampled = sampled_task_ids(experiment, seed)
    prompt_tokens = _prompt_tokens(experiment, sampled, seed) * experiment.repetitions
    attempts = len(sampled) * experiment.repetitions
    arms = list(experiment.arms.all())
    history = _earlier_output(experiment, arms)
    return RunEstimate(
        tasks=len(sampled),
        repetitions=experiment.repetitions,
        arms=[_arm_estimate(experiment.org_id, arm, attempts, prompt_tokens, history) for arm in arms],
    )


def _prompt_tokens(experiment: Experiment, task_ids: list[int], seed: int) -> int:
    """Every sampled task's prompt (a few-shot prompt's examples included), counted as the
    gateway counts a request's."""
    template, mode = experiment.prompt_template, experiment.context_mode or ContextMode.ORACLE
    tasks = (
        TaskInstance.objects.filter(pk__in=task_ids)
        .select_related("dataset")
        .only("external_id", "problem_statement", "repo_files", "repo", "payload", "category", "dataset__kind")
    )
    # The run it would be, as far as its examples go: the same draw as the run's own.
    run = Run(org_id=experiment.org_id, seed=seed, config_snapshot={"few_shot": few_shot_snapshot(experiment)})
    total = 0
    for task in tasks.iterator(chunk_size=500):
        examples = examples_for(run, task) if EXAMPLES in template else ""
        total += estimated_prompt_tokens(prompt_request(_prompt(template, task, mode, examples), {}))
    return total


def _prompt(template: str, task: TaskInstance, mode: str, examples: str) -> str:
    if task.repo and "{{repository}}" in template:
        # A repository's files would mean cloning it here: they are counted at the most the
        # files context may hold instead, an upper bound like the output ceiling.
        template = template.replace("{{repository}}", "x" * DEFAULT_BUDGET_CHARS)
    return render_prompt(template, task, mode, examples)


def _earlier_output(experiment: Experiment, arms: list[ModelArm]) -> dict[tuple[str, str], tuple[float, int]]:
    """Per (provider, model), the mean output tokens of its answers on this dataset, and how
    many there were: one grouped query."""
    if not arms:
        return {}
    same_model = Q()
    for arm in arms:
        same_model |= Q(arm__provider=arm.provider, arm__model_name=arm.model_name)
    rows = (
        Attempt.objects.filter(same_model, task__dataset_id=experiment.dataset_id, status=AttemptStatus.COMPLETED)
        .exclude(output_tokens=None)
        .values_list("arm__provider", "arm__model_name")
        .annotate(mean=Avg("output_tokens"), n=Count("id"))
    )
    return {(provider, model): (mean, n) for provider, model, mean, n in rows}


def _arm_estimate(
    org_id: int,
    arm: ModelArm,
    attempts: int,
    prompt_tokens: int,
    history: dict[tuple[str, str], tuple[float, int]],
) -> ArmEstimate:
    ceiling = arm.config.get("max_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
    served = served_model(org_id, arm.provider, arm.model_name, arm.credential_name)
    price = arm_price(arm.provider, served, arm.config)
    estimate = ArmEstimate(
        label=arm.label,
        provider=arm.provider,
        model_name=arm.model_name,
        attempts=attempts,
        input_tokens=prompt_tokens,
        output_ceiling_tokens=ceiling * attempts,
        max_cost=None if price is None else ceiling_cost(prompt_tokens, ceiling * attempts, price),
    )
    if (arm.provider, arm.model_name) not in history:
        return estimate
    mean, answers = history[(arm.provider, arm.model_name)]
    likely_output = min(math.ceil(mean), ceiling) * attempts
    return replace(
        estimate,
        earlier_answers=answers,
        likely_output_tokens=likely_output,
        likely_cost=None if price is None else ceiling_cost(prompt_tokens, likely_output, price),
    )


def usd(amount: Decimal | None) -> str:
    """Cents for dollars, four decimals below a dollar (a small run costs fractions of a cent)."""
    if amount is None:
        return "unknown"
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def format_estimate(estimate: RunEstimate) -> str:
    """The estimate as a text table, for ``start_run --dry-run``."""
    rows = [["arm", "model", "attempts", "input tokens", "output ceiling", "max cost", "likely cost"]]
    for arm in estimate.arms:
        likely = f"{usd(arm.likely_cost)} (mean of {arm.earlier_answers})" if arm.likely_cost is not None else "-"
        rows.append(
            [
                arm.label,
                f"{arm.provider}/{arm.model_name}",
                str(arm.attempts),
                f"{arm.input_tokens:,}",
                f"{arm.output_ceiling_tokens:,}",
                usd(arm.max_cost),
                likely,
            ]
        )
    unknown = " + unknown" if estimate.unpriced else ""
    rows.append(
        [
            "total",
            "",
            str(estimate.attempts),
            f"{estimate.input_tokens:,}",
            f"{estimate.output_ceiling_tokens:,}",
            usd(estimate.max_cost) + unknown,
            usd(estimate.likely_cost) + unknown,
        ]
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    header = f"{estimate.tasks} tasks x {estimate.repetitions} repetition(s) per arm; prompts at ~4 characters a token"
    return "\n".join([header, *lines])
