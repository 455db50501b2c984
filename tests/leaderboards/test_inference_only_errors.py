"""An inference-only run gives no answer a verdict, yet its error rate is its failures over
every answer and failure the model had, not over its failures alone (issue 26: 6 content-filter
refusals of 36 read "errors 100%"). Run end to end: real attempts, summaries and boards."""

from __future__ import annotations

import pytest

from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import AttemptStatus
from leaderboards.boards import run_boards
from leaderboards.reporting import run_board_text
from providers.errors import ErrorCategory
from tests.conftest import work_queue
from tests.factories import import_as
from tests.samples import JEOPARDY

# Refused by the provider's content filter about one time in five: the model's failure.
REFUSING = {"mode": "oracle", "failure_rate": 0.2, "failure_category": "content_filtered", "max_retries": 0}


@pytest.fixture(params=["qa_exact", "pr_patch"])
def inference_only_run(request, org, alice, start):
    """Answers that are never graded (a question's, whose resolved stays unknown) or graded
    without validation (a patch's)."""
    if request.param == "qa_exact":
        dataset = import_as(org, "jeopardy", JEOPARDY, "jeopardy")
    else:
        dataset = request.getfixturevalue("dataset")
    spec = ExperimentSpec(
        name="Refusals",
        dataset=dataset,
        arms=[ArmSpec("refuser", "mock", "mock-r", REFUSING)],
        sample_size=12,
        repetitions=3,
        seed=3,
    )
    run = start(do_save_experiment(org, spec, alice), inference_only=True)
    work_queue()
    return run


def test_errors_are_counted_over_every_answer(inference_only_run):
    run = inference_only_run
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).count()
    refused = run.attempts.filter(status=AttemptStatus.FAILED, error_category=ErrorCategory.CONTENT_FILTERED).count()
    assert answered and refused and answered + refused == run.attempts.count()  # the seed gives both

    boards = run_boards(run, {}, lambda board, sort: "")
    assert boards.quality is None  # nothing validated, nothing ranked on quality
    (entry,) = boards.speed.entries
    assert entry.arm.error_rate == pytest.approx(refused / (answered + refused))
    (reliability,) = boards.reliability
    assert (reliability["finished"], reliability["failed"], reliability["share"]) == (answered + refused, 0, 0)
    # What start_run --wait prints.
    printed = run_board_text(run)
    assert f"{100 * refused / (answered + refused):.1f}%" in printed and "100.0%" not in printed
