"""The PR workload on a real git repository, end to end: ingest textkit's history, then run
an oracle arm (all resolved), an empty arm (none) and a noisy arm (in between)."""

import json
import shutil

import pytest
from django.core.management import CommandError
from django.urls import reverse

from datasets.models import Dataset, TaskInstance
from evaluation.patches import check_patch
from evaluation.testbed import FLAKY_SUBJECT, KEPT_SUBJECTS, build_testbed
from experiments.actions import ArmSpec, ExperimentSpec, check_start_run, do_save_experiment
from experiments.demo import shared_scratch
from experiments.models import Artifact, ArtifactKind, AttemptStatus
from experiments.swebench_export import swebench_report
from leaderboards.aggregation import PatchQualityRow
from leaderboards.reporting import run_patch_quality
from tests.conftest import client_for, work_queue
from tests.factories import ingest_textkit


@pytest.fixture
def textkit(tmp_path, settings):
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    # The flaky test's counter where every sandbox user can reach it, as the demo's.
    settings.VAR_DIR = tmp_path / "var"
    counter = shared_scratch("flaky-runs")
    yield build_testbed(tmp_path / "textkit", flaky_counter=counter)
    shutil.rmtree(counter.parent)


def test_ingestion_keeps_the_bug_fixes_and_says_why_it_rejects_the_rest(org, alice, textkit):
    output = ingest_textkit(org, textkit)
    assert "5 candidate(s): kept 4 (1 quarantined as flaky), rejected 1" in output
    assert "'Name the word splitter': the gold patch turns no test green" in output
    assert "1 changes only test files, 1 changes no test files" in output
    dataset = Dataset.objects.get(org=org, name="textkit")
    assert dataset.repo_sources == {"local/textkit": str(textkit)}
    tasks = {task.title: task for task in dataset.tasks.all()}
    assert set(tasks) == {*KEPT_SUBJECTS, FLAKY_SUBJECT}
    words = tasks["Count words across newlines"]
    assert words.fail_to_pass == ["tests/test_words.py::test_counts_words_across_newlines"]
    assert words.pass_to_pass == [
        "tests/test_duration.py::test_hours",
        "tests/test_duration.py::test_seconds",
        "tests/test_slug.py::test_lower_cases",
        "tests/test_words.py::test_counts_words_between_spaces",
    ]
    assert "count_words('one\\ntwo') returns 1" in words.problem_statement
    assert "textkit/words.py" in words.gold_patch and "tests/" not in words.gold_patch
    assert "+def test_counts_words_across_newlines" in words.test_patch and "textkit/words.py" not in words.test_patch
    assert not words.quarantined
    flaky = tasks[FLAKY_SUBJECT]
    assert flaky.quarantined
    assert "tests/test_rounding.py::test_sometimes passed only sometimes" in flaky.quarantine_reason
    assert flaky.fail_to_pass == ["tests/test_rounding.py::test_rounds_to_nearest_minute"]
    page = client_for(alice).get(reverse("datasets:detail", args=[dataset.code])).content.decode()
    assert "quarantined</span> Left out of runs unless an experiment includes quarantined tasks: " in page
    assert "tests/test_rounding.py::test_sometimes passed only sometimes" in page


def test_ingesting_again_adds_nothing_twice(org, textkit):
    ingest_textkit(org, textkit, "--max", "2")
    assert TaskInstance.objects.filter(dataset__name="textkit").count() == 2
    output = ingest_textkit(org, textkit)
    assert "2 already in the dataset" in output
    assert TaskInstance.objects.filter(dataset__name="textkit").count() == 4


def test_a_bad_repository_changes_nothing(org, tmp_path):
    with pytest.raises(CommandError, match=r"nothing ingested:\n  --repo .*nowhere: no such directory"):
        ingest_textkit(org, tmp_path / "nowhere")
    (tmp_path / "plain").mkdir()
    with pytest.raises(CommandError, match="not a git repository, or it has no branch or commit 'HEAD'"):
        ingest_textkit(org, tmp_path / "plain")
    assert not Dataset.objects.exists()


def textkit_experiment(org, alice, dataset, **changes):
    arms = [
        ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"}),
        ArmSpec("empty", "mock", "mock-empty", {"mode": "empty"}),
        ArmSpec("noisy", "mock", "mock-noisy", {"mode": "noisy", "quality": 0.5}),
    ]
    spec = ExperimentSpec(name="textkit", dataset=dataset, arms=arms, repetitions=3, seed=5, **changes)
    return do_save_experiment(org, spec, alice)


def test_oracle_resolves_every_task_empty_none_noisy_some(org, alice, textkit, start):
    ingest_textkit(org, textkit)
    dataset = Dataset.objects.get(name="textkit")
    experiment = textkit_experiment(org, alice, dataset)
    check_start_run(experiment)
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    assert run.status == "completed"
    # The quarantined task is left out: 3 tasks x 3 arms x 3 repetitions.
    assert run.total_attempts == 27
    assert not run.attempts.filter(task__quarantined=True).exists()
    resolved = {
        label: run.attempts.filter(arm__label=label, resolved=True).count() for label in ("oracle", "empty", "noisy")
    }
    assert resolved["oracle"] == 9
    assert resolved["empty"] == 0
    assert 0 < resolved["noisy"] < 9
    assert not run.attempts.exclude(status=AttemptStatus.COMPLETED).exists()

    oracle = run.attempts.filter(arm__label="oracle").first()
    assert oracle.fail_to_pass_fraction == 1.0 and oracle.pass_to_pass_regressions == 0
    assert oracle.lint_clean is True and oracle.build_ok is True
    assert oracle.responded_at <= oracle.validated_at
    tests = json.loads(Artifact.objects.get(attempt=oracle, kind=ArtifactKind.TESTS).content)
    assert set(oracle.task.fail_to_pass) <= {test["id"] for test in tests if test["outcome"] == "passed"}
    # Each prompt showed the files its gold patch touches, as they were at the base commit.
    for attempt in run.attempts.filter(arm__label="oracle").select_related("task"):
        prompt = attempt.request["messages"][0]["content"]
        for path in check_patch(attempt.task.gold_patch).paths:
            assert f"--- {path} ---" in prompt
        assert attempt.task.problem_statement in prompt
        if "textkit/duration.py" in attempt.task.gold_patch:  # shown as it was before the fix
            assert 'UNITS = {"h": 3600, "m": 3600, "s": 1}' in prompt

    empty = run.attempts.filter(arm__label="empty").first()
    # No patch fixes none of the FAIL_TO_PASS tests (and breaks none of the others).
    assert (empty.patch_present, empty.resolved, empty.fail_to_pass_fraction) == (False, False, 0.0)
    assert empty.pass_to_pass_regressions == 0

    quality = {row.label: row for row in run_patch_quality(run)}
    assert quality["oracle"] == PatchQualityRow(
        arm_id=oracle.arm_id,
        label="oracle",
        answered=9,
        well_formed_rate=1.0,
        applied_rate=1.0,
        fail_to_pass_mean=1.0,
        pass_to_pass_regressions=0,
        build_ok_rate=1.0,
        lint_clean_rate=1.0,
        lines_changed_mean=quality["oracle"].lines_changed_mean,
    )
    assert quality["oracle"].lines_changed_mean == 2.0  # each fix swaps one line
    empty_row = quality["empty"]
    assert (empty_row.well_formed_rate, empty_row.applied_rate, empty_row.fail_to_pass_mean) == (None, 0.0, 0.0)
    page = client_for(alice).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert "<summary>Patch details</summary>" in page and "FAIL_TO_PASS fixed" in page

    report = swebench_report(run)
    oracle_ids = {task.external_id for task in dataset.tasks.filter(quarantined=False)}
    assert set(report["oracle@rep0"]["resolved_ids"]) == oracle_ids
    assert set(report["empty@rep0"]["empty_patch_ids"]) == oracle_ids


def test_a_wrong_patch_scores_its_fail_to_pass_share(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("noisy", "mock", "mock-noisy", {"mode": "noisy", "quality": 0.0})]
    experiment = do_save_experiment(org, ExperimentSpec(name="w", dataset=dataset, arms=arms, repetitions=6, seed=3))
    run = start(experiment)
    work_queue()
    applied = run.attempts.filter(patch_applied=True)
    assert applied.exists(), "a quality-0 noisy arm always sends some patches that apply but fix nothing"
    assert set(applied.values_list("resolved", "fail_to_pass_fraction", "pass_to_pass_regressions")) == {
        (False, 0.0, 0)
    }


def test_quarantined_tasks_run_only_when_asked_for(org, alice, textkit, start):
    ingest_textkit(org, textkit)
    dataset = Dataset.objects.get(name="textkit")
    experiment = textkit_experiment(org, alice, dataset, include_quarantined=True)
    run = start(experiment)
    assert run.attempts.filter(task__quarantined=True).count() == 9
    assert run.config_snapshot["include_quarantined"] is True


def test_the_attempt_page_shows_what_the_task_asks_of_each_test(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    experiment = do_save_experiment(org, ExperimentSpec(name="p", dataset=dataset, arms=arms))
    run = start(experiment)
    work_queue()
    attempt = run.attempts.get()
    page = client_for(alice).get(reverse("experiments:attempt", args=[attempt.code])).content.decode()
    assert "100% of FAIL_TO_PASS fixed" in page and "no PASS_TO_PASS regression" in page
    assert '<code>tests/test_duration.py::test_minutes</code></td><td class="muted">must fix</td>' in page
    assert '<code>tests/test_duration.py::test_hours</code></td><td class="muted">must keep passing</td>' in page
    dataset_page = client_for(alice).get(reverse("datasets:detail", args=[dataset.code])).content.decode()
    assert "Test command: <code>{python} -m pytest" in dataset_page


def test_bm25_mode_shows_the_files_retrieved_for_the_problem(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")  # parse_duration counts minutes as hours
    dataset = Dataset.objects.get(name="textkit")
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    spec = ExperimentSpec(name="b", dataset=dataset, arms=arms, context_mode="bm25")
    run = start(do_save_experiment(org, spec))
    work_queue()
    attempt = run.attempts.get()
    prompt = attempt.request["messages"][0]["content"]
    assert run.config_snapshot["context_mode"] == "bm25"
    assert run.config_snapshot["prompt_version"].startswith("sha256:")
    # Retrieved, not given: the query's words ("parse_duration", "minutes", "hours") find
    # the module, and test files are never shown.
    assert "--- textkit/duration.py ---" in prompt
    assert "--- tests/" not in prompt
    assert attempt.resolved


def test_an_unavailable_repository_fails_the_attempt_before_the_model_is_paid(org, alice, plain_textkit, start):
    ingest_textkit(org, plain_textkit, "--max", "1")
    dataset = Dataset.objects.get(name="textkit")
    dataset.repo_sources = {"local/textkit": str(plain_textkit.parent / "moved-away")}
    dataset.save()
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    spec = ExperimentSpec(name="gone", dataset=dataset, arms=arms, prompt_template="Fix: {{problem_statement}}")
    run = start(do_save_experiment(org, spec))
    work_queue()
    attempt = run.attempts.get()
    assert attempt.status == AttemptStatus.FAILED
    assert "repository unavailable: cannot clone local/textkit" in attempt.error_message
    assert attempt.request == {} and attempt.input_tokens is None  # no call was made
