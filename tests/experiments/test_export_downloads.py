"""Run exports: the download buttons on the run page (experiments.views.run_export) and the
`export_run` command, both streaming experiments/exports.py."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from experiments import exports
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.models import Attempt
from tests.conftest import client_for
from tests.factories import agent_trajectory, give_trajectory

FORMATS = {  # format: (content type, file name after "prbench-run-<code>")
    "json": ("application/json", ".json"),
    "csv": ("text/csv; charset=utf-8", ".csv"),
    "swebench-preds": ("application/zip", "-swebench-preds.zip"),
    "swebench-report": ("application/json", "-swebench-report.json"),
}


@pytest.fixture
def run(experiment, alice):
    """8 attempts, their jobs never enqueued; the first two given known results, the first an
    agent's with its trajectory."""
    run = do_start_run(experiment, alice)
    first, second = run.attempts.order_by("sequence")[:2]
    Attempt.objects.filter(pk=first.pk).update(
        status="completed", outcome="model_success", response_cached=False, cost_usd=Decimal("0.00123456"), **PINNED
    )
    give_trajectory(first)
    Attempt.objects.filter(pk=second.pk).update(
        status="failed", outcome="model_failure", error_category="timeout", wall_ms=30000, retries=2
    )
    return run


COLUMNS = [
    "task_id",
    "arm_label",
    "repetition",
    "status",
    "outcome",
    "resolved",
    "patch_present",
    "patch_well_formed",
    "patch_applied",
    "fail_to_pass_fraction",
    "pass_to_pass_regressions",
    "lines_changed",
    "files_changed",
    "lint_clean",
    "build_ok",
    "latency_ms",
    "first_token_ms",
    "output_tokens_per_s",
    "wall_ms",
    "cost_usd",
    "cached",
    "error_category",
    "turns",
    "tool_calls",
    "repeat_calls",
    "score",
    "question",
    "extracted_answer",
    "expected_answer",
]
# The JSON export (and Parquet) add the rest of each attempt's transcript.
JSON_COLUMNS = [*COLUMNS, "output", "messages", "grading", "trajectory"]
PINNED = {
    "resolved": True,
    "patch_present": True,
    "patch_well_formed": True,
    "patch_applied": True,
    "fail_to_pass_fraction": 1.0,
    "pass_to_pass_regressions": 0,
    "lines_changed": 7,
    "files_changed": 2,
    "lint_clean": True,
    "build_ok": False,
    "latency_ms": 1234,
    "first_token_ms": 210,
    "output_tokens_per_s": 41.5,
    "wall_ms": 1300,
}


def expected_attempts(run) -> list[dict]:
    """The exported rows, in order: the first two attempts pinned, the rest still queued."""
    first, second, *rest = run.attempts.select_related("task", "arm").order_by("sequence")

    def row(attempt, status, **fields):
        identity = {"task_id": attempt.task.external_id, "arm_label": attempt.arm.label, "repetition": 0}
        # Nothing was sent or answered (the attempts were given results by hand): the task's
        # question and its expected answer (a PR task's gold patch) are there all the same.
        texts = {"question": attempt.task.problem_statement, "expected_answer": attempt.task.gold_patch}
        transcript = {"extracted_answer": "", "output": "", "messages": []}
        values = {**identity, "status": status, "cached": False, "repeat_calls": 0, **texts, **transcript, **fields}
        return {column: values.get(column) for column in JSON_COLUMNS}

    trajectory = json.loads(agent_trajectory().to_json())
    return [
        row(first, "completed", **PINNED, outcome="model_success", cost_usd=0.00123456, turns=3, tool_calls=4)
        | {"trajectory": trajectory},
        row(second, "failed", outcome="model_failure", wall_ms=30000, error_category="timeout"),
        *(row(attempt, "queued") for attempt in rest),
    ]


def download(client: Client, run, format: str):
    return client.get(reverse("experiments:run_export", args=[run.code, format]))


def body(response) -> str:
    return raw_body(response).decode()


def raw_body(response) -> bytes:
    return b"".join(response.streaming_content)


def command_output(run, format: str, *args: str) -> str:
    out = io.StringIO()
    call_command("export_run", str(run.code), *args, format=format, stdout=out)
    return out.getvalue()


def command_bytes(run, format: str) -> bytes:
    """stdout as bytes, as a shell redirect takes it (a zip is not text)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    call_command("export_run", str(run.code), format=format, stdout=out)
    out.flush()
    return out.buffer.getvalue()


class Writes(io.StringIO):
    """A stdout that counts how many times it was written to."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_the_json_export_is_the_documented_document(run):
    text = command_output(run, "json")
    document = json.loads(text)
    assert document["attempts"] == expected_attempts(run)
    assert all(list(attempt) == JSON_COLUMNS for attempt in document["attempts"])
    assert document["run"] == {
        "id": str(run.code),
        "experiment": "Mock duel",
        "status": "running",
        "seed": run.seed,
        "inference_only": False,
        "started_at": run.started_at.isoformat(),
        "finished_at": None,
    }
    assert {arm["label"] for arm in document["arms"]} == {"oracle", "noisy"}
    # Laid out as json.dumps(indent=2) lays it out, ending in a newline, floats spelled as Python does.
    assert text == json.dumps(document, indent=2) + "\n"
    assert '"fail_to_pass_fraction": 1.0,' in text and '"cost_usd": 0.00123456,' in text


def test_the_csv_export_has_one_row_per_attempt_in_execution_order(run):
    text = command_output(run, "csv")
    header, first, second, *rest = csv.reader(io.StringIO(text))
    assert header == COLUMNS
    attempts = expected_attempts(run)
    first_attempt = attempts[0]
    assert first[:22] == [
        first_attempt["task_id"], first_attempt["arm_label"], "0", "completed", "model_success", "True", "True",
        "True", "True", "1.0", "0", "7", "2", "True", "False", "1234", "210", "41.5", "1300", "0.00123456", "False", "",
    ]  # fmt: skip
    identity = [attempts[1]["task_id"], attempts[1]["arm_label"]]
    assert second[:22] == [*identity, "0", "failed", "model_failure", *[""] * 13, "30000", "", "False", "timeout"]
    assert (first[22:24], second[22:24]) == (["3", "4"], ["", ""])  # an agent's turns and tool calls
    for row, attempt in zip((first, second, *rest), attempts, strict=True):
        # No call was made again after a dead worker's (repeat_calls 0); then the texts.
        assert row[24:] == ["0", "", attempt["question"], "", attempt["expected_answer"]]
    assert len(rest) == 6 and text.endswith("\n")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(row["task_id"], row["arm_label"]) for row in rows] == [(a["task_id"], a["arm_label"]) for a in attempts]


def test_an_empty_run_exports_an_empty_attempts_list(run):
    run.attempts.all().delete()
    text = command_output(run, "json")
    assert json.loads(text)["attempts"] == [] and text.endswith('"attempts": []\n}\n')
    assert command_output(run, "csv") == ",".join(COLUMNS) + "\n"


def test_the_command_writes_the_attempts_a_chunk_at_a_time(run, monkeypatch):
    whole = {format: command_output(run, format) for format in ("json", "csv")}
    monkeypatch.setattr(exports, "CHUNK_ROWS", 3)
    for format, text in whole.items():
        out = Writes()
        call_command("export_run", str(run.code), format=format, stdout=out)
        assert out.getvalue() == text, format
        assert out.writes >= 3, format  # 8 attempts, 3 per chunk
    Attempt.objects.filter(run=run).update(status="completed", outcome="model_success")
    text = command_output(run, "swebench-preds", "--arm", "oracle")
    monkeypatch.setattr(exports, "CHUNK_ROWS", 1)
    out = Writes()
    call_command("export_run", str(run.code), "--arm", "oracle", format="swebench-preds", stdout=out)
    assert out.getvalue() == text and len(text.splitlines()) == 4
    assert out.writes >= 4  # one chunk per prediction


@pytest.mark.parametrize("format", list(FORMATS))
def test_a_member_downloads_each_format(bob, run, format):
    response = download(client_for(bob), run, format)
    assert response.status_code == 200
    assert response.streaming
    content_type, suffix = FORMATS[format]
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="prbench-run-{run.code}{suffix}"'
    assert raw_body(response) == command_bytes(run, format)


def test_a_viewer_may_download(vera, run):
    response = download(client_for(vera), run, "csv")
    assert response.status_code == 200
    assert len(list(csv.reader(io.StringIO(body(response))))) == 9  # a header and 8 attempts


@pytest.mark.parametrize("format", [*FORMATS, "xlsx"])
def test_it_checks_ownership(charlie, run, format):
    assert download(client_for(charlie), run, format).status_code == 404


@pytest.mark.parametrize("format", list(FORMATS))
def test_anonymous_is_sent_to_log_in(run, format):
    response = download(Client(), run, format)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_an_unknown_format_is_not_found(bob, run):
    assert download(client_for(bob), run, "xlsx").status_code == 404


def test_csv_cells_a_spreadsheet_would_run_are_neutralised(org, dataset, bob):
    arms = [ArmSpec("=1+1", "mock", "mock-oracle", {"mode": "oracle"}), ArmSpec("@evil", "mock", "m", {})]
    spec = ExperimentSpec(name="Formulas", dataset=dataset, arms=arms, sample_size=1)
    run = do_start_run(do_save_experiment(org, spec))
    task = run.attempts.get(arm__label="=1+1").task
    task.external_id = '=HYPERLINK("http://evil.example")'
    task.save()
    rows = list(csv.DictReader(io.StringIO(body(download(client_for(bob), run, "csv")))))
    assert {row["arm_label"] for row in rows} == {"'=1+1", "'@evil"}
    assert {row["task_id"] for row in rows} == {'\'=HYPERLINK("http://evil.example")'}


def test_an_unavailable_report_says_why(bob, experiment):
    run = do_start_run(experiment, inference_only=True)
    client = client_for(bob)
    response = download(client, run, "swebench-report")
    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:run", args=[run.code])
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert f"run {run.code} was inference-only: no patch was validated, so none is resolved" in page.content.decode()


def test_the_run_page_offers_every_download(bob, run):
    """Each export but the report is started as a background export (tests/experiments/
    test_run_exports.py); the report, a small chunk whatever the run's size, is a link."""
    page = client_for(bob).get(reverse("experiments:run", args=[run.code])).content.decode()
    assert f'action="{reverse("experiments:run_exports", args=[run.code])}"' in page
    for format in ("json", "csv"):
        assert f'name="format" value="{format}"' in page
    for format in ("swebench-preds", "swebench-report"):
        assert f'<input type="hidden" name="format" value="{format}">' in page
    assert reverse("experiments:run_export", args=[run.code, "html"]) in page
    assert "export_run" not in page  # no command to run: the buttons are the way


def test_the_run_page_offers_each_arms_swebench_files(bob, run):
    page = client_for(bob).get(reverse("experiments:run", args=[run.code])).content.decode()
    for label in ("oracle", "noisy"):
        assert f'<input type="hidden" name="arm" value="{label}"><input type="hidden" name="rep" value="0">' in page
    assert "every arm (zip, a JSONL file each)" in page


@pytest.mark.parametrize(
    ("format", "content_type", "suffix"),
    [
        ("swebench-preds", "application/x-ndjson", "swebench-preds-oracle.jsonl"),
        ("swebench-report", "application/json", "swebench-report-oracle.json"),
    ],
)
def test_a_member_downloads_one_arms_file(bob, run, format, content_type, suffix):
    response = client_for(bob).get(reverse("experiments:run_export", args=[run.code, format]), {"arm": "oracle"})
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == content_type
    assert response["Content-Disposition"] == f'attachment; filename="prbench-run-{run.code}-{suffix}"'
    assert body(response) == command_output(run, format, "--arm", "oracle")


def test_the_zip_holds_each_arms_file(bob, run):
    Attempt.objects.filter(run=run).update(status="completed", outcome="model_success")
    archive = zipfile.ZipFile(io.BytesIO(raw_body(download(client_for(bob), run, "swebench-preds"))))
    assert archive.namelist() == ["oracle.jsonl", "noisy.jsonl"]
    for label in ("oracle", "noisy"):
        text = archive.read(f"{label}.jsonl").decode()
        assert text == command_output(run, "swebench-preds", "--arm", label) and len(text.splitlines()) == 4


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"arm": "nope"}, "has no arm &#x27;nope&#x27;; its arms are &#x27;oracle&#x27;, &#x27;noisy&#x27;"),
        ({"arm": "oracle", "rep": "3"}, "arm &#x27;oracle&#x27; has no repetition 3 in run"),
        ({"arm": "oracle", "rep": "x"}, "a repetition is a whole number, not &#x27;x&#x27;"),
    ],
)
def test_an_unknown_arm_is_refused_by_name(bob, run, params, message):
    client = client_for(bob)
    response = client.get(reverse("experiments:run_export", args=[run.code, "swebench-preds"]), params)
    assert response.status_code == 302 and response["Location"] == reverse("experiments:run", args=[run.code])
    assert message in client.get(response["Location"]).content.decode()


def test_one_arms_file_checks_ownership(charlie, run):
    url = reverse("experiments:run_export", args=[run.code, "swebench-preds"])
    assert client_for(charlie).get(url, {"arm": "oracle"}).status_code == 404


def test_parquet_carries_an_agents_turns_tool_calls_and_trajectory(run):
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(io.BytesIO(b"".join(exports.parquet_chunks(run))))
    first, second = frame.iloc[0], frame.iloc[1]
    assert (first["turns"], first["tool_calls"]) == (3, 4)
    assert json.loads(first["trajectory"]) == json.loads(agent_trajectory().to_json())
    assert pd.isna(second["turns"]) and pd.isna(second["trajectory"])
