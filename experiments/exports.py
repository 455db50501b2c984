"""A whole run as a download: JSON (its leaderboard and every attempt), CSV (its attempts),
SWE-bench predictions (a zip of one JSONL per arm and repetition, or one of them alone),
SWE-bench reports (the harness's report per arm and repetition) and the HTML report (its
boards, verdicts and charts), shared by the run page and `export_run`.

A run can have a million attempts, so each export is a stream of text chunks: attempts are
read a chunk at a time through a server-side cursor, joined to their task and arm in SQL, and
written out before the next chunk is read. Memory stays flat whatever the run's size.

Each attempt carries its transcript (experiments/transcript.py): the CSV its question, what its
kind read in the answer, the expected answer and the score, each text cut at
``CSV_CELL_MAX`` characters with a visible marker; the JSON export and attempts.parquet all of
that uncut, with the messages the model was sent, its raw answer and its grading. A task's
question and expected answer are read with the first chunk that needs them, a chunk's new
tasks in one query, and kept for the chunks after (``TaskTexts``, bounded): never a query
per attempt. The raw provider response and the evaluator's rationale are in none of them."""

from __future__ import annotations

import codecs
import csv
import functools
import io
import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, islice
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from django.db import connections
from django.db.models import FloatField, OuterRef, Subquery, Value
from django.db.models.functions import Cast, NullIf

from datasets.models import TaskInstance
from evaluation.workloads import workload_for
from experiments.board_views import board_views
from experiments.models import Artifact, ArtifactKind, Attempt, Run, RunArm
from experiments.replay import REPLAY
from experiments.swebench_export import (
    ExportRefused,
    HarnessModel,
    check_patch_run,
    check_report_available,
    each_model_predictions,
    each_model_report,
    run_models,
    select_models,
)
from experiments.trajectory_page import trajectory_fields
from experiments.transcript import expected_answer, grading_fields, sent_messages

# Rows per fetch from the cursor and per chunk written: large enough that a round trip and a
# write cost little per row, small enough that a chunk stays around a megabyte.
CHUNK_ROWS = 2000
# Rows per chunk of an export with transcripts: a PR prompt with its repository's files can be
# tens of kilobytes, so fewer rows keep a chunk to a few megabytes.
TRANSCRIPT_CHUNK_ROWS = 250
# The CSV's text cells (question, extracted and expected answer) are cut to this many
# characters, the cut marked at the end: a spreadsheet holds at most 32,767 in a cell, and a
# PR task's statement or patch can be longer. The JSON export and Parquet keep them whole.
CSV_CELL_MAX = 2000


class AsFloat(Cast):
    """A number cast to a double in SQL: the nearest double, as float(Decimal) gives, without
    a Decimal per row. The driver already returns a float, so Django's float() of each value,
    which costs a Python pass over every row of the export, is left out."""

    def get_db_converters(self, connection: Any) -> list:
        return []


# Each attempt's export field read from its row and where it comes from. Its error message is
# not exported, nor is any evaluator rationale or raw provider response.
ATTEMPT_FIELDS: dict[str, Any] = {
    "task_id": "task__external_id",
    "arm_label": "arm__label",
    "repetition": "repetition",
    "status": "status",
    "outcome": NullIf("outcome", Value("")),
    "resolved": "resolved",
    "patch_present": "patch_present",
    "patch_well_formed": "patch_well_formed",
    "patch_applied": "patch_applied",
    "fail_to_pass_fraction": "fail_to_pass_fraction",
    "pass_to_pass_regressions": "pass_to_pass_regressions",
    "lines_changed": "lines_changed",
    "files_changed": "files_changed",
    "lint_clean": "lint_clean",
    "build_ok": "build_ok",
    "latency_ms": "latency_ms",
    "first_token_ms": "first_token_ms",
    "output_tokens_per_s": "output_tokens_per_s",
    "wall_ms": "wall_ms",
    "cost_usd": AsFloat("cost_usd", FloatField()),
    "cached": "response_cached",
    "error_category": NullIf("error_category", Value("")),
    "turns": "turns",  # an agent's model turns; null for a single-turn answer
    "tool_calls": "tool_calls",
    # Calls sent again after an earlier claim's worker died mid-call: each was paid twice.
    "repeat_calls": "repeat_calls",
    "score": "score",
}
# Every attempts export's columns (the CSV's): the row's fields, then the task's question, what
# the kind read in the answer and the expected answer (in a person's words).
ATTEMPT_COLUMNS = [*ATTEMPT_FIELDS, "question", "extracted_answer", "expected_answer"]
# The JSON export's and Parquet's, whole: then the raw answer, the messages sent (system first),
# the grading (a question kind's answer artifact; null for a PR patch) and an agent's
# trajectory (its TRAJECTORY artifact, experiments/trajectory.py; null for a single turn).
TRANSCRIPT_COLUMNS = [*ATTEMPT_COLUMNS, "output", "messages", "grading", "trajectory"]
# What a row also reads: the task (for its question and expected answer) and the transcript.
ROW_EXTRAS = ("extracted_answer", "task_id")
TRANSCRIPT_EXTRAS = ("output", "arm__provider", "request__system", "request__messages")


# Told how many more rows an export has read, after each chunk of them: a background export
# (experiments/run_exports.py) reports its progress with it. Most callers need nothing told.
RowsRead = Callable[[int], None]


def _untold(rows: int) -> None:
    pass


@dataclass(frozen=True)
class ExportFormat:
    content_type: str
    suffix: str  # the download's file name after the run's code
    chunks: Callable[..., Iterator[str | bytes]]  # (run, progress=RowsRead)

    def filename(self, run: Run) -> str:
        return f"prbench-run-{run.code}{self.suffix}"


def export_chunks(run: Run, format: str, progress: RowsRead = _untold) -> Iterator[str | bytes]:
    """The export as chunks (text, or bytes for a zip). Its first chunk is made here, so what
    the export cannot do (ReportUnavailable) is raised before anything is written, not halfway
    through a download."""
    chunks = EXPORT_FORMATS[format].chunks(run, progress=progress)
    first = list(islice(chunks, 1))  # made now, so a refusal comes before the download starts
    return chain(first, chunks)


def _attempt_batches(run: Run, transcripts: bool = False, progress: RowsRead = _untold) -> Iterator[list[tuple]]:
    """Batches of rows in ``ATTEMPT_COLUMNS`` order (``TRANSCRIPT_COLUMNS`` with
    ``transcripts``, its messages a list of role and content, its grading the answer
    artifact's text), in execution order; ``progress`` told of each batch as it is read."""
    extras = ROW_EXTRAS + (TRANSCRIPT_EXTRAS if transcripts else ())
    attempts = run.attempts.order_by("sequence")
    if transcripts:
        attempts = attempts.annotate(
            answer_artifact=_artifact_text(ArtifactKind.ANSWER),
            trajectory_artifact=_artifact_text(ArtifactKind.TRAJECTORY),
        )
        extras += ("answer_artifact", "trajectory_artifact")
    chunk = min(CHUNK_ROWS, TRANSCRIPT_CHUNK_ROWS) if transcripts else CHUNK_ROWS
    rows = attempts.values_list(*ATTEMPT_FIELDS.values(), *extras).iterator(chunk_size=chunk)
    tasks = TaskTexts(run)
    width = len(ATTEMPT_FIELDS)
    for batch in _batches(rows, chunk):
        progress(len(batch))
        tasks.load({row[width + 1] for row in batch})
        if transcripts:
            yield [_transcript_row(row, width, tasks) for row in batch]
        else:
            yield [
                (*row[:width], tasks.question(row[width + 1]), row[width], tasks.expected(row[width + 1]))
                for row in batch
            ]


def _artifact_text(kind: str) -> Subquery:
    # Unordered: (attempt, kind) is unique, so there is one row or none. Artifact's default
    # ordering (by attempt, which orders by run) joined the attempt and its run and sorted, for
    # every row exported, and made the query look costly enough for Postgres to JIT-compile it
    # (1.2 s of a 20,000-attempt JSON export's 2.1 s in the database).
    return Subquery(Artifact.objects.filter(attempt=OuterRef("pk"), kind=kind).order_by().values("content")[:1])


def _transcript_row(row: tuple, width: int, tasks: TaskTexts) -> tuple:
    extracted, task_id, output, provider, system, messages, answer, trajectory = row[width:]
    sent = [message.as_dict() for message in sent_messages(system, messages, provider)]
    question, expected = tasks.question(task_id), tasks.expected(task_id)
    return (*row[:width], question, extracted, expected, output, sent, answer, trajectory or None)


class TaskTexts:
    """Each task's question and expected answer, for the attempts of one run: a chunk's tasks
    not yet known are read in one query, and kept for the chunks after, up to ``MAX_CHARS``
    characters in all (then forgotten and read again as needed), so memory stays bounded
    however many tasks a run has and queries do not grow with its repetitions or arms."""

    MAX_CHARS = 20_000_000
    # Fields the question and expected answers never read, and large: left in the database.
    UNREAD = ("repo_files", "test_patch", "hints_text", "gold_detail", "metadata")

    def __init__(self, run: Run) -> None:
        self.run = run
        self.known: dict[int, tuple[str, str]] = {}
        self.chars = 0
        self._workload: Any = None

    def load(self, task_ids: set[int]) -> None:
        missing = task_ids - self.known.keys()
        if not missing:
            return
        if self.chars > self.MAX_CHARS:
            self.known.clear()
            self.chars = 0
            missing = task_ids
        workload = self.workload()
        for task in TaskInstance.objects.filter(pk__in=missing).defer(*self.UNREAD):
            texts = (task.problem_statement, expected_answer(workload, task))
            self.known[task.pk] = texts
            self.chars += len(texts[0]) + len(texts[1])

    def workload(self) -> Any:
        if self._workload is None:  # one query, with the first chunk: a run's tasks share its dataset's kind
            kind = Run.objects.filter(pk=self.run.pk).values_list("experiment__dataset__kind", flat=True).get()
            self._workload = workload_for(kind)
        return self._workload

    def question(self, task_id: int) -> str:
        return self.known[task_id][0]

    def expected(self, task_id: int) -> str:
        return self.known[task_id][1]


def _batches(rows: Iterator[Any], size: int | None = None) -> Iterator[list[Any]]:
    while batch := list(islice(rows, size or CHUNK_ROWS)):
        yield batch


# --- JSON ------------------------------------------------------------------------------------


def json_chunks(run: Run, progress: RowsRead = _untold) -> Iterator[str]:
    """The document `json.dumps(..., indent=2)` gives, with the attempts written as they are read."""
    head = json.dumps(board_views().summary(run), indent=2)
    yield head.removesuffix("\n}") + ',\n  "attempts": ['
    written = False
    literals = TaskLiterals()  # this export's: a worker keeps none of them once it is written
    if _writes_json(run):
        items = _written_json_attempts(run, progress, literals)
    else:
        batches = _attempt_batches(run, transcripts=True, progress=progress)
        items = _encoded_ahead(batches, functools.partial(_json_attempts, literals=literals))
    for attempts in items:
        yield (",\n    " if written else "\n    ") + attempts
        written = True
    yield "\n  ]\n}\n" if written else "]\n}\n"


def _json_attempts(batch: list[tuple], literals: TaskLiterals) -> str:
    return ",\n    ".join(_json_attempt(row, literals) for row in batch)


def _encoded_ahead(batches: Iterator[list[tuple]], encode: Callable[[list[tuple]], str]) -> Iterator[str]:
    """``encode(batch)`` of each batch in order, each encoded in a helper thread while the next
    batch is read. A server-side cursor makes Postgres compute rows only when they are fetched,
    so reading and encoding in turn left Postgres idle while Python encoded, and Python idle
    while Postgres read: a COPY streams both at once. The driver waits without the GIL, so
    the two overlap; two batches at most are held."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export-encoder") as encoder:
        pending: Future[str] | None = None
        for batch in batches:
            ahead = encoder.submit(encode, batch)
            if pending is not None:
                yield pending.result()
            pending = ahead
        if pending is not None:
            yield pending.result()


# The C encoder ignores indent (json.dumps with indent runs in Python, twice as slow), so the
# newline and indent before each of an attempt's keys go in its item separator instead.
_encode_flat = json.JSONEncoder(separators=(",\n      ", ": "), check_circular=False).encode


# The row's own fields, written flat by the C encoder; then the texts, each written as a JSON
# literal: the task's question and expected answer recur on every attempt of the task, so
# their literals are kept (``TaskLiterals``) rather than escaped again for each attempt.
ROW_COLUMNS = list(ATTEMPT_FIELDS)


def _json_attempt(row: tuple, literals: TaskLiterals) -> str:
    """The row as json.dumps(indent=2) writes it inside the document's "attempts" list."""
    width = len(ROW_COLUMNS)
    question, extracted, expected, output, messages, answer, trajectory = row[width:]
    return (
        f"{{\n      {_encode_flat(dict(zip(ROW_COLUMNS, row[:width], strict=True)))[1:-1]}"
        f',\n      "question": {literals.of(question)}'
        f',\n      "extracted_answer": {_encode_value(extracted)}'
        f',\n      "expected_answer": {literals.of(expected)}'
        f',\n      "output": {_encode_value(output)}'
        f',\n      "messages": {_indented(messages, ATTEMPT_DEPTH)}'
        f',\n      "grading": {_indented(grading_fields(answer), ATTEMPT_DEPTH)}'
        f',\n      "trajectory": {_indented(trajectory_fields(trajectory), ATTEMPT_DEPTH)}'
        "\n    }"
    )


class TaskLiterals:
    """One export's task texts as JSON literals, each kept for the next attempt of the same
    task: the same string object comes back from ``TaskTexts`` for each of them, so the lookup
    hashes it once. Up to ``MAX`` texts (then forgotten and made again), and gone with the
    export, where a module-level store kept a run's texts in the worker for good."""

    MAX = 4096

    def __init__(self) -> None:
        self._literals: dict[str, str] = {}

    def of(self, text: str) -> str:
        literal = self._literals.get(text)
        if literal is None:
            if len(self._literals) >= self.MAX:
                self._literals.clear()
            literal = self._literals[text] = _encode_value(text)
        return literal


ATTEMPT_DEPTH = 3  # the document, its "attempts" list, an attempt: its keys are 3 levels in


_encode_value = json.JSONEncoder(check_circular=False).encode


def _indented(value: Any, depth: int) -> str:
    """``value`` as json.dumps(indent=2) writes it ``depth`` levels into a document: the C
    encoder for every scalar, and the nesting's newlines and indents written out here (the
    indenting encoder is pure Python, and twice as slow on a million attempts)."""
    if value is None:  # most attempts' grading and trajectory: not worth the encoder's call
        return "null"
    if isinstance(value, dict) and value:
        inner = "\n" + "  " * (depth + 1)
        items = ",".join(f"{inner}{_encode_value(str(k))}: {_indented(v, depth + 1)}" for k, v in value.items())
        return "{" + items + "\n" + "  " * depth + "}"
    if isinstance(value, list | tuple) and value:
        inner = "\n" + "  " * (depth + 1)
        return "[" + ",".join(inner + _indented(v, depth + 1) for v in value) + "\n" + "  " * depth + "]"
    return _encode_value(value)


# --- JSON written by Postgres --------------------------------------------------------------

# On Postgres the JSON export's attempts are written by the database, each attempt's text but
# its task's question and expected answer (Python's: the workload says what the expected answer
# is), and Python only puts the pieces together. Reading each field into a Python value and
# encoding it again cost the worker about as much CPU as the whole query cost Postgres.
#
# Each piece is what json.dumps writes for the value Python would have read, except that
# Postgres leaves non-ASCII characters and DEL unescaped (``_ascii_json``): integers and
# flags as their text, texts as to_json's literals (json.dumps' escapes), and floats as
# Python's repr (``_SQL_FLOAT``), which Postgres' shortest float text gives when
# extra_float_digits is positive (its default), but for a ".0" on integral values and the
# exponent from 1e15 to 1e16, which Python writes in full.
_SQL_FLOAT = (
    "CASE WHEN {f} IS NULL THEN 'null' "
    "WHEN NOT abs({f}) < 1e15 THEN CASE WHEN abs({f}) < 1e16 "
    "  THEN ({f})::text::numeric::text || CASE WHEN {f} = trunc({f}) THEN '.0' ELSE '' END "
    "  ELSE ({f})::text END "  # NaN, Infinity and -Infinity are written as json.dumps writes them
    "WHEN {f} = trunc({f}) THEN ({f})::text || '.0' "
    "ELSE ({f})::text END"
)
_SQL_TEXT = "COALESCE(to_json({f})::text, 'null')"
_SQL_SCALAR = "COALESCE(({f})::text, 'null')"  # integers, and flags ('true', 'false')
_SQL_FIELDS = {  # ATTEMPT_FIELDS, each written as its JSON literal
    "task_id": _SQL_TEXT.format(f="t.external_id"),
    "arm_label": _SQL_TEXT.format(f="a.label"),
    "repetition": _SQL_SCALAR.format(f="x.repetition"),
    "status": _SQL_TEXT.format(f="x.status"),
    "outcome": _SQL_TEXT.format(f="NULLIF(x.outcome, '')"),
    "resolved": _SQL_SCALAR.format(f="x.resolved"),
    "patch_present": _SQL_SCALAR.format(f="x.patch_present"),
    "patch_well_formed": _SQL_SCALAR.format(f="x.patch_well_formed"),
    "patch_applied": _SQL_SCALAR.format(f="x.patch_applied"),
    "fail_to_pass_fraction": _SQL_FLOAT.format(f="x.fail_to_pass_fraction"),
    "pass_to_pass_regressions": _SQL_SCALAR.format(f="x.pass_to_pass_regressions"),
    "lines_changed": _SQL_SCALAR.format(f="x.lines_changed"),
    "files_changed": _SQL_SCALAR.format(f="x.files_changed"),
    "lint_clean": _SQL_SCALAR.format(f="x.lint_clean"),
    "build_ok": _SQL_SCALAR.format(f="x.build_ok"),
    "latency_ms": _SQL_SCALAR.format(f="x.latency_ms"),
    "first_token_ms": _SQL_SCALAR.format(f="x.first_token_ms"),
    "output_tokens_per_s": _SQL_FLOAT.format(f="x.output_tokens_per_s"),
    "wall_ms": _SQL_SCALAR.format(f="x.wall_ms"),
    "cost_usd": _SQL_FLOAT.format(f="x.cost_usd::float8"),
    "cached": _SQL_SCALAR.format(f="x.response_cached"),
    "error_category": _SQL_TEXT.format(f="NULLIF(x.error_category, '')"),
    "turns": _SQL_SCALAR.format(f="x.turns"),
    "tool_calls": _SQL_SCALAR.format(f="x.tool_calls"),
    "repeat_calls": _SQL_SCALAR.format(f="x.repeat_calls"),
    "score": _SQL_FLOAT.format(f="x.score"),
}
# The attempt's text up to its question: "{", then each field's key and literal, a line each.
_SQL_HEAD = (
    "'{' || "
    + " || ".join(
        f"E'{',' if i else ''}\\n      \"{name}\": ' || {sql}" for i, (name, sql) in enumerate(_SQL_FIELDS.items())
    )
    + " || E',\\n      \"question\": '"
)
# One message as _indented writes it, its role and content as jsonb writes the strings.
_SQL_MESSAGE = (
    "E'\\n        {{\\n          \"role\": ' || {role}"
    " || E',\\n          \"content\": ' || {content} || E'\\n        }}'"
)
_SQL_SYSTEM = _SQL_MESSAGE.format(role="'\"system\"'", content="r.system::text")
_SQL_MESSAGES_AGG = (
    "string_agg("
    + _SQL_MESSAGE.format(role="(e.v -> 'role')::text", content="(e.v -> 'content')::text")
    + ", ',' ORDER BY e.i)"
)
# The messages sent, as _indented(sent_messages(...)) writes them, when every message that is an
# object has a text role and content (as every provider's request keeps them; sent_messages
# skips the rest); otherwise NULL, and the raw messages and system prompt are read for Python.
_SQL_MESSAGES = f"""
SELECT CASE WHEN a.provider = '{REPLAY}' THEN '[]'
  WHEN NOT bool_and(COALESCE(jsonb_typeof(e.v -> 'role') = 'string'
                             AND jsonb_typeof(e.v -> 'content') = 'string', false)) THEN NULL
  WHEN jsonb_typeof(r.system) = 'string' AND r.system <> '""'
    THEN '[' || {_SQL_SYSTEM} || COALESCE(',' || {_SQL_MESSAGES_AGG}, '') || E'\\n      ]'
  WHEN count(*) = 0 THEN '[]'
  ELSE '[' || {_SQL_MESSAGES_AGG} || E'\\n      ]'
  END AS block
FROM jsonb_array_elements(CASE WHEN jsonb_typeof(r.messages) = 'array' THEN r.messages ELSE '[]' END)
     WITH ORDINALITY AS e(v, i)
WHERE jsonb_typeof(e.v) = 'object'
"""
# The request's messages and system prompt are read once a row (OFFSET 0 keeps the subquery
# from being folded into each use, each of which would decompress the request again).
_SQL_ATTEMPTS = f"""
SELECT {_SQL_HEAD} AS head,
       x.task_id,
       E',\\n      "extracted_answer": ' || to_json(x.extracted_answer)::text
         || E',\\n      "expected_answer": ' AS mid,
       E',\\n      "output": ' || to_json(x.output)::text || E',\\n      "messages": ' AS output,
       m.block,
       CASE WHEN m.block IS NULL THEN r.messages::text END AS messages,
       CASE WHEN m.block IS NULL THEN r.system::text END AS system,
       (SELECT g.content FROM {{artifact}} g WHERE g.attempt_id = x.id AND g.kind = '{ArtifactKind.ANSWER}' LIMIT 1),
       (SELECT j.content FROM {{artifact}} j WHERE j.attempt_id = x.id AND j.kind = '{ArtifactKind.TRAJECTORY}' LIMIT 1)
FROM {{attempt}} x
JOIN {{task}} t ON t.id = x.task_id
JOIN {{arm}} a ON a.id = x.arm_id
CROSS JOIN LATERAL (SELECT x.request -> 'messages' AS messages, x.request -> 'system' AS system OFFSET 0) r
CROSS JOIN LATERAL ({_SQL_MESSAGES}) m
WHERE x.run_id = {{run}}
ORDER BY x.sequence
"""


def _writes_json(run: Run) -> bool:
    """Whether the database writes the JSON export's attempts: Postgres, with the shortest
    float text that round-trips (extra_float_digits > 0), which Python's repr also writes."""
    connection = connections[run.attempts.db]
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('extra_float_digits')::int")
        (digits,) = cursor.fetchone()
    return digits > 0


def _written_json_attempts(run: Run, progress: RowsRead, literals: TaskLiterals) -> Iterator[str]:
    """The attempts as ``_json_attempts`` writes them, a chunk of them at a time, from
    ``_SQL_ATTEMPTS`` read through a server-side cursor. Each chunk's tasks are read here,
    between fetches, and its attempts put together in ``_encoded_ahead``'s helper thread."""
    connection = connections[run.attempts.db]
    sql = _SQL_ATTEMPTS.replace("{run}", str(int(run.pk)))  # not format(): the SQL writes braces
    for name, model in (("attempt", Attempt), ("task", TaskInstance), ("arm", RunArm), ("artifact", Artifact)):
        sql = sql.replace(f"{{{name}}}", connection.ops.quote_name(model._meta.db_table))
    tasks = TaskTexts(run)

    def batches(cursor: Any) -> Iterator[list[tuple]]:
        while batch := cursor.fetchmany(TRANSCRIPT_CHUNK_ROWS):
            progress(len(batch))
            tasks.load({row[1] for row in batch})
            yield [(row, tasks.question(row[1]), tasks.expected(row[1])) for row in batch]

    with connection.chunked_cursor() as cursor:
        cursor.execute(sql)
        yield from _encoded_ahead(batches(cursor), functools.partial(_written_json_items, literals=literals))


def _written_json_items(batch: list[tuple], literals: TaskLiterals) -> str:
    return ",\n    ".join(
        [_written_json_attempt(row, question, expected, literals) for row, question, expected in batch]
    )


def _written_json_attempt(row: tuple, question: str, expected: str, literals: TaskLiterals) -> str:
    head, _, mid, output, messages, raw_messages, raw_system, answer, trajectory = row
    if messages is None:
        system = json.loads(raw_system) if raw_system is not None else None
        sent = sent_messages(system, json.loads(raw_messages) if raw_messages is not None else None, "")
        messages = _indented([message.as_dict() for message in sent], ATTEMPT_DEPTH)
    item = "".join(
        (
            head,
            literals.of(question),
            mid,
            literals.of(expected),
            output,
            messages,
            ',\n      "grading": ',
            _indented(grading_fields(answer), ATTEMPT_DEPTH),
            ',\n      "trajectory": ',
            _indented(trajectory_fields(trajectory or None), ATTEMPT_DEPTH),
            "\n    }",
        )
    )
    return item if item.isascii() and "\x7f" not in item else _ascii_json(item)


def _ascii_json(text: str) -> str:
    """JSON text with its non-ASCII characters and DEL escaped as json.dumps escapes them
    (ensure_ascii): they can only stand inside its strings, where Postgres leaves them as they are."""
    return text.encode("ascii", errors=_JSON_ESCAPES).decode("ascii").replace("\x7f", "\\u007f")


def _json_escapes(error: UnicodeError) -> tuple[str, int]:
    assert isinstance(error, UnicodeEncodeError)
    escaped = _encode_value(error.object[error.start : error.end])  # json.dumps' \\uXXXX, surrogate pairs
    return escaped[1:-1], error.end


_JSON_ESCAPES = "prbench-json-escapes"
codecs.register_error(_JSON_ESCAPES, _json_escapes)

# --- CSV -------------------------------------------------------------------------------------


def csv_chunks(run: Run, progress: RowsRead = _untold) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ATTEMPT_COLUMNS)
    yield _drain(buffer)
    for batch in _attempt_batches(run, progress=progress):
        writer.writerows(map(_spreadsheet_safe_row, batch))
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


def _spreadsheet_safe_row(row: tuple) -> tuple:
    # The task id and the arm label lead the row, and the question and the answers end it: the
    # cells someone (or a model) wrote. The rest are numbers, flags and the platform's own
    # words, and checking all the cells took about a third of the time Python spends on a row.
    task_id, arm_label, *rest, question, extracted, expected = row
    return (
        spreadsheet_safe(task_id),
        spreadsheet_safe(arm_label),
        *rest,
        spreadsheet_safe(cut_cell(question)),
        spreadsheet_safe(cut_cell(extracted)),
        spreadsheet_safe(cut_cell(expected)),
    )


def cut_cell(text: str | None) -> str | None:
    """A text cell of at most ``CSV_CELL_MAX`` characters: a longer one keeps its start and
    ends with a marker that says how long it was."""
    if text is None or len(text) <= CSV_CELL_MAX:
        return text
    marker = f" […cut: {len(text):,} characters in all]"
    return text[: CSV_CELL_MAX - len(marker)] + marker


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (a task id or label can be anything a
    customer imported) gets a leading apostrophe, as OWASP advises; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


# --- Parquet (notebooks) ---------------------------------------------------------------------

# The JSON export's attempt columns with their types, for a notebook: pandas reads nullable
# flags, counts and ratios without guessing from text. Task ids, labels and answers are kept as
# typed, whole, with no spreadsheet apostrophe: a Parquet file is not opened by a spreadsheet.
# The messages are a list of (role, content); the grading the answer artifact's JSON text, and
# the trajectory the TRAJECTORY artifact's.
ATTEMPT_ARROW_TYPES: dict[str, pa.DataType] = {
    "task_id": pa.string(),
    "arm_label": pa.string(),
    "repetition": pa.int64(),
    "status": pa.string(),
    "outcome": pa.string(),
    "resolved": pa.bool_(),
    "patch_present": pa.bool_(),
    "patch_well_formed": pa.bool_(),
    "patch_applied": pa.bool_(),
    "fail_to_pass_fraction": pa.float64(),
    "pass_to_pass_regressions": pa.int64(),
    "lines_changed": pa.int64(),
    "files_changed": pa.int64(),
    "lint_clean": pa.bool_(),
    "build_ok": pa.bool_(),
    "latency_ms": pa.int64(),
    "first_token_ms": pa.int64(),
    "output_tokens_per_s": pa.float64(),
    "wall_ms": pa.int64(),
    "cost_usd": pa.float64(),
    "cached": pa.bool_(),
    "error_category": pa.string(),
    "turns": pa.int64(),
    "tool_calls": pa.int64(),
    "repeat_calls": pa.int64(),
    "score": pa.float64(),
    "question": pa.string(),
    "extracted_answer": pa.string(),
    "expected_answer": pa.string(),
    "output": pa.string(),
    "messages": pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
    "grading": pa.string(),
    "trajectory": pa.string(),  # the TRAJECTORY artifact's JSON text
}
ATTEMPT_ARROW_SCHEMA = pa.schema(list(ATTEMPT_ARROW_TYPES.items()))
# A Parquet row group (what readers skip and decompress at a time) holds up to this many rows,
# and fewer when their transcripts pass ROW_GROUP_BYTES: only one group is ever held.
ROW_GROUP_ROWS = 50_000
ROW_GROUP_BYTES = 16 * 1024 * 1024


def parquet_chunks(run: Run, progress: RowsRead = _untold) -> Iterator[bytes]:
    """The attempts as a Parquet file, written a row group at a time as the rows are read, and
    handed out as written: only one row group's columns are ever held."""
    sink = _TellingSink()
    with pq.ParquetWriter(sink, ATTEMPT_ARROW_SCHEMA, compression="zstd") as writer:
        group: list[pa.RecordBatch] = []
        rows = size = 0
        for batch in _attempt_batches(run, transcripts=True, progress=progress):
            group.append(record := _record_batch(batch))
            rows, size = rows + record.num_rows, size + record.nbytes
            if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                writer.write_table(pa.Table.from_batches(group, ATTEMPT_ARROW_SCHEMA))
                group.clear()
                rows = size = 0
                yield sink.drain()
        if group:
            writer.write_table(pa.Table.from_batches(group, ATTEMPT_ARROW_SCHEMA))
    yield sink.drain()


def _record_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = zip(*rows, strict=True)
    arrays = [pa.array(column, type=kind) for column, kind in zip(columns, ATTEMPT_ARROW_TYPES.values(), strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=ATTEMPT_ARROW_SCHEMA)


# --- SWE-bench -------------------------------------------------------------------------------


def each_model_lines(
    run: Run, models: list[HarnessModel], progress: RowsRead = _untold
) -> Iterator[tuple[HarnessModel, Iterator[str]]]:
    """Each model's predictions file (JSONL), a chunk of lines at a time."""
    for model, predictions in each_model_predictions(run, models, chunk_size=CHUNK_ROWS):
        yield model, (_prediction_lines(batch, progress) for batch in _batches(predictions))


def _prediction_lines(batch: list[dict], progress: RowsRead) -> str:
    progress(len(batch))
    return "".join(json.dumps(p) + "\n" for p in batch)


def swebench_predictions_zip(run: Run, progress: RowsRead = _untold) -> Iterator[bytes]:
    """Every model's predictions file in one zip, ``<arm>[@rep<N>].jsonl`` each."""
    models = run_models(run)
    files = ((f"{model.file_stem}.jsonl", lines) for model, lines in each_model_lines(run, models, progress))
    return zip_chunks(files, run.created_at)


def zip_chunks(files: Iterable[tuple[str, Iterable[str]]], modified: datetime) -> Iterator[bytes]:
    """A zip of text files, written as their chunks come: stdlib zipfile on a sink that cannot
    seek, so each member gets a data descriptor instead of a rewritten header and nothing but
    the compressor's window and one chunk is ever held. Zip64 always, since a file of a large
    run can pass 4 GiB; every member dated ``modified`` so the same run zips to the same bytes."""
    sink = _Sink()
    stamp = modified.astimezone(UTC).timetuple()[:6]
    with zipfile.ZipFile(sink, "w") as archive:
        for name, chunks in files:
            member = zipfile.ZipInfo(name, date_time=stamp)
            member.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(member, "w", force_zip64=True) as out:
                for chunk in chunks:
                    out.write(chunk.encode())
                    if written := sink.drain():
                        yield written
            yield sink.drain()
    yield sink.drain()


class _Sink(io.RawIOBase):
    """Where zipfile writes: kept only until the next drain. Not seekable, so zipfile streams."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def drain(self) -> bytes:
        written = b"".join(self.parts)
        self.parts.clear()
        return written


class _TellingSink(_Sink):
    """A sink that says how much was written to it, as Parquet's writer asks (zipfile counts
    for itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.position = 0

    def write(self, data: Any) -> int:
        self.position += len(data)
        return super().write(data)

    def tell(self) -> int:
        return self.position


def swebench_report_chunks(
    run: Run, models: list[HarnessModel] | None = None, progress: RowsRead = _untold
) -> Iterator[str]:
    """Each model's harness report keyed by its name, the document ``json.dumps(indent=4)``
    gives (the harness writes its reports with indent 4), one model's report at a time."""
    check_report_available(run)  # before the first chunk: refused, not half-written
    yield "{"
    written = False
    for model, report in each_model_report(run, models):
        indented = json.dumps(report, indent=4).replace("\n", "\n    ")
        yield ("," if written else "") + f"\n    {json.dumps(model.name)}: {indented}"
        written = True
    yield "\n}\n" if written else "}\n"


@dataclass(frozen=True)
class Export:
    """A download as the run page and `export_run` hand it out."""

    content_type: str
    filename: str
    chunks: Iterator[str | bytes]


MODEL_FORMATS = ("swebench-preds", "swebench-report")


def prepare_export(
    run: Run, format: str, label: str | None = None, repetition: int | None = None, progress: RowsRead = _untold
) -> Export:
    """The whole run in ``format``, or the file of the one arm (and repetition) named.
    ExportRefused, before anything is written, when it cannot be made as asked. ``progress``
    is told how many rows each chunk read (a report is told nothing: it reads no rows)."""
    if format in MODEL_FORMATS:
        check_patch_run(run)
    if label is None and repetition is None:
        whole = EXPORT_FORMATS[format]
        return Export(whole.content_type, whole.filename(run), export_chunks(run, format, progress))
    if format not in MODEL_FORMATS:
        raise ExportRefused(f"only {' and '.join(MODEL_FORMATS)} export one arm at a time, not {format}")
    [model] = select_models(run, label, repetition)
    stem = f"prbench-run-{run.code}-{format}-{model.file_stem}"
    if format == "swebench-preds":
        # next(), not unpacking: the lines are read from the query as they are written.
        _, lines = next(each_model_lines(run, [model], progress))
        return Export("application/x-ndjson", f"{stem}.jsonl", lines)
    # Exactly the harness's report of one model, as it writes one: indented by 4.
    [(_, report)] = each_model_report(run, [model])
    return Export("application/json", f"{stem}.json", iter([json.dumps(report, indent=4) + "\n"]))


# --- HTML report -----------------------------------------------------------------------------


def html_report_chunks(run: Run, progress: RowsRead = _untold) -> Iterator[str]:
    # One chunk: the report holds aggregates from the run's summaries, small whatever its size.
    yield board_views().html_report(run)


EXPORT_FORMATS = {
    "json": ExportFormat("application/json", ".json", json_chunks),
    "csv": ExportFormat("text/csv; charset=utf-8", ".csv", csv_chunks),
    "swebench-preds": ExportFormat("application/zip", "-swebench-preds.zip", swebench_predictions_zip),
    "swebench-report": ExportFormat("application/json", "-swebench-report.json", swebench_report_chunks),
    "html": ExportFormat("text/html; charset=utf-8", ".html", html_report_chunks),
}
