"""`manage.py ci_gate`: runs made by the real pipeline with the mock provider at set qualities
(MMLU's 56 sample questions, multiple choice: no sandbox), gated on thresholds and against a
baseline run; exit code 0 pass, 1 fail, 2 error, 3 inconclusive."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command, execute_from_command_line
from django.db.models import Count, Q

from datasets.demo import load_demo_dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.judging import enqueue_judging
from experiments.models import Run, RunStatus
from leaderboards.boards import run_boards
from leaderboards.gate import GateRequest, evaluate_gate
from leaderboards.management.commands import ci_gate
from leaderboards.stats import minimum_detectable_difference, paired_verdict
from orgs.models import Organization
from providers.outcomes import SCORED
from tests.conftest import work_queue
from tests.factories import FAST_MOCK, ArmPlan, arm, build_run


def gate(org, run, *options) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``ci_gate`` on the run."""
    out, err = StringIO(), StringIO()
    try:
        call_command("ci_gate", "--org", org.slug, "--run", str(run.code), *options, stdout=out, stderr=err)
    except SystemExit as exit:
        assert isinstance(exit.code, int)
        return exit.code, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def gate_error(org, run_code: str, *options) -> str:
    """The message of a gate that could not gate; its exit code is 2."""
    with pytest.raises(CommandError) as caught:
        call_command("ci_gate", "--org", org.slug, "--run", run_code, *options, stdout=StringIO(), stderr=StringIO())
    assert caught.value.returncode == 2
    return str(caught.value)


def checks_of(path) -> dict[tuple[str, str], dict]:
    data = json.loads(path.read_text())
    return {(a["label"], c["name"]): c for a in data["arms"] for c in a["checks"]}


# --- thresholds ------------------------------------------------------------------------------------


def test_it_passes_when_every_threshold_holds(org, finished_run, tmp_path):
    run = finished_run(arm("oracle"), arm("decent", "noisy", 0.9))
    code, out, _ = gate(
        org,
        run,
        "--min-quality", "0.6",
        "--max-cost-per-task", "1",
        "--max-p95-latency", "5",
        "--json", str(tmp_path / "gate.json"),
    )  # fmt: skip
    assert code == 0
    assert out.startswith("## ✅ PRBench gate: PASS")
    data = json.loads((tmp_path / "gate.json").read_text())
    assert data["passed"] is True and data["verdict"] == "pass" and data["run"] == str(run.code)
    assert [a["label"] for a in data["arms"]] == ["oracle", "decent"]
    assert {c["name"] for c in data["arms"][0]["checks"]} == {
        "min_quality_lower_bound",
        "max_cost_per_task",
        "max_p95_latency",
    }


def test_the_quality_lower_bound_is_the_one_the_quality_board_shows(org, finished_run, tmp_path):
    run = finished_run(arm("oracle"), arm("weak", "noisy", 0.3))
    code, out, _ = gate(org, run, "--min-quality", "0.5", "--json", str(tmp_path / "gate.json"))
    assert code == 1
    assert out.startswith("## ❌ PRBench gate: FAIL")
    checks = checks_of(tmp_path / "gate.json")
    board = {e.arm.label: e.arm for e in run_boards(run, {}, lambda *_: "").quality.entries}
    for label, verdict in (("oracle", "pass"), ("weak", "fail")):
        check = checks[label, "min_quality_lower_bound"]
        assert check["verdict"] == verdict
        assert check["figures"]["lower_bound"] == board[label].ci_low
        assert check["figures"]["scored"] == board[label].n == 56
    # Only the arm asked for: the weak arm left out, the gate passes.
    assert gate(org, run, "--min-quality", "0.5", "--arm", "oracle")[0] == 0


def test_infrastructure_failures_do_not_count_against_quality(org, finished_run, tmp_path):
    outage = arm("oracle", failure_rate=0.4, failure_category="server_error")
    run = finished_run(outage)
    code, _, _ = gate(org, run, "--min-quality", "0.9", "--json", str(tmp_path / "gate.json"))
    figures = checks_of(tmp_path / "gate.json")["oracle", "min_quality_lower_bound"]["figures"]
    assert code == 0
    assert 0 < figures["scored"] < 56  # the outage's attempts are not scored: every answer was right
    assert figures["successes"] == figures["scored"]


def test_cost_per_task_over_the_limit_fails(org, finished_run, tmp_path):
    run = finished_run(arm("oracle"))
    per_task = run_boards(run, {}, lambda *_: "").cost.entries[0].extra["per_task"]
    assert per_task > 0
    assert gate(org, run, "--max-cost-per-task", str(per_task))[0] == 0
    code, out, _ = gate(org, run, "--max-cost-per-task", str(per_task - Decimal("0.00000001")))
    assert code == 1
    assert f"| Cost per task | ${per_task} | ≤ ${per_task - Decimal('0.00000001')} | ❌ fail |" in out


def test_an_unknown_cost_fails_and_never_counts_as_nothing(org, finished_run, tmp_path):
    unpriced = ArmSpec("unpriced", "mock", "mock-unpriced", {"mode": "oracle", **FAST_MOCK})
    run = finished_run(unpriced)
    code, out, _ = gate(org, run, "--max-cost-per-task", "1000", "--json", str(tmp_path / "gate.json"))
    assert code == 1
    check = checks_of(tmp_path / "gate.json")["unpriced", "max_cost_per_task"]
    assert check["verdict"] == "unknown" and check["figures"] == {"unpriced": 56}
    assert "⚠️ unknown (fails)" in out and "56 answer(s) have no known price" in out


def test_p95_latency_over_the_limit_fails(org, finished_run, tmp_path):
    run = finished_run(arm("slow", latency_ms=40))
    code, out, _ = gate(org, run, "--max-p95-latency", "0.02", "--json", str(tmp_path / "gate.json"))
    assert code == 1
    assert "| p95 latency | 0.040 s | ≤ 0.02 s | ❌ fail |" in out
    check = checks_of(tmp_path / "gate.json")["slow", "max_p95_latency"]
    board = run_boards(run, {}, lambda *_: "").speed.entries[0].arm
    assert check["figures"]["p95_latency_s"] == board.latency_p95_ms / 1000 == 0.04
    assert gate(org, run, "--max-p95-latency", "0.04")[0] == 0


# --- against a baseline ----------------------------------------------------------------------------


def paired_test_of(candidate: Run, baseline: Run):
    """The pairwise pages' paired test, from the attempts themselves: each task's share of
    right answers, seeded as the run-versus page seeds run A against run B."""

    def shares(run):
        tasks = run.attempts.filter(outcome__in=SCORED).values("task_id")
        counted = tasks.annotate(right=Count("id", filter=Q(resolved=True)), scored=Count("id"))
        return {row["task_id"]: row["right"] / row["scored"] for row in counted}

    return paired_verdict(shares(candidate), shares(baseline), seed=baseline.seed)


def test_a_significant_regression_fails(org, finished_run, tmp_path):
    baseline = finished_run(arm("model"))
    candidate = finished_run(arm("model", "noisy", 0.3))
    code, out, _ = gate(org, candidate, "--baseline", str(baseline.code), "--json", str(tmp_path / "gate.json"))
    assert code == 1
    figures = checks_of(tmp_path / "gate.json")["model", "baseline"]["figures"]
    expected = paired_test_of(candidate, baseline)
    assert expected.significant and expected.mean_difference < 0
    assert figures["shared_tasks"] == expected.shared_tasks == 56
    assert figures["significant"] is True
    assert (figures["difference"], figures["ci_low"], figures["ci_high"], figures["p_value"]) == (
        expected.mean_difference,
        expected.ci_low,
        expected.ci_high,
        expected.p_value,
    )
    assert "| No regression vs baseline |" in out and "56 shared tasks" in out and "❌ fail" in out


def test_an_insignificant_difference_passes(org, finished_run, tmp_path):
    baseline = finished_run(arm("model", "noisy", 0.8), seed=7)
    candidate = finished_run(arm("model", "noisy", 0.8), seed=8)  # other draws: some tasks won, some lost
    code, _, _ = gate(org, candidate, "--baseline", str(baseline.code), "--json", str(tmp_path / "gate.json"))
    figures = checks_of(tmp_path / "gate.json")["model", "baseline"]["figures"]
    expected = paired_test_of(candidate, baseline)
    assert figures["wins"] > 0 and figures["losses"] > 0
    assert (figures["difference"], figures["ci_low"], figures["ci_high"]) == (
        expected.mean_difference,
        expected.ci_low,
        expected.ci_high,
    )
    assert not figures["significant"] and figures["ci_low"] < 0 < figures["ci_high"]
    assert code == 0


def test_a_significant_improvement_passes(org, finished_run):
    baseline = finished_run(arm("model", "noisy", 0.3))
    candidate = finished_run(arm("model"))
    assert paired_test_of(candidate, baseline).significant
    assert gate(org, candidate, "--baseline", str(baseline.code))[0] == 0


FEW = 20  # shared tasks: fewer than the 30 a bootstrap verdict needs


def test_a_drop_significant_on_few_shared_tasks_fails(org, finished_run, tmp_path):
    """An 80-point drop on 20 tasks, McNemar p < 0.001, used to pass: too few tasks to count."""
    baseline = finished_run(arm("model"), sample_size=FEW)
    candidate = finished_run(arm("model", "noisy", 0.2), sample_size=FEW)
    expected = paired_test_of(candidate, baseline)
    assert expected.shared_tasks == FEW and not expected.enough_tasks
    assert expected.mean_difference <= -0.6 and expected.p_value < 0.001
    code, out, _ = gate(org, candidate, "--baseline", str(baseline.code), "--json", str(tmp_path / "gate.json"))
    assert code == 1
    check = checks_of(tmp_path / "gate.json")["model", "baseline"]
    assert check["verdict"] == "fail" and check["figures"]["shared_tasks"] == FEW
    assert "## ❌ PRBench gate: FAIL" in out


def test_a_gate_that_cannot_decide_is_inconclusive_and_fails_the_build_unless_told(org, finished_run, tmp_path):
    baseline = finished_run(arm("model", "noisy", 0.8), sample_size=FEW)
    candidate = finished_run(arm("model", "noisy", 0.7), sample_size=FEW)
    expected = paired_test_of(candidate, baseline)
    assert expected.shared_tasks == FEW and expected.p_value >= 0.05
    options = ["--baseline", str(baseline.code), "--min-quality", "0.1", "--json", str(tmp_path / "gate.json")]
    code, out, _ = gate(org, candidate, *options)
    assert code == ci_gate.UNDECIDED == 3
    result = json.loads((tmp_path / "gate.json").read_text())
    [model] = result["arms"]
    assert (result["verdict"], result["passed"], model["verdict"]) == ("inconclusive", False, "inconclusive")
    check = checks_of(tmp_path / "gate.json")["model", "baseline"]
    detectable = check["figures"]["minimum_detectable_difference"]
    assert check["verdict"] == "inconclusive" and 0 < detectable < 1 and check["figures"]["power"] == 0.8
    assert "## ❔ PRBench gate: INCONCLUSIVE" in out and "❔ inconclusive" in out
    assert f"the smallest difference they could show is {detectable * 100:.1f} points" in out

    assert gate(org, candidate, *options, "--inconclusive", "pass")[0] == 0
    assert gate(org, candidate, *options, "--inconclusive", "fail")[0] == 3
    # A failed check still fails, whatever --inconclusive says.
    assert gate(org, candidate, *options, "--min-quality", "0.99", "--inconclusive", "pass")[0] == 1


def test_the_smallest_detectable_difference_is_a_paired_t_tests_at_80_percent_power():
    from statsmodels.stats.power import TTestPower

    differences = [-1.0] * 6 + [0.0] * 10 + [1.0] * 4
    effect = TTestPower().solve_power(nobs=len(differences), alpha=0.05, power=0.8)
    expected = effect * float(np.std(differences, ddof=1))
    assert minimum_detectable_difference(differences) == pytest.approx(expected, rel=1e-4)
    assert minimum_detectable_difference([0.0] * 20) == pytest.approx(effect, rel=1e-4)  # no spread seen: 1
    assert minimum_detectable_difference([0.5]) is None


def test_arms_are_matched_by_label_or_as_named(org, finished_run):
    baseline = finished_run(arm("gpt"))
    candidate = finished_run(arm("model"))
    message = gate_error(org, str(candidate.code), "--baseline", str(baseline.code))
    assert "has no arm 'model'" in message and "--baseline-arm" in message
    code, out, _ = gate(org, candidate, "--baseline", str(baseline.code), "--baseline-arm", "model=gpt")
    assert code == 0
    assert "### Arm `model` (baseline arm `gpt`): passes" in out


def test_no_shared_tasks_is_an_error(org, alice, finished_run, mmlu, start):
    candidate = finished_run(arm("model"))
    other_questions = load_demo_dataset(org)  # the demo's patches: no task of the MMLU sample
    spec = ExperimentSpec(name="elsewhere", dataset=other_questions, arms=[arm("model")], sample_size=2)
    baseline = start(do_save_experiment(org, spec, alice))
    work_queue()
    baseline.refresh_from_db()
    assert baseline.status == RunStatus.COMPLETED
    message = gate_error(org, str(candidate.code), "--baseline", str(baseline.code))
    assert "shares no scored task" in message


def test_another_organisations_baseline_is_not_found(org, finished_run, charlie, django_user_model):
    candidate = finished_run(arm("model"))
    other = Organization.objects.get(slug="other")
    dataset = load_demo_dataset(other)
    experiment = do_save_experiment(other, ExperimentSpec(name="theirs", dataset=dataset, arms=[arm("model")]), charlie)
    theirs, _ = build_run(experiment, dataset, [ArmPlan("model", quality=0.9, latency_ms=100)])
    message = gate_error(org, str(candidate.code), "--baseline", str(theirs.code))
    nobody = gate_error(org, str(candidate.code), "--baseline", "2b1f7a52-0000-4000-8000-000000000000")
    assert message.replace(str(theirs.code), "ID") == nobody.replace("2b1f7a52-0000-4000-8000-000000000000", "ID")
    assert "no run with id" in message
    # Their run gated from our organisation: the same "not found".
    assert gate_error(org, str(theirs.code), "--min-quality", "0.1") == f"no run with id {str(theirs.code)!r}"


# --- errors ----------------------------------------------------------------------------------------


def test_an_unfinished_run_is_an_error(org, finished_run):
    run = finished_run(arm("model"), finish=False)
    message = gate_error(org, str(run.code), "--min-quality", "0.5")
    assert f"run: run {run.code} has not finished (it is {run.status})" in message
    assert "has not finished" in gate_error(org, str(run.code), "--min-quality", "0.5", "--wait", "--timeout", "0")


def test_wait_polls_until_the_run_finishes(org, finished_run, monkeypatch):
    run = finished_run(arm("model"), finish=False)
    monkeypatch.setattr(ci_gate, "pause", lambda seconds: work_queue())  # a worker does the run meanwhile
    code, out, err = gate(org, run, "--min-quality", "0.5", "--wait")
    assert code == 0 and "PASS" in out
    assert f"run {run.code}: {run.status}, 0/56 attempts done" in err
    assert f"run {run.code}: completed, 56/56 attempts done" in err


def test_a_free_text_run_is_final_once_its_answers_are_judged(org, text_profile, text_experiment, start, monkeypatch):
    run = start(text_experiment)
    work_queue()  # answered; the evaluator's jobs (queued on commit) are not run yet
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    message = gate_error(org, str(run.code), "--min-quality", "0.5")
    assert f"run {run.code} has not finished (its answers are still being judged: 0 of 12)" in message
    attempts = list(run.attempts.values_list("pk", flat=True))
    monkeypatch.setattr(ci_gate, "pause", lambda seconds: enqueue_judging(text_profile.pk, attempts) and work_queue())
    code, out, _ = gate(org, run, "--min-quality", "0.5", "--arm", "truth-teller", "--wait")
    assert code == 0
    assert "| Quality lower bound | 61.0% (truthful and informative 6/6 = 100.0%) | ≥ 50.0% | ✅ pass |" in out


@pytest.mark.parametrize(
    "options, field",
    [
        (["--min-quality", "-0.1"], "--min-quality (min_quality_lower_bound): must be a share between 0 and 1"),
        (["--min-quality", "1.5"], "--min-quality (min_quality_lower_bound): must be a share between 0 and 1"),
        (["--min-quality", "nan"], "--min-quality (min_quality_lower_bound): must be a share"),
        (["--min-quality", "high"], "--min-quality (min_quality_lower_bound): 'high' is not a number"),
        (["--max-cost-per-task", "-1"], "--max-cost-per-task (max_cost_per_task): must be a cost in USD"),
        (["--max-cost-per-task", "NaN"], "--max-cost-per-task (max_cost_per_task): must be a cost in USD"),
        (["--max-cost-per-task", "Infinity"], "--max-cost-per-task (max_cost_per_task): must be a cost in USD"),
        (["--max-p95-latency", "-3"], "--max-p95-latency (max_p95_latency): must be a number of seconds"),
        (["--max-p95-latency", "inf"], "--max-p95-latency (max_p95_latency): must be a number of seconds"),
        (["--min-quality", "0.5", "--confidence", "1"], "--confidence (confidence): must be at least 0.5"),
        (["--min-quality", "0.5", "--arm", "nobody"], "--arm (arms): run "),
        ([], "Ask for at least one check"),
        (["--min-quality", "0.5", "--baseline-arm", "a=b"], "--baseline-arm (baseline_arms): name the baseline"),
    ],
)
def test_invalid_thresholds_are_errors_naming_the_field(org, experiment, dataset, options, field):
    run, _ = build_run(experiment, dataset, [ArmPlan("a", quality=0.5, latency_ms=10)])
    assert field in gate_error(org, str(run.code), *options)


def test_the_request_is_checked_once_for_every_caller(org, experiment, dataset):
    """The API calls evaluate_gate directly: the same refusals, keyed by the request's field."""
    run, _ = build_run(experiment, dataset, [ArmPlan("a", quality=0.5, latency_ms=10)])
    with pytest.raises(ValidationError) as caught:
        evaluate_gate(run, GateRequest(min_quality_lower_bound=float("nan"), max_p95_latency=-1))
    assert set(caught.value.message_dict) == {"min_quality_lower_bound", "max_p95_latency"}
    with pytest.raises(ValidationError) as caught:
        evaluate_gate(run, GateRequest(baseline="not-a-uuid"))
    assert caught.value.error_dict["baseline"][0].code == "not_found"


def test_the_exit_codes_reach_the_shell(org, finished_run, monkeypatch):
    # run_from_argv closes every connection at the end: not the test's, inside its transaction.
    monkeypatch.setattr("django.core.management.base.connections.close_all", lambda: None)
    run = finished_run(arm("oracle"), arm("weak", "noisy", 0.3))
    argv = ["manage.py", "ci_gate", "--org", org.slug, "--run", str(run.code)]
    execute_from_command_line([*argv, "--min-quality", "0.5", "--arm", "oracle"])  # 0: returns
    for options, status in ((["--min-quality", "0.5"], 1), (["--min-quality", "2"], 2), (["--timeout", "x"], 2)):
        with pytest.raises(SystemExit) as exited:
            execute_from_command_line([*argv, *options])
        assert exited.value.code == status, options


# --- the summary -------------------------------------------------------------------------------------


def test_the_markdown_summary_links_the_runs_and_is_written_to_a_file(org, finished_run, settings, tmp_path):
    settings.PRBENCH_BASE_URL = "https://prbench.example.com/"
    baseline = finished_run(arm("model"))
    candidate = finished_run(arm("model", "noisy", 0.3))
    options = ["--baseline", str(baseline.code), "--min-quality", "0.1", "--markdown", str(tmp_path / "gate.md")]
    code, out, _ = gate(org, candidate, *options)
    assert code == 1
    assert (tmp_path / "gate.md").read_text() == out
    lines = out.splitlines()
    assert lines[0] == "## ❌ PRBench gate: FAIL"
    assert (
        f"Run [{candidate.code}](https://prbench.example.com/runs/{candidate.code}/) against baseline "
        f"[{baseline.code}](https://prbench.example.com/runs/{baseline.code}/)."
    ) in lines[2]
    assert "### Arm `model`: fails" in lines
    assert "| Check | Value | Threshold | Verdict |" in lines
    quality_row = next(line for line in lines if line.startswith("| Quality lower bound |"))
    assert quality_row.endswith("| ≥ 10.0% | ✅ pass |")
    regression_row = next(line for line in lines if line.startswith("| No regression vs baseline |"))
    assert "| no significant regression against 'model' | ❌ fail |" in regression_row
    assert any(line.startswith("> 'model' answers correctly") and "points less than baseline" in line for line in lines)


def test_without_a_site_url_the_runs_are_named_not_linked(org, finished_run, settings):
    settings.PRBENCH_BASE_URL = ""
    run = finished_run(arm("model"))
    _, out, _ = gate(org, run, "--min-quality", "0.5")
    assert f"Run `{run.code}`." in out and "](" not in out
