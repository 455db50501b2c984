"""`export_run --format swebench-preds | swebench-report`: one predictions file and one harness
report per arm and repetition (the harness keeps one prediction per instance_id)."""

import io
import json
import zipfile
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.models import Artifact, ArtifactKind, Attempt
from experiments.swebench_export import HarnessModel
from tests.cli import run_command
from tests.conftest import work_queue

# The harness's report fields (make_run_report, schema 2), in its order.
HARNESS_FIELDS = [
    "total_instances",
    "submitted_instances",
    "completed_instances",
    "resolved_instances",
    "unresolved_instances",
    "infra_failure_instances",
    "ambiguous_failure_instances",
    "empty_patch_instances",
    "error_instances",
    "completed_ids",
    "incomplete_ids",
    "empty_patch_ids",
    "submitted_ids",
    "resolved_ids",
    "unresolved_ids",
    "infra_failure_ids",
    "ambiguous_failure_ids",
    "failure_reasons",
    "error_ids",
    "schema_version",
    # PRBench's own, after the harness's.
    "configuration_failure_instances",
    "configuration_failure_ids",
]


@pytest.fixture
def finished_run(experiment, django_capture_on_commit_callbacks):
    def finish(arms=None, repetitions=1, inference_only=False):
        if arms:
            do_replace_arms(experiment, arms)
        experiment.repetitions = repetitions
        experiment.save()
        with django_capture_on_commit_callbacks(execute=True):
            run = do_start_run(experiment, inference_only=inference_only)
        work_queue()
        run.refresh_from_db()
        return run

    return finish


def zip_stdout(*args) -> zipfile.ZipFile:
    """The command's stdout as bytes (a zip), as a shell redirect would take it."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    call_command(*args, stdout=out, stderr=io.StringIO())
    out.flush()
    return zipfile.ZipFile(io.BytesIO(out.buffer.getvalue()))


def lines_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_each_arm_gets_a_predictions_file_the_harness_reads_whole(finished_run, tmp_path):
    run = finished_run()
    code = str(run.code)
    oracle = lines_of(run_command("export_run", code, "--format", "swebench-preds", "--arm", "oracle"))
    gold = {a.task.external_id: a.task.gold_patch for a in run.attempts.select_related("task")}
    assert len(oracle) == 4 and all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in oracle)
    # The harness keys predictions by instance_id: every line of the file survives that.
    assert len({p["instance_id"]: p for p in oracle}) == 4
    assert all(p["model_name_or_path"] == "oracle" and p["model_patch"] == gold[p["instance_id"]] for p in oracle)

    archive = zip_stdout("export_run", code, "--format", "swebench-preds")
    assert archive.namelist() == ["oracle.jsonl", "noisy.jsonl"]  # the run's arm order
    noisy = run_command("export_run", code, "--format", "swebench-preds", "--arm", "noisy")
    assert archive.read("oracle.jsonl").decode() == run_command(
        "export_run", code, "--format", "swebench-preds", "--arm", "oracle"
    )
    assert archive.read("noisy.jsonl").decode() == noisy
    assert {p["model_name_or_path"] for p in lines_of(noisy)} == {"noisy"}

    written = run_command("export_run", code, "--format", "swebench-preds", "--output-dir", str(tmp_path / "preds"))
    assert sorted(path.name for path in (tmp_path / "preds").iterdir()) == ["noisy.jsonl", "oracle.jsonl"]
    assert (tmp_path / "preds" / "noisy.jsonl").read_text() == noisy
    assert "4 prediction(s) of oracle" in written


def test_the_report_is_the_harness_report_of_each_arm(finished_run):
    run = finished_run()
    code = str(run.code)
    report = json.loads(run_command("export_run", code, "--format", "swebench-report"))
    assert list(report) == ["oracle", "noisy"]
    assert all(list(model) == HARNESS_FIELDS for model in report.values())
    oracle, noisy = report["oracle"], report["noisy"]
    tasks = sorted(run.attempts.filter(arm__label="oracle").values_list("task__external_id", flat=True))
    assert oracle["resolved_ids"] == oracle["submitted_ids"] == oracle["completed_ids"] == tasks
    assert (oracle["total_instances"], oracle["resolved_instances"], oracle["schema_version"]) == (4, 4, 2)
    resolved = run.attempts.filter(arm__label="noisy", resolved=True).values_list("task__external_id", flat=True)
    assert noisy["resolved_ids"] == sorted(resolved)
    # The harness's identities: submitted = completed + empty + error; total = submitted + incomplete.
    lists = ("completed_ids", "empty_patch_ids", "error_ids")
    assert sorted(i for key in lists for i in noisy[key]) == noisy["submitted_ids"] == tasks
    assert noisy["incomplete_ids"] == []
    # One arm alone is exactly the harness's report file: the same document, indented by 4.
    alone = run_command("export_run", code, "--format", "swebench-report", "--arm", "noisy")
    assert alone == json.dumps(noisy, indent=4) + "\n"


@pytest.fixture
def pinned_run(experiment):
    """Two arms, two repetitions, four tasks (16 attempts, never enqueued), each given a known
    ending: every kind of attempt the harness's lists tell apart."""
    experiment.repetitions = 2
    experiment.save()
    run = do_start_run(experiment)
    tasks = set(run.attempts.values_list("task__external_id", flat=True))
    endings = {
        ("oracle", 0): [RESOLVED, UNRESOLVED, NOT_APPLIED, NO_PATCH],
        ("oracle", 1): [MODEL_TIMEOUT, RATE_LIMITED, TESTS_TIMED_OUT, QUEUED],
        ("noisy", 0): [CANCELLED, RESOLVED, REFUSED_PATCH, MISCONFIGURED],
        # ("noisy", 1) stays queued: nothing submitted.
    }
    for (label, repetition), fields in endings.items():
        for task, ending in zip(sorted(tasks), fields, strict=True):
            attempt = run.attempts.get(arm__label=label, repetition=repetition, task__external_id=task)
            patch = f"patch of {label} {task}\n" if ending.get("patch_present") else ""
            Attempt.objects.filter(pk=attempt.pk).update(**ending, extracted_answer=patch)
    return run, sorted(tasks)


VALIDATED_AT = datetime(2026, 1, 1, tzinfo=UTC)
ANSWERED = {"status": "completed", "outcome": "model_success", "patch_present": True, "validated_at": VALIDATED_AT}
RESOLVED = {**ANSWERED, "patch_applied": True, "resolved": True}
UNRESOLVED = {**ANSWERED, "patch_applied": True, "resolved": False}
NOT_APPLIED = {**ANSWERED, "patch_applied": False, "resolved": False, "patch_well_formed": True}
REFUSED_PATCH = {**ANSWERED, "patch_applied": False, "resolved": False, "patch_well_formed": False}
NO_PATCH = {**ANSWERED, "patch_present": False, "patch_applied": False, "resolved": False}
MODEL_TIMEOUT = {"status": "failed", "outcome": "model_failure", "error_category": "timeout"}
RATE_LIMITED = {"status": "failed", "outcome": "infrastructure_failure", "error_category": "rate_limited"}
MISCONFIGURED = {"status": "failed", "outcome": "configuration_failure", "error_category": "unsupported_parameter"}
TESTS_TIMED_OUT = {**ANSWERED, "outcome": "infrastructure_failure", "patch_applied": True, "resolved": False}
CANCELLED = {"status": "cancelled"}
QUEUED: dict = {}


def test_every_ending_lands_in_the_harness_list_of_the_same_meaning(pinned_run):
    run, (t0, t1, t2, t3) = pinned_run
    report = json.loads(run_command("export_run", str(run.code), "--format", "swebench-report"))
    assert list(report) == ["oracle@rep0", "oracle@rep1", "noisy@rep0", "noisy@rep1"]
    nothing: dict = {
        "infra_failure_ids": [],
        "configuration_failure_ids": [],
        "failure_reasons": {},
        "incomplete_ids": [],
    }
    expected = {
        # A patch git apply refused is an error, as in the harness; no patch at all is empty.
        "oracle@rep0": {
            **nothing,
            "resolved_ids": [t0],
            "unresolved_ids": [t1],
            "error_ids": [t2],
            "empty_patch_ids": [t3],
            "completed_ids": [t0, t1],
            "submitted_ids": [t0, t1, t2, t3],
        },
        # The model's own timeout is its empty answer; a rate limit or tests that ran out of
        # time are the infrastructure's errors; a queued attempt is not submitted yet.
        "oracle@rep1": {
            "resolved_ids": [],
            "unresolved_ids": [],
            "error_ids": [t1, t2],
            "empty_patch_ids": [t0],
            "completed_ids": [],
            "submitted_ids": [t0, t1, t2],
            "incomplete_ids": [t3],
            "infra_failure_ids": [t1, t2],
            "configuration_failure_ids": [],
            "failure_reasons": {t1: "rate_limited", t2: "tests_timed_out"},
        },
        # A patch PRBench's rule refused before applying is an error too; cancelled is incomplete.
        # A request the provider refused for the arm's settings is neither the model's empty
        # answer nor the infrastructure's: an error, in a list of its own, with its cause.
        "noisy@rep0": {
            **nothing,
            "resolved_ids": [t1],
            "unresolved_ids": [],
            "error_ids": [t2, t3],
            "empty_patch_ids": [],
            "completed_ids": [t1],
            "submitted_ids": [t1, t2, t3],
            "incomplete_ids": [t0],
            "configuration_failure_ids": [t3],
            "failure_reasons": {t3: "unsupported_parameter"},
        },
        "noisy@rep1": {
            **nothing,
            "resolved_ids": [],
            "unresolved_ids": [],
            "error_ids": [],
            "empty_patch_ids": [],
            "completed_ids": [],
            "submitted_ids": [],
            "incomplete_ids": [t0, t1, t2, t3],
        },
    }
    for name, lists in expected.items():
        counts = {
            key.replace("_ids", "_instances"): len(ids)
            for key, ids in lists.items()
            if key not in ("incomplete_ids", "failure_reasons")
        }
        assert report[name] == {
            "total_instances": 4,
            **counts,
            "ambiguous_failure_instances": 0,
            **lists,
            "ambiguous_failure_ids": [],
            "schema_version": 2,
        }, name


def test_a_predictions_file_holds_what_was_submitted(pinned_run):
    run, (t0, t1, t2, _) = pinned_run
    code = str(run.code)
    rep1 = lines_of(run_command("export_run", code, "--format", "swebench-preds", "--arm", "oracle", "--rep", "1"))
    # The report's submitted_ids, each once; the patches joined from their artifacts.
    assert sorted(p["instance_id"] for p in rep1) == [t0, t1, t2]
    assert {p["instance_id"]: p["model_patch"] for p in rep1} == {t0: "", t1: "", t2: f"patch of oracle {t2}\n"}
    assert {p["model_name_or_path"] for p in rep1} == {"oracle@rep1"}
    archive = zip_stdout("export_run", code, "--format", "swebench-preds")
    names = ["oracle@rep0.jsonl", "oracle@rep1.jsonl", "noisy@rep0.jsonl", "noisy@rep1.jsonl"]
    assert archive.namelist() == names
    assert archive.read("noisy@rep1.jsonl") == b""
    for info in archive.infolist():
        assert info.compress_type == zipfile.ZIP_DEFLATED and info.date_time[0] == run.created_at.year
        label, rep = info.filename.removesuffix(".jsonl").split("@rep")
        alone = run_command("export_run", code, "--format", "swebench-preds", "--arm", label, "--rep", rep)
        assert archive.read(info).decode() == alone


def test_the_zip_is_written_as_the_attempts_are_read(pinned_run, monkeypatch):
    """A chunk of the zip goes out per chunk of attempts read: nothing waits for the whole run."""
    from experiments import exports

    run, _ = pinned_run
    monkeypatch.setattr(exports, "CHUNK_ROWS", 1)
    read = []
    real = exports.each_model_predictions

    def counted(*args, **kwargs):
        for model, predictions in real(*args, **kwargs):
            yield model, (read.append(prediction) or prediction for prediction in predictions)

    monkeypatch.setattr(exports, "each_model_predictions", counted)
    chunks = exports.swebench_predictions_zip(run)
    first = next(chunks)
    assert first.startswith(b"PK\x03\x04") and len(read) <= 1  # the first header, before the rest is read
    whole = first + b"".join(chunks)
    assert len(read) == 10  # every submitted attempt, each read once
    assert zipfile.ZipFile(io.BytesIO(whole)).testzip() is None


def test_the_same_run_zips_to_the_same_bytes(pinned_run):
    from experiments.exports import swebench_predictions_zip

    run, _ = pinned_run
    assert b"".join(swebench_predictions_zip(run)) == b"".join(swebench_predictions_zip(run))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arm", "nope"], "has no arm 'nope'; its arms are 'oracle', 'noisy'"),
        (["--arm", "oracle"], "arm 'oracle' ran 2 repetitions in run {code}: choose one of 0 to 1"),
        (
            ["--arm", "oracle", "--rep", "2"],
            "arm 'oracle' has no repetition 2 in run {code}: it has repetitions 0 to 1",
        ),
        (["--arm", "noisy", "--rep", "-1"], "arm 'noisy' has no repetition -1"),
        (["--rep", "1"], "a repetition is chosen with an arm"),
    ],
)
def test_an_unknown_arm_or_repetition_is_refused_by_name(pinned_run, args, message):
    run, _ = pinned_run
    for format in ("swebench-preds", "swebench-report"):
        with pytest.raises(CommandError) as caught:
            run_command("export_run", str(run.code), "--format", format, *args)
        assert message.format(code=run.code) in str(caught.value)


def test_one_repetition_needs_no_rep_and_has_only_rep_0(finished_run):
    run = finished_run([ArmSpec("mute", "mock", "m", {"mode": "empty"})])
    code = str(run.code)
    assert run_command("export_run", code, "--format", "swebench-preds", "--arm", "mute") == run_command(
        "export_run", code, "--format", "swebench-preds", "--arm", "mute", "--rep", "0"
    )
    with pytest.raises(CommandError, match=r"arm 'mute' has no repetition 1 in run .*: it has only repetition 0"):
        run_command("export_run", code, "--format", "swebench-preds", "--arm", "mute", "--rep", "1")
    report = json.loads(run_command("export_run", code, "--format", "swebench-report", "--arm", "mute"))
    assert report["empty_patch_instances"] == report["submitted_instances"] == 4


def test_other_formats_have_no_per_arm_file(pinned_run, tmp_path):
    run, _ = pinned_run
    with pytest.raises(CommandError, match="only swebench-preds and swebench-report export one arm at a time, not csv"):
        run_command("export_run", str(run.code), "--format", "csv", "--arm", "oracle")
    with pytest.raises(CommandError, match="--output-dir writes SWE-bench predictions files, not swebench-report"):
        run_command("export_run", str(run.code), "--format", "swebench-report", "--output-dir", str(tmp_path))


def test_the_output_dir_never_replaces_a_file(pinned_run, tmp_path):
    run, _ = pinned_run
    (tmp_path / "noisy@rep1.jsonl").write_text("mine\n")
    with pytest.raises(CommandError) as caught:
        run_command("export_run", str(run.code), "--format", "swebench-preds", "--output-dir", str(tmp_path))
    assert f"nothing written: already there: {tmp_path / 'noisy@rep1.jsonl'}" in str(caught.value)
    assert [path.name for path in tmp_path.iterdir()] == ["noisy@rep1.jsonl"]
    assert (tmp_path / "noisy@rep1.jsonl").read_text() == "mine\n"


def test_the_zip_is_not_written_to_a_terminal(pinned_run):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    run, _ = pinned_run
    with pytest.raises(CommandError, match="come as a zip: redirect stdout to a file"):
        call_command("export_run", str(run.code), format="swebench-preds", stdout=Terminal())


@pytest.mark.parametrize(
    ("label", "stem"),
    [("gpt-4.1", "gpt-4.1"), ("org/model", "org%2Fmodel"), ("..", "%2E."), ("a b", "a%20b"), ("x@rep1", "x@rep1")],
)
def test_a_model_file_name_is_never_a_path(label, stem):
    assert HarnessModel(1, label, 0, label).file_stem == stem


def test_an_inference_only_run_has_no_report(finished_run):
    run = finished_run(inference_only=True)
    for args in ([], ["--arm", "oracle"]):
        with pytest.raises(CommandError) as caught:
            run_command("export_run", str(run.code), "--format", "swebench-report", *args)
        assert "was inference-only: no patch was validated" in str(caught.value)


def test_a_run_is_read_once_per_arm_whatever_its_repetitions(pinned_run, django_assert_num_queries):
    from experiments.exports import swebench_predictions_zip
    from experiments.swebench_export import swebench_report

    run, _ = pinned_run
    with django_assert_num_queries(3):  # the arms, then each arm's attempts (two repetitions each)
        swebench_report(run)
    with django_assert_num_queries(3):
        b"".join(swebench_predictions_zip(run))


def test_a_repetition_not_asked_for_is_skipped_not_misfiled(experiment):
    from experiments.swebench_export import each_model

    experiment.repetitions = 3
    experiment.save()
    run = do_start_run(experiment)
    oracle = run.arms.get(label="oracle").pk
    asked = [HarnessModel(oracle, "oracle", 0, "first"), HarnessModel(oracle, "oracle", 2, "third")]
    fields = ("task__external_id", "repetition")
    read = {model.name: list(rows) for model, rows in each_model(run.attempts.all(), asked, fields, 1)}
    tasks = sorted(set(run.attempts.values_list("task__external_id", flat=True)))
    assert sorted(read["first"]) == [(task, 0) for task in tasks]
    assert sorted(read["third"]) == [(task, 2) for task in tasks]  # the second repetition's rows in between


def test_a_patch_whose_tests_hung_where_the_golds_finished_is_an_error_as_in_the_harness(pinned_run):
    """The board scores it unresolved (the model's failure, in the denominator); the harness
    files a timed-out patch under error_ids, not unresolved_ids, and so does the report."""
    run, (_t0, t1, _t2, _t3) = pinned_run
    hung = run.attempts.get(arm__label="oracle", repetition=0, task__external_id=t1)
    Artifact.objects.create(attempt=hung, kind=ArtifactKind.VALIDATION, status="timed_out", content="timed out")
    report = json.loads(run_command("export_run", str(run.code), "--format", "swebench-report"))["oracle@rep0"]
    assert report["unresolved_ids"] == []
    assert t1 in report["error_ids"] and t1 not in report["completed_ids"]
    assert report["infra_failure_ids"] == [] and report["failure_reasons"] == {}
    assert sorted(report["completed_ids"] + report["empty_patch_ids"] + report["error_ids"]) == report["submitted_ids"]
