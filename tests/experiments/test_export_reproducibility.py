"""The same seed gives byte-identical exports: every format of two runs of one experiment with
one seed is the same, byte for byte, once what names the run or comes from this machine's clock
is set aside, and exporting one run twice gives the same bytes."""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest

from evaluation.models import EvaluatorProfile
from experiments.actions import ArmSpec, do_replace_arms, do_start_run
from experiments.exports import EXPORT_FORMATS, export_chunks
from leaderboards.summaries import refresh_run_summaries
from tests.conftest import work_queue

ARMS = [
    ArmSpec("oracle", "mock", "m-oracle", {"mode": "oracle", "price_input_per_mtok": 3, "price_output_per_mtok": 15}),
    ArmSpec(
        "noisy",
        "mock",
        "m-noisy",
        {"mode": "noisy", "quality": 0.5, "jitter_ms": 3, "price_input_per_mtok": 1, "price_output_per_mtok": 2},
    ),
]
# Read from this machine's clock, not from what the mock answers: the seed cannot fix them.
CLOCK_FIELDS = ("wall_ms", "started_at", "finished_at")
# As JSON writes a time, and as the HTML report shows one ("2026-11-26 20:25 UTC", and its
# figures' refresh to the second).
CLOCK_TIMES = re.compile(r"\d{4}-\d\d-\d\d(T\d\d:\d\d:\d\d(\.\d+)?\+00:00| \d\d:\d\d(:\d\d)? UTC)")


@pytest.fixture
def judged_experiment(experiment, db):
    EvaluatorProfile.objects.create(
        name="mock-reviewer", provider="mock", model_name="mock-evaluator", provider_config={"mode": "evaluator"}
    )
    do_replace_arms(experiment, ARMS)
    experiment.repetitions = 3  # 12 answers per arm: enough verdicts for the evaluator's interval
    experiment.save(update_fields=["repetitions"])
    return experiment


def finished_run(experiment, seed, capture):
    with capture(execute=True):
        run = do_start_run(experiment, seed=seed)
    with capture(execute=True):
        work_queue()  # the attempts; recording them queues the evaluator's jobs on commit
    work_queue()  # the verdicts, then the summaries' refresh
    run.refresh_from_db()
    return run


GENERATED = re.compile(r'<p class="generated">Generated [^<]*</p>')


def exported(run, format: str) -> str | bytes:
    chunks = list(export_chunks(run, format))
    if chunks and isinstance(chunks[0], bytes):  # a zip
        return b"".join(chunk for chunk in chunks if isinstance(chunk, bytes))
    return "".join(chunk for chunk in chunks if isinstance(chunk, str))


def as_text(export: str | bytes) -> str:
    """A zip as its members' names and contents: its bytes carry the run's creation time."""
    if isinstance(export, str):
        return export
    archive = zipfile.ZipFile(io.BytesIO(export))
    return "".join(f"{info.filename}\n{archive.read(info).decode()}" for info in archive.infolist())


def without_clock(text: str, run) -> str:
    """The export with the run's id and every clock reading replaced by placeholders."""
    text = text.replace(str(run.code), "RUN").replace(str(run.code)[:8], "RUN")
    text = CLOCK_TIMES.sub("TIME", text)
    for field in CLOCK_FIELDS:
        text = re.sub(rf'("{field}": )[^,\n]+', r"\1CLOCK", text)
    return text


def without_clock_csv(text: str) -> str:
    header, *rows = text.splitlines()
    wall = header.split(",").index("wall_ms")
    return "\n".join(
        [header, *(",".join(c if i != wall else "CLOCK" for i, c in enumerate(row.split(","))) for row in rows)]
    )


def test_the_same_seed_gives_byte_identical_exports(judged_experiment, django_capture_on_commit_callbacks):
    first = finished_run(judged_experiment, 11, django_capture_on_commit_callbacks)
    second = finished_run(judged_experiment, 11, django_capture_on_commit_callbacks)
    assert first.status == second.status == "completed"
    document = json.loads(exported(first, "json"))
    assert all(arm["evaluator"] and arm["evaluator"][0]["ci_low"] is not None for arm in document["arms"])

    for format in EXPORT_FORMATS:
        a, b = as_text(exported(first, format)), as_text(exported(second, format))
        if format == "csv":
            a, b = without_clock_csv(a), without_clock_csv(b)
        assert without_clock(a, first) == without_clock(b, second), format


def test_exporting_a_run_twice_gives_the_same_bytes(judged_experiment, django_capture_on_commit_callbacks):
    run = finished_run(judged_experiment, 12, django_capture_on_commit_callbacks)
    before = {format: exported(run, format) for format in EXPORT_FORMATS}
    again = {format: exported(run, format) for format in EXPORT_FORMATS}
    assert GENERATED.search(before["html"])
    # Byte for byte, but for the report's "Generated" second (leaderboards/report.py): the two
    # exports can fall either side of a second's turn, as they did once on a loaded machine.
    assert {**again, "html": GENERATED.sub("", again["html"])} == {**before, "html": GENERATED.sub("", before["html"])}

    refresh_run_summaries(run.pk)  # the bootstraps are drawn again, from the same seeds

    after = {format: exported(run, format) for format in EXPORT_FORMATS}
    assert {format: text for format, text in after.items() if format != "html"} == {
        format: text for format, text in before.items() if format != "html"
    }
    # The report says when its figures were refreshed, and nothing else changes.
    assert CLOCK_TIMES.sub("TIME", after["html"]) == CLOCK_TIMES.sub("TIME", before["html"])
