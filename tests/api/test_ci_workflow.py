"""The README's CI workflow, run step by step against a live server, as GitHub Actions would.

Every ``run:`` step of the workflow between the ci-workflow markers is executed with bash
(``-eo pipefail``, GitHub's default shell), with the job's environment pointed at the live
server and ``$GITHUB_ENV`` carried from step to step. Steps that need GitHub itself (a
``${{ }}`` expression in their script, e.g. the pull-request comment) are left out. Between
starting the run and waiting for it, this process's worker drains the queue.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import make_api_key, work_queue
from tests.factories import arm

README = Path(__file__).resolve().parents[2] / "README.md"
STEP_TIMEOUT_S = 120


def workflow() -> dict:
    text = README.read_text()
    block = re.search(r"<!-- ci-workflow:start -->\n```yaml\n(.*?)```\n<!-- ci-workflow:end -->", text, re.S)
    assert block, "the README's CI workflow is missing its markers"
    return yaml.safe_load(block.group(1))


def runnable_steps() -> list[dict]:
    [job] = workflow()["jobs"].values()
    return [step for step in job["steps"] if "run" in step and "${{" not in step["run"]]


def run_step(step: dict, env: dict[str, str], workdir: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
    )
    for line in Path(env["GITHUB_ENV"]).read_text().splitlines():  # what the step exported
        name, _, value = line.partition("=")
        env[name] = value
    return done


def the_job(live_server, org, baseline, tmp_path) -> tuple[dict[str, str], list[subprocess.CompletedProcess]]:
    steps = runnable_steps()
    assert [step["name"] for step in steps] == ["Start a run", "Wait for it", "Gate"]
    (tmp_path / "github_env").write_text("")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PRBENCH_URL": live_server.url,
        "PRBENCH_API_KEY": make_api_key(org, ["read", "run"]),
        "EXPERIMENT": str(baseline.experiment.code),
        "BASELINE": str(baseline.code),
        "RUN_KEY": "gate-1-1",
        "GITHUB_ENV": str(tmp_path / "github_env"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    results = [run_step(steps[0], env, tmp_path)]
    # A retried start (the runner lost the answer) gives back the same run.
    first_run = env.get("RUN")
    results.append(run_step(steps[0], env, tmp_path))
    assert env.get("RUN") == first_run
    work_queue()
    results += [run_step(step, env, tmp_path) for step in steps[1:]]
    return env, results


@pytest.mark.django_db(transaction=True)
def test_the_readme_workflow_starts_waits_and_passes_the_gate(live_server, org, finished_run, tmp_path):
    from experiments.models import Run, RunStatus

    baseline = finished_run(arm("model"))
    env, results = the_job(live_server, org, baseline, tmp_path)
    assert [result.returncode for result in results] == [0, 0, 0, 0], [r.stdout + r.stderr for r in results]
    candidate = Run.objects.get(code=env["RUN"])
    assert candidate.experiment == baseline.experiment and candidate.status == RunStatus.COMPLETED
    assert Run.objects.filter(experiment=baseline.experiment).count() == 2  # the retry made no second run
    assert "completed: 100% done" in results[2].stdout
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## ✅ PRBench gate: PASS") and summary == (tmp_path / "gate.md").read_text()


@pytest.mark.django_db(transaction=True)
def test_the_readme_workflow_fails_the_build_when_quality_is_too_low(live_server, org, finished_run, tmp_path):
    baseline = finished_run(arm("model", "noisy", 0.3))
    _, results = the_job(live_server, org, baseline, tmp_path)
    assert [result.returncode for result in results] == [0, 0, 0, 1], [r.stdout + r.stderr for r in results]
    assert (tmp_path / "summary.md").read_text().startswith("## ❌ PRBench gate: FAIL")
