"""Other systems' predictions as an arm: a SWE-bench predictions file, imported and replayed.

``import_predictions`` reads the file the harness reads (JSONL, one ``{"instance_id",
"model_name_or_path", "model_patch"}`` per line, or a JSON list or ``{instance_id:
prediction}`` mapping), all or nothing, and adds a ``replay`` arm to the experiment whose
attempts give those patches (providers/adapters/replay/adapter.py). They are validated, scored and
judged as a live arm's are; a task the file has nothing for gets "no answer".

Where the harness is silent or lenient, this is stricter, because a benchmark must not
guess: a second prediction for one instance is refused (the harness silently keeps one), and
so is a file mixing systems (two ``model_name_or_path`` values). A ``model_patch`` of null is
an empty answer, as the harness files it. Predictions for instances outside the dataset are
counted and left out (a published file covers all of SWE-bench; a dataset may be Lite).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from experiments.models import Experiment, ModelArm, Prediction, PredictionSet, RunArm
from prbench.file_rows import read_records
from prbench.inputs import (
    JSONL_LINE_MAX_BYTES,
    LABEL_MAX,
    NAME_MAX,
    JsonRejected,
    document_problems,
    parse_json,
    text_problem,
    utf8_problem,
)
from providers.adapters.replay.adapter import PREDICTIONS_KEY
from providers.policy import arm_problems
from providers.types import Message

REPLAY = "replay"
FIELDS = ("instance_id", "model_name_or_path", "model_patch")
# A replay arm's request: it is never sent, and rendering the prompt (files, retrieval) would be wasted work.
REPLAYED_MESSAGE = Message("user", "(replayed: the answer was read from imported predictions; no prompt was sent)")


class PredictionsRejected(Exception):
    """The file cannot be imported; ``problems`` say where and why, one each."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class ParsedPrediction:
    where: int  # the line (JSONL) or entry (JSON) it came from, from 1
    instance_id: str
    model_name: str
    answer: str


@dataclass(frozen=True)
class ParsedPredictions:
    name: str
    sha256: str
    model_name: str
    predictions: list[ParsedPrediction]


@dataclass(frozen=True)
class PredictionsReport:
    arm: ModelArm
    prediction_set: PredictionSet
    replaced: bool  # the arm already replayed an earlier import
    kept: int
    ignored: list[str]  # instance ids the dataset does not have
    unanswered: int  # the dataset's tasks the file has nothing for: "no answer"
    empty: int  # predictions with an empty patch
    warnings: list[str] = field(default_factory=list)


# --- Reading the file ------------------------------------------------------------------------


def parse_predictions(name: str, data: bytes) -> ParsedPredictions:
    """The file's predictions, or ``PredictionsRejected`` naming each problem's line (or
    entry) and field. JSON when the name ends in .json, else JSONL, as the harness decides."""
    sha256 = hashlib.sha256(data).hexdigest()
    if name.endswith(".json"):
        entries = list(enumerate(_json_entries(name, data), start=1))
        kind = "entry"
    else:
        entries = list(_jsonl_entries(name, data))
        kind = "line"

    def another_system(prediction: ParsedPrediction, first: ParsedPrediction) -> str:
        if prediction.model_name == first.model_name:
            return ""
        return (
            f"field model_name_or_path: {prediction.model_name!r} differs from "
            f"{first.model_name!r} on {kind} {first.where} (one file is one system)"
        )

    predictions = read_records(
        name,
        entries,
        _prediction,
        key=lambda prediction: prediction.instance_id,
        key_field="instance_id",
        rejected=PredictionsRejected,
        items="predictions",
        place=f"{kind} ",
        duplicate_note=" (the harness would silently keep one of them)",
        mismatch=another_system,
    )
    return ParsedPredictions(name, sha256, predictions[0].model_name, predictions)


def _jsonl_entries(name: str, data: bytes) -> Iterable[tuple[int, Any]]:
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > JSONL_LINE_MAX_BYTES:
            raise PredictionsRejected([f"{name}:line {number}: longer than {JSONL_LINE_MAX_BYTES:,} bytes"])
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PredictionsRejected([f"{name}:line {number}: {utf8_problem(line, exc)}"]) from None
        try:
            yield number, parse_json(text)
        except JsonRejected as exc:
            yield number, _Unreadable(f"not valid JSON: {exc}")


def _json_entries(name: str, data: bytes) -> list[Any]:
    """A JSON list of predictions, or a mapping of instance id to prediction (SWE-agent's)."""
    try:
        document = parse_json(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise PredictionsRejected([f"{name}: {utf8_problem(data, exc)}"]) from None
    except JsonRejected as exc:
        raise PredictionsRejected([f"{name}:line {exc.line}: not valid JSON: {exc}"]) from None
    if isinstance(document, dict):
        return list(document.values())
    if isinstance(document, list):
        return document
    raise PredictionsRejected([f"{name}: must hold a list of predictions or a mapping of instance_id to prediction"])


@dataclass(frozen=True)
class _Unreadable:
    problem: str


def _prediction(where: int, raw: Any) -> tuple[ParsedPrediction | None, list[str]]:
    if isinstance(raw, _Unreadable):
        return None, [raw.problem]
    if not isinstance(raw, dict):
        return None, ["each prediction must be a JSON object"]
    errors = [f"field {name}: missing" for name in FIELDS if name not in raw]
    if errors:
        return None, errors
    instance_id, model_name, answer = raw["instance_id"], raw["model_name_or_path"], raw["model_patch"]
    for name, value in (("instance_id", instance_id), ("model_name_or_path", model_name)):
        if not isinstance(value, str) or not value.strip():
            errors.append(f"field {name}: must be a non-empty string")
        elif problem := text_problem(value, NAME_MAX):
            errors.append(f"field {name}: {problem}")
    if answer is None:
        answer = ""  # the harness files a null patch as an empty one
    elif not isinstance(answer, str):
        errors.append(f"field model_patch: must be a string or null, not {type(answer).__name__}")
    else:
        # NUL or a lone surrogate: Postgres could not store the patch. What it says is the
        # replayed system's answer, judged when the arm runs, not here.
        errors += [f"field {problem}" for problem in document_problems(answer, "model_patch")]
    if errors:
        return None, errors
    return ParsedPrediction(where, instance_id, model_name, answer), []


# --- Importing ---------------------------------------------------------------------------------


def check_replay_label(experiment: Experiment, label: str) -> ModelArm | None:
    """The replay arm the label already names (its predictions are replaced), None for a new
    arm; ``ValidationError`` when the label is unusable or names a live arm."""
    if problem := text_problem(label, LABEL_MAX):
        raise ValidationError(f"--arm: {problem}")
    if not label.strip():
        raise ValidationError("--arm: the arm label must not be blank")
    arm = experiment.arms.filter(label=label).first()
    if arm is not None and arm.provider != REPLAY:
        raise ValidationError(
            f"--arm: experiment {experiment.name!r} already has an arm {label!r} calling {arm.provider}/"
            f"{arm.model_name}; choose another label for the replayed predictions"
        )
    return arm


@transaction.atomic
def do_import_predictions(
    experiment: Experiment, label: str, parsed: ParsedPredictions, user: Any = None
) -> PredictionsReport:
    """The predictions saved as a new set, and the experiment's replay arm ``label`` (added,
    or pointed at the new set) replaying them. Nothing is saved when something is wrong."""
    experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
    existing = check_replay_label(experiment, label)
    task_ids = set(experiment.dataset.tasks.values_list("external_id", flat=True))
    kept = [p for p in parsed.predictions if p.instance_id in task_ids]
    ignored = [p.instance_id for p in parsed.predictions if p.instance_id not in task_ids]
    if not kept:
        raise ValidationError(
            f"{parsed.name}: none of its {len(parsed.predictions)} predictions is for a task of dataset "
            f"{experiment.dataset.name!r} (e.g. {parsed.predictions[0].instance_id!r})"
        )
    prediction_set = PredictionSet.objects.create(
        org_id=experiment.org_id,
        experiment=experiment,
        label=label,
        model_name=parsed.model_name,
        source_name=parsed.name[:300],
        sha256=parsed.sha256,
        count=len(kept),
        ignored=len(ignored),
        imported_by=user,
    )
    Prediction.objects.bulk_create(
        Prediction(prediction_set=prediction_set, instance_id=p.instance_id, answer=p.answer, line=p.where)
        for p in kept
    )
    arm = existing or ModelArm(experiment=experiment, label=label, position=_next_arm_position(experiment))
    arm.provider, arm.model_name, arm.credential_name = REPLAY, parsed.model_name, ""
    arm.config = {PREDICTIONS_KEY: prediction_set.pk}
    arm.save()
    experiment.save(update_fields=["updated_at"])
    return PredictionsReport(
        arm=arm,
        prediction_set=prediction_set,
        replaced=existing is not None,
        kept=len(kept),
        ignored=ignored,
        unanswered=len(task_ids) - len(kept),
        empty=sum(not p.answer.strip() for p in kept),
    )


def _next_arm_position(experiment: Experiment) -> int:
    last = experiment.arms.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


# --- Checking and replaying -------------------------------------------------------------------


def experiment_arm_problems(org_id: int, provider: str, model_name: str, config: object) -> list[str]:
    """``arm_problems``, and for a replay arm that its predictions were imported into this
    organisation: the one check every way of saving or starting an arm goes through."""
    problems = arm_problems(org_id, provider, model_name, config)
    if problems or provider != REPLAY:
        return problems
    assert isinstance(config, dict)  # arm_problems refuses any other config
    if not PredictionSet.objects.filter(org_id=org_id, pk=config[PREDICTIONS_KEY]).exists():
        return [
            f"config.{PREDICTIONS_KEY}: no predictions with id {config[PREDICTIONS_KEY]} were imported into this "
            "organisation (import_predictions adds a replay arm)"
        ]
    return []


def arms_with_sources(experiment: Experiment) -> list[ModelArm]:
    """The experiment's arms, each replay arm with the predictions it replays as ``replays``
    (None for the others): one query for all of them."""
    arms = list(experiment.arms.all())
    wanted = {arm.config.get(PREDICTIONS_KEY) for arm in arms if arm.provider == REPLAY}
    ids = [pk for pk in wanted if isinstance(pk, int) and not isinstance(pk, bool)]
    sets = PredictionSet.objects.filter(org_id=experiment.org_id).in_bulk(ids) if ids else {}
    for arm in arms:
        arm.replays = sets.get(arm.config.get(PREDICTIONS_KEY)) if arm.provider == REPLAY else None  # type: ignore[attr-defined]
    return arms


ANSWERS_ATTRIBUTE = "replayed_answers"


def load_recorded_answers(arms: Iterable[RunArm], org_id_of: dict[int, int]) -> None:
    """Read each replay arm's answers once, onto the arm (``org_id_of``: run id to its
    organisation). Called on a job's own thread: prompts are built on pool threads, which
    must not query the database."""
    for arm in arms:
        if arm.provider == REPLAY and ANSWERS_ATTRIBUTE not in arm.__dict__:
            setattr(arm, ANSWERS_ATTRIBUTE, _answers(org_id_of[arm.run_id], arm.config.get(PREDICTIONS_KEY)))


def recorded_answer(arm: RunArm, org_id: int, instance_id: str) -> str | None:
    """The replay arm's answer for the task, None when its predictions have none."""
    answers = arm.__dict__.get(ANSWERS_ATTRIBUTE)
    if answers is None:  # not loaded by a job (a direct call): read them now
        answers = _answers(org_id, arm.config.get(PREDICTIONS_KEY))
        setattr(arm, ANSWERS_ATTRIBUTE, answers)
    return answers.get(instance_id)


def _answers(org_id: int, set_id: object) -> dict[str, str]:
    if not isinstance(set_id, int) or isinstance(set_id, bool):
        return {}  # a config the save-time checks would refuse: no answers, not a crash
    # Scoped to the run's organisation: a config naming another's predictions reads nothing.
    rows = Prediction.objects.filter(prediction_set_id=set_id, prediction_set__org_id=org_id)
    return dict(rows.values_list("instance_id", "answer"))
