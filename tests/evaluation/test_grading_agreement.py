"""Grading agrees with a person on the labelled sets in tests/data/grading/ (their README says
how they were made): qa_exact's jeopardy mode with a Jeopardy judge's rulings, read_choice
with the letter a person reads. The figures are bench/grading_agreement.py's."""

from pathlib import Path

import pytest

from evaluation.grading_agreement import (
    PARTS,
    choice_figures,
    load_choices,
    load_qa,
    qa_accepts,
    qa_figures,
)
from evaluation.workloads import workload_for
from evaluation.workloads.answer_matching import MODES
from evaluation.workloads.base import Context

DATA = Path(__file__).resolve().parent.parent / "data" / "grading"
QA_SET, CHOICE_SET = load_qa(DATA), load_choices(DATA)
# Targets (issue 24): a judge's agreement on the whole set, and false accepts (a wrong response
# taken for right, which flatters a model) at most 1% of the rows on every part. The held-out
# part, which the matcher was not tuned against, has a floor of its own: it stands at 96.1%.
AGREEMENT, FALSE_ACCEPTS, HELD_OUT_AGREEMENT = 0.97, 0.01, 0.95
# read_choice: as for the judge, 97% agreement; and a letter read where a person reads another
# or none, which grades an answer the model did not give, at most 1% of the rows.
CHOICE_AGREEMENT, CHOICE_MISREAD = 0.97, 0.01


def part(judgements, name):
    return [j for j in judgements if name in ("all", j.part)]


def test_the_sets_are_as_large_as_promised_and_their_parts_share_no_clue():
    assert len(QA_SET) >= 300 and len(part(QA_SET, "held-out")) >= 100
    assert len(CHOICE_SET) >= 150 and len(part(CHOICE_SET, "held-out")) >= 50
    assert {j.part for j in QA_SET} == {j.part for j in CHOICE_SET} == set(PARTS.values())
    dev_clues = {j.clue for j in part(QA_SET, "dev")}
    assert not dev_clues & {j.clue for j in part(QA_SET, "held-out")}
    dev_questions = {j.source for j in part(CHOICE_SET, "dev")}
    assert not dev_questions & {j.source for j in part(CHOICE_SET, "held-out")}
    # Both kinds of ruling are there in earnest: hard negatives, not only right answers.
    assert sum(not j.correct for j in QA_SET) >= len(QA_SET) // 4
    assert {"namesake", "ambiguous-surname", "partial-other", "two-answers", "near-miss"} <= {
        j.convention for j in QA_SET if not j.correct
    }


def test_the_jeopardy_mode_agrees_with_the_judge():
    everything = qa_figures(QA_SET, "jeopardy")
    assert everything.agreed / everything.rows >= AGREEMENT, everything
    for name in PARTS.values():
        figures = qa_figures(part(QA_SET, name), "jeopardy")
        assert figures.false_accepts / figures.rows <= FALSE_ACCEPTS, (name, figures)
    held_out = qa_figures(part(QA_SET, "held-out"), "jeopardy")
    assert held_out.agreed / held_out.rows >= HELD_OUT_AGREEMENT, held_out


def test_strict_mode_stays_strict():
    strict = qa_figures(QA_SET, "strict")
    assert strict.false_accepts == 0
    jeopardy_accepts = {id(j) for j in QA_SET if qa_accepts(j, "jeopardy")}
    # Whatever strict accepts, the judge accepts too: strict only ever says less.
    assert all(id(j) in jeopardy_accepts for j in QA_SET if qa_accepts(j, "strict"))


def test_read_choice_agrees_with_a_person():
    everything = choice_figures(CHOICE_SET)
    assert everything.agreed / everything.rows >= CHOICE_AGREEMENT, everything
    for name in PARTS.values():
        figures = choice_figures(part(CHOICE_SET, name))
        assert (figures.wrong_letters + figures.read_where_none) / figures.rows <= CHOICE_MISREAD, (name, figures)


@pytest.mark.parametrize("mode", MODES)
def test_the_mocks_wrong_answers_stay_wrong_for_every_clue_of_the_set(mode):
    """The mock's wrong responses are kept only where no mode takes them (qa_exact's
    distractors, checked without the clue); graded with the clue they must still be wrong."""
    qa = workload_for("qa_exact")
    for task in {j.clue: j.task() for j in QA_SET}.values():
        context = Context(grading={"grading": mode})
        assert not any(qa.evaluate(task, wrong, context).correct for wrong in qa.distractors(task)), task
