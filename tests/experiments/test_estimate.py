"""The pre-run estimate, with every figure worked out by hand for a two-task dataset.

Template "Fix {{problem_statement}}:\\n{{repository}}"; the gateway counts a request's text
(the empty system prompt, a newline, the user message) at one token per 4 characters, up:
- task A: "Fix bug one:\\n" (13) + "--- a.py ---\\nx = 1\\n" (19) = 32, plus 1 = 33 -> 9 tokens
- task B: "Fix second bug here:\\n" (21) + "--- a.py ---\\nz\\n" (15) + "\\n\\n" (2)
  + "--- b.py ---\\ny = 2\\n" (19) = 57, plus 1 = 58 -> 15 tokens
Three repetitions: 6 attempts per arm and (9 + 15) x 3 = 72 prompt tokens.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from datasets.models import Dataset, TaskInstance
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.context import DEFAULT_BUDGET_CHARS
from experiments.estimate import estimate_run, format_estimate
from experiments.models import Attempt, AttemptStatus, Run, RunArm, SampleStrategy
from providers.models import Price

TEMPLATE = "Fix {{problem_statement}}:\n{{repository}}"
MOCK = ArmSpec(
    "mock", "mock", "mock-estimate", {"price_input_per_mtok": 3, "price_output_per_mtok": 15, "max_tokens": 200}
)
CATALOG = ArmSpec("gpt", "openai", "estimate-test-model")  # no max_tokens: the request default, 4096
UNPRICED = ArmSpec("unpriced", "openai", "nobody-prices-this")


@pytest.fixture
def small(org):
    dataset = Dataset.objects.create(org=org, name="Two tasks")
    TaskInstance.objects.create(
        dataset=dataset, external_id="A", position=0, problem_statement="bug one", repo_files={"a.py": "x = 1\n"}
    )
    TaskInstance.objects.create(
        dataset=dataset,
        external_id="B",
        position=1,
        problem_statement="second bug here",
        repo_files={"b.py": "y = 2\n", "a.py": "z\n"},
    )
    Price.objects.create(
        provider="openai",
        model_pattern="estimate-test-model",
        input_per_mtok=Decimal(2),
        output_per_mtok=Decimal(8),
        valid_from=date(2024, 1, 1),
    )
    return dataset


def experiment_of(org, dataset, arms, **fields):
    spec = ExperimentSpec(name="Estimate", dataset=dataset, arms=arms, prompt_template=TEMPLATE, repetitions=3)
    for name, value in fields.items():
        setattr(spec, name, value)
    return do_save_experiment(org, spec)


def test_the_estimate_prices_prompts_and_output_ceilings(org, small):
    experiment = experiment_of(org, small, [MOCK, CATALOG, UNPRICED])

    estimate = estimate_run(experiment)

    mock, gpt, unpriced = estimate.arms
    assert (estimate.tasks, estimate.repetitions, estimate.attempts) == (2, 3, 18)
    assert (mock.attempts, mock.input_tokens, mock.output_ceiling_tokens) == (6, 72, 1200)
    assert mock.max_cost == Decimal("0.000216") + Decimal("0.018")  # 72 x $3/M + 1200 x $15/M
    assert (gpt.input_tokens, gpt.output_ceiling_tokens) == (72, 4096 * 6)
    assert gpt.max_cost == Decimal("0.000144") + Decimal("0.196608")  # 72 x $2/M + 24576 x $8/M
    assert unpriced.max_cost is None and unpriced.likely_cost is None
    assert estimate.unpriced == ["unpriced"]
    assert estimate.max_cost == Decimal("0.214968")  # of the priced arms; the page adds "+ unknown"
    assert mock.likely_cost is None and mock.earlier_answers == 0


def test_the_sample_is_the_one_the_run_would_take(org, small):
    experiment = experiment_of(org, small, [MOCK], sample_size=1, sample_strategy=SampleStrategy.FIRST)

    estimate = estimate_run(experiment)

    assert (estimate.tasks, estimate.arms[0].input_tokens) == (1, 9 * 3)


def test_the_likely_cost_uses_the_models_earlier_answers_on_the_dataset(org, small):
    experiment = experiment_of(org, small, [MOCK, CATALOG])
    earlier = Run.objects.create(org=org, experiment=experiment, seed=0)
    arm = RunArm.objects.create(run=earlier, label="old label", provider="mock", model_name="mock-estimate")
    task = small.tasks.first()
    now = timezone.now()
    for sequence, (status, output_tokens) in enumerate(
        [(AttemptStatus.COMPLETED, 50), (AttemptStatus.COMPLETED, 71), (AttemptStatus.FAILED, None)]
    ):
        Attempt.objects.create(
            run=earlier,
            task=task,
            arm=arm,
            repetition=sequence,
            sequence=sequence,
            queued_at=now,
            status=status,
            output_tokens=output_tokens,
        )

    mock, gpt = estimate_run(experiment).arms

    # Mean 60.5, rounded up to 61 a call: 366 for 6 attempts.
    assert (mock.earlier_answers, mock.likely_output_tokens) == (2, 366)
    assert mock.likely_cost == Decimal("0.000216") + Decimal("0.00549")  # 72 x $3/M + 366 x $15/M
    assert gpt.likely_cost is None  # no history for that model: only the ceiling


def test_repository_files_are_counted_at_the_context_budget_without_cloning(org, small):
    small.tasks.update(repo="owner/nowhere", base_commit="abc123")
    experiment = experiment_of(org, small, [MOCK], sample_size=1, sample_strategy=SampleStrategy.FIRST)

    estimate = estimate_run(experiment)  # no source for the repository, and no clone attempted

    # "\n" + "Fix bug one:\n" + the files context at its most.
    assert estimate.arms[0].input_tokens == -(-(1 + 13 + DEFAULT_BUDGET_CHARS) // 4) * 3


def test_the_table_shows_unknown_never_zero(org, small):
    experiment = experiment_of(org, small, [MOCK, UNPRICED])

    table = format_estimate(estimate_run(experiment))

    assert "2 tasks x 3 repetition(s) per arm" in table
    lines = table.splitlines()
    assert lines[3].split() == ["mock", "mock/mock-estimate", "6", "72", "1,200", "$0.0182", "-"]
    assert lines[4].split() == ["unpriced", "openai/nobody-prices-this", "6", "72", "24,576", "unknown", "-"]
    assert lines[6].split() == ["total", "12", "144", "25,776", "$0.0182", "+", "unknown", "$0.0182", "+", "unknown"]


# --- start_run --dry-run and --budget-usd ---------------------------------------------------


def start_run(*args: str) -> str:
    out = StringIO()
    call_command("start_run", "--org", "acme", "--experiment", "Estimate", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_a_dry_run_prints_the_estimate_and_starts_nothing(org, small):
    experiment_of(org, small, [MOCK])

    printed = start_run("--dry-run", "--budget-usd", "0.01")

    assert Run.objects.count() == 0 and Attempt.objects.count() == 0
    assert "mock/mock-estimate" in printed and "$0.0182" in printed
    assert printed.rstrip().endswith("Dry run: the checks pass; nothing was started.")


def test_a_dry_run_names_what_would_stop_the_run(org, small):
    experiment_of(org, small, [MOCK, UNPRICED])

    with pytest.raises(CommandError, match="arm 'unpriced': openai/nobody-prices-this has no known price"):
        start_run("--dry-run", "--budget-usd", "5")

    assert Run.objects.count() == 0


def test_budget_usd_sets_the_run_budget(org, small):
    experiment_of(org, small, [MOCK])

    run_id = start_run("--budget-usd", "2.5").splitlines()[0]

    assert Run.objects.get(code=run_id).budget_usd == Decimal("2.50")


@pytest.mark.parametrize("amount", ["0", "-3", "1.234", "lots", "nan", "1e9", "0.001"])
def test_a_bad_budget_is_named_and_starts_nothing(org, small, amount):
    experiment_of(org, small, [MOCK])

    with pytest.raises(CommandError, match=r"--budget-usd must be an amount in USD from 0\.01 to 1,000,000"):
        start_run("--budget-usd", amount)

    assert Run.objects.count() == 0
