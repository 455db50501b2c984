"""PR patches: a repository (or a task's own files) and a problem statement in, a unified
diff out, validated by applying it and running the task's tests, lint and build."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from evaluation.environments import EnvironmentUnavailable
from evaluation.patches import extract_patch
from evaluation.scoring import score_pr_attempt
from evaluation.validation import ValidationResult, ValidationStatus
from evaluation.workloads.base import QUESTION, ArtifactRow, Context, Evaluation, Workload
from evaluation.workloads.wording import Said, Wording

REPOSITORY = "{{repository}}"
DEFAULT_PROMPT = """You are fixing a bug in a small repository.

Problem statement:
{{problem_statement}}

Repository files:
{{repository}}

Reply with a unified diff (paths prefixed a/ and b/) in a ```diff fenced block that fixes
the problem. Do not change the tests."""


def _said(words: Wording, row: Any, inference_only: bool) -> Said:
    if row.resolved:
        return Said(words.right, "good")
    if row.outcome == "infrastructure_failure":
        return Said("tests gave no verdict")
    if inference_only:
        return Said("patch, not validated" if row.patch_present else "no patch")
    if row.patch_applied:
        return Said("tests fail", "bad")
    return Said("did not apply" if row.patch_present else "no patch", "bad")


WORDS = Wording(
    kind="pr_patch",
    verdict="Resolved",
    rate="resolved",
    question="Problem statement",
    answer="patch",
    expected="Gold patch",
    right="resolved",
    wrong="not resolved",
    success="resolved",
    right_filter="resolved",
    wrong_filter="not resolved",
    per_success="Per resolved task",
    not_graded="no patch was validated, so none can be resolved",
    said=_said,
)


class PrPatch(Workload):
    kind = "pr_patch"
    label = "PR patch"
    words = WORDS
    quality_metric = ("Resolved", "resolves")
    judged_by_evaluator = True
    answers_are_patches = True
    default_prompt = DEFAULT_PROMPT
    builtin_prompts = {"plain@1": DEFAULT_PROMPT}
    placeholders: ClassVar[tuple[str, ...]] = (QUESTION, REPOSITORY)

    def render_prompt(self, template: str, task: Any, repository: Callable[[], str]) -> str:
        # Reading a repository is not free: only when the template asks for it.
        files = repository() if REPOSITORY in template else ""
        return template.replace(QUESTION, task.problem_statement).replace(REPOSITORY, files)

    def reference_output(self, task: Any) -> str:
        return task.gold_patch

    def evaluate(self, task: Any, output: str, context: Context) -> Evaluation:
        patch = extract_patch(output)
        validation = None
        if not context.inference_only:
            assert context.validate is not None, "a PR patch is validated by the pipeline's validator"
            try:
                validation = context.validate(task, patch)
            except EnvironmentUnavailable as exc:
                return _not_validated(patch, str(exc))
        score = score_pr_attempt(patch, validation)
        resolved = score.resolved if validation else None
        return Evaluation(
            answer=patch,
            correct=score.resolved,
            score=None if resolved is None else float(resolved),
            columns=_columns(score, validation),
            artifacts=_artifacts(validation),
            validated=validation is not None,
            harness_failed=bool(validation and validation.environment_missing)
            or _harness_timed_out(task, validation, context),
        )


def _not_validated(patch: str, why: str) -> Evaluation:
    """The task's environment went missing between the call and the validation: the answer is
    kept, unscored, as the platform's failure."""
    return Evaluation(
        answer=patch,
        correct=None,
        score=None,
        columns={},
        artifacts=(ArtifactRow("validation", why, ValidationStatus.SKIPPED),),
        validated=False,
        harness_failed=True,
    )


def _harness_timed_out(task: Any, validation: ValidationResult | None, context: Context) -> bool:
    """A patch whose tests ran out of time is judged as SWE-bench's harness judges it, against
    the model (unresolved, in the denominator), unless the gold patch runs out of time too:
    then the limit, not the patch, is at fault."""
    if validation is None or not validation.timed_out or context.gold_times_out is None:
        return False
    return context.gold_times_out(task)


def _columns(score: Any, validation: ValidationResult | None) -> dict[str, Any]:
    tally = validation.tally if validation else None
    return {
        "patch_present": score.patch_present,
        "patch_well_formed": score.well_formed,
        "patch_applied": score.applied,
        "apply_method": validation.apply_method if validation else "",
        "lines_changed": score.lines_changed,
        "files_changed": score.files_changed,
        "lint_clean": validation.lint.ok if validation else None,
        "build_ok": validation.build.ok if validation else None,
        "fail_to_pass_fraction": tally.fail_to_pass_fraction if tally else None,
        "pass_to_pass_regressions": tally.pass_to_pass_failed if tally else None,
    }


def _artifacts(validation: ValidationResult | None) -> tuple[ArtifactRow, ...]:
    """The validation's log, tests and checks; none for an inference-only attempt (its run
    says so). The patch itself is the attempt's ``extracted_answer``, kept once: it was also
    written as an artifact, which cost a row, and its text again, for every attempt (issue 31)."""
    if not validation:
        return ()
    rows = [ArtifactRow("validation", validation.log, validation.status, validation.duration_ms)]
    if validation.tests:
        rows.append(ArtifactRow("tests", json.dumps([test.as_dict() for test in validation.tests])))
    for kind, check in (("lint", validation.lint), ("build", validation.build)):
        rows.append(ArtifactRow(kind, check.log, check.status))
    return tuple(rows)
