"""The JSON API's results: a run's attempts, one attempt as its page shows it, every export
of the run page and `export_run`, and the attempts as CSV or Parquet for a notebook (mounted by
prbench/api.py).

An attempt's evaluator rationale is staff-only: it is never read here (experiments/reporting.py
``verdict_scores`` hands out the scores alone), nor is anything the attempt page does not show
its customers (the raw provider request and response, the claim, the cost source). What the
model was sent is shown on purpose: the messages of its normalised request, as its page shows
them (experiments/transcript.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.core.exceptions import ValidationError
from django.http import FileResponse, HttpRequest, StreamingHttpResponse
from django.urls import reverse
from django.utils.http import content_disposition_header
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError

from experiments.access import access_attempt, access_run, access_run_export
from experiments.exports import EXPORT_FORMATS, csv_chunks, parquet_chunks, prepare_export
from experiments.forms import AttemptListForm
from experiments.models import Artifact, ArtifactKind, Attempt, ExportStatus, Run, RunExport
from experiments.reporting import cache_source, tests_with_roles, verdict_scores
from experiments.run_exports import (
    check_request_export,
    check_streamable,
    do_request_export,
    export_file,
    export_options,
)
from experiments.swebench_export import ExportRefused
from experiments.trajectory_page import trajectory_fields
from experiments.transcript import attempt_transcript, patch_of
from orgs.api_auth import READ
from prbench.api_support import (
    COMMON_ERRORS,
    MAX_LIMIT,
    ErrorBody,
    JsonBody,
    Page,
    form_invalid,
    json_body,
    paginate,
    read_body,
)

router = Router(tags=["results"])


# --- attempts --------------------------------------------------------------------------------


class TaskRef(Schema):
    id: UUID
    external_id: str


class AttemptSummary(Schema):
    id: UUID
    url: str
    sequence: int
    task: TaskRef
    arm: str
    repetition: int
    status: str
    outcome: str | None  # model_success, model_failure, infrastructure_failure; null until it ends
    error_category: str | None
    resolved: bool | None
    score: float | None
    patch_present: bool | None
    patch_applied: bool | None
    input_tokens: int | None
    output_tokens: int | None
    latency_ms: int | None
    cost_usd: float | None  # null: no call made, or its price is unknown
    cached: bool
    retries: int
    turns: int | None  # an agent's model turns; null for a single-turn answer
    tool_calls: int | None  # an agent's tool calls; null for a single-turn answer
    # Provider calls made again after an earlier worker died mid-call: each was paid twice.
    repeat_calls: int


class Tokens(Schema):
    input: int | None
    output: int | None
    cache_read: int | None
    cache_write: int | None  # part of input
    reasoning: int | None  # part of output


class RetryOut(Schema):
    attempt: int | None  # the try that failed, counted from 1
    category: str | None
    wait_s: float | None


class VerdictOut(Schema):
    """The evaluator's scores, as the attempt page shows them: never its rationale."""

    profile: str
    status: str
    overall: int | None
    technical_quality: int | None
    correctness_confidence: float | None
    change_risk: str | None


class TestOut(Schema):
    id: str
    role: str  # "must fix" (FAIL_TO_PASS), "must keep passing" (PASS_TO_PASS), or ""
    outcome: str
    seconds: float | None = None
    message: str = ""


class CheckOut(Schema):
    kind: str  # build, lint
    status: str
    log: str


class ValidationOut(Schema):
    status: str
    duration_ms: int | None
    log: str
    tests: list[TestOut]
    checks: list[CheckOut]


class MessageOut(Schema):
    role: str  # system, user, assistant
    content: str  # as rendered and sent


class AttemptDetail(AttemptSummary):
    provider: str
    model: str
    model_served: str
    error_message: str
    tokens: Tokens
    first_token_ms: int | None
    output_tokens_per_s: float | None
    wall_ms: int | None
    cost_breakdown: dict[str, float]
    warnings: list[str]
    retry_log: list[RetryOut]
    cached_from: UUID | None  # the attempt whose answer was reused
    patch_well_formed: bool | None
    lines_changed: int | None
    files_changed: int | None
    fail_to_pass_fraction: float | None
    pass_to_pass_regressions: int | None
    build_ok: bool | None
    lint_clean: bool | None
    confidence: float | None
    queued_at: datetime
    started_at: datetime | None
    responded_at: datetime | None
    validated_at: datetime | None
    scored_at: datetime | None
    verdicts: list[VerdictOut]
    patch: str | None  # a PR task's diff; null for a question, or when the answer had none
    answer: dict[str, Any] | None  # the same as grading (the name it had first)
    answer_status: str
    validation: ValidationOut | None
    # The transcript, as the attempt page shows it: what the model was sent (system first),
    # why there is nothing (or that it was prepared and never sent), its raw answer, what its
    # kind read in it, the expected answer in a person's words, and how it was graded (a
    # question kind's answer artifact; null for a PR patch, whose validation says it).
    messages: list[MessageOut]
    messages_note: str
    output: str
    extracted_answer: str
    expected_answer: str
    grading: dict[str, Any] | None
    # An agent's steps as stored (experiments/trajectory.py: each turn's messages sent, text,
    # tool calls, tool results as the model saw them, tokens, latency and cost; why it ended);
    # null for a single-turn answer.
    trajectory: dict[str, Any] | None


class AttemptFilters(Schema):
    arm: str = ""  # an arm's label
    status: str = ""
    outcome: str = ""


SUMMARY_COLUMNS = (
    "code", "run", "sequence", "repetition", "status", "outcome", "error_category", "resolved", "score",
    "patch_present", "patch_applied", "input_tokens", "output_tokens", "latency_ms", "cost_usd",
    "response_cached", "retries", "turns", "tool_calls", "repeat_calls", "task__code", "task__external_id",
    "arm__label",
)  # fmt: skip


def _summary_fields(attempt: Attempt) -> dict[str, Any]:
    return {
        "id": attempt.code,
        "url": reverse("experiments:attempt", args=[attempt.code]),
        "sequence": attempt.sequence,
        "task": TaskRef(id=attempt.task.code, external_id=attempt.task.external_id),
        "arm": attempt.arm.label,
        "repetition": attempt.repetition,
        "status": attempt.status,
        "outcome": attempt.outcome or None,
        "error_category": attempt.error_category or None,
        "resolved": attempt.resolved,
        "score": attempt.score,
        "patch_present": attempt.patch_present,
        "patch_applied": attempt.patch_applied,
        "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens,
        "latency_ms": attempt.latency_ms,
        "cost_usd": None if attempt.cost_usd is None else float(attempt.cost_usd),
        "cached": attempt.response_cached,
        "retries": attempt.retries,
        "turns": attempt.turns,
        "tool_calls": attempt.tool_calls,
        "repeat_calls": attempt.repeat_calls,
    }


@router.get(
    "/runs/{run_id}/attempts",
    response={200: Page[AttemptSummary], **COMMON_ERRORS},
    auth=READ,
    summary="A run's attempts, newest first, filtered by arm label, status and outcome class",
)
def list_attempts(
    request: HttpRequest,
    run_id: str,
    filters: Query[AttemptFilters],
    cursor: str | None = None,
    limit: int = Query(50, ge=1, le=MAX_LIMIT),
) -> Page[AttemptSummary]:
    run = access_run(request, run_id)
    # The run page's form: only the run's own arms and the known statuses and classes pass.
    form = AttemptListForm(filters.dict(), run)
    if not form.is_valid():
        raise form_invalid(form)
    query = form.query()
    # Only what a summary shows: a page of 500 would otherwise read each attempt's request,
    # raw response and answer and each task's problem and gold patch, to show none of them.
    attempts = run.attempts.select_related("task", "arm").only(*SUMMARY_COLUMNS)
    if (arm_id := form.arm_id()) is not None:
        attempts = attempts.filter(arm_id=arm_id)
    if query.status:
        attempts = attempts.filter(status=query.status)
    if query.outcome:
        attempts = attempts.filter(outcome=query.outcome)
    rows, next_cursor = paginate(attempts, cursor, limit)
    return Page[AttemptSummary](
        items=[AttemptSummary(**_summary_fields(attempt)) for attempt in rows], next_cursor=next_cursor
    )


@router.get(
    "/attempts/{attempt_id}",
    response={200: AttemptDetail, **COMMON_ERRORS},
    auth=READ,
    summary="One attempt: scores, outcome, tokens, cost, latency, its patch or answer and its validation",
)
def get_attempt(request: HttpRequest, attempt_id: str) -> AttemptDetail:
    attempt = access_attempt(request, attempt_id)
    artifacts = {artifact.kind: artifact for artifact in attempt.artifacts.all()}
    cached_from = cache_source(attempt)
    answer = artifacts.get("answer")
    trajectory = artifacts.get(ArtifactKind.TRAJECTORY)
    transcript = attempt_transcript(attempt, artifacts)
    return AttemptDetail(
        **_summary_fields(attempt),
        provider=attempt.arm.provider,
        model=attempt.arm.model_name,
        model_served=attempt.model_served,
        error_message=attempt.error_message,
        tokens=Tokens(
            input=attempt.input_tokens,
            output=attempt.output_tokens,
            cache_read=attempt.cached_tokens,
            cache_write=attempt.cache_write_tokens,
            reasoning=attempt.reasoning_tokens,
        ),
        first_token_ms=attempt.first_token_ms,
        output_tokens_per_s=attempt.output_tokens_per_s,
        wall_ms=attempt.wall_ms,
        cost_breakdown={part: float(usd) for part, usd in (attempt.cost_breakdown or {}).items()},
        warnings=[str(warning) for warning in attempt.warnings or []],
        retry_log=[_retry(entry) for entry in attempt.retry_log or [] if isinstance(entry, dict)],
        cached_from=cached_from.code if cached_from else None,
        patch_well_formed=attempt.patch_well_formed,
        lines_changed=attempt.lines_changed,
        files_changed=attempt.files_changed,
        fail_to_pass_fraction=attempt.fail_to_pass_fraction,
        pass_to_pass_regressions=attempt.pass_to_pass_regressions,
        build_ok=attempt.build_ok,
        lint_clean=attempt.lint_clean,
        confidence=attempt.confidence,
        queued_at=attempt.queued_at,
        started_at=attempt.started_at,
        responded_at=attempt.responded_at,
        validated_at=attempt.validated_at,
        scored_at=attempt.scored_at,
        verdicts=[VerdictOut(**scores) for scores in verdict_scores(attempt)],
        patch=patch_of(attempt) or None,
        answer=transcript.grading,
        answer_status=answer.status if answer else "",
        validation=_validation(attempt, artifacts),
        messages=[MessageOut(**message.as_dict()) for message in transcript.messages],
        messages_note=transcript.messages_note,
        output=transcript.output,
        extracted_answer=transcript.extracted,
        expected_answer=transcript.expected,
        grading=transcript.grading,
        trajectory=trajectory_fields(trajectory.content if trajectory else None),
    )


def _retry(entry: dict[str, Any]) -> RetryOut:
    """A retried try as the page shows it: its number, category and wait (not its message)."""
    wait = entry.get("wait_s")
    return RetryOut(
        attempt=entry.get("try"),
        category=entry.get("category"),
        wait_s=float(wait) if isinstance(wait, int | float) else None,
    )


def _validation(attempt: Attempt, artifacts: dict[str, Artifact]) -> ValidationOut | None:
    validation = artifacts.get("validation")
    if validation is None:
        return None
    return ValidationOut(
        status=validation.status,
        duration_ms=validation.duration_ms,
        log=validation.content,
        tests=[TestOut(**test) for test in tests_with_roles(attempt, artifacts.get("tests"))],
        checks=[
            CheckOut(kind=kind, status=artifacts[kind].status, log=artifacts[kind].content)
            for kind in ("build", "lint")
            if kind in artifacts
        ],
    )


# --- exports ---------------------------------------------------------------------------------

ExportName = Literal["json", "csv", "swebench-preds", "swebench-report", "html"]


def _file_response(content_types: Iterable[str]) -> dict[str, Any]:
    """The OpenAPI description of a download: a 200 in one of these content types."""
    return {
        "responses": {
            "200": {
                "description": "The file, streamed as it is written",
                "content": {kind.split(";")[0]: {"schema": _body_schema(kind)} for kind in content_types},
            }
        }
    }


def _body_schema(content_type: str) -> dict[str, str]:
    return {"type": "object"} if content_type == "application/json" else {"type": "string", "format": "binary"}


# Every export's type, and one arm's SWE-bench predictions (JSON lines).
EXPORT_CONTENT_TYPES = sorted({*(export.content_type for export in EXPORT_FORMATS.values()), "application/x-ndjson"})


def _download(chunks: Iterator[str | bytes], content_type: str, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = content_disposition_header(True, filename)
    return response


@router.get(
    "/runs/{run_id}/exports/{format}",
    response=COMMON_ERRORS,
    auth=READ,
    summary="A run exported as the run page and `export_run` export it",
    openapi_extra=_file_response(EXPORT_CONTENT_TYPES),
)
def export_run(
    request: HttpRequest, run_id: str, format: ExportName, arm: str | None = None, rep: int | None = None
) -> StreamingHttpResponse:
    """Formats: ``json`` (the boards and every attempt), ``csv`` (the attempts), ``swebench-preds``
    (a zip of one predictions file per arm and repetition, or with ``arm`` and ``rep`` that one
    JSONL file), ``swebench-report`` (the harness's reports; ``arm``/``rep`` likewise) and
    ``html`` (the report). A format the run cannot give is refused with 422 and the reason."""
    run = access_run(request, run_id)
    try:
        check_streamable(run, format)
        export = prepare_export(run, format, arm, rep)
    except ExportRefused as exc:
        raise ValidationError({"arm" if arm is not None or rep is not None else "format": str(exc)}) from None
    return _download(export.chunks, export.content_type, export.filename)


# --- background exports ------------------------------------------------------------------------


class StartExportIn(JsonBody):
    format: ExportName
    arm: str | None = None  # one arm's SWE-bench file: its label
    rep: int | None = None  # and which of its repetitions


class RunExportOut(Schema):
    id: UUID
    status_url: str  # this answer, to poll
    run: UUID
    format: str
    arm: str | None
    rep: int | None
    status: str  # queued, running, done, failed, expired (its file deleted a day after it was written)
    rows_written: int
    rows_total: int | None  # null where the total is not known in advance (SWE-bench files)
    percent: int | None
    size: int  # bytes, once done
    error: str
    created_at: datetime
    finished_at: datetime | None
    expires_at: datetime | None
    download_url: str | None  # the file, while it is done


def run_export_out(export: RunExport) -> RunExportOut:
    done = export.status == ExportStatus.DONE
    return RunExportOut(
        id=export.code,
        status_url=reverse("api:run_export_status", args=[export.code]),
        run=export.run.code,
        format=export.format,
        arm=export.options.get("arm"),
        rep=export.options.get("rep"),
        status=export.status,
        rows_written=export.rows_written,
        rows_total=export.rows_total,
        percent=export.percent,
        size=export.size,
        error=export.error,
        created_at=export.created_at,
        finished_at=export.finished_at,
        expires_at=export.expires_at,
        download_url=reverse("api:run_export_file", args=[export.code]) if done else None,
    )


@router.post(
    "/runs/{run_id}/exports",
    response={202: RunExportOut, **COMMON_ERRORS},
    auth=READ,
    summary="Start writing an export in the background (any size: poll its url, then fetch download_url)",
    openapi_extra=json_body(StartExportIn),
)
def start_export(request: HttpRequest, run_id: str) -> Status[RunExportOut]:
    """The same formats as ``GET /runs/{id}/exports/{format}``, written to a file by a worker.
    The same export already queued or being written (or, for a finished run, already written)
    is handed back rather than made twice. Reading scope: an export reads, it changes nothing."""
    run = access_run(request, run_id)
    body = read_body(request, StartExportIn)
    options = export_options(body.arm, body.rep)
    try:
        check_request_export(run, body.format, options)
    except ExportRefused as exc:
        raise ValidationError({"arm" if options else "format": str(exc)}) from None
    export = do_request_export(run, body.format, options, getattr(request, "user", None))
    export.run = run
    return Status(202, run_export_out(export))


@router.get(
    "/exports/{export_id}",
    response={200: RunExportOut, **COMMON_ERRORS},
    auth=READ,
    summary="A background export: its state, its progress and, once written, where to download it",
    url_name="run_export_status",
)
def export_status(request: HttpRequest, export_id: str) -> RunExportOut:
    return run_export_out(access_run_export(request, export_id))


@router.get(
    "/exports/{export_id}/file",
    response={409: ErrorBody, 410: ErrorBody, **COMMON_ERRORS},
    auth=READ,
    summary="A background export's file (409 until it is written, 410 once it has expired)",
    openapi_extra=_file_response(EXPORT_CONTENT_TYPES),
    url_name="run_export_file",
)
def export_file_download(request: HttpRequest, export_id: str) -> FileResponse:
    export = access_run_export(request, export_id)
    path = export_file(export)
    if export.status == ExportStatus.EXPIRED:
        raise HttpError(410, "This export expired (files are kept for a day): start it again.")
    if path is None:
        raise HttpError(409, f"This export is {export.status}: there is no file to download.")
    return FileResponse(
        path.open("rb"), as_attachment=True, filename=export.file_name, content_type=export.content_type
    )


# --- notebook access ----------------------------------------------------------------------------

CSV_TYPE = "text/csv; charset=utf-8"
PARQUET_TYPE = "application/vnd.apache.parquet"


@router.get(
    "/runs/{run_id}/attempts.csv",
    response=COMMON_ERRORS,
    auth=READ,
    summary="A run's attempts as CSV: the CSV export's columns, for pandas.read_csv",
    openapi_extra=_file_response([CSV_TYPE]),
)
def attempts_csv(request: HttpRequest, run_id: str) -> StreamingHttpResponse:
    run = access_run(request, run_id)
    return _download(csv_chunks(run), CSV_TYPE, f"prbench-run-{run.code}-attempts.csv")


@router.get(
    "/runs/{run_id}/attempts.parquet",
    response=COMMON_ERRORS,
    auth=READ,
    summary="A run's attempts as Parquet: the CSV export's columns, typed, for pandas.read_parquet",
    openapi_extra=_file_response([PARQUET_TYPE]),
)
def attempts_parquet(request: HttpRequest, run_id: str) -> StreamingHttpResponse:
    run: Run = access_run(request, run_id)
    return _download(parquet_chunks(run), PARQUET_TYPE, f"prbench-run-{run.code}-attempts.parquet")
