"""The board the command line prints (start_run --wait, demo): ranked with intervals, as the
run page ranks, from the run's summaries brought up to date first."""

from __future__ import annotations

import pytest

from datasets.models import Dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.models import AttemptStatus
from leaderboards.jobs import OUT_OF_DATE
from leaderboards.models import ArmSummary
from leaderboards.reporting import run_board_text
from prbench.queues import get_connection
from tests.conftest import work_queue
from tests.factories import import_file
from tests.samples import JEOPARDY

ARMS = [ArmSpec(label, "mock", f"mock-{label}", {"mode": "oracle"}) for label in ("strong", "middling", "close")]
# Of each arm's 108 answers, how many resolved: 90% is far above the other two, and 52% and
# 48% overlap (their Wilson intervals share most of their width).
RESOLVED = {"strong": 97, "middling": 56, "close": 52}


@pytest.fixture
def answered_run(org, dataset, alice):
    spec = ExperimentSpec(name="three", dataset=dataset, arms=ARMS, repetitions=9)
    run = do_start_run(do_save_experiment(org, spec, alice), alice)
    attempts = list(run.attempts.select_related("arm").order_by("sequence"))
    resolved_so_far = dict.fromkeys(RESOLVED, 0)
    for attempt in attempts:
        label = attempt.arm.label
        attempt.status, attempt.outcome = AttemptStatus.COMPLETED, "model_success"
        attempt.resolved = resolved_so_far[label] < RESOLVED[label]
        resolved_so_far[label] += attempt.resolved
    run.attempts.bulk_update(attempts, ["status", "outcome", "resolved"])
    return run


def board_lines(text: str) -> dict[str, list[str]]:
    """Each arm's cells, by its label."""
    return {
        line.split()[1]: line.split()
        for line in text.splitlines()
        if line.split()[1:2] in (["strong"], ["middling"], ["close"])
    }


def test_the_rank_is_one_plus_the_arms_significantly_better_not_the_row_number(answered_run):
    text = run_board_text(answered_run)

    rows = board_lines(text)
    assert list(rows) == ["strong", "middling", "close"]  # best first
    assert {label: cells[0] for label, cells in rows.items()} == {"strong": "1", "middling": "2", "close": "2"}
    assert rows["strong"][4] == "89.8%"  # 97 of 108
    assert "equal ranks are not significantly different" in text


def test_attempts_recorded_since_the_last_refresh_are_counted(answered_run):
    run_board_text(answered_run)
    answered_run.attempts.filter(arm__label="close").update(resolved=True)
    get_connection().sadd(OUT_OF_DATE, answered_run.pk)  # as recording an attempt marks its run

    rows = board_lines(run_board_text(answered_run))

    assert rows["close"][0] == "1" and rows["close"][4] == "100.0%"
    assert not get_connection().sismember(OUT_OF_DATE, answered_run.pk)


def test_an_inference_only_run_ranks_nothing_on_quality(answered_run):
    answered_run.inference_only = True
    answered_run.save(update_fields=["inference_only"])

    text = run_board_text(answered_run)

    assert all(cells[0] == "—" and cells[4] == "—" for cells in board_lines(text).values())
    assert "Inference only: nothing was validated" in text
    assert ArmSummary.objects.filter(run=answered_run).count() == 3


def test_a_question_runs_board_is_headed_in_its_kinds_words(org, alice, dataset, start):
    import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
    spec = ExperimentSpec(name="quiz", dataset=Dataset.objects.get(name="jeopardy"), arms=ARMS[:1], sample_size=3)
    run = start(do_save_experiment(org, spec, alice))
    work_queue()
    header = run_board_text(run).splitlines()[0].split()
    assert "right" in header and "$/right" in header and "resolved" not in header
    patches = do_start_run(
        do_save_experiment(org, ExperimentSpec(name="patches", dataset=dataset, arms=ARMS[:1]), alice)
    )
    assert "resolved" in run_board_text(patches).splitlines()[0].split()


def test_a_long_arm_name_keeps_the_columns_in_line(org, dataset, alice):
    """An agent arm reads "label (agent)", longer than the column was: the column widens."""
    arms = [ArmSpec("short", "mock", "mock-a", {}), ArmSpec("careful-agent", "mock", "mock-b", {"solver": "agent"})]
    run = do_start_run(do_save_experiment(org, ExperimentSpec(name="wide", dataset=dataset, arms=arms), alice), alice)
    run.attempts.update(status=AttemptStatus.COMPLETED, outcome="model_success", resolved=True)
    lines = run_board_text(run).splitlines()
    header, rows = lines[0], [line for line in lines[2:] if "mock/" in line]
    assert any("careful-agent (agent)" in row for row in rows)
    assert {row.index("mock/") for row in rows} == {header.index("provider/model")}
