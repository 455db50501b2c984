"""Short-answer questions, Jeopardy style: a clue in, a response out, graded against the
expected answer and its aliases in the run's grading mode (answer_matching.py)."""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from typing import Any, ClassVar

from evaluation.workloads.answer_matching import MODES, extract_response, grade
from evaluation.workloads.base import ArtifactRow, Context, Evaluation, GradingRow, Workload
from evaluation.workloads.wording import (
    CATEGORY_COLUMN,
    CELL_CHARS,
    TaskColumn,
    payload_of,
    question_cell,
    right_or_wrong,
    short,
)

ANSWER_MAX = 1000  # a response is a name or a phrase; a long one is a paste gone wrong
ALIASES_MAX = 50
DEFAULT_PROMPT = """This is a Jeopardy! clue. Give the correct response, phrased as a question.

{{problem_statement}}

End your reply with a line "Answer: What is ...?" (or "Who is ...?")."""

# The mock's wrong responses: plausible quiz answers, each kept only where it is wrong in
# every mode for the task at hand (see ``distractors``).
WRONG_RESPONSES = (
    "Who is Napoleon Bonaparte?",
    "What is the Pacific Ocean?",
    "What is Mount Kilimanjaro?",
    "What is photosynthesis?",
    "Who is William Shakespeare?",
    "What is the Mississippi River?",
    "Who is Marie Curie?",
    "What is the Magna Carta?",
    "Who is Ludwig van Beethoven?",
    "What is Antarctica?",
    "What is the Rosetta Stone?",
    "Who is Cleopatra?",
)
DISTRACTORS = 3


RESPONSE = 'End your reply with a line "Answer: What is ...?" (or "Who is ...?").'
BUILTIN_PROMPTS = {
    "jeopardy@1": DEFAULT_PROMPT,
    "plain@1": "Answer the question in a few words.\n\n{{problem_statement}}\n\n"
    'End your reply with a line "Answer: ...".',
    "cot@1": "This is a Jeopardy! clue. Give the correct response, phrased as a question.\n\n{{problem_statement}}\n\n"
    "Think step by step about what the clue describes first. Then " + RESPONSE[0].lower() + RESPONSE[1:],
    "few-shot@1": "Jeopardy! clues, each with its correct response.\n\n{{examples}}\n\n{{problem_statement}}\n\n"
    + RESPONSE,
    "confidence@1": "This is a Jeopardy! clue. Give the correct response, phrased as a question.\n\n"
    '{{problem_statement}}\n\nGive your response on a line "Answer: What is ...?" (or "Who is ...?"), then on the '
    'last line "Confidence: N%", where N is how likely you think your response is right.',
}


def _response(task: Any) -> str:
    aliases = payload_of(task, "aliases") or []
    also = f" (also {'; '.join(aliases)})" if aliases else ""
    return short(f"{payload_of(task, 'answer') or ''}{also}", CELL_CHARS)


WORDS = right_or_wrong(
    "qa_exact",
    question="Clue",
    answer="response",
    expected="Expected response",
    not_graded="no response was graded, so none is right or wrong",
    label_from="question",
    task_columns=(
        TaskColumn("Clue", question_cell),
        TaskColumn("Response", _response),
        CATEGORY_COLUMN,
        TaskColumn("Value", lambda task: task.difficulty),
    ),
)


class QaExact(Workload):
    kind = "qa_exact"
    label = "Question and answer (Jeopardy style)"
    words = WORDS
    quality_metric = ("Accuracy", "answers correctly")
    default_prompt = DEFAULT_PROMPT
    builtin_prompts = BUILTIN_PROMPTS
    grading_modes: ClassVar[tuple[str, ...]] = MODES

    def payload_errors(self, payload: dict) -> list[str]:
        errors = _answer_errors(payload.get("answer"), "answer")
        aliases = payload.get("aliases", [])
        if not isinstance(aliases, list) or len(aliases) > ALIASES_MAX:
            errors.append(f"aliases: must be a list of at most {ALIASES_MAX} answers")
        else:
            errors += [e for i, alias in enumerate(aliases) for e in _answer_errors(alias, f"aliases[{i}]")]
        return errors

    def reference_output(self, task: Any) -> str:
        return f"What is {' '.join(task.payload['answer'].split())}?"

    def expected_answer(self, task: Any) -> str:
        answer, *aliases = _expected(task)
        return f"{answer} (also accepted: {'; '.join(aliases)})" if aliases else answer

    def grading_rows(self, task: Any, detail: dict[str, Any]) -> list[GradingRow]:
        """The mode, both sides' normalised forms, and the similarity against the threshold."""
        mode = str(detail.get("mode", ""))
        if detail.get("graded") is False:
            return [GradingRow("Grading mode", mode), GradingRow("Graded", "no: an inference-only run grades nothing")]
        rows = [
            GradingRow("Grading mode", mode),
            GradingRow("Response, normalised", "; ".join(detail.get("response_forms") or []) or "—"),
            GradingRow("Expected, normalised", "; ".join(detail.get("expected_forms") or []) or "—"),
        ]
        if detail.get("matched"):
            rows.append(GradingRow("Nearest expected form", str(detail["matched"])))
        if isinstance(detail.get("similarity"), int | float) and isinstance(detail.get("threshold"), int | float):
            rows.append(GradingRow("Similarity", _similarity_words(detail)))
        if detail.get("reason"):
            rows.append(GradingRow("Why", str(detail["reason"])))
        return rows

    def distractors(self, task: Any) -> tuple[str, ...]:
        """A few of ``WRONG_RESPONSES``, which ones by the task's id (so the same every time),
        none that any mode would take for one of the task's answers."""
        return _distractors(task.external_id, tuple(_expected(task)))

    def evaluate(self, task: Any, output: str, context: Context) -> Evaluation:
        response = extract_response(output)
        mode = context.grading.get("grading") or MODES[0]
        if context.inference_only:  # an inference-only run records answers and grades none
            detail = {"response": response, "mode": mode, "graded": False}
            return Evaluation(response, None, None, artifacts=(ArtifactRow("answer", json.dumps(detail)),))
        verdict = grade(response, _expected(task), mode, clue=task.problem_statement)
        detail = {"response": response, "expected": _expected(task), **verdict.as_dict()}
        return Evaluation(
            answer=response,
            correct=verdict.correct,
            score=1.0 if verdict.correct else 0.0,
            artifacts=(ArtifactRow("answer", json.dumps(detail)),),
        )


@functools.lru_cache(maxsize=4096)
def _distractors(external_id: str, expected: tuple[str, ...]) -> tuple[str, ...]:
    """Cached: every attempt's request asks again, and grading a dozen candidates in four
    modes is most of a zero-latency attempt's cost."""
    start = int(hashlib.sha256(external_id.encode()).hexdigest()[:8], 16)
    ordered = (WRONG_RESPONSES[(start + i) % len(WRONG_RESPONSES)] for i in range(len(WRONG_RESPONSES)))
    wrong = (text for text in ordered if not _right_in_any_mode(text, list(expected)))
    return tuple(itertools.islice(wrong, DISTRACTORS))


def _right_in_any_mode(output: str, expected: list[str]) -> bool:
    return any(grade(extract_response(output), expected, mode).correct for mode in MODES)


def _similarity_words(detail: dict[str, Any]) -> str:
    """ "0.92, threshold 0.85 (short answer): accepted"."""
    answer_type = f" ({detail['answer_type']} answer)" if detail.get("answer_type") else ""
    verdict = "accepted" if detail.get("correct") else "rejected"
    return f"{detail['similarity']:.2f}, threshold {detail['threshold']:.2f}{answer_type}: {verdict}"


def _expected(task: Any) -> list[str]:
    return [task.payload["answer"], *task.payload.get("aliases", [])]


def _answer_errors(value: Any, field: str) -> list[str]:
    if not isinstance(value, str) or not any(c.isalnum() for c in value):
        return [f"{field}: must be text with a letter or a digit in it"]
    if len(value) > ANSWER_MAX:
        return [f"{field}: {len(value):,} characters long; at most {ANSWER_MAX:,} are allowed"]
    return []
