"""The pipeline's bulk writes store values exactly as the ORM would."""

from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone

from experiments.bulk import _document_json, insert_rows, update_by_pk
from experiments.models import Artifact, Attempt, AttemptStatus


def test_inserted_rows_get_the_model_defaults(experiment):
    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.order_by("sequence").first()
    assert attempt.status == AttemptStatus.QUEUED and attempt.claims == 0 and attempt.retries == 0
    assert attempt.request == {} and attempt.retry_log == [] and attempt.output == ""
    assert attempt.code and attempt.started_at is None and attempt.cost_usd is None
    assert run.attempts.values("code").distinct().count() == run.total_attempts  # a default per row, not one shared


def test_updated_rows_round_trip_json_decimals_and_times(experiment):
    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    first, second = run.attempts.order_by("sequence")[:2]
    now = timezone.now()
    values = {
        "status": AttemptStatus.COMPLETED,
        "request": {"messages": [{"role": "user", "content": 'quote " and \\ and ünïcode'}]},
        "cost_usd": Decimal("0.00012345"),
        "responded_at": now,
        "resolved": True,
    }
    update_by_pk(Attempt, {first.pk: values, second.pk: {**values, "resolved": False, "cost_usd": None}})
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.request == values["request"] and first.cost_usd == Decimal("0.00012345")
    assert first.responded_at == now and first.resolved is True and first.status == AttemptStatus.COMPLETED
    assert second.resolved is False and second.cost_usd is None
    insert_rows(Artifact, [{"attempt_id": first.pk, "kind": "patch", "content": "diff", "created_at": now}])
    artifact = Artifact.objects.get(attempt=first)
    assert artifact.content == "diff" and artifact.status == "" and artifact.duration_ms is None


def test_rows_that_set_different_fields_each_get_their_own(experiment):
    """A batch mixes a single-turn answer with an agent's, which also sets its turns: the
    agent's turns are written even when the single-turn row comes first."""
    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    single, agent = run.attempts.order_by("sequence")[:2]
    update_by_pk(Attempt, {single.pk: {"resolved": True}, agent.pk: {"resolved": False, "turns": 4, "tool_calls": 6}})
    single.refresh_from_db()
    agent.refresh_from_db()
    assert (single.resolved, single.turns) == (True, None)
    assert (agent.resolved, agent.turns, agent.tool_calls) == (False, 4, 6)


def test_a_value_too_long_for_its_column_is_refused_not_cut(experiment):
    """The chunk's one UPDATE casts each value to its column's type: a cast to varchar(64)
    would cut a longer value silently, where the row must be refused, as the ORM refuses it
    (the pipeline then records that attempt as the platform's failure)."""
    import pytest
    from django.db import DataError, connection, transaction

    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.order_by("sequence").first()
    if connection.vendor != "postgresql":
        pytest.skip("SQLite does not enforce a column's length")
    with pytest.raises(DataError), transaction.atomic():
        update_by_pk(Attempt, {attempt.pk: {"finish_reason": "x" * 65}})
    attempt.refresh_from_db()
    assert attempt.finish_reason == ""


def test_one_chunk_sets_many_rows_each_its_own_values(experiment):
    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempts = list(run.attempts.order_by("sequence"))
    update_by_pk(
        Attempt, {a.pk: {"output": f"answer {a.pk}", "latency_ms": a.pk, "warnings": [a.pk]} for a in attempts}
    )
    for pk, output, latency, warnings in run.attempts.values_list("pk", "output", "latency_ms", "warnings"):
        assert (output, latency, warnings) == (f"answer {pk}", pk, [pk])


def test_values_of_another_type_than_their_plain_field_still_go_through_the_field(experiment):
    # Plain values are bound as they are (bulk._PLAIN); any other goes through the field's
    # own preparation, as the ORM would: a bool for an integer column, a float for an
    # integer, a string of digits for a float, a lazy string for a text column.
    from django.utils.functional import lazy

    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.order_by("sequence").first()
    lazy_text = lazy(lambda: "a lazy answer", str)()
    update_by_pk(
        Attempt,
        {attempt.pk: {"retries": True, "latency_ms": 12.0, "output_tokens_per_s": "3.5", "output": lazy_text}},
    )
    stored = Attempt.objects.values("retries", "latency_ms", "output_tokens_per_s", "output").get(pk=attempt.pk)
    assert stored == {"retries": 1, "latency_ms": 12, "output_tokens_per_s": 3.5, "output": "a lazy answer"}


def _request_record_as_asdict_made_it(request):
    """The record as it was built before issue 31 (asdict, then the messages rebuilt)."""
    from dataclasses import asdict

    from experiments.trajectory import message_record

    record = asdict(request)
    record.pop("recorded_answer")
    record["messages"] = [message_record(message) for message in request.messages]
    for name, empty in (("tools", []), ("agent_task", None), ("idempotency_key", "")):
        if record.get(name) == empty:
            record.pop(name)
    return record


def test_a_requests_record_is_key_for_key_what_asdict_made():
    """Guard of the field-by-field record (it cannot fail on the old code, which was asdict):
    every field, nested tools and agent tasks, empty and set, in the same order."""
    from experiments.pipeline import request_record
    from providers.types import AgentTask, CompletionRequest, Message, Tool, ToolCall, ToolResult

    turn = Message("assistant", "", tool_calls=(ToolCall("c1", "run", {"cmd": ["ls"]}),))
    answer = Message("user", "", tool_results=(ToolResult("c1", "a.py", False),))
    requests = [
        CompletionRequest(messages=(Message("user", "hi"),)),
        CompletionRequest(
            messages=(Message("user", "fix it"), turn, answer),
            system="be brief",
            max_output_tokens=100,
            temperature=0.2,
            top_p=0.9,
            stop=("\n\n",),
            seed_key="k",
            response_schema={"type": "object", "properties": {"a": {"type": "string"}}},
            response_schema_name="pick",
            recorded_answer="replayed",
            tools=(Tool("run", "runs a command", {"type": "object", "properties": {"cmd": {"type": "array"}}}),),
            agent_task=AgentTask("t1", "fix", repo="o/r", files={"a.py": "x"}, test_command=("pytest",)),
            idempotency_key="idem",
        ),
    ]
    for request in requests:
        made, expected = request_record(request), _request_record_as_asdict_made_it(request)
        assert made == expected and list(made) == list(expected)
        assert made["response_schema"] is not request.response_schema or request.response_schema is None
    assert request_record(None) == {}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="lz4 compression is Postgres'")
def test_a_recorded_prompt_is_compressed_with_lz4(experiment):
    """The record compresses the request (a prompt past the TOAST threshold) with lz4, which
    costs Postgres half what pglz did (migration 0053)."""

    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.order_by("sequence").first()
    prompt = " ".join(f"line {number} of a long prompt" for number in range(400))  # about 10 kB
    update_by_pk(Attempt, {attempt.pk: {"request": {"messages": [{"role": "user", "content": prompt}]}}})
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(request) FROM experiments_attempt WHERE id = %s", [attempt.pk])
        assert cursor.fetchone() == ("lz4",)
    attempt.refresh_from_db()
    assert attempt.request["messages"][0]["content"] == prompt


@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.parametrize(
    "encoder, big",
    [
        ("orjson", 2**63 - 1),
        # Past 64 bits orjson refuses the document, and json.dumps writes it, as it did before.
        ("json.dumps", 10**20),
    ],
)
def test_a_chunk_written_as_one_document_stores_what_the_orm_stores(experiment, encoder, big):
    """Guard (issue 31): Postgres gets a chunk's values as one JSON document, read into each
    column by its type. Every column holds, to the text, what the ORM's own update writes:
    non-ASCII and escapes, JSON with big and tiny numbers and nulls, a decimal with more
    places than its column, floats that are not finite or not short, an aware time in
    another zone, a bool for an integer; whichever encoder wrote the document."""
    import datetime
    from zoneinfo import ZoneInfo

    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    bulk, orm = run.attempts.order_by("sequence")[:2]
    values = {
        "output": 'ünïcode " \\ \n\t 😀 \u202e',
        "request": {"messages": [{"role": "user", "content": 'q " ü 😀'}], "n": 1.5, "big": big, "tiny": 1e-300},
        "raw_response": "a JSON string",
        "retry_log": [None, True, -0.0, {"wait": 0.1 + 0.2}],
        "warnings": [],
        "cost_usd": Decimal("0.123456789"),
        "output_tokens_per_s": float("inf"),
        "fail_to_pass_fraction": 0.1 + 0.2,
        "score": float("nan"),
        "latency_ms": True,
        "responded_at": datetime.datetime(2026, 11, 29, 8, 1, 2, 345678, tzinfo=ZoneInfo("Europe/Berlin")),
        "resolved": None,
        "cached_from_id": None,
        "error_message": "",
    }
    assert isinstance(_document_json([values["request"]]), bytes if encoder == "orjson" else str)
    update_by_pk(Attempt, {bulk.pk: values})
    Attempt.objects.filter(pk=orm.pk).update(**values)
    columns = ", ".join(f"{Attempt._meta.get_field(name).column}::text" for name in values)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM experiments_attempt WHERE id IN (%s, %s) ORDER BY id", [bulk.pk, orm.pk])
        written, expected = cursor.fetchall()
    assert dict(zip(values, written, strict=True)) == dict(zip(values, expected, strict=True))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-document path is Postgres'")
def test_a_figure_json_cannot_hold_is_recorded_as_null_not_refused(experiment):
    """A NaN inside a JSON value (a provider's body may hold one: Python's json reads it) is
    written as null: json.dumps wrote a token Postgres refuses, failing the attempt's record."""
    from experiments.actions import do_start_run

    run = do_start_run(experiment, inference_only=True)
    attempt = run.attempts.order_by("sequence").first()
    update_by_pk(Attempt, {attempt.pk: {"raw_response": {"score": float("nan"), "top": float("inf")}}})
    attempt.refresh_from_db()
    assert attempt.raw_response == {"score": None, "top": None}
