"""The quality board and the SWE-bench report count the same attempts the same way: both
read the outcome class the recorder stored. The one difference is the harness's: a patch that
did not apply is its error, where the board counts it as a scored answer that did not resolve."""

from __future__ import annotations

from experiments.actions import ArmSpec, do_replace_arms
from experiments.swebench_export import swebench_report
from leaderboards.boards import run_boards
from providers.outcomes import OutcomeClass
from tests.conftest import work_queue


def test_the_board_agrees_with_the_swebench_report_on_every_attempt(experiment, start, settings):
    """Through the real pipeline: answers that resolve or not, an empty answer, the model's
    own timeout, a provider outage, tests that hang past the validation limit, and a patch
    that does not apply."""
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
    hanging, stale, *_ = (attempt.task for attempt in run.attempts.filter(arm__label="oracle").order_by("sequence"))
    hanging.test_command = ["{python}", "-c", "import time; time.sleep(30)"]
    hanging.save()
    # The oracle answers with the gold patch: one whose removed line is not in the file
    # parses, and git apply refuses it.
    stale.gold_patch = stale_copy(stale.gold_patch)
    stale.save()
    work_queue()  # the run's end refreshes its summaries
    run.refresh_from_db()

    report = swebench_report(run)
    quality = run_boards(run, {}, lambda *_: "").quality
    board = {e.arm.label: e.arm for e in quality.entries}
    patches = {e.arm.label: e.patch for e in quality.entries}

    assert set(board) == set(report)
    for label, row in board.items():
        ids = report[label]
        apply_failures = ids["error_instances"] - row.infrastructure_failed
        assert apply_failures == not_applied(run, label), label
        assert row.resolved == ids["resolved_instances"], label
        assert row.n - row.resolved == ids["unresolved_instances"] + ids["empty_patch_instances"] + apply_failures
        assert row.infrastructure_failed == ids["infra_failure_instances"], label
    # Every oracle answer carries a patch, so the board's applied rate counts its apply failures.
    oracle = report["oracle"]
    assert oracle["error_ids"] == sorted([hanging.external_id, stale.external_id])
    assert oracle["infra_failure_ids"] == [hanging.external_id] and stale.external_id not in oracle["unresolved_ids"]
    assert patches["oracle"].answered * (1 - patches["oracle"].applied_rate) == 1
    # Each kind of attempt is in the test, so each rule was checked.
    hanging_oracle = run.attempts.get(arm__label="oracle", task=hanging)
    assert hanging_oracle.outcome == "infrastructure_failure" and board["oracle"].infrastructure_failed == 1
    assert run.attempts.get(arm__label="oracle", task=stale).patch_applied is False
    assert board["oracle"].resolved >= 1 and report["mute"]["empty_patch_instances"] >= 1
    assert board["noisy"].n >= 1
    assert (board["slow"].n, board["slow"].failed, report["slow"]["empty_patch_instances"]) == (4, 4, 4)
    assert (board["down"].n, board["down"].infrastructure_failed, report["down"]["error_instances"]) == (0, 4, 4)


def stale_copy(patch: str) -> str:
    """The patch with its first removed line changed: still a diff, no longer applicable."""
    lines = patch.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("-") and not line.startswith("---"))
    lines[first] = "-# not in the file" + lines[first][1:]
    return "".join(lines)


def not_applied(run, label: str) -> int:
    """Answers with a patch that did not apply, counted from the attempts themselves."""
    return run.attempts.filter(
        arm__label=label, outcome=OutcomeClass.SUCCESS, patch_present=True, patch_applied=False
    ).count()
