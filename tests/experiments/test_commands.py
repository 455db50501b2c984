import csv
import json
import os
import subprocess
import sys
from io import StringIO
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.core.management import CommandError

from experiments.models import Experiment, ModelArm, Run, RunStatus
from tests.cli import run_command
from tests.conftest import work_queue

SPEC: dict[str, Any] = {
    "name": "From the repo",
    "dataset": "Demo: small Python bugs",
    "sample_size": 3,
    "seed": 4,
    "repetitions": 2,
    "arms": [
        {"label": "a", "provider": "mock", "model_name": "m-a", "config": {"mode": "oracle"}},
        {"label": "b", "provider": "mock", "model_name": "m-b", "config": {"mode": "noisy", "quality": 0.5}},
    ],
}


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    return str(path)


class TestApplyExperiment:
    def test_it_creates_then_updates(self, tmp_path, org, dataset):
        path = write(tmp_path, "exp.yaml", yaml.safe_dump(SPEC))
        assert "Created experiment 'From the repo'" in run_command("apply_experiment", "--org", "acme", path)
        experiment = Experiment.objects.get(org=org, name="From the repo")
        assert (experiment.sample_size, experiment.sample_seed, experiment.repetitions) == (3, 4, 2)
        assert list(experiment.arms.values_list("label", flat=True)) == ["a", "b"]

        changed = dict(SPEC, arms=SPEC["arms"][:1], repetitions=1)
        path = write(tmp_path, "exp.json", json.dumps(changed))
        assert "Updated" in run_command("apply_experiment", "--org", "acme", path)
        experiment.refresh_from_db()
        assert experiment.repetitions == 1 and experiment.arms.count() == 1

    def test_an_unknown_provider_is_named_and_changes_nothing(self, tmp_path, org, dataset):
        run_command("apply_experiment", "--org", "acme", write(tmp_path, "ok.yaml", yaml.safe_dump(SPEC)))
        bad = dict(
            SPEC,
            repetitions=5,
            arms=[dict(SPEC["arms"][0], provider="skynet"), dict(SPEC["arms"][1], config={"quality": 3})],
        )
        with pytest.raises(CommandError) as caught:
            run_command("apply_experiment", "--org", "acme", write(tmp_path, "bad.yaml", yaml.safe_dump(bad)))
        message = str(caught.value)
        assert "bad.yaml" in message
        assert "arms[0].provider 'skynet' is not supported" in message
        assert "arms[1].config.quality" in message
        experiment = Experiment.objects.get(name="From the repo")
        assert experiment.repetitions == 2 and ModelArm.objects.filter(experiment=experiment).count() == 2

    @pytest.mark.parametrize(
        "change, field",
        [
            ({"dataset": "nope"}, "dataset: no dataset named 'nope'"),
            ({"repetitions": 0}, "repetitions: must be an integer"),
            ({"sample_strategy": "vibes"}, "sample_strategy"),
            ({"arms": []}, "arms: required"),
            ({"colour": "red"}, "colour: unknown field"),
            ({"prompt_template": "no placeholder"}, "prompt_template: must contain"),
        ],
    )
    def test_each_bad_field_is_named(self, tmp_path, dataset, change, field):
        path = write(tmp_path, "bad.json", json.dumps(dict(SPEC, **change)))
        with pytest.raises(CommandError, match=field):
            run_command("apply_experiment", "--org", "acme", path)
        assert not Experiment.objects.exists()

    def test_malformed_files_name_the_line(self, tmp_path, org):
        with pytest.raises(CommandError, match=r"bad.yaml:3: invalid YAML: mapping values are not allowed here"):
            run_command(
                "apply_experiment", "--org", "acme", write(tmp_path, "bad.yaml", "name: x\narms: []\nseed: a: b\n")
            )
        with pytest.raises(CommandError, match=r"bad.json:2: invalid JSON"):
            run_command("apply_experiment", "--org", "acme", write(tmp_path, "bad.json", '{"name": "x",\n oops}'))

    def test_an_unknown_org_is_refused(self, tmp_path, db):
        with pytest.raises(CommandError, match="no organisation with slug 'ghost'"):
            run_command("apply_experiment", "--org", "ghost", write(tmp_path, "x.json", "{}"))


class TestStartRun:
    def test_it_prints_the_run_id_first(self, experiment, django_capture_on_commit_callbacks):
        with django_capture_on_commit_callbacks(execute=True):
            out = run_command("start_run", "--org", "acme", "--experiment", "Mock duel", "--seed", "99")
        run = Run.objects.get()
        assert out.splitlines()[0] == str(run.code)
        assert run.seed == 99 and run.total_attempts == 8

    # transaction=True: the command's own commit must enqueue the jobs before it waits.
    @pytest.mark.django_db(transaction=True)
    def test_wait_shows_the_leaderboard(self, experiment):
        # No worker process is running, so --wait works the queue in-process.
        out = run_command("start_run", "--org", "acme", "--experiment", "Mock duel", "--inference-only", "--wait")
        run = Run.objects.get()
        assert run.status == RunStatus.COMPLETED
        lines = out.splitlines()
        assert lines[0] == str(run.code)
        assert "oracle" in out and "95% CI" in out and "completed" in out

    @pytest.mark.django_db(transaction=True)
    def test_wait_exits_non_zero_when_the_run_fails(self, experiment):
        experiment.arms.update(config={"mode": "error", "failure_category": "authentication"})
        with pytest.raises(CommandError, match="ended failed"):
            run_command("start_run", "--org", "acme", "--experiment", "Mock duel", "--wait")

    def test_an_unknown_experiment_is_refused(self, experiment):
        with pytest.raises(CommandError, match="no experiment named 'Nope'"):
            run_command("start_run", "--org", "acme", "--experiment", "Nope")
        assert not Run.objects.exists()


def finished_run(experiment, capture):
    with capture(execute=True):
        run_command("start_run", "--org", "acme", "--experiment", "Mock duel")
    work_queue()
    return Run.objects.get()


def test_export_json_has_the_documented_shape(experiment, django_capture_on_commit_callbacks):
    run = finished_run(experiment, django_capture_on_commit_callbacks)
    data = json.loads(run_command("export_run", str(run.code), "--format", "json"))
    assert set(data) == {"run", "arms", "attempts"}
    assert {"id", "status", "seed", "started_at", "finished_at"} <= set(data["run"])
    assert data["run"]["id"] == str(run.code) and data["run"]["status"] == "completed"
    arm_keys = {
        "label",
        "provider",
        "model_name",
        "n",
        "resolved_rate",
        "ci_low",
        "ci_high",
        "latency_p50_ms",
        "latency_p95_ms",
        "first_token_p50_ms",
        "output_tokens_per_s_median",
        "cost_usd",
        "cost_per_resolved_usd",
        "error_rate",
        "cached",
        "quality_rank",
        "speed_rank",
        "cost_rank",
        "scored_tasks",
    }
    assert all(arm_keys <= set(arm) for arm in data["arms"])
    oracle = next(arm for arm in data["arms"] if arm["label"] == "oracle")
    assert oracle["n"] == 4 and oracle["resolved_rate"] == 1.0 and oracle["quality_rank"] == 1
    assert len(data["attempts"]) == 8
    assert set(data["attempts"][0]) == {
        "task_id",
        "arm_label",
        "repetition",
        "status",
        "outcome",
        "resolved",
        "patch_present",
        "patch_well_formed",
        "patch_applied",
        "fail_to_pass_fraction",
        "pass_to_pass_regressions",
        "lines_changed",
        "files_changed",
        "lint_clean",
        "build_ok",
        "latency_ms",
        "first_token_ms",
        "output_tokens_per_s",
        "wall_ms",
        "cost_usd",
        "cached",
        "error_category",
        # An agent's work (null for a single-turn answer).
        "turns",
        "tool_calls",
        "trajectory",
        # Calls made again after their worker died mid-call (each paid twice).
        "repeat_calls",
        # The transcript: what the attempt was asked, what came back, what was read and expected.
        "score",
        "question",
        "extracted_answer",
        "expected_answer",
        "output",
        "messages",
        "grading",
    }
    oracle_attempt = next(a for a in data["attempts"] if a["arm_label"] == "oracle")
    assert oracle_attempt["patch_well_formed"] is True and oracle_attempt["files_changed"] >= 1


def test_export_csv(experiment, django_capture_on_commit_callbacks):
    run = finished_run(experiment, django_capture_on_commit_callbacks)
    rows = list(csv.reader(StringIO(run_command("export_run", str(run.code), "--format", "csv"))))
    lines = [",".join(rows[0]), *rows[1:]]  # a question or a patch spans lines inside its quoted cell
    assert lines[0] == (
        "task_id,arm_label,repetition,status,outcome,resolved,patch_present,patch_well_formed,patch_applied,"
        "fail_to_pass_fraction,pass_to_pass_regressions,lines_changed,files_changed,"
        "lint_clean,build_ok,latency_ms,first_token_ms,output_tokens_per_s,wall_ms,cost_usd,cached,error_category,"
        "turns,tool_calls,repeat_calls,score,question,extracted_answer,expected_answer"
    )
    assert len(lines) == 9


def test_export_of_an_unknown_run_is_refused(db):
    with pytest.raises(CommandError, match="no run with id 'not-a-uuid'"):
        run_command("export_run", "not-a-uuid")


def test_run_control(experiment, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        run_command("start_run", "--org", "acme", "--experiment", "Mock duel")
    code = str(Run.objects.get().code)
    assert "is paused" in run_command("run_control", "pause", code)
    with pytest.raises(CommandError, match="cannot pause a run that is paused"):
        run_command("run_control", "pause", code)
    with django_capture_on_commit_callbacks(execute=True):
        assert "is running" in run_command("run_control", "resume", code)
    assert "is cancelled" in run_command("run_control", "cancel", code)
    assert Run.objects.get().status == RunStatus.CANCELLED


def test_requeue_stale_reports(experiment):
    assert "reclaimed 0 abandoned attempt(s)" in run_command("requeue_stale")


def test_demo_runs_on_sqlite_and_embedded_redis(tmp_path):
    """What `make demo` does on a bare machine: no DATABASE_URL, no REDIS_URL."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="prbench.settings", PRBENCH_VAR_DIR=str(tmp_path))
    manage = str(settings.BASE_DIR / "manage.py")
    subprocess.run([sys.executable, manage, "migrate", "--noinput", "-v0"], env=env, check=True, timeout=300)
    demo = subprocess.run(
        [sys.executable, manage, "demo", "--no-serve"], env=env, capture_output=True, text=True, timeout=600
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    # Patches (self-contained, then a repository), multiple choice and code: four runs.
    assert demo.stdout.count("completed") == 5, demo.stdout
    assert "Running 'Demo: multiple choice, how sure?': 20 tasks × 3 arms × 2" in demo.stdout
    assert "Running 'Demo: code that runs': 12 tasks × 3 arms × 2" in demo.stdout
    assert "Running 'Demo: Jeopardy clues': 10 tasks × 3 arms × 2" in demo.stdout
    assert demo.stdout.count("Not judged by the evaluator: its workload is scored by rules alone.") == 3
    for arm in ("oracle", "careful", "cheap-flaky", "careful-agent (agent)"):
        assert arm in demo.stdout
    # Its oracle and careful arms, and the careful model again as an agent.
    assert "Running 'Demo: textkit bug fixes': 3 tasks × 3 arms × 2" in demo.stdout
    assert "bm25s" not in demo.stderr  # its debug lines stay quiet
    assert demo.stdout.count("Evaluator scores (mock-reviewer:v1 (mock)):") == 2, demo.stdout
    assert "0 evaluator errors" in demo.stdout
    assert "API key (read, run), shown once: prb_" in demo.stdout and "/api/runs/" in demo.stdout
    assert (tmp_path / "prbench.sqlite3").exists()
    assert not (tmp_path / "redis.sock").exists(), "the embedded Redis must stop with the demo"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"arms": [dict(SPEC["arms"][0], label=["a", "b"])]}, "arms[0].label: required, a non-empty string"),
        ({"arms": [dict(SPEC["arms"][0], config={"when": "2024-01-01"})]}, None),
        ({"sample_size": 99_999_999_999}, "sample_size: must be an integer of at least 1 and at most 1000000"),
        ({"name": "x" * 250}, "name: required, a non-empty string of at most 200 characters"),
        ({"context_mode": "grep"}, "context_mode: must be one of oracle, bm25"),
        ({"include_quarantined": "yes"}, "include_quarantined: must be true or false"),
        ({"arms": [dict(SPEC["arms"][0], config={"max_retries": "2"})]}, "arms[0].config.max_retries"),
        (
            {"arms": [dict(SPEC["arms"][0], model_name="m" * 300)]},
            "arms[0].model_name: must be a string of at most 200",
        ),
    ],
)
def test_wrongly_typed_fields_are_named_not_crashed_on(tmp_path, dataset, change, message):
    path = write(tmp_path, "bad.yaml", yaml.safe_dump(dict(SPEC, **change)))
    if message is None:  # a YAML date is not JSON: refused by name, not with a TypeError
        dated = "name: x\ndataset: 'Demo: small Python bugs'\narms:\n- label: a\n  provider: mock\n  model_name: m\n"
        dated += "  config:\n    when: 2024-01-01\n"
        path = write(tmp_path, "bad.yaml", dated)
        message = "arms[0].config.when: a date is not allowed here"
    with pytest.raises(CommandError) as caught:
        run_command("apply_experiment", "--org", "acme", path)
    assert message in str(caught.value)
    assert not Experiment.objects.exists()


def test_start_run_refuses_a_seed_out_of_range(experiment):
    with pytest.raises(CommandError, match="--seed must be between"):
        run_command("start_run", "--org", "acme", "--experiment", "Mock duel", "--seed", "99999999999999999999")
    assert not Run.objects.exists()
