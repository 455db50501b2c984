"""The JSON export's attempts as Postgres writes them (issue 31): the bytes Python writes from
the same rows, whatever the values (floats at the edges of Python's repr, texts Postgres and
json.dumps escape differently, odd requests, answer and trajectory artifacts, a replay arm), and
Python's own path where Postgres' floats would not be Python's. A guard: the change is speed."""

from __future__ import annotations

import json
from decimal import Decimal
from types import SimpleNamespace

import pytest
from django.db import connection

from experiments import exports
from experiments.exports import json_chunks
from experiments.models import Artifact, ArtifactKind, Attempt, RunArm
from tests.factories import ArmPlan, build_run

FLOATS = [
    0.0,
    -0.0,
    1.0,
    0.5,
    1e-05,
    0.0001,
    67.30879123525678,
    123456789012345.6,
    1e15,
    1234567890123456.8,
    -1e15,
    1e16,
    1.5e16,
    2.0**53,
    5e-324,
    1e100,
    float("nan"),
    float("inf"),
    float("-inf"),
    None,
]
COSTS = [Decimal("0"), Decimal("1"), Decimal("0.00000001"), Decimal("123456.12345678"), Decimal("0.1"), None]
TEXTS = [
    "",
    'quote " backslash \\ tab\t nl\n cr\r ctrl \x01\x1f\x08\x0c </script> / ~',
    "café ☃ 😀 del \x7f and ß",
    "\u2028 line separator, \ufeff BOM",
    "plain",
]
REQUESTS = [
    {"system": "Be terse ✓.", "messages": [{"role": "user", "content": TEXTS[1], "name": "extra key"}]},
    {"messages": [{"role": "user", "content": TEXTS[2]}, {"role": "assistant", "content": "ok"}]},
    {"system": "", "messages": [{"role": 7, "content": "a role that is a number"}, "not an object"]},
    {"system": ["not text"], "messages": "not a list"},
    {"messages": [{"content": "no role"}]},
    {"messages": [None, {"role": "user", "content": "after a null"}]},
    {"messages": []},
    {},
]
ANSWERS = [None, '{"answer": "B", "parsed": {"letter": "B", "score": 1.0}, "note": "é"}', "not JSON ✓", "[1, 2]"]
TRAJECTORIES = [None, '{"steps": [{"tool": "read", "ok": true, "took": 0.25}], "text": "ü"}', "", "not JSON"]


def python_written(run, monkeypatch) -> str:
    with monkeypatch.context() as patched:
        patched.setattr(exports, "_writes_json", lambda run: False)
        return "".join(json_chunks(run))


@pytest.fixture
def odd_run(experiment, dataset, monkeypatch):
    # The document's head is the run's boards, which no float here is meant for: it is left out.
    monkeypatch.setattr(exports, "board_views", lambda: SimpleNamespace(summary=lambda run: {"run": str(run.code)}))
    run, _ = build_run(experiment, dataset, [ArmPlan("a", 0.5, 100), ArmPlan("b ✓", 0.5, 100)], repetitions=2)
    for i, attempt in enumerate(run.attempts.order_by("sequence")):
        Attempt.objects.filter(pk=attempt.pk).update(
            fail_to_pass_fraction=FLOATS[i % len(FLOATS)],
            output_tokens_per_s=FLOATS[(i + 7) % len(FLOATS)],
            score=FLOATS[(i + 13) % len(FLOATS)],
            cost_usd=COSTS[i % len(COSTS)],
            output=TEXTS[i % len(TEXTS)],
            extracted_answer=TEXTS[(i + 2) % len(TEXTS)],
            request=REQUESTS[i % len(REQUESTS)],
            turns=i if i % 3 else None,
            outcome="" if i % 4 == 0 else attempt.outcome,
            error_category="rate_limit" if i % 5 == 0 else "",
        )
        for kind, contents in ((ArtifactKind.ANSWER, ANSWERS), (ArtifactKind.TRAJECTORY, TRAJECTORIES)):
            if (content := contents[i % len(contents)]) is not None:
                Artifact.objects.create(attempt=attempt, kind=kind, content=content)
    return run


def test_postgres_writes_the_attempts_python_writes(odd_run, monkeypatch):
    assert exports._writes_json(odd_run)
    written = "".join(json_chunks(odd_run))
    assert written == python_written(odd_run, monkeypatch)
    document = json.loads(written)
    assert written == json.dumps(document, indent=2) + "\n"
    assert len(document["attempts"]) == odd_run.attempts.count() > len(FLOATS)


def test_a_replay_arms_attempts_were_sent_nothing(odd_run, monkeypatch):
    RunArm.objects.filter(run=odd_run, label="a").update(provider="replay")
    written = "".join(json_chunks(odd_run))
    assert written == python_written(odd_run, monkeypatch)
    replayed = [attempt for attempt in json.loads(written)["attempts"] if attempt["arm_label"] == "a"]
    assert replayed and all(attempt["messages"] == [] for attempt in replayed)


def test_python_writes_them_where_postgres_floats_are_not_pythons(odd_run, monkeypatch):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL extra_float_digits = 0")  # 15 significant digits, not the shortest exact
    assert not exports._writes_json(odd_run)
    written = "".join(json_chunks(odd_run))
    assert written == json.dumps(json.loads(written), indent=2) + "\n"
    # Postgres' own text would not be Python's repr of the float it reads (1234567890123456.8
    # reads as 1234567890123460.0, but Postgres would write 1234567890123460).
    monkeypatch.setattr(exports, "_writes_json", lambda run: True)
    assert "".join(json_chunks(odd_run)) != written
