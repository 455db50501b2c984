"""multiple_choice: the letter read out of chain-of-thought, bare letters, "(C)" and option
text; an ambiguous or empty output is a wrong answer with the reason recorded."""

import json
from types import SimpleNamespace

import pytest

from evaluation.workloads import workload_for
from evaluation.workloads.base import Context
from evaluation.workloads.multiple_choice import read_choice

MC = workload_for("multiple_choice")
CHOICES = ["Paris", "London", "Berlin", "Rome"]
CHAIN_OF_THOUGHT = """Let's think step by step.
Option A, Paris, is the capital of France, so it is not A.
London (B) is in England. The answer is not B either.
Berlin is the capital of Germany, which the question asks about.

Answer: C"""


def task(choices=CHOICES, answer="C"):
    return SimpleNamespace(payload={"choices": choices, "answer": answer}, problem_statement="Capital of Germany?")


def evaluated(output, **context):
    evaluation = MC.evaluate(task(), output, Context(**context))
    return evaluation, json.loads(evaluation.artifacts[0].content)


@pytest.mark.parametrize(
    "output, letter, how",
    [
        (CHAIN_OF_THOUGHT, "C", "answer line"),
        ("Answer: C", "C", "answer line"),
        ("**Answer:** (C)", "C", "answer line"),
        ("The correct answer: C. Berlin", "C", "answer line"),
        ("Answer: Berlin", "C", "answer line"),
        ("Answer: I would say C", "C", "answer line"),
        ("Answer: c", "C", "answer line"),
        ("Answer: A\nHmm, no: Paris is in France.\nFinal answer: C", "C", "answer line"),
        ("Germany's capital is Berlin, so the answer is C.", "C", "answer phrase"),
        ("I choose C", "C", "answer phrase"),
        ("The answer is B. Wait, the answer is C.", "C", "answer phrase"),  # a correction sets B aside
        ("C", "C", "letter"),
        ("(C)", "C", "letter"),
        ("C.", "C", "letter"),
        ("c", "C", "letter"),
        ("C. Berlin", "C", "letter"),
        ("Thinking about it...\n(C) Berlin", "C", "letter"),
        ("Berlin", "C", "option text"),
        ("berlin.", "C", "option text"),
    ],
)
def test_the_letter_is_read_however_it_is_given(output, letter, how):
    reading = read_choice(output, CHOICES)
    assert (reading.letter, reading.how, reading.reason) == (letter, how, "")
    evaluation, detail = evaluated(output)
    assert evaluation.correct is True and evaluation.score == 1.0 and evaluation.answer == "C"
    assert detail == {"letter": "C", "how": how, "reason": "", "claimed": ["C"], "expected": "C"}


@pytest.mark.parametrize(
    "output, reason",
    [
        ("Answer: A or C", "ambiguous: claims A and C"),
        ("Answer: B\nAnswer: C", "ambiguous: claims B and C"),
        ("Answer: B. Berlin", "ambiguous: claims B and C"),  # the letter of one, the text of another
        ("The answer is B. The answer is C.", "ambiguous: claims B and C"),  # no correction between them
        ("Answer: E", "answered E, not one of the options A-D"),
        ("I am not sure about this one.", "no answer found: no answer line, no letter, no option's text"),
        ("A rock would be heavier.", "no answer found: no answer line, no letter, no option's text"),
        ("", "empty output"),
        ("   \n  ", "empty output"),
    ],
)
def test_an_ambiguous_or_missing_answer_is_a_wrong_answer_with_its_reason(output, reason):
    evaluation, detail = evaluated(output)
    assert evaluation.correct is False and evaluation.score == 0.0 and evaluation.answer == ""
    assert detail["reason"] == reason and detail["letter"] == ""


REASONING = "Paris is in France (A) and London in England (B), so neither is right."


@pytest.mark.parametrize(
    "output, how",
    [
        (f"{REASONING}\n\n\\boxed{{C}}", "boxed"),
        ("The answer is $\\boxed{\\text{C}}$.", "boxed"),
        ('{"answer": "C", "reason": "Berlin is the capital"}', "answer line"),
        ("I'd go with C, Berlin.", "answer phrase"),
        ("I would choose C", "answer phrase"),
        (f"{REASONING} Berlin is Germany's capital, so C.", "answer phrase"),
        ("the answer is c", "answer phrase"),
        ("the answer is (c)", "answer phrase"),
        ("Germany's capital has been Berlin since 1990.", "option named"),
        ("The answer is B.\nHmm, London is in England.\nActually, I'll go with C.", "answer phrase"),
        ("Answer: B\nNo, wait: Berlin is the capital.\nAnswer: C", "answer line"),
    ],
)
def test_chain_of_thought_is_read_as_a_person_reads_it(output, how):
    reading = read_choice(output, CHOICES)
    assert (reading.letter, reading.how, reading.reason) == ("C", how, "")


@pytest.mark.parametrize(
    "output, reason",
    [
        ("The answer is A or C.", "ambiguous: claims A and C"),
        ("It's either B or C; both are big cities.", "no answer found: no answer line, no letter, no option's text"),
        ("the answer is a bit unclear to me.", "no answer found: no answer line, no letter, no option's text"),
        ("Berlin or Rome, I cannot say.", "no answer found: no answer line, no letter, no option's text"),
    ],
)
def test_two_letters_or_none_in_chain_of_thought_read_as_no_answer(output, reason):
    assert read_choice(output, CHOICES).reason == reason


def test_a_wrong_letter_is_wrong_without_a_reason():
    evaluation, detail = evaluated("Answer: B")
    assert evaluation.correct is False and detail["letter"] == "B" and detail["reason"] == ""
    assert detail["expected"] == "C"


def test_an_inference_only_run_reads_the_letter_and_grades_nothing():
    evaluation, detail = evaluated("Answer: C", inference_only=True)
    assert evaluation.correct is None and evaluation.score is None and evaluation.answer == "C"
    assert detail["letter"] == "C"


def test_options_with_the_same_text_cannot_be_told_apart_by_text():
    choices = ["12", "-4", "4", "12"]  # as in MMLU's elementary_mathematics val split
    assert read_choice("Answer: D", choices).letter == "D"
    assert read_choice("12", choices).reason == "ambiguous: claims A and D"


def test_the_oracle_is_right_and_every_distractor_wrong():
    clue = task()
    assert MC.evaluate(clue, MC.reference_output(clue), Context()).correct
    assert MC.distractors(clue) == ("Answer: A", "Answer: B", "Answer: D")
    assert not any(MC.evaluate(clue, wrong, Context()).correct for wrong in MC.distractors(clue))


def test_the_prompt_lists_the_options_by_letter():
    prompt = MC.render_prompt(MC.default_prompt, task(), lambda: "")
    assert "Capital of Germany?\n\nA. Paris\nB. London\nC. Berlin\nD. Rome\n" in prompt
    assert "Answer: X" in prompt
    # A template without {{choices}} still shows them, after the question.
    assert MC.render_prompt("Q: {{problem_statement}}", task(), lambda: "") == (
        "Q: Capital of Germany?\n\nA. Paris\nB. London\nC. Berlin\nD. Rome"
    )


@pytest.mark.parametrize(
    "payload, errors",
    [
        ({"choices": ["a", "b"], "answer": "B"}, []),
        ({"choices": ["a"], "answer": "A"}, ["choices: must be a list of 2 to 26 options"]),
        ({"choices": "a,b", "answer": "A"}, ["choices: must be a list of 2 to 26 options"]),
        ({"choices": ["a", " "], "answer": "A"}, ["choices[1]: must be non-empty text of at most 10,000 characters"]),
        ({"choices": ["a", "b"], "answer": "C"}, ["answer: must be the letter of one of the options, A to B"]),
        ({"choices": ["a", "b"], "answer": "b"}, ["answer: must be the letter of one of the options, A to B"]),
        ({"choices": ["a", "b"]}, ["answer: must be the letter of one of the options, A to B"]),
    ],
)
def test_payload_errors_name_the_field(payload, errors):
    assert MC.payload_errors(payload) == errors
