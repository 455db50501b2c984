"""The boards' part of a run's exports: the JSON document's head (the run and each arm's
figures on its boards) and the HTML report. experiments' exports (experiments/exports.py)
write the attempts and reach these through experiments/board_views.py."""

from __future__ import annotations

from decimal import Decimal

from experiments.models import Run
from leaderboards.aggregation import PATCH_FIGURES, PatchQualityRow
from leaderboards.boards import Entry, run_boards
from leaderboards.jobs import ensure_fresh_summaries
from leaderboards.report import run_report


def run_summary(run: Run) -> dict:
    """The run and each arm's figures on its boards, in the run's arm order: aggregates read
    from the run's summaries (brought up to date first), small whatever the run's size."""
    ensure_fresh_summaries(run.pk)
    boards = run_boards(run, {}, lambda board, sort: "")
    speed = {entry.arm.arm_id: entry for entry in boards.speed.entries}
    cost = {entry.arm.arm_id: entry for entry in boards.cost.entries}
    quality = {entry.arm.arm_id: entry for entry in boards.quality.entries} if boards.quality else {}
    evaluator: dict[int, list[Entry]] = {}
    for entry in boards.evaluator.entries:
        evaluator.setdefault(entry.arm.arm_id, []).append(entry)
    return {
        "run": {
            "id": str(run.code),
            "experiment": run.experiment.name,
            "status": run.status,
            "seed": run.seed,
            "inference_only": run.inference_only,
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        },
        "arms": [
            _arm_summary(speed[arm_id], quality.get(arm_id), cost[arm_id], evaluator.get(arm_id, []))
            for arm_id in run.arms.order_by("position", "pk").values_list("pk", flat=True)
        ],
    }


def _arm_summary(speed: Entry, quality: Entry | None, cost: Entry, evaluator: list[Entry]) -> dict:
    """One arm's figures; ``quality`` is None when the run validated nothing (inference only),
    and so are its quality figures then."""
    r = speed.arm
    scored = quality is not None
    return {
        "label": r.label,
        "provider": r.provider,
        "model_name": r.model_name,
        "solver": r.solver,
        "n": r.n,
        "scored_tasks": quality.extra["scored_tasks"] if quality else None,
        "quality_rank": quality.rank if quality else None,
        "resolved_rate": r.resolved_rate if scored else None,
        "ci_low": r.ci_low if scored else None,
        "ci_high": r.ci_high if scored else None,
        "speed_rank": speed.rank,
        "latency_p50_ms": r.latency_p50_ms,
        "latency_p95_ms": r.latency_p95_ms,
        "first_token_p50_ms": r.first_token_p50_ms,
        "output_tokens_per_s_median": r.output_tokens_per_s_median,
        "cost_rank": cost.rank,
        "cost_usd": _number(r.cost_usd),
        "cost_per_task_usd": _number(cost.extra["per_task"]),
        "cost_per_resolved_usd": _number(r.cost_per_resolved_usd) if scored else None,
        "turns_per_attempt": r.turns_per_attempt,
        "tool_calls_per_attempt": r.tool_calls_per_attempt,
        "tokens_per_task": r.tokens_per_task,
        "tokens_per_resolved": r.tokens_per_resolved if scored else None,
        "error_rate": r.error_rate,
        "cached": r.cached,
        "infrastructure_failed": r.infrastructure_failed,
        "configuration_failed": r.configuration_failed,
        "low_sample": quality.low_sample if quality else None,
        **_quality_fields(quality.patch if quality else None),
        "evaluator": [
            {
                "profile": e.evaluator.profile,
                "rank": e.rank,
                "mean_overall": e.evaluator.mean_overall,
                "ci_low": e.evaluator.ci_low,
                "ci_high": e.evaluator.ci_high,
                "judged": e.evaluator.judged,
                "evaluator_errors": e.evaluator.errors,
            }
            for e in evaluator
            if e.evaluator is not None
        ],
    }


def _number(value: Decimal | float | None) -> float | None:
    return None if value is None else float(value)


def _quality_fields(row: PatchQualityRow | None) -> dict:
    return {field: getattr(row, field) if row else None for field in PATCH_FIGURES}


def html_report(run: Run) -> str:
    """The HTML report, from the run's summaries brought up to date first, as the JSON
    export's are, so the two never disagree."""
    ensure_fresh_summaries(run.pk)
    return run_report(run)
