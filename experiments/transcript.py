"""An attempt's transcript, as its page and the API show it: the messages it was sent (system
and user, as rendered, in order), the model's raw answer, what its kind read in it, the
expected answer, and how the answer was graded, in the kind's words.

What a model was sent is the attempt's ``request`` (the normalised request, never the raw
provider request): its ``system`` prompt first, then its ``messages``. An attempt that has
none says why (not run yet, failed before a request was made, a replayed answer). The raw
provider response and the evaluator's rationale are never part of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from evaluation.workloads import workload_for
from evaluation.workloads.base import GradingRow, Workload
from evaluation.workloads.wording import Said, task_label, wording_for
from experiments.models import Artifact, Attempt, AttemptStatus
from experiments.replay import REPLAY
from providers.errors import ErrorCategory

# A message longer than this is folded on the page, its first lines shown above the fold.
FOLD_CHARS = 3000
FOLD_LINES = 60
PREVIEW_LINES = 12
# Errors that stop a call before it leaves: the request was prepared, never sent.
STOPPED_BEFORE_SENDING = frozenset(
    {
        ErrorCategory.BUDGET_EXCEEDED,
        ErrorCategory.EGRESS_REFUSED,
        ErrorCategory.CAPACITY_TIMEOUT,
        ErrorCategory.NOT_ALLOWED,
    }
)
# Where each question kind's answer artifact keeps what it read, for attempts recorded
# before ``Attempt.extracted_answer`` existed.
READ_FIELDS = ("letter", "response", "completion", "answer")


@dataclass(frozen=True)
class Passage:
    """A text as the page shows it: whole when short, else its first lines and the rest
    folded, with its size."""

    text: str

    @property
    def folded(self) -> bool:
        return len(self.text) > FOLD_CHARS or self.text.count("\n") >= FOLD_LINES

    @property
    def preview(self) -> str:
        return "\n".join(self.text.splitlines()[:PREVIEW_LINES])

    @property
    def size(self) -> str:
        lines = self.text.count("\n") + 1
        return f"{len(self.text):,} character{'s' * (len(self.text) != 1)}, {lines:,} line{'s' * (lines != 1)}"


@dataclass(frozen=True)
class SentMessage:
    role: str  # "system", "user", "assistant"
    content: str

    @property
    def passage(self) -> Passage:
        return Passage(self.content)

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Transcript:
    messages: list[SentMessage]
    # Why there are no messages, or that they were prepared and never sent; "" when sent.
    messages_note: str
    output: str
    extracted: str
    expected: str
    grading: dict[str, Any] | None  # the answer artifact's fields (question kinds)
    grading_rows: list[GradingRow]
    verdict: Said
    quality_label: str
    task_label: str  # the task's id with the first words of what it asks

    @property
    def output_passage(self) -> Passage:
        return Passage(self.output)

    @property
    def extracted_passage(self) -> Passage:
        return Passage(self.extracted)

    @property
    def expected_passage(self) -> Passage:
        return Passage(self.expected)


def sent_messages(system: Any, messages: Any, provider: str) -> list[SentMessage]:
    """A request's messages, its system prompt first; none for a replayed answer (the
    request of a replay arm holds a placeholder: nothing was sent to anyone)."""
    if provider == REPLAY:
        return []
    sent = [SentMessage("system", system)] if isinstance(system, str) and system else []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            sent.append(SentMessage(str(message.get("role", "")), str(message.get("content", ""))))
    return sent


def attempt_transcript(attempt: Attempt, artifacts: dict[str, Artifact]) -> Transcript:
    """The attempt's transcript from its row and its artifacts (keyed by kind)."""
    task = attempt.task
    workload = workload_for(task.dataset.kind)
    request = attempt.request if isinstance(attempt.request, dict) else {}
    messages = sent_messages(request.get("system"), request.get("messages"), attempt.arm.provider)
    grading = answer_fields(artifacts.get("answer"))
    extracted = attempt.extracted_answer or recorded_read(grading)
    words = wording_for(task.dataset.kind)
    # The same words as the run page's list gives the attempt, from the same columns.
    result = SimpleNamespace(
        status=attempt.status,
        resolved=attempt.resolved,
        error_category=attempt.error_category,
        outcome=attempt.outcome,
        patch_present=attempt.patch_present,
        patch_applied=attempt.patch_applied,
        answer_start=extracted,
        expected_short=words.short_expected(task.payload),
    )
    return Transcript(
        messages=messages,
        messages_note=messages_note(attempt, bool(messages)),
        output=attempt.output,
        extracted=extracted,
        expected=expected_answer(workload, task),
        grading=grading,
        grading_rows=_grading_rows(workload, task, grading, artifacts.get("answer")),
        verdict=words.result(result, attempt.run.inference_only),
        quality_label=words.verdict,
        task_label=task_label(words, task.external_id, task.title, task.problem_statement),
    )


def messages_note(attempt: Attempt, has_messages: bool) -> str:
    """Why an attempt shows no messages, or that those it shows never left; "" otherwise."""
    if attempt.arm.provider == REPLAY:
        return "None: a replayed answer, read from imported predictions; no prompt was sent."
    if has_messages:
        if attempt.status == AttemptStatus.FAILED and attempt.error_category in STOPPED_BEFORE_SENDING:
            return f"Prepared but never sent: the call was stopped before it was made ({attempt.error_category})."
        return ""
    if attempt.status == AttemptStatus.QUEUED:
        return "None yet: the attempt has not run."
    if attempt.status == AttemptStatus.RUNNING:
        return "None recorded yet: the attempt is running; its messages are kept with its result."
    if attempt.status == AttemptStatus.CANCELLED:
        return "None: the attempt was cancelled before it ran."
    if attempt.error_category == ErrorCategory.PLATFORM_ERROR:
        # A crash before the request was kept, or a poison attempt retired by its claims:
        # an earlier claim may have sent it, so nothing is said about whether it left.
        return "None recorded: the platform failed on this attempt before its request was kept; see its error above."
    if attempt.status == AttemptStatus.FAILED:
        why = f" ({attempt.error_category})" if attempt.error_category else ""
        return f"None: the attempt failed before any call was made{why}; see its error above."
    return "None recorded."  # answered before transcripts were kept


def answer_fields(artifact: Artifact | None) -> dict[str, Any] | None:
    """A question kind's answer artifact as its fields; None for an attempt without one (a
    PR patch: its diff and validation say how it was graded)."""
    return grading_fields(artifact.content if artifact is not None else None)


def grading_fields(content: str | None) -> dict[str, Any] | None:
    """An answer artifact's text as its fields (the text as ``answer`` when it is not a JSON
    object); None for no artifact."""
    if content is None:
        return None
    try:
        fields = json.loads(content or "{}")
    except ValueError:
        return {"answer": content}
    return fields if isinstance(fields, dict) else {"answer": content}


def patch_of(attempt: Attempt) -> str:
    """A pull request's patch, as its kind read it from the answer: kept once, as the
    attempt's ``extracted_answer`` (migration 0054). "" for a question kind, whose answer is
    no patch, and when no patch was found."""
    return attempt.extracted_answer if workload_for(attempt.task.dataset.kind).answers_are_patches else ""


def recorded_read(grading: dict[str, Any] | None) -> str:
    """What a question kind read, for an attempt recorded before ``extracted_answer`` was
    kept: its answer artifact's letter, response or completion. (A patch recorded then was
    copied into ``extracted_answer`` by migration 0054.)"""
    if grading:
        for name in READ_FIELDS:
            if isinstance(grading.get(name), str) and grading[name]:
                return grading[name]
    return ""


def expected_answer(workload: Workload, task: Any) -> str:
    """The kind's expected answer, or "" for a task whose payload cannot say it (an import
    from before the kind checked its fields must not break the page or an export)."""
    try:
        return workload.expected_answer(task)
    except (KeyError, IndexError, TypeError, ValueError, NotImplementedError):
        return ""


def _grading_rows(
    workload: Workload, task: Any, grading: dict[str, Any] | None, artifact: Artifact | None
) -> list[GradingRow]:
    if grading is None:
        return []
    if artifact is not None and not artifact.content.lstrip().startswith("{"):
        return [GradingRow("Answer", artifact.content, block=True)]
    try:
        return workload.grading_rows(task, grading)
    except (KeyError, IndexError, TypeError, ValueError):  # an artifact of an older shape
        return Workload.grading_rows(workload, task, grading)
