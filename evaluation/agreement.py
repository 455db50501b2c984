"""How far two evaluator profiles agree on the same attempts, and how well each one's
correctness confidence predicts what the tests said. Staff read it (the command, the
admin) before trusting a new profile version with the leaderboard."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import spearmanr

from evaluation.models import ChangeRisk, EvaluatorProfile, Verdict, VerdictStatus


@dataclass(frozen=True)
class Agreement:
    first: EvaluatorProfile
    second: EvaluatorProfile
    attempts: int  # judged by both
    spearman: float | None  # of overall scores
    kappa: float | None  # Cohen's, of change risk
    auc: dict[str, float | None]  # per profile: correctness confidence against resolved


def agreement(first: EvaluatorProfile, second: EvaluatorProfile, run_code: str | None = None) -> Agreement:
    verdicts = Verdict.objects.filter(status=VerdictStatus.JUDGED)
    if run_code:
        verdicts = verdicts.filter(attempt__run__code=run_code)
    a = {row[0]: row[1:] for row in verdicts.filter(profile=first).values_list("attempt_id", "overall", "change_risk")}
    b = {row[0]: row[1:] for row in verdicts.filter(profile=second).values_list("attempt_id", "overall", "change_risk")}
    shared = sorted(a.keys() & b.keys())
    return Agreement(
        first=first,
        second=second,
        attempts=len(shared),
        spearman=_spearman([a[i][0] for i in shared], [b[i][0] for i in shared]),
        kappa=_kappa([a[i][1] for i in shared], [b[i][1] for i in shared]),
        auc={str(p): confidence_auc(p, verdicts) for p in (first, second)},
    )


def agreements_with(profile: EvaluatorProfile, limit: int = 5) -> list[Agreement]:
    """This profile against each other profile that judged some of the same attempts."""
    judged = Verdict.objects.filter(profile=profile, status=VerdictStatus.JUDGED).values("attempt_id")
    others = (
        EvaluatorProfile.objects.exclude(pk=profile.pk)
        .filter(verdicts__attempt_id__in=judged, verdicts__status=VerdictStatus.JUDGED)
        .distinct()
        .order_by("name", "-version")[:limit]
    )
    return [agreement(profile, other) for other in others]


def confidence_auc(profile: EvaluatorProfile, verdicts) -> float | None:
    """ROC AUC of correctness confidence for "the tests resolved it", over validated
    attempts; None unless both outcomes occur."""
    rows = verdicts.filter(profile=profile, attempt__resolved__isnull=False, attempt__validated_at__isnull=False)
    pairs = list(rows.values_list("correctness_confidence", "attempt__resolved"))
    outcomes = {resolved for _, resolved in pairs}
    if len(outcomes) < 2:
        return None
    from sklearn.metrics import roc_auc_score  # about 0.8 s to import: only where staff ask for it

    return float(roc_auc_score([resolved for _, resolved in pairs], [confidence for confidence, _ in pairs]))


def _spearman(x: list[int | None], y: list[int | None]) -> float | None:
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None  # undefined for constant scores; meaningless for one or two
    value = float(spearmanr(x, y).statistic)
    return None if math.isnan(value) else value


def _kappa(x: list[str], y: list[str]) -> float | None:
    if not x:
        return None
    from sklearn.metrics import cohen_kappa_score  # see confidence_auc

    value = float(cohen_kappa_score(x, y, labels=ChangeRisk.values))
    return None if math.isnan(value) else value


def describe(result: Agreement) -> list[str]:
    def number(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    lines = [
        f"{result.first} vs {result.second}: {result.attempts} attempt(s) judged by both",
        f"  Spearman correlation of overall scores: {number(result.spearman)}",
        f"  Cohen's kappa of change risk: {number(result.kappa)}",
    ]
    lines += [
        f"  AUC of correctness confidence for resolved, {name}: {number(auc)}" for name, auc in result.auc.items()
    ]
    return lines
