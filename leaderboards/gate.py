"""The CI gate: does a finished run clear a team's bar? Each arm against thresholds (the lower
bound of its quality, its cost per task, its p95 latency) and against the same arm of a
baseline run (no significant regression on the tasks both scored).

Every figure is the one the run's boards show, read from its summaries (leaderboards/boards.py
and the pairwise test of leaderboards/stats.py), never recomputed another way: a gate that
disagreed with the page it links to would be worse than none. ``manage.py ci_gate`` and the
API's ``POST /api/runs/{id}/gate`` both call ``evaluate_gate``; the Markdown is for a
pull-request comment.

A check the gate cannot measure (no scored attempt, an answer without a price, no call timed)
is "unknown", and an unknown check fails its arm: a gate passes only what it has seen pass.
A baseline comparison on fewer shared tasks than a verdict needs is "inconclusive", with the
smallest difference those tasks could have shown, unless even they show a significant drop
(which fails): the caller decides what CI does with a gate that could not decide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.urls import reverse

from evaluation.workloads import workload_for
from experiments.models import Run, RunStatus
from experiments.progress import judging_progress, run_progress
from leaderboards.boards import Entry, RunBoards, quality_metric, run_boards
from leaderboards.jobs import ensure_fresh_summaries
from leaderboards.models import TaskSummary
from leaderboards.stats import (
    DETECTION_POWER,
    LOW_SAMPLE,
    PairedVerdict,
    minimum_detectable_difference,
    paired_verdict,
    wilson_interval,
)
from prbench.inputs import LABEL_MAX, text_problem

BOARD_CONFIDENCE = 0.95  # what the boards' intervals and the pairwise page use
PASS, FAIL, UNKNOWN, INCONCLUSIVE = "pass", "fail", "unknown", "inconclusive"
CHECKS = ("min_quality_lower_bound", "baseline", "max_cost_per_task", "max_p95_latency")
# A threshold no real run comes near: a typo (an extra digit of cost) is refused, not obeyed.
MAX_COST_PER_TASK = Decimal(1_000_000)
MAX_P95_LATENCY_S = 365 * 24 * 3600.0
RUN_ID_MAX = 100  # a run id is a UUID (36 characters); anything much longer is not one


@dataclass(frozen=True)
class GateRequest:
    """What to check. Each threshold is optional; at least one check must be asked for.
    ``arms``: the run's arm labels to gate (every arm when empty); ``baseline_arms``: an arm's
    label in the baseline run, where it differs from its label in this run."""

    min_quality_lower_bound: float | None = None  # a share in [0, 1]
    baseline: str | None = None  # the baseline run's public id
    max_cost_per_task: Decimal | None = None  # USD
    max_p95_latency: float | None = None  # seconds
    arms: Sequence[str] = ()
    baseline_arms: Mapping[str, str] = field(default_factory=dict)
    confidence: float = BOARD_CONFIDENCE


@dataclass(frozen=True)
class GatePlan:
    """A checked request: the runs and the arms it names, found."""

    run: Run
    request: GateRequest
    baseline: Run | None
    arms: list[tuple[str, str]]  # (label in the run, label in the baseline)


def _invalid(field_name: str, message: str, code: str = "invalid") -> ValidationError:
    return ValidationError({field_name: [ValidationError(message, code=code)]})


def parse_number(field_name: str, text: str | None, kind: type = float) -> Any:
    """A threshold given as text (a command-line argument), as ``kind`` (float or Decimal);
    None stays None. Whether its value makes sense is check_gate_request's question."""
    if text is None:
        return None
    try:
        return kind(text.strip())
    except (ValueError, InvalidOperation):
        raise _invalid(field_name, f"{field_name}: {text!r} is not a number") from None


def _finite(value: Any) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite()
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _threshold_errors(request: GateRequest) -> dict[str, str]:
    errors = {}
    checks: dict[str, tuple[Any, Any, Any, str]] = {  # field: (value, lowest, highest, what it is)
        "min_quality_lower_bound": (request.min_quality_lower_bound, 0, 1, "a share between 0 and 1"),
        "max_cost_per_task": (request.max_cost_per_task, 0, MAX_COST_PER_TASK, "a cost in USD from 0 to 1000000"),
        "max_p95_latency": (request.max_p95_latency, 0, MAX_P95_LATENCY_S, "a number of seconds from 0 to a year"),
    }
    for name, (value, lowest, highest, what) in checks.items():
        if value is not None and not (_finite(value) and lowest <= value <= highest):
            errors[name] = f"{name}: must be {what}, not {value}"
    confidence = request.confidence
    if not (_finite(confidence) and 0.5 <= confidence < 1):
        errors["confidence"] = f"confidence: must be at least 0.5 and below 1, not {confidence}"
    return errors


def _label_errors(name: str, labels: Sequence[str], known: Sequence[str], run: Run) -> list[str]:
    errors = []
    for label in labels:
        if problem := text_problem(label, LABEL_MAX):
            errors.append(f"{name}: an arm label {problem}")
        elif label not in known:
            errors.append(f"{name}: run {run.code} has no arm {label!r} (its arms: {', '.join(known)})")
    return errors


def _baseline_of(run: Run, code: str) -> Run:
    """The baseline run, in the run's own organisation: another organisation's run reads as
    absent, with the very message an id nobody has gets."""
    missing = _invalid("baseline", f"baseline: no run with id {code!r}", code="not_found")
    if text_problem(code, RUN_ID_MAX):
        raise missing
    try:
        found = Run.objects.select_related("experiment__dataset").filter(org_id=run.org_id, code=code).first()
    except (ValidationError, ValueError):  # not a UUID
        found = None
    if found is None:
        raise missing
    return found


def check_gate_request(run: Run, request: GateRequest) -> GatePlan:
    """The one validation of a gate request on ``run`` (already reached through the access
    layer or the command's --org): thresholds in range, arms and baseline found (the baseline
    in the run's organisation). Raises ValidationError keyed by the field at fault. Whether the
    runs have finished is evaluate_gate's question: a command may wait for that."""
    if all(getattr(request, name) is None for name in CHECKS):
        raise ValidationError({NON_FIELD_ERRORS: ["ask for at least one check: " + ", ".join(CHECKS)]}, code="invalid")
    errors = _threshold_errors(request)
    labels = list(run.arms.order_by("position", "pk").values_list("label", flat=True))
    if problems := _label_errors("arms", request.arms, labels, run):
        errors["arms"] = "; ".join(problems)
    elif len(set(request.arms)) != len(request.arms):
        errors["arms"] = "arms: an arm is named twice"
    quality_checks = [name for name in ("min_quality_lower_bound", "baseline") if getattr(request, name) is not None]
    if run.inference_only and quality_checks:
        errors[quality_checks[0]] = (
            f"{quality_checks[0]}: run {run.code} is inference-only: nothing was validated, so it has no quality"
        )
    if request.baseline_arms and request.baseline is None:
        errors["baseline_arms"] = "baseline_arms: name the baseline run too"
    if errors:
        raise ValidationError({name: [ValidationError(message, code="invalid")] for name, message in errors.items()})
    gated = list(request.arms) or labels
    baseline = None if request.baseline is None else _baseline_of(run, request.baseline)
    pairs = [(label, label) for label in gated]
    if baseline is not None:
        pairs = _baseline_pairs(run, baseline, gated, request.baseline_arms)
    return GatePlan(run=run, request=request, baseline=baseline, arms=pairs)


def _baseline_pairs(run: Run, baseline: Run, gated: list[str], renamed: Mapping[str, str]) -> list[tuple[str, str]]:
    if baseline.pk == run.pk:
        raise _invalid("baseline", "baseline: a run cannot be its own baseline")
    if baseline.inference_only:
        raise _invalid("baseline", f"baseline: run {baseline.code} is inference-only: it has no quality")
    if unknown := [label for label in renamed if label not in gated]:
        raise _invalid("baseline_arms", f"baseline_arms: {', '.join(map(repr, unknown))} is not an arm being gated")
    pairs = [(label, renamed.get(label, label)) for label in gated]
    known = list(baseline.arms.order_by("position", "pk").values_list("label", flat=True))
    if problems := _label_errors("baseline_arms", [theirs for _, theirs in pairs], known, baseline):
        raise _invalid("baseline_arms", "; ".join(problems))
    return pairs


def still_changing(run: Run) -> str | None:
    """Why the run's figures may still change, or None once they are final: it has not
    finished, or its kind's quality waits for the evaluator's verdicts (free text) and some
    are still to come."""
    if not run.is_finished:
        return f"it is {run.status}"
    if workload_for(run.experiment.dataset.kind).verdict_decides:
        judging = judging_progress(run, run_progress(run))
        if judging is not None and not judging.finished:
            return f"its answers are still being judged: {judging.judged} of {judging.answered}"
    return None


def check_gate_ready(plan: GatePlan) -> None:
    """Both runs completed and settled. A run still going has no final figures; a failed or
    cancelled one stopped short, so its figures are not the experiment's."""
    for name, run in (("run", plan.run), ("baseline", plan.baseline)):
        if run is None:
            continue
        if why := still_changing(run):
            raise _invalid(name, f"{name}: run {run.code} has not finished ({why})", "not_finished")
        if run.status != RunStatus.COMPLETED:
            raise _invalid(name, f"{name}: run {run.code} ended {run.status}: there is nothing to gate", "not_finished")


# --- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    name: str  # one of CHECKS
    verdict: str  # PASS, FAIL, UNKNOWN (which fails too) or INCONCLUSIVE
    value: str  # the arm's figure, as the summary shows it
    threshold: str
    detail: str = ""  # a sentence: why unknown, or the paired test in words
    figures: dict[str, Any] = field(default_factory=dict)  # the numbers, for a machine

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


@dataclass(frozen=True)
class ArmResult:
    label: str
    baseline_label: str | None
    checks: list[CheckResult]
    # Attempts no check counts, each in its own column: the infrastructure's, and those the
    # provider refused for the arm's own settings (a setting to change, not a model to judge).
    infrastructure_failed: int = 0
    configuration_failed: int = 0

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def verdict(self) -> str:
        return overall_verdict(check.verdict for check in self.checks)


def overall_verdict(verdicts: Iterable[str]) -> str:
    """Fail if anything failed (or is unknown); else inconclusive if anything is; else pass."""
    found = set(verdicts)
    if found & {FAIL, UNKNOWN}:
        return FAIL
    return INCONCLUSIVE if INCONCLUSIVE in found else PASS


@dataclass(frozen=True)
class GateResult:
    run: str
    run_url: str  # "" when PRBENCH_BASE_URL is set empty
    baseline: str | None
    baseline_url: str
    metric: str  # "Resolved", "Accuracy": what quality counts
    confidence: float
    arms: list[ArmResult]

    @property
    def passed(self) -> bool:
        return all(arm.passed for arm in self.arms)

    @property
    def verdict(self) -> str:
        """PASS, FAIL or INCONCLUSIVE (a check could not decide, and none failed)."""
        return overall_verdict(arm.verdict for arm in self.arms)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types only (costs and thresholds as they are written, in strings)."""
        data = asdict(self)
        data["passed"] = self.passed
        data["verdict"] = self.verdict
        for arm, raw in zip(self.arms, data["arms"], strict=True):
            raw["passed"] = arm.passed
            raw["verdict"] = arm.verdict
        return data


def evaluate_gate(run: Run, request: GateRequest) -> GateResult:
    """The gate's verdict on each arm. Raises ValidationError (keyed by field) for a request
    check_gate_request refuses, a run not completed, or a baseline sharing no task with it."""
    plan = check_gate_request(run, request)
    check_gate_ready(plan)
    runs = [run] if plan.baseline is None else [run, plan.baseline]
    for each in runs:
        ensure_fresh_summaries(each.pk)  # every attempt recorded counts, not the last refresh's
    boards = run_boards(run, {}, lambda board, sort: "")
    comparisons = _regressions(plan) if plan.baseline is not None else {}
    arms = [
        ArmResult(
            label=label,
            baseline_label=theirs if plan.baseline is not None else None,
            checks=_arm_checks(plan, boards, label, comparisons.get(label)),
            infrastructure_failed=_entry(boards.speed.entries, label).arm.infrastructure_failed,
            configuration_failed=_entry(boards.speed.entries, label).arm.configuration_failed,
        )
        for label, theirs in plan.arms
    ]
    return GateResult(
        run=str(run.code),
        run_url=run_url(run),
        baseline=None if plan.baseline is None else str(plan.baseline.code),
        baseline_url="" if plan.baseline is None else run_url(plan.baseline),
        metric=quality_metric(run)[0],
        confidence=request.confidence,
        arms=arms,
    )


def run_url(run: Run) -> str:
    site = settings.PRBENCH_BASE_URL.rstrip("/")
    return f"{site}{reverse('experiments:run', args=[run.code])}" if site else ""


def _entry(board_entries: list[Entry], label: str) -> Entry:
    return next(entry for entry in board_entries if entry.arm.label == label)


def _arm_checks(plan: GatePlan, boards: RunBoards, label: str, regression: CheckResult | None) -> list[CheckResult]:
    request, checks = plan.request, []
    if request.min_quality_lower_bound is not None:
        assert boards.quality is not None  # check_gate_request refused an inference-only run
        checks.append(_quality_check(_entry(boards.quality.entries, label), request, boards.metric))
    if regression is not None:
        checks.append(regression)
    if request.max_cost_per_task is not None:
        checks.append(_cost_check(_entry(boards.cost.entries, label), request.max_cost_per_task))
    if request.max_p95_latency is not None:
        checks.append(_latency_check(_entry(boards.speed.entries, label), request.max_p95_latency))
    return checks


def _share(value: float) -> str:
    return f"{value * 100:.1f}%"


def _quality_check(entry: Entry, request: GateRequest, metric: str) -> CheckResult:
    """The lower bound of the Wilson interval the quality board shows (at another confidence,
    the same interval of the same counts at that level)."""
    threshold, row = request.min_quality_lower_bound, entry.arm
    assert threshold is not None
    shown = f"≥ {_share(threshold)}"
    name = "min_quality_lower_bound"
    if request.confidence == BOARD_CONFIDENCE:
        lower = row.ci_low
    else:
        interval = wilson_interval(row.resolved, row.n, request.confidence)
        lower = interval[0] if interval else None
    if lower is None or row.resolved_rate is None:
        why = (
            f"no scored attempt ({row.infrastructure_failed} infrastructure failure(s) and "
            f"{row.configuration_failed} configuration failure(s), not the model's doing)"
        )
        return CheckResult(name, UNKNOWN, "unknown", shown, why, {"scored": 0})
    figures = {"lower_bound": lower, "rate": row.resolved_rate, "successes": row.resolved, "scored": row.n}
    value = f"{_share(lower)} ({metric.lower()} {row.resolved}/{row.n} = {_share(row.resolved_rate)})"
    detail = f"{request.confidence:.0%} Wilson lower bound; infrastructure failures left out"
    return CheckResult(name, PASS if lower >= threshold else FAIL, value, shown, detail, figures)


def _cost_check(entry: Entry, threshold: Decimal) -> CheckResult:
    """The cost board's mean cost of an answer that made a call. An answer without a price
    makes the arm's cost unknown (never $0), and unknown fails."""
    per_task, unpriced = entry.extra["per_task"], entry.extra["unpriced"]
    shown, name = f"≤ ${threshold}", "max_cost_per_task"
    if per_task is None:
        why = f"{unpriced} answer(s) have no known price" if unpriced else "no answer made a provider call"
        return CheckResult(name, UNKNOWN, "unknown", shown, why, {"unpriced": unpriced})
    figures = {"cost_per_task_usd": str(per_task), "calls": entry.extra["calls"]}
    detail = f"mean over {entry.extra['calls']} answer(s) that made a call"
    return CheckResult(name, PASS if per_task <= threshold else FAIL, f"${per_task}", shown, detail, figures)


def _latency_check(entry: Entry, threshold_s: float) -> CheckResult:
    """The speed board's p95 latency of the successful try of each answer that made a call."""
    p95_ms, shown, name = entry.arm.latency_p95_ms, f"≤ {threshold_s:g} s", "max_p95_latency"
    if p95_ms is None:
        return CheckResult(name, UNKNOWN, "unknown", shown, "no answer made a provider call", {})
    seconds = p95_ms / 1000
    figures = {"p95_latency_s": seconds, "calls": entry.extra["calls"]}
    detail = f"over {entry.extra['calls']} answer(s) that made a call"
    return CheckResult(name, PASS if seconds <= threshold_s else FAIL, f"{seconds:.3f} s", shown, detail, figures)


def _task_scores(run: Run, label: str) -> dict[int, float]:
    """The arm's score on each task it was scored on: its share of successes (repetitions
    averaged), as the pairwise board reads it."""
    rows = TaskSummary.objects.filter(run=run, arm__label=label, scored__gt=0).values_list(
        "task_id", "scored", "successes"
    )
    return {task: successes / scored for task, scored, successes in rows}


def _regressions(plan: GatePlan) -> dict[str, CheckResult]:
    """Each gated arm against its baseline arm: the paired test of the pairwise and run-versus
    pages (leaderboards/stats.py paired_verdict, seeded as the versus page seeds run A against
    B), on the tasks both were scored on. A run sharing no task with its baseline is an error."""
    assert plan.baseline is not None
    baseline, confidence = plan.baseline, plan.request.confidence
    _, verb = quality_metric(plan.run)
    results = {}
    for label, theirs in plan.arms:
        ours_scores, their_scores = _task_scores(plan.run, label), _task_scores(baseline, theirs)
        verdict = paired_verdict(ours_scores, their_scores, seed=baseline.seed, confidence=confidence)
        if not verdict.shared_tasks:
            raise _invalid(
                "baseline",
                f"baseline: arm {label!r} shares no scored task with arm {theirs!r} of run {baseline.code}",
                "no_shared_tasks",
            )
        differences = [ours_scores[task] - their_scores[task] for task in ours_scores.keys() & their_scores.keys()]
        detectable = minimum_detectable_difference(differences, confidence)
        results[label] = _regression_check(verdict, detectable, label, theirs, verb)
    return results


def regression_verdict(verdict: PairedVerdict) -> str:
    """FAIL on a significant drop; PASS on enough shared tasks otherwise. On fewer, the
    bootstrap interval is too narrow to trust, but McNemar's exact p-value holds on any number
    of tasks: a drop it calls significant fails (an 80-point drop on 20 tasks passed once),
    an improvement it calls significant passes, and anything else is INCONCLUSIVE."""
    assert verdict.mean_difference is not None
    if verdict.enough_tasks:
        return FAIL if verdict.significant and verdict.mean_difference < 0 else PASS
    if verdict.p_value < 1 - verdict.confidence and verdict.mean_difference != 0:
        return FAIL if verdict.mean_difference < 0 else PASS
    return INCONCLUSIVE


def _regression_check(
    verdict: PairedVerdict, detectable: float | None, label: str, theirs: str, verb: str
) -> CheckResult:
    assert verdict.mean_difference is not None
    outcome = regression_verdict(verdict)
    figures = {
        "difference": verdict.mean_difference,
        "ci_low": verdict.ci_low,
        "ci_high": verdict.ci_high,
        "p_value": verdict.p_value,
        "shared_tasks": verdict.shared_tasks,
        "wins": verdict.wins,
        "ties": verdict.ties,
        "losses": verdict.losses,
        "significant": verdict.significant,
        "min_shared_tasks": verdict.min_shared_tasks,
        "minimum_detectable_difference": detectable,
        "power": DETECTION_POWER,
    }
    value = (
        f"{_points(verdict.mean_difference)} points ({verdict.confidence:.0%} CI {_points(verdict.ci_low)} to "
        f"{_points(verdict.ci_high)}), {_p_value(verdict.p_value)}, {verdict.shared_tasks} shared tasks"
    )
    threshold = f"no significant regression against {theirs!r}"
    sentence = verdict.sentence(f"{label!r}", f"baseline {theirs!r}", verb)
    if outcome == INCONCLUSIVE:
        sentence += (
            f". Inconclusive: {verdict.shared_tasks} shared tasks, fewer than the {verdict.min_shared_tasks} a "
            f"verdict needs; {_detectable(detectable)} at {1 - verdict.confidence:.2g} significance with "
            f"{DETECTION_POWER:.0%} power"
        )
    return CheckResult("baseline", outcome, value, threshold, sentence, figures)


def _detectable(difference: float | None) -> str:
    if difference is None or difference >= 1:
        return "they could not show any difference"
    return f"the smallest difference they could show is {difference * 100:.1f} points"


def _points(share: float | None) -> str:
    return "?" if share is None else f"{share * 100:+.1f}"


def _p_value(p: float) -> str:  # as the pairwise pages' sentences write it
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


# --- Markdown ------------------------------------------------------------------------------------

CHECK_TITLES = {
    "min_quality_lower_bound": "Quality lower bound",
    "baseline": "No regression vs baseline",
    "max_cost_per_task": "Cost per task",
    "max_p95_latency": "p95 latency",
}
VERDICT_MARKS = {PASS: "✅ pass", FAIL: "❌ fail", UNKNOWN: "⚠️ unknown (fails)", INCONCLUSIVE: "❔ inconclusive"}
TITLE_MARKS = {PASS: "✅", FAIL: "❌", INCONCLUSIVE: "❔"}
ARM_OUTCOMES = {PASS: "passes", FAIL: "fails", INCONCLUSIVE: "inconclusive"}


def _cell(text: str) -> str:
    """Text inside a Markdown table cell: a pipe or a newline would break the table."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code in a table or heading: a backtick would end it early."""
    return "`" + _cell(text).replace("`", "'") + "`"


def _linked(text: str, url: str) -> str:
    return f"[{text}]({url})" if url else _code(text)


def gate_markdown(result: GateResult) -> str:
    """A pull-request comment: PASS, FAIL or INCONCLUSIVE in the title, then one table per arm."""
    lines = [f"## {TITLE_MARKS[result.verdict]} PRBench gate: {result.verdict.upper()}", ""]
    runs = f"Run {_linked(result.run, result.run_url)}"
    if result.baseline:
        runs += f" against baseline {_linked(result.baseline, result.baseline_url)}"
    lines += [
        f"{runs}. Quality is {result.metric.lower()}; infrastructure and configuration failures are not counted.",
        "",
    ]
    for arm in result.arms:
        against = f" (baseline arm {_code(arm.baseline_label)})" if arm.baseline_label not in (None, arm.label) else ""
        outcome = ARM_OUTCOMES[arm.verdict]
        lines += [f"### Arm {_code(arm.label)}{against}: {outcome}", ""]
        lines += ["| Check | Value | Threshold | Verdict |", "| --- | --- | --- | --- |"]
        for check in arm.checks:
            cells = [CHECK_TITLES[check.name], check.value, check.threshold, VERDICT_MARKS[check.verdict]]
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
        lines += ["", "| Infrastructure failures | Configuration failures |", "| --- | --- |"]
        lines.append(f"| {arm.infrastructure_failed} | {arm.configuration_failed} |")
        notes = [check.detail for check in arm.checks if check.detail and check.name == "baseline"]
        notes += [f"{CHECK_TITLES[c.name]}: {c.detail}." for c in arm.checks if c.verdict == UNKNOWN]
        lines += ["", *(f"> {_cell(note)}" for note in notes)] if notes else []
        lines.append("")
    lines.append(
        f"Significance at {result.confidence:.0%}; below {LOW_SAMPLE} shared tasks only a drop McNemar's exact test "
        "finds significant counts, and anything else is inconclusive."
        if result.baseline
        else f"Intervals at {result.confidence:.0%}."
    )
    return "\n".join(lines) + "\n"
