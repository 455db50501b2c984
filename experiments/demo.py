"""The shipped demo: a dataset of 12 small real bugs and an experiment with three mock arms
and the careful one again as an agent;
the textkit repository's history, mined by ingest_prs, with an experiment on it; and
samples of question-answer benchmarks (HumanEval's code, MMLU's multiple choice) run with
mock arms, so the first screen shows both families of workload."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings

from datasets.demo import load_demo_dataset
from datasets.formats import FormatOptions
from datasets.formats.humaneval import parse as parse_humaneval
from datasets.formats.jeopardy import parse as parse_jeopardy
from datasets.formats.mmlu import parse as parse_mmlu
from datasets.imports import do_import_questions
from datasets.ingest import IngestOptions, ingest
from datasets.models import Dataset
from evaluation.models import EvaluatorProfile
from evaluation.testbed import build_testbed
from experiments.actions import check_experiment_spec, do_apply_experiment
from experiments.models import Experiment
from orgs.models import Organization

DEMO_EXPERIMENT = "Demo: mock arms, single-turn and agent"
DEMO_REPO_DATASET = "Demo: textkit repository"
DEMO_REPO_EXPERIMENT = "Demo: textkit bug fixes"
DEMO_DATA_DIR = Path(__file__).resolve().parent.parent / "tests" / "data"
DEMO_CODE_DATASET = "Demo: HumanEval sample"
DEMO_CODE_EXPERIMENT = "Demo: code that runs"
CODE_SAMPLE = 12
DEMO_JEOPARDY_DATASET = "Demo: Jeopardy sample"
DEMO_JEOPARDY_EXPERIMENT = "Demo: Jeopardy clues"
DEMO_MMLU_DATASET = "Demo: MMLU sample"
DEMO_MMLU_EXPERIMENT = "Demo: multiple choice, how sure?"
# Simulated models for questions: one that knows, one that mostly does, one that guesses.
QUESTION_ARMS = [
    {
        "label": "oracle",
        "provider": "mock",
        "model_name": "mock-oracle",
        "config": {"mode": "oracle", "latency_ms": 80, "price_input_per_mtok": 3.0, "price_output_per_mtok": 15.0},
    },
    {
        "label": "careful",
        "provider": "mock",
        "model_name": "mock-careful",
        "config": {
            "mode": "noisy",
            "quality": 0.7,
            "latency_ms": 200,
            "jitter_ms": 150,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 5.0,
        },
    },
    {
        "label": "guesser",
        "provider": "mock",
        "model_name": "mock-guesser",
        "config": {
            "mode": "noisy",
            "quality": 0.3,
            "latency_ms": 40,
            "jitter_ms": 20,
            "price_input_per_mtok": 0.15,
            "price_output_per_mtok": 0.6,
        },
    },
]

DEMO_ARMS: list[dict[str, Any]] = [
    {
        "label": "oracle",
        "provider": "mock",
        "model_name": "mock-oracle",
        "config": {
            "mode": "oracle",
            "latency_ms": 120,
            "jitter_ms": 80,
            "price_input_per_mtok": 3.0,
            "price_output_per_mtok": 15.0,
        },
    },
    {
        "label": "careful",
        "provider": "mock",
        "model_name": "mock-careful",
        "config": {
            "mode": "noisy",
            "quality": 0.75,
            "latency_ms": 300,
            "jitter_ms": 200,
            "price_input_per_mtok": 1.0,
            "price_output_per_mtok": 5.0,
        },
    },
    {
        "label": "cheap-flaky",
        "provider": "mock",
        "model_name": "mock-cheap",
        "config": {
            "mode": "noisy",
            "quality": 0.4,
            "latency_ms": 60,
            "jitter_ms": 40,
            "failure_rate": 0.35,
            "failure_category": "server_error",
            "max_retries": 1,
            "retry_base_ms": 50,
            "price_input_per_mtok": 0.15,
            "price_output_per_mtok": 0.6,
        },
    },
]

# The careful model again, as an agent: it works through the tools in the task's sandbox
# (lists, reads, edits, may run the tests, submits) instead of answering once, so the boards
# and the pairwise page compare one model both ways on the same tasks.
DEMO_AGENT_ARM = {
    "label": "careful-agent",
    "provider": "mock",
    "model_name": "mock-careful",
    "config": {
        **DEMO_ARMS[1]["config"],
        "latency_ms": 150,
        "jitter_ms": 100,
        "solver": "agent",
        "max_turns": 20,
    },
}


def load_demo_experiment(org: Organization, user=None) -> Experiment:
    dataset = load_demo_dataset(org)
    spec = check_experiment_spec(
        org,
        {
            "name": DEMO_EXPERIMENT,
            "dataset": dataset.name,
            "seed": 7,
            "repetitions": 1,
            "arms": [*DEMO_ARMS, DEMO_AGENT_ARM],
            "description": "An oracle, a careful model (once answering, once as an agent) and a cheap, flaky one, "
            "all simulated.",
        },
    )
    experiment, _ = do_apply_experiment(org, spec, user)
    return experiment


def load_repository_experiment(org: Organization, user=None) -> Experiment:
    """textkit, built under var/ and mined once: three bug fixes kept, one flaky fix
    quarantined, one refactor rejected; oracle and careful arms prompted with BM25 files, and
    the careful model as an agent."""
    repo = Path(settings.VAR_DIR) / "demo-repos" / "textkit"
    if not repo.exists():
        build_testbed(repo, flaky_counter=shared_scratch("flaky-runs"))
    # Every time: mining skips the commits already decided, so an interrupted demo resumes.
    for _ in ingest(org, DEMO_REPO_DATASET, IngestOptions("demo/textkit", str(repo))):
        pass
    Dataset.objects.filter(org=org, name=DEMO_REPO_DATASET, description="").update(
        description="A small library's real bug-fix history, mined with ingest_prs."
    )
    spec = check_experiment_spec(
        org,
        {
            "name": DEMO_REPO_EXPERIMENT,
            "dataset": DEMO_REPO_DATASET,
            "seed": 7,
            "repetitions": 2,
            "context_mode": "bm25",
            "arms": [*DEMO_ARMS[:2], DEMO_AGENT_ARM],
            "description": "Patches checked out, tested and judged on a real git repository.",
        },
    )
    experiment, _ = do_apply_experiment(org, spec, user)
    return experiment


def load_code_experiment(org: Organization, user=None) -> Experiment:
    """The first problems of HumanEval (shipped under tests/data, MIT), imported once, and
    three mock arms answering each twice: pass@1 and pass@2 under the quality board."""
    if not Dataset.objects.filter(org=org, name=DEMO_CODE_DATASET).exists():
        path = DEMO_DATA_DIR / "humaneval" / "HumanEval.jsonl.gz"
        tasks = parse_humaneval(path.name, path.read_bytes(), FormatOptions())[:CODE_SAMPLE]
        do_import_questions(org, DEMO_CODE_DATASET, tasks, path.name)
        Dataset.objects.filter(org=org, name=DEMO_CODE_DATASET).update(
            description=f"The first {CODE_SAMPLE} problems of HumanEval: each completion runs with its hidden tests."
        )
    return _question_experiment(
        org, user, DEMO_CODE_EXPERIMENT, DEMO_CODE_DATASET, "Completions run in the sandbox with the task's tests."
    )


def load_mmlu_experiment(org: Organization, user=None) -> Experiment:
    """Four of MMLU's subject files (shipped under tests/data, MIT), imported once, and the
    three mock arms answering a sample stratified by subject with a prompt that asks how sure
    they are: accuracy by subject, consistency and calibration under the boards."""
    if not Dataset.objects.filter(org=org, name=DEMO_MMLU_DATASET).exists():
        files = sorted((DEMO_DATA_DIR / "mmlu").glob("*.csv"))
        tasks = [task for path in files for task in parse_mmlu(path.name, path.read_bytes(), FormatOptions())]
        do_import_questions(org, DEMO_MMLU_DATASET, tasks, "tests/data/mmlu")
        Dataset.objects.filter(org=org, name=DEMO_MMLU_DATASET).update(
            description="Questions from four MMLU subjects (dev and val splits), four options each."
        )
    return _question_experiment(
        org,
        user,
        DEMO_MMLU_EXPERIMENT,
        DEMO_MMLU_DATASET,
        "A sample stratified by subject; each answer says how sure it is.",
        sample_size=20,
        sample_strategy="stratified",
        stratify_by="category",
        allocation="equal",
        template="confidence@1",
    )


def load_jeopardy_experiment(org: Organization, user=None) -> Experiment:
    """Ten Jeopardy-style clues in the published TSV layout (made up for PRBench, under
    tests/data/qa), imported once, and the three mock arms answering them in the jeopardy
    grading mode: the attempt pages show each response as read, the expected answer and why
    the judge took it or not."""
    if not Dataset.objects.filter(org=org, name=DEMO_JEOPARDY_DATASET).exists():
        path = DEMO_DATA_DIR / "qa" / "jeopardy_sample.tsv"
        tasks = parse_jeopardy(path.name, path.read_bytes(), FormatOptions())
        do_import_questions(org, DEMO_JEOPARDY_DATASET, tasks, path.name)
        Dataset.objects.filter(org=org, name=DEMO_JEOPARDY_DATASET).update(
            description="Ten clues in the Jeopardy! archive's layout, graded as a Jeopardy judge rules."
        )
    return _question_experiment(
        org, user, DEMO_JEOPARDY_EXPERIMENT, DEMO_JEOPARDY_DATASET, "Short answers, judged as the show judges them."
    )


def _question_experiment(
    org: Organization, user, name: str, dataset: str, description: str, **fields: object
) -> Experiment:
    spec = check_experiment_spec(
        org,
        {
            "name": name,
            "dataset": dataset,
            "seed": 7,
            "repetitions": 2,
            "arms": QUESTION_ARMS,
            "description": description,
            **fields,
        },
    )
    experiment, _ = do_apply_experiment(org, spec, user)
    return experiment


def shared_scratch(name: str) -> Path:
    """A file the sandbox's users can all reach: validations hide VAR_DIR from them."""
    directory = (
        Path(tempfile.gettempdir()) / "prbench-demo" / hashlib.sha256(str(settings.VAR_DIR).encode()).hexdigest()[:12]
    )
    directory.mkdir(parents=True, exist_ok=True)
    for part in (directory.parent, directory):
        part.chmod(0o755)
    return directory / name


DEMO_EVALUATOR = "mock-reviewer"
DEMO_TEXT_EVALUATOR = "mock-fact-checker"


def load_demo_evaluator() -> EvaluatorProfile:
    """The demo's evaluator: the mock, which scores from the validation summary plus seeded
    noise and says so. A real profile (staff, in the admin) takes over once it is active.
    Free-text answers get a mock of their own (truthful when the answer is a true reference
    answer), with the free-text prompt and rubric."""
    mock = {"provider": "mock", "model_name": "mock-evaluator", "provider_config": {"mode": "evaluator"}}
    EvaluatorProfile.objects.get_or_create(
        name=DEMO_TEXT_EVALUATOR, version=1, defaults={**mock, "workload": "free_text"}
    )
    profile, _ = EvaluatorProfile.objects.get_or_create(name=DEMO_EVALUATOR, version=1, defaults=mock)
    return profile
