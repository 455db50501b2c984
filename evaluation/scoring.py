"""Deterministic rule metrics per workload kind."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.patches import PatchRejected, check_patch
from evaluation.validation import ValidationResult


@dataclass(frozen=True)
class PatchScore:
    patch_present: bool
    applied: bool
    resolved: bool
    lines_changed: int


def score_pr_attempt(patch: str, validation: ValidationResult | None) -> PatchScore:
    """Rule metrics for a pr_patch attempt; ``validation`` is None for inference-only runs."""
    try:
        lines_changed = check_patch(patch).lines_changed
    except PatchRejected:
        lines_changed = 0
    return PatchScore(
        patch_present=bool(patch.strip()),
        applied=bool(validation and validation.applied),
        resolved=bool(validation and validation.passed),
        lines_changed=lines_changed,
    )
