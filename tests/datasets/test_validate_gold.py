"""`manage.py validate_gold`: each task's gold patch validated as its runs would validate it,
unsound tasks quarantined with the reason, each finding saved as it is made."""

from __future__ import annotations

import pytest
from django.core.management import CommandError
from django.urls import reverse

from datasets.models import Dataset, GoldStatus
from evaluation.sandbox import isolation
from evaluation.testbed import build_testbed
from experiments.demo import shared_scratch
from tests.cli import run_command
from tests.conftest import client_for
from tests.factories import ingest_textkit

SOMETIMES = "tests/test_rounding.py::test_sometimes"


@pytest.fixture
def mined(org, tmp_path, settings):
    """The two newest bug fixes of the textkit testbed, mined."""
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    ingest_textkit(org, build_testbed(tmp_path / "textkit"), "--max", "2")
    return Dataset.objects.get(org=org, name="textkit")


def validate_gold(org, *extra):
    return run_command("validate_gold", "--org", org.slug, "--dataset", "textkit", *extra)


def test_sound_tasks_pass_and_an_unsound_one_is_quarantined_with_the_reason(org, alice, mined):
    broken, sound = mined.tasks.order_by("position")
    # A gold patch that applies and changes nothing the tests look at: it cannot resolve the task.
    broken.gold_patch = "--- /dev/null\n+++ b/textkit/unused.py\n@@ -0,0 +1 @@\n+UNUSED = 1\n"
    broken.save(update_fields=["gold_patch"])

    out = validate_gold(org, "--runs", "2")

    broken.refresh_from_db()
    sound.refresh_from_db()
    assert sound.gold_status == GoldStatus.RESOLVED and not sound.quarantined
    assert sound.gold_detail.count("passed: FAIL_TO_PASS 1/1") == 2
    assert broken.gold_status == GoldStatus.UNRESOLVED and broken.quarantined
    reason = "validate_gold: gold does not resolve it: run 1: failed: FAIL_TO_PASS 0/1"
    assert broken.quarantine_reason.startswith(reason)
    assert f"{broken.external_id}: gold does not resolve it (quarantined)" in out
    assert "Checked 2 task(s) of 'textkit': 1 gold resolves it, 1 gold does not resolve it" in out
    page = client_for(alice).get(reverse("datasets:detail", args=[mined.code])).content.decode()
    assert "gold resolves it</span>" in page and "gold does not resolve it</span>" in page


def test_a_second_check_skips_what_is_decided_and_a_recheck_lifts_its_own_quarantine(org, mined):
    first, _ = mined.tasks.order_by("position")
    validate_gold(org, "--runs", "1")
    assert not mined.tasks.filter(gold_status="").exists()

    again = validate_gold(org, "--runs", "1")
    assert "2 task(s) already checked: skipped" in again and "Checked 0 task(s)" in again

    first.refresh_from_db()
    first.quarantined, first.quarantine_reason = True, "validate_gold: gold does not resolve it: run 1: failed"
    first.save(update_fields=["quarantined", "quarantine_reason"])
    validate_gold(org, "--runs", "1", "--recheck")
    first.refresh_from_db()
    assert first.gold_status == GoldStatus.RESOLVED and not first.quarantined


def test_a_gold_patch_that_flips_between_runs_is_flaky(org, tmp_path, settings):

    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    settings.VAR_DIR = tmp_path / "var"
    counter = shared_scratch("flaky-runs")
    repo = build_testbed(tmp_path / "textkit", flaky_counter=counter)
    ingest_textkit(org, repo, "--max", "1")  # the newest candidate: the fix with a test that passes on odd runs
    task = Dataset.objects.get(org=org, name="textkit").tasks.get()
    task.pass_to_pass = [*task.pass_to_pass, SOMETIMES]  # as if mining had not seen it flip
    task.quarantined, task.quarantine_reason = False, ""
    task.save(update_fields=["pass_to_pass", "quarantined", "quarantine_reason"])

    out = validate_gold(org, "--runs", "2")

    task.refresh_from_db()
    assert task.gold_status == GoldStatus.FLAKY and task.quarantined
    assert "resolved in 1 of 2 runs" in task.gold_detail and "gold flips between runs (quarantined)" in out


def test_the_empty_patch_check_flags_a_task_whose_tests_pass_without_a_fix(org, mined):
    task = mined.tasks.order_by("position").first()
    # Its FAIL_TO_PASS swapped for a test that passes at the base commit already.
    task.fail_to_pass, task.pass_to_pass = task.pass_to_pass[:1], task.pass_to_pass[1:]
    task.save(update_fields=["fail_to_pass", "pass_to_pass"])

    validate_gold(org, "--runs", "1", "--empty")

    task.refresh_from_db()
    assert task.gold_status == GoldStatus.TRIVIAL and task.quarantined
    assert "the empty patch resolves it too" in task.gold_detail


def test_bad_options_are_refused_by_name(org, mined):
    with pytest.raises(CommandError, match="--runs must be between 1 and 10, not 0"):
        validate_gold(org, "--runs", "0")
    with pytest.raises(CommandError, match="organisation 'acme' has no dataset 'nope'"):
        run_command("validate_gold", "--org", org.slug, "--dataset", "nope")
    assert not mined.tasks.exclude(gold_status="").exists()


def test_a_sandbox_that_fails_is_an_error_checked_again_not_a_verdict_on_the_gold(org, mined, monkeypatch):
    """The sandbox's command server cannot start (its interpreter is gone): the task is not
    quarantined, its finding says the sandbox failed, and the next check tries it again."""
    if not isolation().sessions:
        pytest.skip("the sandbox runs one command at a time here: there is no server to fail")
    with monkeypatch.context() as patched:
        patched.setattr("sys.executable", "/nonexistent/python")
        validate_gold(org, "--runs", "1")
    tasks = mined.tasks.all()
    assert {task.gold_status for task in tasks} == {GoldStatus.ERROR}
    assert all("the sandbox failed" in task.gold_detail for task in tasks)
    assert not tasks.filter(quarantined=True).exists()
    validate_gold(org, "--runs", "1")
    assert {task.gold_status for task in mined.tasks.all()} == {GoldStatus.RESOLVED}
