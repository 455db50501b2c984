"""A run's boards as text, and the figures behind them, for the command line (``start_run
--wait``, ``demo``) and the tests: read from the run's summaries, as the run page's are."""

from __future__ import annotations

from decimal import Decimal

from evaluation.models import Verdict
from evaluation.workloads.wording import Wording, wording_for
from experiments.models import Run
from leaderboards.aggregation import (
    ArmRow,
    EvaluatorRow,
    PatchQualityRow,
    arm_evaluator_scores,
    arm_leaderboard,
    arm_patch_quality,
)
from leaderboards.boards import RunBoards, run_boards
from leaderboards.jobs import ensure_fresh_summaries


def run_leaderboard(run: Run) -> list[ArmRow]:
    return arm_leaderboard(run.attempts.all())


def run_patch_quality(run: Run) -> list[PatchQualityRow]:
    return arm_patch_quality(run.attempts.all())


def run_evaluator_scores(run: Run) -> list[EvaluatorRow]:
    """Scores only: rationale and raw answers never leave the admin."""
    return arm_evaluator_scores(Verdict.objects.filter(attempt__run=run))


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _money(value: Decimal | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def _rank(rank: int | None) -> str:
    return "—" if rank is None else str(rank)


# The quality column's heading, named for the run's kind when printed (Wording.rate: resolved,
# right, passed, truthful).
RATE = "{rate}"
COLUMNS = [  # (heading, width, cell of an entry of the quality board, or of the speed board)
    ("#", 2, lambda e: _rank(e.rank)),
    ("arm", -16, lambda e: e.arm.shown_label),
    ("provider/model", -24, lambda e: f"{e.arm.provider}/{e.arm.model_name}"),
    ("n", 4, lambda e: str(e.arm.n)),
    (RATE, 9, lambda e: _pct(e.arm.resolved_rate)),
    ("95% CI", 15, lambda e: f"{_pct(e.arm.ci_low)}–{_pct(e.arm.ci_high)}" if e.arm.ci_low is not None else "—"),
    ("p50 ms", 7, lambda e: _ms(e.arm.latency_p50_ms)),
    ("p95 ms", 7, lambda e: _ms(e.arm.latency_p95_ms)),
    ("cost", 10, lambda e: _money(e.arm.cost_usd)),
    (f"$/{RATE}", 11, lambda e: _money(e.arm.cost_per_resolved_usd)),
    ("errors", 7, lambda e: _pct(e.arm.error_rate)),
    ("infra", 6, lambda e: str(e.arm.infrastructure_failed)),
    ("config", 7, lambda e: str(e.arm.configuration_failed)),
]
# An inference-only run validated nothing: its arms are listed by speed, with no quality figures.
INFERENCE_ONLY_HIDDEN = {"#", RATE, "95% CI", f"$/{RATE}"}


def _cells(values: list[str], arm_width: int = 16) -> str:
    """One line of the table; the arm column as wide as its longest label ("x (agent)")."""
    widths = [-arm_width if heading == "arm" else width for heading, width, _ in COLUMNS]
    return " ".join(f"{v:<{-w}}" if w < 0 else f"{v:>{w}}" for v, w in zip(values, widths, strict=True))


def run_board_text(run: Run) -> str:
    """The run's quality board as the command line prints it, from its summaries (rebuilt
    first if attempts were recorded since): best first, each arm with its CI-aware rank."""
    ensure_fresh_summaries(run.pk)
    return format_leaderboard(run_boards(run, {}, lambda board, sort: ""), wording_for(run.experiment.dataset.kind))


def format_leaderboard(boards: RunBoards, words: Wording) -> str:
    board = boards.quality or boards.speed
    arm_width = max([16, *(len(entry.arm.shown_label) for entry in board.entries)])
    header = _cells([heading.format(rate=words.rate) for heading, _, _ in COLUMNS], arm_width)
    lines = [header, "-" * len(header)]
    for entry in board.entries:
        hidden = INFERENCE_ONLY_HIDDEN if boards.quality is None else set()
        cells = ["—" if heading in hidden else cell(entry) for heading, _, cell in COLUMNS]
        flag = "  (low n)" if entry.low_sample and boards.quality else ""
        lines.append(_cells(cells, arm_width) + flag)
    if boards.quality is None:
        lines.append("Inference only: nothing was validated, so nothing is ranked on quality.")
    else:
        lines.append(
            "# is 1 + the number of arms whose 95% interval lies wholly above the arm's: equal ranks are not "
            "significantly different; — is not scored."
        )
    cached = sum(entry.arm.cached for entry in board.entries)
    if cached:
        lines.append(
            f"{cached} attempt(s) reused a cached answer: counted in n and {words.rate}, not in latency or cost"
        )
    return "\n".join(lines)


def evaluator_summary(run: Run) -> str:
    rows = run_evaluator_scores(run)
    if run.evaluator_profile_id is None and not rows:
        return "Not judged by the evaluator: its workload is scored by rules alone.\n"
    if not rows:
        return "No evaluator profile is active: attempts were not judged.\n"
    lines = [f"Evaluator scores ({rows[0].profile}):"]
    for row in rows:
        score = (
            "insufficient data" if row.insufficient else f"{row.mean_overall:.1f} ({row.ci_low:.1f}-{row.ci_high:.1f})"
        )
        lines.append(f"  {row.label:<16} {score}, {row.judged} judged, {row.errors} evaluator errors")
    return "\n".join(lines) + "\n"
