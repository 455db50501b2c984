"""How often the question kinds' grading agrees with a person's, on labelled judgements:
qa_exact's verdicts in each grading mode against a Jeopardy judge's rulings, and
multiple_choice's letter reading against the letter a person reads.

The labelled sets live in ``tests/data/grading/`` (their README says how they were made), in
two parts: ``dev``, which the matchers were tuned against, and ``held-out``, which they were
not. ``bench/grading_agreement.py`` prints the figures; the tests hold them to their targets.
Each judgement goes through the kind's own ``evaluate``, as an attempt's answer does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

from evaluation.workloads import workload_for
from evaluation.workloads.base import Context

PARTS = {"dev": "dev", "heldout": "held-out"}  # file suffix: the part's name in figures
QA_SETS, CHOICE_SETS = "jeopardy_{}.yaml", "mmlu_{}.yaml"
NO_LETTER = ("none", "ambiguous")  # labels where a person reads no single letter


@dataclass(frozen=True)
class QaJudgement:
    part: str
    category: str
    clue: str
    answer: str
    aliases: tuple[str, ...]
    output: str  # the model's output, as it would arrive
    correct: bool  # the judge's ruling
    convention: str  # which of the set's conventions the row tests ("surname", "near-miss", ...)

    def task(self) -> Any:
        payload = {"answer": self.answer} | ({"aliases": list(self.aliases)} if self.aliases else {})
        return SimpleNamespace(payload=payload, problem_statement=self.clue, external_id=f"{self.category}:{self.clue}")


@dataclass(frozen=True)
class ChoiceJudgement:
    part: str
    source: str  # the MMLU row: subject_split-row
    choices: tuple[str, ...]
    output: str
    label: str  # the letter a person reads, or "none" / "ambiguous"
    style: str

    @property
    def letter(self) -> str:
        return "" if self.label in NO_LETTER else self.label

    def task(self) -> Any:
        return SimpleNamespace(payload={"choices": list(self.choices), "answer": "A"}, problem_statement=self.source)


@dataclass(frozen=True)
class QaFigures:
    rows: int
    wrong_rows: int  # rows the judge ruled wrong
    false_accepts: int  # wrong responses the grader accepted
    false_rejects: int  # right responses it refused

    @property
    def agreed(self) -> int:
        return self.rows - self.false_accepts - self.false_rejects


@dataclass(frozen=True)
class ChoiceFigures:
    rows: int
    no_letter_rows: int  # rows where a person reads no single letter
    wrong_letters: int  # a letter read where a person reads another
    read_where_none: int  # a letter read where a person reads none
    missed: int  # no letter read where a person reads one

    @property
    def agreed(self) -> int:
        return self.rows - self.wrong_letters - self.read_where_none - self.missed


def load_qa(directory: Path) -> list[QaJudgement]:
    return [
        QaJudgement(
            part=part,
            category=clue["category"],
            clue=clue["clue"],
            answer=str(clue["answer"]),
            aliases=tuple(str(alias) for alias in clue.get("aliases", ())),
            output=row["response"],
            correct=_ruling(row["label"]),
            convention=row["convention"],
        )
        for part, clue in _entries(directory, QA_SETS)
        for row in _rows(clue["responses"], ("label", "convention", "response"))
    ]


def load_choices(directory: Path) -> list[ChoiceJudgement]:
    return [
        ChoiceJudgement(
            part=part,
            source=question["source"],
            choices=tuple(question["choices"]),
            output=row["output"],
            label=_letter_label(row["label"], len(question["choices"])),
            style=row["style"],
        )
        for part, question in _entries(directory, CHOICE_SETS)
        for row in _rows(question["responses"], ("label", "style", "output"))
    ]


def qa_figures(judgements: Iterable[QaJudgement], mode: str) -> QaFigures:
    rows = wrong_rows = false_accepts = false_rejects = 0
    for judgement in judgements:
        accepted = qa_accepts(judgement, mode)
        rows += 1
        wrong_rows += not judgement.correct
        false_accepts += accepted and not judgement.correct
        false_rejects += judgement.correct and not accepted
    return QaFigures(rows, wrong_rows, false_accepts, false_rejects)


def qa_accepts(judgement: QaJudgement, mode: str) -> bool:
    context = Context(grading={"grading": mode})
    return bool(workload_for("qa_exact").evaluate(judgement.task(), judgement.output, context).correct)


def choice_figures(judgements: Iterable[ChoiceJudgement]) -> ChoiceFigures:
    rows = no_letter = wrong = read_where_none = missed = 0
    for judgement in judgements:
        read = letter_read(judgement)
        rows += 1
        no_letter += not judgement.letter
        wrong += bool(judgement.letter and read and read != judgement.letter)
        read_where_none += bool(read and not judgement.letter)
        missed += bool(judgement.letter and not read)
    return ChoiceFigures(rows, no_letter, wrong, read_where_none, missed)


def letter_read(judgement: ChoiceJudgement) -> str:
    context = Context(inference_only=True)  # the letter read, whichever is right
    return workload_for("multiple_choice").evaluate(judgement.task(), judgement.output, context).answer


def _entries(directory: Path, pattern: str) -> list[tuple[str, dict]]:
    return [
        (part, entry)
        for suffix, part in PARTS.items()
        for entry in yaml.safe_load((directory / pattern.format(suffix)).read_text(encoding="utf-8"))
    ]


def _rows(rows: list, fields: tuple[str, str, str]) -> list[dict]:
    """A row is written [label, convention, text] or, for a multi-line text, as a mapping."""
    return [row if isinstance(row, dict) else dict(zip(fields, row, strict=True)) for row in rows]


def _ruling(label: str) -> bool:
    if label not in ("right", "wrong"):
        raise ValueError(f"a ruling is right or wrong, not {label!r}")
    return label == "right"


def _letter_label(label: str, choices: int) -> str:
    if label not in NO_LETTER and not (len(label) == 1 and "A" <= label < chr(ord("A") + choices)):
        raise ValueError(f"a label is an option's letter, none or ambiguous, not {label!r}")
    return label
