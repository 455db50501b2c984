"""Deterministic rule metrics per workload kind."""

from __future__ import annotations

from dataclasses import dataclass

from evaluation.patches import PatchRejected, check_patch
from evaluation.validation import ValidationResult


@dataclass(frozen=True)
class PatchScore:
    patch_present: bool
    well_formed: bool  # a diff that parses, with safe paths and no binary parts
    applied: bool
    resolved: bool
    lines_changed: int
    files_changed: int


def score_pr_attempt(patch: str, validation: ValidationResult | None) -> PatchScore:
    """Rule metrics for a pr_patch attempt; ``validation`` is None for inference-only runs."""
    try:
        stats = check_patch(patch, binary=True)  # as validation takes it
    except PatchRejected:
        well_formed, lines_changed, files_changed = False, 0, 0
    else:
        well_formed, lines_changed, files_changed = True, stats.lines_changed, stats.files
    return PatchScore(
        patch_present=bool(patch.strip()),
        well_formed=well_formed,
        applied=bool(validation and validation.applied),
        resolved=bool(validation and validation.passed),
        lines_changed=lines_changed,
        files_changed=files_changed,
    )
