import json
from dataclasses import asdict

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.exports import json_chunks
from leaderboards.reporting import run_leaderboard
from tests.conftest import work_queue


def execute(experiment, seed, capture):
    with capture(execute=True):
        run = do_start_run(experiment, seed=seed)
    work_queue()
    return run


# The gateway's own clock, not a figure the mock reports: the seed reproduces what the
# provider says (latency and time to first token included), not how long this machine took.
MEASURED = {"wall_ms"}


def comparable(run):
    board = [{k: v for k, v in asdict(row).items() if k != "arm_id"} for row in run_leaderboard(run)]
    exported = json.loads("".join(json_chunks(run)))["attempts"]
    attempts = [{k: v for k, v in a.items() if k not in MEASURED} for a in exported]
    return board, attempts


def test_same_seed_same_sample_order_outputs_and_leaderboard(experiment, django_capture_on_commit_callbacks):
    do_replace_arms(
        experiment,
        [
            ArmSpec(
                "noisy",
                "mock",
                "m1",
                {
                    "mode": "noisy",
                    "quality": 0.5,
                    "jitter_ms": 3,
                    "price_input_per_mtok": 1,
                    "price_output_per_mtok": 4,
                },
            ),
            ArmSpec(
                "flaky",
                "mock",
                "m2",
                {
                    "mode": "noisy",
                    "quality": 0.8,
                    "failure_rate": 0.3,
                    "max_retries": 1,
                    "retry_base_ms": 1,
                    "price_input_per_mtok": 1,
                    "price_output_per_mtok": 4,
                },
            ),
        ],
    )
    first = execute(experiment, 5, django_capture_on_commit_callbacks)
    second = execute(experiment, 5, django_capture_on_commit_callbacks)
    other = execute(experiment, 6, django_capture_on_commit_callbacks)
    assert comparable(first) == comparable(second)
    assert outputs(first) == outputs(second)  # same task order, same arms, same answers
    assert outputs(first) != outputs(other)


def outputs(run):
    return list(run.attempts.order_by("sequence").values_list("task__external_id", "arm__label", "output"))
