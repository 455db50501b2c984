"""Timing the oracle mock arm through the whole pipeline, as the bench scripts that measure
scoring do: one experiment, one run, ``workers`` RQ workers, until every attempt has ended."""

from __future__ import annotations

import time


def timed_oracle_run(org, dataset, name: str, repetitions: int, workers: int):
    """The finished run and its wall time in seconds, from starting it to its last attempt's end."""
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
    from experiments.management.commands.demo import start_workers, stop_workers
    from experiments.models import AttemptStatus

    spec = ExperimentSpec(
        name=name,
        dataset=dataset,
        repetitions=repetitions,
        arms=[ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})],
    )
    experiment = do_save_experiment(org, spec)
    processes = start_workers(workers)
    try:
        started = time.perf_counter()
        run = do_start_run(experiment)
        while run.attempts.exclude(status__in=[AttemptStatus.COMPLETED, AttemptStatus.FAILED]).exists():
            time.sleep(0.05)
        wall = time.perf_counter() - started
    finally:
        stop_workers(processes, timeout_s=60)
    return run, wall
