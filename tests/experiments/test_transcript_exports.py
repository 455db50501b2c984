"""Each attempt's transcript in the run's exports (issue 24): the JSON export and attempts.parquet
carry what the API's attempt carries (messages, raw answer, extracted and expected answer,
grading), the CSV the question, the extracted and expected answer and the score, formula-safe
and cut with a marker; the task's texts are read per chunk, never per attempt."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from datasets.models import Dataset
from experiments import exports
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.exports import ATTEMPT_COLUMNS, CSV_CELL_MAX, TRANSCRIPT_COLUMNS, csv_chunks, json_chunks
from experiments.models import Attempt
from tests.conftest import api_client, make_api_key, work_queue
from tests.factories import ArmPlan, build_run, import_file
from tests.samples import JEOPARDY, MMLU

ORACLE = ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})
WRONG = ArmSpec("wrong", "mock", "mock-wrong", {"mode": "wrong"})
TRANSCRIPT = ("messages", "output", "extracted_answer", "expected_answer", "grading")


def finished_run(org, alice, start, dataset, **spec):
    experiment = do_save_experiment(
        org, ExperimentSpec(name="t", dataset=dataset, arms=[ORACLE, WRONG], sample_size=2, **spec), alice
    )
    run = start(experiment)
    work_queue()
    return run


@pytest.fixture
def question_run(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    return finished_run(org, alice, start, Dataset.objects.get(name="mmlu"))


def api_attempts(org, run) -> list[dict]:
    client = api_client(make_api_key(org, ["read"]))
    attempts = run.attempts.order_by("sequence").select_related("task")
    return [client.get(f"/api/attempts/{attempt.code}").json() | {"_task": attempt.task} for attempt in attempts]


def parquet_of(org, run):
    response = api_client(make_api_key(org, ["read"])).get(f"/api/runs/{run.code}/attempts.parquet")
    assert response.status_code == 200
    return pd.read_parquet(io.BytesIO(b"".join(response.streaming_content)))


def test_the_json_export_and_parquet_carry_each_attempts_transcript_as_the_api_does(org, question_run):
    text = "".join(json_chunks(question_run))
    document = json.loads(text)
    # Laid out as json.dumps(indent=2) lays it out, nested messages and grading included.
    assert text == json.dumps(document, indent=2) + "\n"
    exported = document["attempts"]
    frame = parquet_of(org, question_run)
    assert list(frame.columns) == TRANSCRIPT_COLUMNS
    expected = api_attempts(org, question_run)
    assert len(exported) == len(frame) == len(expected) == 4
    for row, (_, parquet), api in zip(exported, frame.iterrows(), expected, strict=True):
        assert row["messages"] and row["messages"][0]["role"] == "user"
        for field in TRANSCRIPT:
            assert row[field] == api[field], field
        assert row["question"] == api["_task"].problem_statement
        assert row["score"] == api["score"] in (0.0, 1.0)
        assert [dict(message) for message in parquet["messages"]] == api["messages"]
        assert json.loads(parquet["grading"]) == api["grading"]
        for field in ("output", "extracted_answer", "expected_answer", "question"):
            assert parquet[field] == row[field], field
    assert {row["extracted_answer"] for row in exported} <= set("ABCD")


@pytest.mark.parametrize("kind", ["qa_exact", "code_exec", "pr_patch"])
def test_every_kinds_exports_carry_its_transcript(org, alice, start, kind, request):
    if kind == "qa_exact":
        import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
        run = finished_run(org, alice, start, Dataset.objects.get(name="jeopardy"))
    elif kind == "code_exec":
        run = finished_run(org, alice, start, request.getfixturevalue("humaneval"))
    else:
        run = finished_run(org, alice, start, request.getfixturevalue("dataset"))
    exported = json.loads("".join(json_chunks(run)))["attempts"]
    csv_rows = list(csv.DictReader(io.StringIO("".join(csv_chunks(run)))))
    frame = parquet_of(org, run)
    rows = zip(exported, csv_rows, frame.iterrows(), api_attempts(org, run), strict=True)
    for row, csv_row, (_, parquet), api in rows:
        stored = Attempt.objects.get(code=api["id"]).request["messages"]
        assert row["messages"] == api["messages"] == stored and "{{" not in stored[0]["content"]
        for field in TRANSCRIPT:
            assert row[field] == api[field], field
        assert row["expected_answer"], "every kind says what it expected"
        assert parquet["extracted_answer"] == row["extracted_answer"]
        assert csv_row["expected_answer"] == exports.spreadsheet_safe(exports.cut_cell(row["expected_answer"]))
        assert csv_row["question"] == exports.spreadsheet_safe(exports.cut_cell(row["question"]))
        if kind == "pr_patch":
            assert row["grading"] is None  # its validation says how it was graded (patch_* columns)
        else:
            assert row["grading"] and parquet["grading"]


def test_the_csv_has_the_question_the_answers_and_the_score_formula_safe_and_cut(question_run):
    first, second = question_run.attempts.order_by("sequence").select_related("task")[:2]
    first.task.problem_statement = '=HYPERLINK("http://evil.example")'
    first.task.save(update_fields=["problem_statement"])
    Attempt.objects.filter(pk=first.pk).update(extracted_answer="+cmd|' /C calc'!A0")
    long_answer = "x" * (CSV_CELL_MAX + 500)
    Attempt.objects.filter(pk=second.pk).update(extracted_answer=long_answer)
    rows = list(csv.DictReader(io.StringIO("".join(csv_chunks(question_run)))))
    assert list(rows[0]) == ATTEMPT_COLUMNS
    assert ATTEMPT_COLUMNS[-4:] == ["score", "question", "extracted_answer", "expected_answer"]
    assert rows[0]["question"] == '\'=HYPERLINK("http://evil.example")'
    assert rows[0]["extracted_answer"] == "'+cmd|' /C calc'!A0"
    cut = rows[1]["extracted_answer"]
    assert len(cut) == CSV_CELL_MAX and cut.endswith(f" […cut: {CSV_CELL_MAX + 500:,} characters in all]")
    assert cut.startswith("x" * 1000)
    letter = second.task.payload["answer"]
    assert rows[1]["expected_answer"] == f"{letter}. {second.task.payload['choices']['ABCD'.index(letter)]}"
    assert {row["score"] for row in rows} <= {"0.0", "1.0"}
    # The JSON export keeps it whole.
    whole = json.loads("".join(json_chunks(question_run)))["attempts"][1]["extracted_answer"]
    assert whole == long_answer


def export_queries(run, format: str) -> list[str]:
    chunks = {"csv": csv_chunks, "json": json_chunks, "parquet": exports.parquet_chunks}[format]
    with CaptureQueriesContext(connection) as captured:
        for _ in chunks(run):
            pass
    return [query["sql"] for query in captured.captured_queries]


@pytest.mark.parametrize("format", ["csv", "json", "parquet"])
def test_an_exports_queries_do_not_grow_with_the_run(experiment, dataset, monkeypatch, format):
    """Each task's question and expected answer are read once per chunk that first needs them,
    not once per attempt: more attempts of the same tasks make no more queries."""
    monkeypatch.setattr(exports, "CHUNK_ROWS", 5)  # many chunks, even in a small run
    run, _ = build_run(experiment, dataset, [ArmPlan("a", 0.5, 100), ArmPlan("b", 0.5, 100)])
    export_queries(run, format)  # the summaries are brought up to date on the first export
    small = export_queries(run, format)
    task_reads = [sql for sql in small if 'FROM "experiments_taskinstance"' in sql]
    assert 0 < len(task_reads) <= dataset.tasks.count() / 5 + 2
    # Four more repetitions of every task, after the first: five times the attempts.
    Attempt.objects.bulk_create(
        repeated(attempt, repetition) for attempt in run.attempts.order_by("sequence") for repetition in range(1, 5)
    )
    assert run.attempts.count() == 5 * dataset.tasks.count() * 2
    export_queries(run, format)
    assert len(export_queries(run, format)) == len(small)


def repeated(attempt: Attempt, repetition: int) -> Attempt:
    """A copy of the attempt as another repetition of its task, after all of the run's attempts."""
    copied = (f.attname for f in Attempt._meta.concrete_fields if f.name not in ("id", "code"))
    fields = {name: getattr(attempt, name) for name in copied}
    return Attempt(**fields | {"repetition": repetition, "sequence": attempt.sequence + 1000 * repetition})


# Requests as providers store them, and some no provider does: the JSON export writes each the
# way json.dumps(indent=2) does, whether it reads the messages' JSON text (plain ASCII) or has
# to decode them (non-ASCII, DEL, a role that is not text, no list).
ODD_TEXT = 'quote " backslash \\ tab\t nl\n ctrl \x01\x1f </script> / ~'
REQUESTS = [
    {"system": "Be terse.", "messages": [{"role": "user", "content": ODD_TEXT, "name": "extra key"}]},
    {"messages": [{"role": "user", "content": "café ☃ 😀 del \x7f"}, {"role": "assistant", "content": "ok"}]},
    {"system": "", "messages": [{"role": 7, "content": "a role that is a number"}, "not an object"]},
    {"system": ["not text"], "messages": "not a list"},
    {"messages": []},
    {},
]


def test_the_json_export_is_json_dumps_indent_2_whatever_the_messages(experiment, alice):
    run = do_start_run(experiment, alice)
    for attempt, request in zip(run.attempts.order_by("sequence"), REQUESTS, strict=False):
        Attempt.objects.filter(pk=attempt.pk).update(request=request)
    text = "".join(json_chunks(run))
    document = json.loads(text)
    assert text == json.dumps(document, indent=2) + "\n"
    messages = [attempt["messages"] for attempt in document["attempts"][: len(REQUESTS)]]
    assert messages == [
        [{"role": "system", "content": "Be terse."}, {"role": "user", "content": ODD_TEXT}],
        [{"role": "user", "content": "café ☃ 😀 del \x7f"}, {"role": "assistant", "content": "ok"}],
        [{"role": "7", "content": "a role that is a number"}],
        [],
        [],
        [],
    ]
