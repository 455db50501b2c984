"""The quality board and the SWE-bench report count the same attempts the same way: both
read the outcome class the recorder stored."""

from __future__ import annotations

from experiments.actions import ArmSpec, do_replace_arms
from experiments.swebench_export import swebench_report
from leaderboards.boards import run_boards
from tests.conftest import work_queue


def test_the_board_agrees_with_the_swebench_report_on_every_attempt(experiment, start, settings):
    """Through the real pipeline: answers that resolve or not, an empty answer, the model's
    own timeout, a provider outage, and tests that hang past the validation limit."""
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 10  # the demo tasks' tests take a few seconds on a busy machine
    do_replace_arms(
        experiment,
        [
            ArmSpec("oracle", "mock", "m", {"mode": "oracle"}),
            ArmSpec("noisy", "mock", "m", {"mode": "noisy", "quality": 0.5}),
            ArmSpec("mute", "mock", "m", {"mode": "empty"}),
            ArmSpec("slow", "mock", "m", {"mode": "error", "failure_category": "timeout", "max_retries": 0}),
            ArmSpec("down", "mock", "m", {"mode": "error", "max_retries": 0}),
        ],
    )
    run = start(experiment)
    hanging = run.attempts.order_by("sequence").first().task
    hanging.test_command = ["{python}", "-c", "import time; time.sleep(30)"]
    hanging.save()
    work_queue()  # the run's end refreshes its summaries
    run.refresh_from_db()

    report = swebench_report(run)["models"]
    board = {e.arm.label: e.arm for e in run_boards(run, {}, lambda *_: "").quality.entries}

    assert set(board) == set(report)
    for label, row in board.items():
        ids = report[label]
        assert row.resolved == ids["resolved_instances"], label
        assert row.n - row.resolved == ids["unresolved_instances"] + ids["empty_patch_instances"], label
        assert row.infrastructure_failed == ids["error_instances"], label
    # Each kind of attempt is in the test, so each rule was checked.
    hanging_oracle = run.attempts.get(arm__label="oracle", task=hanging)
    assert hanging_oracle.outcome == "infrastructure_failure" and board["oracle"].infrastructure_failed >= 1
    assert board["oracle"].resolved >= 1 and report["mute"]["empty_patch_instances"] >= 1
    assert board["noisy"].n >= 1
    assert (board["slow"].n, board["slow"].failed, report["slow"]["empty_patch_instances"]) == (4, 4, 4)
    assert (board["down"].n, board["down"].infrastructure_failed, report["down"]["error_instances"]) == (0, 4, 4)
