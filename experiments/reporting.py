"""Plain-text and machine-readable views of a run, shared by commands and the API."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from datasets.models import TaskInstance
from evaluation.models import Verdict
from evaluation.workloads import workload_for
from evaluation.workloads.wording import LETTERS, Wording, wording_for
from experiments.models import Artifact, ArtifactKind, Attempt, Run, RunArm
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

REPETITIONS_SHOWN = 10  # of each arm on a task's page

VERDICT_SCORES = ("status", "overall", "technical_quality", "correctness_confidence", "change_risk")


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
    ("arm", -16, lambda e: e.arm.label),
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


def _cells(values: list[str]) -> str:
    return " ".join(f"{v:<{-w}}" if w < 0 else f"{v:>{w}}" for v, (_, w, _) in zip(values, COLUMNS, strict=True))


def run_board_text(run: Run) -> str:
    """The run's quality board as the command line prints it, from its summaries (rebuilt
    first if attempts were recorded since): best first, each arm with its CI-aware rank."""
    ensure_fresh_summaries(run.pk)
    return format_leaderboard(run_boards(run, {}, lambda board, sort: ""), wording_for(run.experiment.dataset.kind))


def format_leaderboard(boards: RunBoards, words: Wording) -> str:
    board = boards.quality or boards.speed
    header = _cells([heading.format(rate=words.rate) for heading, _, _ in COLUMNS])
    lines = [header, "-" * len(header)]
    for entry in board.entries:
        hidden = INFERENCE_ONLY_HIDDEN if boards.quality is None else set()
        cells = ["—" if heading in hidden else cell(entry) for heading, _, cell in COLUMNS]
        flag = "  (low n)" if entry.low_sample and boards.quality else ""
        lines.append(_cells(cells) + flag)
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


@dataclass
class TaskComparison:
    """One task of a run and every arm's attempts at it, each with its answer (a patch, a
    letter, a response, a function) and its result in the kind's words."""

    task: TaskInstance
    arms: list[tuple[RunArm, list[Attempt]]]
    words: Wording
    expected: str  # the right answer as a person reads it (not for a patch: its diff is shown)
    choices: list[tuple[str, str, bool]]  # a multiple-choice question's options: letter, text, right


def task_comparison(run: Run, task_code: Any) -> TaskComparison | None:
    """None when the task is not part of the run (an outsider guessing codes gets a 404)."""
    attempts = list(
        # A run of many samples per task shows the first ones (the attempts list has them all).
        run.attempts.filter(task__code=task_code, repetition__lt=REPETITIONS_SHOWN)
        .select_related("task", "arm")
        .defer("request", "raw_response", "output")
        .order_by("arm__position", "arm_id", "repetition")
    )
    if not attempts:
        return None
    task = attempts[0].task
    words = wording_for(run.experiment.dataset.kind)
    patches = dict(
        Artifact.objects.filter(attempt__in=attempts, kind=ArtifactKind.PATCH).values_list("attempt_id", "content")
    )
    by_arm: dict[int, list[Attempt]] = {}
    for attempt in attempts:
        attempt.patch_text = patches.get(attempt.pk, "")  # type: ignore[attr-defined]
        attempt.answer_start = attempt.extracted_answer  # type: ignore[attr-defined]
        attempt.expected_short = words.short_expected(task.payload)  # type: ignore[attr-defined]
        attempt.answer_text = words.spelled_answer(task.payload, attempt.extracted_answer)  # type: ignore[attr-defined]
        attempt.result = words.result(attempt, run.inference_only)  # type: ignore[attr-defined]
        by_arm.setdefault(attempt.arm_id, []).append(attempt)
    return TaskComparison(
        task=task,
        arms=[(group[0].arm, group) for group in by_arm.values()],
        words=words,
        expected="" if words.patches else workload_for(words.kind).expected_answer(task),
        choices=_choices(task),
    )


def _choices(task: TaskInstance) -> list[tuple[str, str, bool]]:
    choices = task.payload.get("choices") if isinstance(task.payload, dict) else None
    if not isinstance(choices, list):
        return []
    right = task.payload.get("answer")
    return [(letter, str(text), letter == right) for letter, text in zip(LETTERS, choices, strict=False)]


def cache_source(attempt: Attempt) -> Attempt | None:
    """The attempt whose answer this one reused, when it is the same organisation's (a key
    includes the organisation, so it always is; the page links to it, so it is checked)."""
    if attempt.cached_from_id is None:
        return None
    sources = Attempt.objects.filter(pk=attempt.cached_from_id, run__org_id=attempt.run.org_id)
    return sources.select_related("run").only("code", "sequence", "run__code").first()


def verdict_scores(attempt: Attempt) -> list[dict]:
    """The evaluator's scores for the attempt, as plain values: its rationale stays in the
    admin, so it is never even handed to a customer page's template."""
    return [
        {"profile": str(verdict.profile), **{field: getattr(verdict, field) for field in VERDICT_SCORES}}
        for verdict in attempt.verdicts.select_related("profile").order_by("profile__name", "-profile__version")
    ]


def tests_with_roles(attempt: Attempt, artifact: Artifact | None) -> list[dict]:
    """Each test's outcome, marked with what the task asks of it: to be fixed
    (FAIL_TO_PASS), to keep passing (PASS_TO_PASS), or nothing."""
    tests = json.loads(artifact.content) if artifact else []
    roles = {test: "must fix" for test in attempt.task.fail_to_pass}
    roles.update({test: "must keep passing" for test in attempt.task.pass_to_pass})
    for test in tests:
        test["role"] = roles.get(test["id"], "")
    return tests
