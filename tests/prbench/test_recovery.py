"""prbench/recovery.py: the sweep runs the steps PRBENCH_RECOVERY_STEPS names, in that order."""

from datetime import timedelta

import pytest

from prbench.recovery import run_recovery_sweep

ran: list[tuple[str, timedelta]] = []


def first(stale_after: timedelta) -> dict[str, int]:
    ran.append(("first", stale_after))
    return {"reclaimed": 2}


def second(stale_after: timedelta) -> dict[str, int]:
    ran.append(("second", stale_after))
    return {"webhooks": 1}


def broken(stale_after: timedelta) -> dict[str, int]:
    raise RuntimeError("this step failed")


@pytest.fixture
def steps(settings):
    ran.clear()

    def use(*names: str) -> None:
        settings.PRBENCH_RECOVERY_STEPS = [f"{__name__}.{name}" for name in names]

    return use


def test_every_step_runs_in_the_settings_order_and_reports_its_counts(steps, settings):
    steps("second", "first")
    assert run_recovery_sweep(stale_after_seconds=60) == {"webhooks": 1, "reclaimed": 2}
    assert ran == [("second", timedelta(seconds=60)), ("first", timedelta(seconds=60))]


def test_the_staleness_limit_defaults_to_the_setting(steps, settings):
    settings.PRBENCH_STALE_AFTER_SECONDS = 123
    steps("first")
    run_recovery_sweep()
    assert ran == [("first", timedelta(seconds=123))]


def test_a_failing_step_ends_the_pass_as_it_always_has(steps):
    steps("first", "broken", "second")
    with pytest.raises(RuntimeError, match="this step failed"):
        run_recovery_sweep()
    assert [name for name, _ in ran] == ["first"]
