"""Each kind's words (evaluation/workloads/wording.py): every kind has them, and a result
reads as a person would say it."""

from types import SimpleNamespace

import pytest

from evaluation.workloads import WORKLOADS, workload_for
from evaluation.workloads.wording import short, task_label, wording_for


def row(status="completed", resolved=None, answer="", expected="", **fields):
    defaults = {"error_category": "", "outcome": "model_success", "patch_present": None, "patch_applied": None}
    return SimpleNamespace(
        status=status, resolved=resolved, answer_start=answer, expected_short=expected, **{**defaults, **fields}
    )


def test_every_kind_has_its_words():
    assert all(workload_for(kind).kind == kind for kind in WORKLOADS)
    assert all(wording_for(kind).kind == kind for kind in WORKLOADS)


@pytest.mark.parametrize(
    ("kind", "attempt", "said"),
    [
        ("multiple_choice", row(resolved=False, answer="B", expected="D"), ("wrong: B, expected D", "bad")),
        ("multiple_choice", row(resolved=False, answer="", expected="D"), ("wrong: no answer read, expected D", "bad")),
        ("multiple_choice", row(resolved=True, answer="D", expected="D"), ("right: D", "good")),
        ("multiple_choice", row(resolved=None, answer="C"), ("answered C", "")),
        (
            "qa_exact",
            row(resolved=False, answer="Napoleon", expected="the Nile"),
            ("wrong: Napoleon, expected the Nile", "bad"),
        ),
        ("code_exec", row(resolved=False, answer="return 1"), ("failed its tests", "bad")),
        ("code_exec", row(resolved=False, answer=""), ("no code in the answer", "bad")),
        ("code_exec", row(resolved=None, outcome="infrastructure_failure"), ("the sandbox gave no verdict", "")),
        ("free_text", row(resolved=None, answer="Yes."), ("waiting for the evaluator", "")),
        ("pr_patch", row(resolved=False, patch_present=True, patch_applied=False), ("did not apply", "bad")),
        ("pr_patch", row(resolved=False, patch_present=False), ("no patch", "bad")),
        ("pr_patch", row(resolved=True), ("resolved", "good")),
        ("qa_exact", row(status="failed", error_category="connection"), ("connection", "bad")),
        ("qa_exact", row(status="queued"), ("", "")),
    ],
)
def test_a_result_in_the_kinds_words(kind, attempt, said):
    result = wording_for(kind).result(attempt)
    assert (result.text, result.tone) == said


def test_long_text_is_cut_at_a_word_and_a_label_shows_the_first_words():
    assert short("Which of the following is not a way to form recombinant DNA?", 30) == "Which of the following is not…"
    assert short("  two\nlines  ") == "two lines"
    words = wording_for("multiple_choice")
    assert (
        task_label(words, "mmlu-42", "Which of the following is true of a gene?")
        == "mmlu-42 · Which of the following is true of a gene?"
    )
    assert task_label(wording_for("qa_exact"), "jeopardy-1", "BASKETBALL · $200", "This Miami Heat guard") == (
        "jeopardy-1 · This Miami Heat guard"
    )
