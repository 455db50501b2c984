"""A run in SWE-bench's own formats, for its harness and for side-by-side comparison.

The harness evaluates one model at a time: its predictions file holds one prediction per
``instance_id`` (a second one for the same instance silently replaces the first), and its run
report (``make_run_report`` in swebench/harness/reporting.py) describes that one model. Here a
model is one arm's repetition, so a run gives one predictions file and one report per arm and
repetition.

What the report says of each attempt comes from the outcome class the recorder stored on it
(providers/outcomes.py), the one the boards count, mapped to the harness's lists:

- not finished (queued, running, cancelled), or a replay arm's task its predictions file had
  no line for: not submitted, so ``incomplete_ids``;
- the model failed (a timeout of its own, a refusal) or answered without a patch:
  ``empty_patch_ids``, as the harness files an empty ``model_patch``;
- a patch that was not applied (git apply refused it, or PRBench's patch rule refused it before
  applying: malformed, binary, escaping the checkout, changing the task's tests):
  ``error_ids``, as the harness files any patch it could not run the tests on;
- the infrastructure failed (no answer through no fault of the model, or tests that ran out
  of time where the gold patch's did too): ``error_ids``, and ``infra_failure_ids`` with the
  cause in ``failure_reasons``;
- the model's patch made its tests run out of time where the gold patch's finished: scored
  unresolved on the boards, and ``error_ids`` here, as the harness files any timed-out patch;
- the provider refused the request for the arm's own settings (a configuration failure: an
  unsupported parameter, a model it does not serve): ``error_ids`` too, as neither the model's
  empty answer nor the infrastructure's, and ``configuration_failure_ids`` with the cause in
  ``failure_reasons`` (PRBench's own fields: the harness has no such class);
- otherwise ``resolved_ids`` or ``unresolved_ids``; both are ``completed_ids``.

So ``submitted = completed + empty_patch + error`` and ``total = submitted + incomplete``, as
in the harness. The predictions file of a model holds exactly its ``submitted_ids``: an
infrastructure failure is written with an empty patch there (there is no other way to say
"no answer" in that format), so the harness would file it as empty_patch where this report,
knowing why, says error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter, itemgetter
from urllib.parse import quote

from django.db.models import Exists, OuterRef, QuerySet

from evaluation.validation import ValidationStatus
from evaluation.workloads import workload_for
from experiments.models import Artifact, ArtifactKind, AttemptStatus, Run
from providers.errors import ErrorCategory
from providers.outcomes import OutcomeClass

# The harness's report schema this report follows: schema 2, with the advisory
# infrastructure-failure fields the harness added to it later without a new number.
SCHEMA_VERSION = 2
SUBMITTED = (AttemptStatus.COMPLETED, AttemptStatus.FAILED)  # the attempts with an outcome


class ExportRefused(Exception):
    """The export cannot be made as asked; the message says why, for a page or a terminal."""


class ReportUnavailable(ExportRefused):
    pass


@dataclass(frozen=True)
class HarnessModel:
    """One arm's repetition: what the harness calls a model."""

    arm_id: int
    label: str
    repetition: int
    name: str  # the predictions' model_name_or_path, and the report's key

    @property
    def file_stem(self) -> str:
        """The name as a file name: percent-encoded where a file system or an archive would
        read it as a path (``/``, ``..``), so two models never share a file."""
        stem = quote(self.name, safe="@+")
        return "%2E" + stem[1:] if stem.startswith(".") else stem


def model_name(label: str, repetition: int, repetitions: int) -> str:
    """SWE-bench wants one prediction per (instance, model): each repetition of an arm is
    its own "model" when the run has several."""
    return label if repetitions <= 1 else f"{label}@rep{repetition}"


def run_repetitions(run: Run) -> int:
    return int(run.config_snapshot.get("repetitions") or 1)


def run_models(run: Run) -> list[HarnessModel]:
    """Every model of the run, in the run's arm order, then by repetition."""
    repetitions = run_repetitions(run)
    return [
        HarnessModel(arm.pk, arm.label, repetition, model_name(arm.label, repetition, repetitions))
        for arm in run.arms.all()  # in position order; the run page reads them once, prefetched
        for repetition in range(repetitions)
    ]


def select_models(run: Run, label: str | None = None, repetition: int | None = None) -> list[HarnessModel]:
    """The models an export covers: all of them, or the one ``label`` and ``repetition``
    name (the repetition may be left out when the run has one). Refused, naming what exists,
    when the arm or the repetition does not."""
    models = run_models(run)
    if label is None:
        if repetition is not None:
            raise ExportRefused("a repetition is chosen with an arm: give the arm's label too")
        return models
    labels = list(dict.fromkeys(model.label for model in models))
    if label not in labels:
        raise ExportRefused(
            f"run {run.code} has no arm {label!r}; its arms are " + ", ".join(repr(known) for known in labels)
        )
    repetitions = run_repetitions(run)
    if repetition is None:
        if repetitions > 1:
            raise ExportRefused(
                f"arm {label!r} ran {repetitions} repetitions in run {run.code}: "
                f"choose one of 0 to {repetitions - 1} (the harness takes one prediction per instance)"
            )
        repetition = 0
    if not 0 <= repetition < repetitions:
        choices = "only repetition 0" if repetitions == 1 else f"repetitions 0 to {repetitions - 1}"
        raise ExportRefused(f"arm {label!r} has no repetition {repetition} in run {run.code}: it has {choices}")
    return [model for model in models if model.label == label and model.repetition == repetition]


# --- Reading a run, model by model -------------------------------------------------------------


def each_model(
    attempts: QuerySet, models: list[HarnessModel], fields: tuple, chunk_size: int
) -> Iterator[tuple[HarnessModel, Iterator[tuple]]]:
    """Each model (in the order given, an arm's repetitions together) with the ``fields`` of
    its ``attempts`` in execution order. One query per arm, its repetitions read one after
    the other: a run of many repetitions costs as many queries as it has arms, and a model's
    rows are read, ``chunk_size`` at a time, as they are used."""
    for arm_id, arm_models in groupby(models, key=attrgetter("arm_id")):
        wanted = sorted(arm_models, key=attrgetter("repetition"))
        rows = (
            attempts.filter(arm_id=arm_id, repetition__range=(wanted[0].repetition, wanted[-1].repetition))
            .order_by("repetition", "sequence")
            .values_list("repetition", *fields)
            .iterator(chunk_size=chunk_size)
        )
        by_repetition = groupby(rows, key=itemgetter(0))
        group = next(by_repetition, None)
        for model in wanted:
            while group is not None and group[0] < model.repetition:  # a repetition not asked for
                group = next(by_repetition, None)
            if group is not None and group[0] == model.repetition:
                yield model, (row[1:] for row in group[1])
                group = next(by_repetition, None)
            else:
                yield model, iter(())


# --- Predictions -------------------------------------------------------------------------------


def each_model_predictions(
    run: Run, models: list[HarnessModel], chunk_size: int
) -> Iterator[tuple[HarnessModel, Iterator[dict]]]:
    """Each model's predictions file, a line each: ``instance_id``, ``model_name_or_path``,
    ``model_patch`` (empty when there was no patch). One per finished attempt, so one per
    instance; read in chunks, so a large run never sits in memory."""
    # A replayed file's missing instance stays missing: written, it would become an empty patch.
    attempts = run.attempts.filter(status__in=SUBMITTED).exclude(error_category=ErrorCategory.NO_ANSWER)
    for model, rows in each_model(attempts, models, ("task__external_id", "extracted_answer"), chunk_size):
        yield (
            model,
            (
                {"instance_id": instance_id, "model_name_or_path": model.name, "model_patch": patch_text}
                for instance_id, patch_text in rows
            ),
        )


# --- Report ----------------------------------------------------------------------------------

REPORT_FIELDS = (
    "task__external_id",
    "status",
    "outcome",
    "error_category",
    "patch_present",
    "patch_applied",
    "resolved",
    "tests_timed_out",
)


def tests_timed_out() -> Exists:
    """Whether the attempt's tests ran out of time (its validation's status): the harness files
    such a patch under ``error_ids``, in the denominator, when it is the model's (the gold
    patch finished inside the limit) as when it is the infrastructure's."""
    return Exists(
        Artifact.objects.filter(attempt=OuterRef("pk"), kind=ArtifactKind.VALIDATION, status=ValidationStatus.TIMED_OUT)
    )


def each_model_report(run: Run, models: list[HarnessModel] | None = None) -> Iterator[tuple[HarnessModel, dict]]:
    """Each model's harness report (see the module's docstring). Memory grows with the run's
    tasks, not its attempts: one model's ids are held at a time."""
    check_report_available(run)
    models = run_models(run) if models is None else models
    attempts = run.attempts.annotate(tests_timed_out=tests_timed_out())
    for model, rows in each_model(attempts, models, REPORT_FIELDS, REPORT_CHUNK_ROWS):
        yield model, harness_report(rows)


def swebench_report(run: Run, models: list[HarnessModel] | None = None) -> dict[str, dict]:
    """Each model's harness report, keyed by its name (``model_name_or_path``)."""
    return {model.name: report for model, report in each_model_report(run, models)}


def check_patch_run(run: Run) -> None:
    """SWE-bench's formats hold patches: refused for a run of another kind of task."""
    kind = run.experiment.dataset.kind
    if not workload_for(kind).answers_are_patches:
        raise ExportRefused(f"run {run.code} answered {kind} tasks: SWE-bench's formats are for PR patch runs")


def check_report_available(run: Run) -> None:
    if run.inference_only:
        raise ReportUnavailable(f"run {run.code} was inference-only: no patch was validated, so none is resolved")


REPORT_CHUNK_ROWS = 2000


def harness_report(rows: Iterable[tuple]) -> dict:
    """The harness's run report for one model from its attempts' ``REPORT_FIELDS``: its
    counts and id lists with the harness's names and meanings."""
    ids: dict[str, set[str]] = {name: set() for name in ("resolved", "unresolved", "empty_patch", "error")}
    every: set[str] = set()
    infrastructure: dict[str, str] = {}
    configuration: dict[str, str] = {}
    for instance_id, status, outcome, error_category, patch_present, patch_applied, resolved, timed_out in rows:
        every.add(instance_id)
        harness_list = harness_list_of(outcome, patch_present, patch_applied, resolved, error_category, timed_out)
        if harness_list is not None:
            ids[harness_list].add(instance_id)
        if outcome == OutcomeClass.INFRASTRUCTURE_FAILURE:
            infrastructure[instance_id] = failure_reason(status, error_category)
        elif outcome == OutcomeClass.CONFIGURATION_FAILURE:
            configuration[instance_id] = failure_reason(status, error_category)
    submitted = set().union(*ids.values())
    completed = ids["resolved"] | ids["unresolved"]
    return {
        "total_instances": len(every),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(ids["resolved"]),
        "unresolved_instances": len(ids["unresolved"]),
        "infra_failure_instances": len(infrastructure),
        "ambiguous_failure_instances": 0,  # the stored outcome class leaves no failure ambiguous
        "empty_patch_instances": len(ids["empty_patch"]),
        "error_instances": len(ids["error"]),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(every - submitted),
        "empty_patch_ids": sorted(ids["empty_patch"]),
        "submitted_ids": sorted(submitted),
        "resolved_ids": sorted(ids["resolved"]),
        "unresolved_ids": sorted(ids["unresolved"]),
        "infra_failure_ids": sorted(infrastructure),
        "ambiguous_failure_ids": [],
        "failure_reasons": dict(sorted((infrastructure | configuration).items())),
        "error_ids": sorted(ids["error"]),
        "schema_version": SCHEMA_VERSION,
        # PRBench's own, after the harness's fields: the harness has no configuration class.
        "configuration_failure_instances": len(configuration),
        "configuration_failure_ids": sorted(configuration),
    }


def harness_list_of(
    outcome: str,
    patch_present: bool | None,
    patch_applied: bool | None,
    resolved: bool | None,
    error_category: str = "",
    tests_timed_out: bool = False,
) -> str | None:
    """Which of the harness's lists a finished attempt is in; None when it is not finished or
    a replayed predictions file had nothing for it (not submitted: the harness's incomplete)."""
    if error_category == ErrorCategory.NO_ANSWER:
        return None
    if outcome in (OutcomeClass.INFRASTRUCTURE_FAILURE, OutcomeClass.CONFIGURATION_FAILURE):
        return "error"
    if outcome == OutcomeClass.MODEL_FAILURE or (outcome == OutcomeClass.SUCCESS and not patch_present):
        return "empty_patch"
    if outcome == OutcomeClass.SUCCESS:
        if not patch_applied:
            return "error"  # the harness could not run the tests on it either
        if tests_timed_out and not resolved:
            return "error"  # the model's: its tests hung where the gold patch's finished
        return "resolved" if resolved else "unresolved"
    return None


def failure_reason(status: str, error_category: str) -> str:
    # A completed attempt is an infrastructure failure only when its tests ran out of time.
    if status == AttemptStatus.COMPLETED:
        return "tests_timed_out"
    return error_category or "unknown"
