"""A run in SWE-bench's own formats, for its harness and for side-by-side comparison."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from django.db.models import FilteredRelation, Q, TextField, Value
from django.db.models.functions import Coalesce

from experiments.models import ArtifactKind, AttemptStatus, Run
from providers.outcomes import OutcomeClass


def model_name(label: str, repetition: int, repetitions: int) -> str:
    """SWE-bench wants one prediction per (instance, model): each repetition of an arm is
    its own "model" when the run has several."""
    return label if repetitions <= 1 else f"{label}@rep{repetition}"


def _repetitions(run: Run) -> int:
    return int(run.config_snapshot.get("repetitions") or 1)


def swebench_predictions(run: Run, chunk_size: int) -> Iterator[dict]:
    """One per attempt: ``instance_id``, ``model_name_or_path``, ``model_patch`` (empty when
    the model gave no patch or no answer). Read ``chunk_size`` rows at a time, each with its
    patch joined in SQL, so a large run never sits in memory."""
    repetitions = _repetitions(run)
    patch = FilteredRelation("artifacts", condition=Q(artifacts__kind=ArtifactKind.PATCH))
    patch_text = Coalesce("patch__content", Value(""), output_field=TextField())
    rows = (
        run.attempts.annotate(patch=patch)
        .order_by("sequence")
        .values_list("task__external_id", "arm__label", "repetition", patch_text)
        .iterator(chunk_size=chunk_size)
    )
    for instance_id, label, repetition, patch in rows:
        yield {
            "instance_id": instance_id,
            "model_name_or_path": model_name(label, repetition, repetitions),
            "model_patch": patch,
        }


class ReportUnavailable(Exception):
    pass


def swebench_report(run: Run) -> dict:
    """Per model (arm, and repetition when there are several), SWE-bench's id lists, sorted
    by each attempt's outcome class (the one the boards count): resolved; unresolved (a patch
    that did not resolve, including one that did not apply); empty_patch (the model gave no
    patch: an answer without one, or a failure of its own, such as a timeout); error (the
    infrastructure failed: no answer through no fault of the model, or tests that ran out of
    time)."""
    if run.inference_only:
        raise ReportUnavailable(f"run {run.code} was inference-only: no patch was validated, so none is resolved")
    unfinished = run.attempts.exclude(status__in=[AttemptStatus.COMPLETED, AttemptStatus.FAILED]).count()
    repetitions = _repetitions(run)
    models: dict[str, dict[str, list[str]]] = defaultdict(
        lambda: {"resolved_ids": [], "unresolved_ids": [], "empty_patch_ids": [], "error_ids": []}
    )
    attempts = run.attempts.order_by("sequence").values_list(
        "task__external_id", "arm__label", "repetition", "outcome", "patch_present", "resolved"
    )
    for instance_id, label, repetition, outcome, patch_present, resolved in attempts:
        id_list = _id_list(outcome, patch_present, resolved)
        if id_list:
            models[model_name(label, repetition, repetitions)][id_list].append(instance_id)
    per_model = {}
    for name, ids in sorted(models.items()):
        lists = {key: sorted(values) for key, values in ids.items()}
        counts = {key.replace("_ids", "_instances"): len(values) for key, values in lists.items()}
        per_model[name] = {"total_instances": sum(counts.values()), **counts, **lists}
    return {"run_id": str(run.code), "status": run.status, "unfinished_instances": unfinished, "models": per_model}


def _id_list(outcome: str, patch_present: bool | None, resolved: bool | None) -> str | None:
    if outcome == OutcomeClass.INFRASTRUCTURE_FAILURE:
        return "error_ids"
    if outcome == OutcomeClass.MODEL_FAILURE or (outcome == OutcomeClass.SUCCESS and not patch_present):
        return "empty_patch_ids"
    if outcome == OutcomeClass.SUCCESS:
        return "resolved_ids" if resolved else "unresolved_ids"
    return None  # still queued or running, or cancelled: not part of the report
