"""Multiple-choice questions (MMLU, TruthfulQA MC1): a question and lettered options in, one
letter out.

The letter is read so that chain-of-thought survives: an "Answer: C" line (a "Final answer"
line first), else a sentence such as "the answer is C", else a reply that is only a letter
("C", "(C)", "C. Paris"), else a reply that is one option's text. An output that claims two
different letters, or none, is answered but wrong (the model's failure, like a malformed
patch), and the answer artifact says why.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evaluation.workloads.answer_matching import basic_form
from evaluation.workloads.base import QUESTION, ArtifactRow, Context, Evaluation, GradingRow, Workload

LETTERS = string.ascii_uppercase
MIN_CHOICES, MAX_CHOICES = 2, len(LETTERS)
CHOICE_MAX = 10_000
CHOICES = "{{choices}}"
DEFAULT_PROMPT = """Answer the following multiple-choice question.

{{problem_statement}}

{{choices}}

Think it through if you need to, then end your reply with a line "Answer: X", where X is the
letter of the correct option."""

_MARKUP = re.compile(r"\*\*|__|`")
# "Answer: C", "Final answer: (C)", "**Answer:** C. Paris", "The answer is: C"
_ANSWER_LINE = re.compile(
    r"^\W*(?:the\s+|my\s+)?(?P<final>final\s+)?(?:correct\s+)?(?:answer|choice|option)\s*(?:is\s*)?[:：]\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
# A letter that opens an answer: alone, in parentheses, or followed by "." ")" ":" or a dash.
_OPENING_LETTER = re.compile(r"^\(?(?P<letter>[A-Za-z])(?:\)|(?=[.:,;]|\s+[-–—]|\s*$))[.:,;]?\s*[-–—]?\s*(?P<text>.*)$")
# "C and D", "A or B", "A, C", "A/B": two letters claimed at once.
_TWO_LETTERS = re.compile(r"^\(?([A-Z])\)?\s*(?:,|/|&|\band\b|\bor\b)\s*\(?([A-Z])\)?(?![A-Za-z])")
# In running text: "the answer is C", "the correct option would be (B)", "I choose D".
_ANSWER_PHRASE = re.compile(
    r"\b(?i:answer|option|choice)\s+(?i:is|would\s+be|must\s+be|should\s+be)\s*:?\s*\(?([A-Z])\)?(?![A-Za-z'’])"
    r"|\bI\s+(?i:choose|pick|select|go\s+with)\s+(?i:option\s+)?\(?([A-Z])\)?(?![A-Za-z'’])"
)
# A capital letter standing alone ("I would say B", "B is right").
_LONE_LETTER = re.compile(r"(?<![A-Za-z'’])\(?([A-Z])\)?(?![A-Za-z'’])")
# ... but not the pronoun "I" or the article "A" before a word ("I think", "A rock").
_PRONOUN_OR_ARTICLE = re.compile(r"[AI]\s+[a-z]")


@dataclass(frozen=True)
class Reading:
    """What a model's output answered: a letter, how it was found, or why there is none."""

    letter: str = ""
    how: str = ""  # "answer line", "answer phrase", "letter", "option text"
    reason: str = ""  # why there is no letter: "no answer found", "claims both A and C", ...
    claimed: list[str] = field(default_factory=list)


ENDING = 'End your reply with a line "Answer: X", where X is the letter of the correct option.'
BUILTIN_PROMPTS = {
    "plain@1": DEFAULT_PROMPT,
    "cot@1": "Answer the following multiple-choice question.\n\n{{problem_statement}}\n\n{{choices}}\n\n"
    "Think step by step: write out your reasoning first. Then " + ENDING[0].lower() + ENDING[1:],
    "few-shot@1": "The following are multiple-choice questions, each with its answer.\n\n{{examples}}\n\n"
    "{{problem_statement}}\n\n{{choices}}\n\n" + ENDING,
    "confidence@1": "Answer the following multiple-choice question.\n\n{{problem_statement}}\n\n{{choices}}\n\n"
    'Give the letter of the correct option on a line "Answer: X", then on the last line "Confidence: N%", where N '
    "is how likely you think your answer is right.",
}


# How a letter was read (``Reading.how``), in words.
READ_FROM = {
    "answer line": 'an "Answer: X" line',
    "answer phrase": 'a phrase such as "the answer is X"',
    "letter": "a reply that is a letter",
    "option text": "a reply that is one option's text",
}


class MultipleChoice(Workload):
    kind = "multiple_choice"
    quality_metric = ("Accuracy", "answers correctly")
    default_prompt = DEFAULT_PROMPT
    builtin_prompts = BUILTIN_PROMPTS
    placeholders: ClassVar[tuple[str, ...]] = (QUESTION, CHOICES)

    def payload_errors(self, payload: dict) -> list[str]:
        choices = payload.get("choices")
        if not isinstance(choices, list) or not MIN_CHOICES <= len(choices) <= MAX_CHOICES:
            return [f"choices: must be a list of {MIN_CHOICES} to {MAX_CHOICES} options"]
        errors = [
            f"choices[{i}]: must be non-empty text of at most {CHOICE_MAX:,} characters"
            for i, choice in enumerate(choices)
            if not isinstance(choice, str) or not choice.strip() or len(choice) > CHOICE_MAX
        ]
        letters = LETTERS[: len(choices)]
        answer = payload.get("answer")
        if not isinstance(answer, str) or len(answer) != 1 or answer not in letters:
            errors.append(f"answer: must be the letter of one of the options, {letters[0]} to {letters[-1]}")
        return errors

    def render_prompt(self, template: str, task: Any, repository: Callable[[], str]) -> str:
        """The options as "A. ..." lines where the template has ``{{choices}}``; a template
        without it gets them after the question, so no prompt asks without its options."""
        options = list_choices(task.payload["choices"])
        if CHOICES in template:
            return template.replace(QUESTION, task.problem_statement).replace(CHOICES, options)
        return template.replace(QUESTION, f"{task.problem_statement}\n\n{options}")

    def reference_output(self, task: Any) -> str:
        return f"Answer: {task.payload['answer']}"

    def expected_answer(self, task: Any) -> str:
        letter = task.payload["answer"]
        return f"{letter}. {task.payload['choices'][LETTERS.index(letter)]}"

    def expected_in_short(self, task: Any) -> str:
        return str(task.payload["answer"])

    def grading_rows(self, task: Any, detail: dict[str, Any]) -> list[GradingRow]:
        """The options, the letter read and how it was read (or why none was)."""
        letter = str(detail.get("letter") or "")
        read = f"{letter}, from {READ_FROM.get(str(detail.get('how')), detail.get('how') or 'the answer')}"
        rows = [
            GradingRow("Options", list_choices(task.payload["choices"]), block=True),
            GradingRow("Letter read", read if letter else f"none: {detail.get('reason') or 'no answer found'}"),
        ]
        claimed = [str(c) for c in detail.get("claimed") or []]
        if len(claimed) > 1 or (claimed and claimed != [letter]):
            rows.append(GradingRow("Letters claimed", ", ".join(claimed)))
        rows.append(GradingRow("Expected", str(detail.get("expected") or task.payload["answer"])))
        return rows

    def distractors(self, task: Any) -> tuple[str, ...]:
        letters = LETTERS[: len(task.payload["choices"])]
        return tuple(f"Answer: {letter}" for letter in letters if letter != task.payload["answer"])

    def evaluate(self, task: Any, output: str, context: Context) -> Evaluation:
        reading = read_choice(output, task.payload["choices"])
        expected = task.payload["answer"]
        detail: dict[str, Any] = {
            "letter": reading.letter,
            "how": reading.how,
            "reason": reading.reason,
            "claimed": reading.claimed,
            "expected": expected,
        }
        rows = (ArtifactRow("answer", json.dumps(detail)),)
        if context.inference_only:  # an inference-only run records answers and grades none
            return Evaluation(reading.letter, None, None, artifacts=rows)
        correct = reading.letter == expected
        return Evaluation(reading.letter, correct, 1.0 if correct else 0.0, artifacts=rows)


def list_choices(choices: list[str]) -> str:
    return "\n".join(f"{letter}. {choice}" for letter, choice in zip(LETTERS, choices, strict=False))


def read_choice(output: str, choices: list[str]) -> Reading:
    """The letter ``output`` answers among ``choices``' letters (see the module's docstring)."""
    letters = LETTERS[: len(choices)]
    lines = [line.strip() for line in _MARKUP.sub("", output).splitlines() if line.strip()]
    if not lines:
        return Reading(reason="empty output")
    for how, claims in (
        ("answer line", _answer_line_claims(lines, choices)),
        ("answer phrase", _phrase_claims(lines, letters)),
        ("letter", _reply_letter(lines, choices)),
        ("option text", _option_text(lines, choices)),
    ):
        if claims:
            return _one_letter(how, claims, letters)
    return Reading(reason="no answer found: no answer line, no letter, no option's text")


def _one_letter(how: str, claims: list[str], letters: str) -> Reading:
    distinct = sorted(set(claims))
    if len(distinct) > 1:
        return Reading(how=how, reason=f"ambiguous: claims {' and '.join(distinct)}", claimed=distinct)
    letter = distinct[0]
    if letter not in letters:
        reason = f"answered {letter}, not one of the options {letters[0]}-{letters[-1]}"
        return Reading(how=how, reason=reason, claimed=distinct)
    return Reading(letter=letter, how=how, claimed=distinct)


def _answer_line_claims(lines: list[str], choices: list[str]) -> list[str]:
    """The letters claimed on "Answer: X" lines; only "Final answer" lines when there are some
    (a draft answer before the final one is not a second claim)."""
    matches = [m for line in lines if (m := _ANSWER_LINE.match(line)) and m.group("rest").strip()]
    finals = [m for m in matches if m.group("final")]
    return [letter for m in (finals or matches) for letter in _letters_in(m.group("rest").strip(), choices)]


def _letters_in(rest: str, choices: list[str]) -> list[str]:
    """What the text after "Answer:" claims: a letter (or two), an option's text, or a lone
    letter somewhere in it ("I would say B")."""
    if two := _TWO_LETTERS.match(rest):
        return [two.group(1), two.group(2)]
    if claimed := _opening_letter(rest, choices):
        return claimed
    if by_text := _matching_options(rest, choices):
        return by_text
    letters = LETTERS[: len(choices)]
    return [
        m.group(1)
        for m in _LONE_LETTER.finditer(rest)
        if m.group(1) in letters and not _PRONOUN_OR_ARTICLE.match(rest, m.start())
    ]


def _opening_letter(text: str, choices: list[str]) -> list[str]:
    """ "C", "(C)", "C." or "C. <text>": the letter; and the option the text names too, when
    that is another ("B. Paris" where Paris is C: two claims). A lower-case letter only on
    its own ("answer: c"), since "a" is also the article."""
    opening = _OPENING_LETTER.match(text)
    if not opening or (opening.group("letter").islower() and opening.group("text").strip()):
        return []
    letter = opening.group("letter").upper()
    named = _matching_options(opening.group("text"), choices)
    return [letter] if not named or letter in named else [letter, *named]


def _phrase_claims(lines: list[str], letters: str) -> list[str]:
    return [next(g for g in m.groups() if g) for line in lines for m in _ANSWER_PHRASE.finditer(line)]


def _reply_letter(lines: list[str], choices: list[str]) -> list[str]:
    """A reply that is a letter: its last line (the whole of a one-line reply) is "C", "(C)"
    or "C. Paris"."""
    return _opening_letter(lines[-1], choices)


def _option_text(lines: list[str], choices: list[str]) -> list[str]:
    """A reply whose whole text, or last line, is one option's text."""
    for text in (" ".join(lines), lines[-1]):
        if found := _matching_options(text, choices):
            return found
    return []


def _matching_options(text: str, choices: list[str]) -> list[str]:
    return [LETTERS[i] for i, choice in enumerate(choices) if _same_text(text, choice)]


def _same_text(a: str, b: str) -> bool:
    return bool(basic_form(a)) and basic_form(a) == basic_form(b)
