"""Multiple-choice questions (MMLU, TruthfulQA MC1): a question and lettered options in, one
letter out.

The letter is read so that chain-of-thought survives: an "Answer: C" line (a "Final answer"
line first; ``{"answer": "C"}`` too), else ``\\boxed{C}``, else a sentence such as "the answer
is C", "I'd go with C" or "..., so C.", else a reply that is only a letter ("C", "(C)", "C.
Paris"), else a reply that is one option's text, else a last sentence that names exactly one
option's text ("A standard automobile has two axles."). A correction ("Wait", "Actually",
"No,") sets aside the claims before it. An output that claims two different letters, or
none, is answered but wrong (the model's failure, like a malformed patch), and the answer
artifact says why. ``tests/data/grading/mmlu_*.yaml`` holds the labelled set this reading was
tuned against (bench/grading_agreement.py prints the agreement).
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
from evaluation.workloads.wording import (
    ANSWER_CHARS,
    CATEGORY_COLUMN,
    CELL_CHARS,
    QUESTION_COLUMN,
    TaskColumn,
    payload_of,
    right_or_wrong,
    short,
)

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
# A JSON answer: {"answer": "C"}.
_JSON_ANSWER = re.compile(
    r"[\"'](?:final_)?(?:answer|choice|option)[\"']\s*:\s*[\"']\(?([A-Za-z])\)?[\"']", re.IGNORECASE
)
# LaTeX's final-answer box: \boxed{C}, \boxed{\text{C}}.
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{\s*)?\(?([A-Za-z])\)?\s*\}")
# A correction: what was claimed before it is set aside ("The answer is B. Wait, ... C").
_CORRECTION = re.compile(
    r"\b(?:wait|actually|correction|on\s+second\s+thought|scratch\s+that|i\s+made\s+a\s+mistake)\b|\bno\s*[,:.;-]",
    re.IGNORECASE,
)
# A letter that opens an answer: alone, in parentheses, or followed by "." ")" ":" or a dash.
_OPENING_LETTER = re.compile(r"^\(?(?P<letter>[A-Za-z])(?:\)|(?=[.:,;]|\s+[-–—]|\s*$))[.:,;]?\s*[-–—]?\s*(?P<text>.*)$")
# "C and D", "A or B", "A, C", "A/B": two letters claimed at once.
_TWO_LETTERS = re.compile(r"^\(?([A-Z])\)?\s*(?:,|/|&|\band\b|\bor\b)\s*\(?([A-Z])\)?(?![A-Za-z])")
# In running text: "the answer is C", "the correct option would be (B)", "I choose D".
# A letter in running text: a capital standing alone, or a lower-case one in parentheses or
# ending the sentence ("the answer is (a)", "the answer is b"; not "the answer is a bit ...").
_PHRASE_LETTER = r"(?:\(?([A-Z])\)?(?![A-Za-z'’])|\(([a-z])\)|([a-z])(?=\s*(?:[.!,;)]|$)))"
_ANSWER_PHRASE = re.compile(
    r"\b(?i:answer|option|choice)\s+(?i:is|would\s+be|must\s+be|should\s+be)\s*:?\s*" + _PHRASE_LETTER + "|"
    r"\bI(?:['’]d|['’]ll|\s+would|\s+will)?\s+(?i:choose|pick|select|go\s+with)\s+(?i:option\s+)?"
    + _PHRASE_LETTER
    + "|"
    r"\b(?i:so|thus|therefore|hence)[,:]?\s+\(?([A-Z])\)?(?=\s*[.!]?\s*$)"  # "..., so C." ending a line
)
# A second letter claimed beside the first: "the answer is C or D".
_SECOND_LETTER = re.compile(r"\)?\s*(?:,|/|&|\band\b|\bor\b)\s*\(?([A-Z])\)?(?![A-Za-z'’])")
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


def _choices(task: Any) -> str:
    choices = payload_of(task, "choices") or []
    listed = " · ".join(f"{letter}. {choice}" for letter, choice in zip(LETTERS, choices, strict=False))
    return short(listed, CELL_CHARS)


def _letter_and_option(task: Any) -> str:
    letter, choices = payload_of(task, "answer") or "", payload_of(task, "choices") or []
    index = LETTERS.find(letter) if letter else -1
    return f"{letter}. {short(choices[index], ANSWER_CHARS)}" if 0 <= index < len(choices) else letter


WORDS = right_or_wrong(
    "multiple_choice",
    question="Question",
    answer="answer",
    expected="Expected answer",
    not_graded="no answer was graded, so none is right or wrong",
    task_columns=(
        QUESTION_COLUMN,
        TaskColumn("Choices", _choices),
        TaskColumn("Answer", _letter_and_option),
        CATEGORY_COLUMN,
    ),
)


class MultipleChoice(Workload):
    kind = "multiple_choice"
    label = "Multiple choice"
    words = WORDS
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

    def reference_keys(self, task: Any) -> tuple[str, ...]:
        # Two tasks may ask the same question with other options (MMLU has many a "Which of
        # the following is true?"): the options tell them apart.
        return (task.problem_statement, list_choices(task.payload["choices"]))

    def expected_answer(self, task: Any) -> str:
        letter = task.payload["answer"]
        return f"{letter}. {task.payload['choices'][LETTERS.index(letter)]}"

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
        ("boxed", [m.group(1).upper() for line in lines for m in _BOXED.finditer(line)][-1:]),
        ("answer phrase", _phrase_claims(lines)),
        ("letter", _reply_letter(lines, choices)),
        ("option text", _option_text(lines, choices)),
        ("option named", _option_named(lines[-1], choices)),
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
    """The letters claimed on "Answer: X" lines (or in a JSON answer); only "Final answer"
    lines when there are some, and only lines after a correction when there are some (a
    draft answer before the final one is not a second claim)."""
    lines = _after_last_correction(lines, lambda line: bool(_ANSWER_LINE.match(line) or _JSON_ANSWER.search(line)))
    matches = [m for line in lines if (m := _ANSWER_LINE.match(line)) and m.group("rest").strip()]
    finals = [m for m in matches if m.group("final")]
    json_claims = [m.group(1).upper() for line in lines for m in _JSON_ANSWER.finditer(line)]
    if json_claims and not finals:
        return json_claims
    return [letter for m in (finals or matches) for letter in _letters_in(m.group("rest").strip(), choices)]


def _after_last_correction(lines: list[str], claims: Callable[[str], bool]) -> list[str]:
    """The lines from the last correction on, when a claim follows it; else all of them."""
    for index in range(len(lines) - 1, -1, -1):
        corrections = list(_CORRECTION.finditer(lines[index]))
        if corrections:
            rest = [lines[index][corrections[-1].end() :], *lines[index + 1 :]]
            return rest if any(claims(line) for line in rest) else lines
    return lines


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


def _phrase_claims(lines: list[str]) -> list[str]:
    """The letters sentences conclude with; "the answer is C or D" claims both."""
    lines = _after_last_correction(lines, lambda line: bool(_ANSWER_PHRASE.search(line)))
    claims = []
    for line in lines:
        for m in _ANSWER_PHRASE.finditer(line):
            claims.append(next(g for g in m.groups() if g).upper())
            if second := _SECOND_LETTER.match(line, m.end()):
                claims.append(second.group(1))
    return claims


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


def _option_named(line: str, choices: list[str]) -> list[str]:
    """The option whose text a last sentence names, when it names exactly one ("A standard
    automobile has two axles."); options of a digit or two ("1", "12") are too easily named
    by reasoning to count."""
    words = f" {basic_form(line)} "
    forms = [basic_form(choice) for choice in choices]
    named = [i for i, form in enumerate(forms) if sum(c.isalpha() for c in form) >= 3 and f" {form} " in words]
    return [LETTERS[i] for i in named] if len({forms[i] for i in named}) == 1 else []


def _matching_options(text: str, choices: list[str]) -> list[str]:
    return [LETTERS[i] for i, choice in enumerate(choices) if _same_text(text, choice)]


def _same_text(a: str, b: str) -> bool:
    return bool(basic_form(a)) and basic_form(a) == basic_form(b)
