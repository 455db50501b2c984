"""One workload interface: what a dataset's kind does with a task and a model's answer.

A kind says how a task becomes a prompt, what the right answer is (for the mock oracle),
which wrong ones a mock may give and by what text the mock recognises the task in a prompt,
and how an answer is extracted, validated and scored. The pipeline asks the kind of the
task's dataset and knows nothing else about it: adding a kind is a module here (its class
says everything about the kind: name, label, prompts, words), a line in ``WORKLOADS``
(evaluation/workloads/__init__.py) and an importer for its files. Every
kind ends an answered attempt the same way, a correct-or-not verdict (the boards' quality),
a score in [0, 1] and the artifacts that show why, so boards, statistics and exports work
for all of them.

``evaluate`` runs on a job's pool threads: it must not touch the database. Whatever it needs
beyond the task (the pipeline's validator, say) comes in its ``Context``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from evaluation.validation import ValidationResult
    from evaluation.workloads.wording import Wording

# The placeholder every kind's prompt has for the task's question or problem statement.
QUESTION = "{{problem_statement}}"
# Where a few-shot prompt puts its solved examples (drawn from another dataset, the dev split).
EXAMPLES = "{{examples}}"
# Whatever a template writes in double braces is meant as a placeholder: one its kind does not
# fill would reach the model as written ("Repository files: {{repository}}" in a quiz question).
PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")
# A template that asks for a confidence says "Confidence:"; the answer's last such line is it,
# as a percentage ("Confidence: 80%", "confidence: 80") or a probability ("Confidence: 0.8").
CONFIDENCE_ASKED = re.compile(r"\bconfidence\s*:", re.IGNORECASE)
STATED_CONFIDENCE = re.compile(r"\bconfidence\s*[:=]\s*(\d{1,3}(?:\.\d+)?)\s*(%?)", re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def asks_for_confidence(template: str) -> bool:
    # Asked of every answer, of one of a few templates (a run has one): a case-blind search
    # of a template of kilobytes each time was 1.5% of a worker's CPU (issue 31).
    return bool(CONFIDENCE_ASKED.search(template))


def stated_confidence(output: str) -> float | None:
    """The confidence an answer states, in [0, 1]; None when it states none (or nonsense)."""
    found = STATED_CONFIDENCE.findall(output)
    if not found:
        return None
    number, percent = found[-1]
    value = float(number)
    if percent or value > 1:
        value /= 100
    return value if 0 <= value <= 1 else None


@dataclass(frozen=True)
class ArtifactRow:
    """An artifact to store with the attempt (``ArtifactKind``), one per kind and attempt."""

    kind: str
    content: str = ""
    status: str = ""
    duration_ms: int | None = None


@dataclass(frozen=True)
class Evaluation:
    """What a kind made of one answer."""

    answer: str  # what was extracted from the output: a patch, a letter, a function
    # Right or not (``Attempt.resolved``, what every quality board counts); None when the
    # answer was not judged (an inference-only run).
    correct: bool | None
    score: float | None  # in [0, 1]; None when not judged
    # Further columns of the attempt the kind sets (a PR patch's validation figures).
    columns: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[ArtifactRow, ...] = ()
    validated: bool = False  # something was run on the answer (``Attempt.validated_at``)
    # The answer came but the harness gave no verdict on it (its tests hit a time limit the
    # gold patch hits too, a sandbox that failed): not the model's fault.
    harness_failed: bool = False


@dataclass(frozen=True)
class GradingRow:
    """One line of how an answer was graded, as the attempt page shows it: a label in a
    person's words and its value (``block``: shown as a block of text, a test's output say)."""

    label: str
    value: str
    block: bool = False


@dataclass(frozen=True)
class Context:
    """What the pipeline gives a kind to evaluate with (plain values and callables)."""

    inference_only: bool = False
    # The run's grading settings from its experiment (qa_exact's ``grading`` mode, ...).
    grading: dict[str, Any] = field(default_factory=dict)
    # PR patches: the pipeline's validator (repository checkout, one validation per core).
    validate: Callable[[Any, str], ValidationResult] | None = None
    # PR patches: whether the task's gold patch runs out of the validation time too, asked only
    # when a patch's tests did. None: no gold to compare with, so the timeout is the patch's.
    gold_times_out: Callable[[Any], bool] | None = None


class Workload:
    """One kind. ``task`` arguments are ``TaskInstance`` rows (with their dataset loaded):
    ``problem_statement`` is the question, ``payload`` the kind's own fields."""

    kind: ClassVar[str]
    # How forms and pages name the kind (``Dataset.kind``'s choices come from here).
    label: ClassVar[str]
    # How pages name its questions, answers and verdicts (evaluation/workloads/wording.py).
    words: ClassVar[Wording]
    # The quality board's heading and what a success "does", e.g. ("Accuracy", "answers correctly").
    quality_metric: ClassVar[tuple[str, str]] = ("Accuracy", "answers correctly")
    # Whether the evaluator agent judges its answers (a PR patch's review, free text's truth).
    judged_by_evaluator: ClassVar[bool] = False
    # Whether its answers are patches: the quality board then shows their tests and whether
    # they applied, and the attempt page the diff.
    answers_are_patches: ClassVar[bool] = False
    # Whether the run page shows pass@k over the repetitions (code: k samples, one passing).
    shows_pass_at_k: ClassVar[bool] = False
    # Whether that verdict is the answer's correctness (free text): ``evaluate`` leaves it open
    # and recording the verdict settles it, so a run needs an active profile for the kind.
    verdict_decides: ClassVar[bool] = False
    # The prompt an experiment on this kind starts from.
    default_prompt: ClassVar[str] = QUESTION
    # The placeholders its prompts fill besides ``{{examples}}``, which every kind's few-shot
    # prompts may hold.
    placeholders: ClassVar[tuple[str, ...]] = (QUESTION,)
    # Built-in prompts by "name@version" (plain, chain of thought, few-shot, ...). A published
    # version's text never changes: a new text is a new version, so a run's prompt is known
    # by its name as well as by its hash.
    builtin_prompts: ClassVar[dict[str, str]] = {}
    # The grading modes an experiment may choose (``grading``), the first the default; none
    # for a kind graded one way.
    grading_modes: ClassVar[tuple[str, ...]] = ()

    def payload_errors(self, payload: dict) -> list[str]:
        """What is missing or wrong in a task's ``payload``, each naming its field."""
        return []

    def template_errors(self, template: str) -> list[str]:
        """What in ``template`` this kind cannot fill, each placeholder named with the kind:
        checked when an experiment is saved, when a run starts and before each call, so such a
        prompt is never sent (nor paid for, nor scored)."""
        return list(_template_errors(self.kind, self.placeholders, template))

    def render_prompt(self, template: str, task: Any, repository: Callable[[], str]) -> str:
        """The prompt for ``task``. ``repository`` renders a PR task's files, read only when
        the template shows them."""
        return template.replace(QUESTION, task.problem_statement)

    def render_example(self, task: Any) -> str:
        """A solved example for a few-shot prompt: the task as asked, then its right answer."""
        question = self.render_prompt(QUESTION, task, lambda: "")  # a question kind shows no files
        return f"{question}\n{self.reference_output(task)}"

    def reference_output(self, task: Any) -> str:
        """A model's output that scores 1: what the mock oracle answers."""
        raise NotImplementedError

    def reference_keys(self, task: Any) -> tuple[str, ...]:
        """Texts that, all in a prompt, show it asks ``task``: how the mock, which sees only
        the prompt, knows what it is asked. The first is the one searched for (the most
        telling); the others must come after it. Each is part of what ``render_prompt``
        puts in any template of the kind."""
        return (task.problem_statement,)

    def expected_answer(self, task: Any) -> str:
        """The right answer as a person reads it, beside the model's in the transcript and
        the exports (the letter and its option, the response and its aliases, ...)."""
        return self.reference_output(task)

    def grading_rows(self, task: Any, detail: dict[str, Any]) -> list[GradingRow]:
        """How an answer was graded, from its answer artifact's fields (``detail``), in the
        kind's words. By default each field as it is; a kind says it better for its own."""
        return [GradingRow(name.replace("_", " ").capitalize(), _text(value)) for name, value in detail.items()]

    def distractors(self, task: Any) -> tuple[str, ...]:
        """Outputs that score 0, for the mock to give when it answers wrongly; empty for a
        PR patch, whose wrong answers the mock makes from the gold patch itself."""
        return ()

    def evaluate(self, task: Any, output: str, context: Context) -> Evaluation:
        raise NotImplementedError


@functools.lru_cache(maxsize=256)
def _template_errors(kind: str, placeholders: tuple[str, ...], template: str) -> tuple[str, ...]:
    """Cached: every attempt's request asks again, with one of a handful of templates."""
    fillable = (*placeholders, EXAMPLES)
    unfilled = dict.fromkeys(found for found in PLACEHOLDER.findall(template) if found not in fillable)
    errors = [
        f"{found} cannot be filled for a {kind} dataset (its prompts fill {', '.join(fillable)})" for found in unfilled
    ]
    if "{{" in PLACEHOLDER.sub("", template):
        errors.append("has a {{ that opens no placeholder (a placeholder is written {{name}}, e.g. " + QUESTION + ")")
    return tuple(errors)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "; ".join(_text(item) for item in value) or "—"
    return "—" if value is None else str(value)
