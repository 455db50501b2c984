"""An attempt's answer in its kind's words: the one place that says "wrong: B, expected D".

The attempt page uses it today; any page that lists attempts (the run page, the task side by
side) can use it too, since it needs only an attempt's columns and the short expected answer
its kind gives (``Workload.expected_in_short``), no artifact.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.workloads.base import Workload

# The quality board's heading for a kind, as the heading of one attempt's row: a board counts
# "Accuracy", an attempt is "Correct" or not; "Passed" and "Resolved" read well either way.
ATTEMPT_LABELS = {"Accuracy": "Correct"}
SHOWN_MAX = 80  # characters of an answer in a verdict; the transcript shows the whole of it


@dataclass(frozen=True)
class AnswerWords:
    text: str
    tone: str  # "good", "bad", or "" when nothing was graded (a CSS class of the pages)


def quality_label(workload: Workload) -> str:
    """The row that says whether one attempt succeeded: "Correct", "Passed", "Resolved"."""
    heading = workload.quality_metric[0]
    return ATTEMPT_LABELS.get(heading, heading)


def answer_verdict(
    workload: Workload,
    *,
    status: str,
    resolved: bool | None,
    extracted: str,
    expected: str,
    error_category: str = "",
    patch_present: bool | None = None,
    patch_applied: bool | None = None,
) -> AnswerWords:
    """What became of an attempt's answer, in a few words: "correct: D", "wrong: B, expected
    D", "passed", "not resolved: the patch did not apply", "no answer: rate_limited"...
    ``expected`` is the kind's short expected answer (empty for code, patches, free text)."""
    if status != "completed":
        return AnswerWords(_unanswered(status, error_category), "")
    if resolved is None:
        return AnswerWords("awaiting the evaluator" if workload.verdict_decides else "not graded", "")
    if workload.answers_are_patches:
        if resolved:
            return AnswerWords("resolved", "good")
        return AnswerWords(_unresolved(patch_present, patch_applied), "bad")
    label = quality_label(workload).lower()
    if expected:
        if resolved:
            return AnswerWords(f"{label}: {shown(extracted)}", "good")
        return AnswerWords(f"wrong: {shown(extracted) or 'no answer read'}, expected {shown(expected)}", "bad")
    if resolved:
        return AnswerWords(label, "good")
    return AnswerWords(f"not {label}" + ("" if extracted.strip() else ": no answer read"), "bad")


def shown(answer: str) -> str:
    """An answer on one line, cut to ``SHOWN_MAX`` characters."""
    line = " ".join(answer.split())
    return line if len(line) <= SHOWN_MAX else line[: SHOWN_MAX - 1] + "…"


def _unanswered(status: str, error_category: str) -> str:
    if status == "failed":
        return f"no answer: {error_category}" if error_category else "no answer"
    return {"queued": "not answered yet", "running": "being answered", "cancelled": "cancelled"}.get(status, status)


def _unresolved(patch_present: bool | None, patch_applied: bool | None) -> str:
    if patch_present is False:
        return "not resolved: no patch in the answer"
    if patch_applied is False:
        return "not resolved: the patch did not apply"
    return "not resolved: the task's tests do not pass"
