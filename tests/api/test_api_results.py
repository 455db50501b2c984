"""The API's read side: a run's boards, pairwise verdicts, the cross-run board, attempts, every
export, and the attempts as CSV and Parquet for a notebook."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from django.urls import reverse

from evaluation.models import Verdict
from experiments.exports import (
    ATTEMPT_ARROW_TYPES,
    ATTEMPT_COLUMNS,
    EXPORT_FORMATS,
    TRANSCRIPT_COLUMNS,
    cut_cell,
    spreadsheet_safe,
)
from experiments.models import Attempt
from leaderboards.exports import run_summary
from leaderboards.models import TaskSummary
from leaderboards.pairwise import run_pairwise
from leaderboards.summaries import refresh_run_summaries
from orgs.models import Organization
from tests.conftest import api_client, client_for, make_api_key, work_queue
from tests.factories import STRONG_AND_WEAK, build_run


@pytest.fixture
def judged_run(experiment, dataset):
    """Two arms on the demo dataset, built row by row with known figures and verdicts whose
    rationale is marked, its summaries refreshed as a finished run's are."""
    run, _ = build_run(experiment, dataset, STRONG_AND_WEAK, repetitions=5, verdicts=True)
    refresh_run_summaries(run.pk)
    return run


@pytest.fixture
def reader(org):
    return api_client(make_api_key(org, ["read"]))


@pytest.fixture
def outsider(charlie):
    return api_client(make_api_key(Organization.objects.get(slug="other")))


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field"}, body
    return body["error"]


# --- boards ------------------------------------------------------------------------------------


def test_a_runs_leaderboards_are_the_figures_its_page_and_export_show(reader, judged_run):
    response = reader.get(f"/api/runs/{judged_run.code}/leaderboards")
    assert response.status_code == 200, response.content
    body = response.json()
    summary = {arm["label"]: arm for arm in run_summary(judged_run)["arms"]}
    quality = {entry["arm"]["label"]: entry for entry in body["quality"]["entries"]}
    speed = {entry["arm"]["label"]: entry for entry in body["speed"]["entries"]}
    cost = {entry["arm"]["label"]: entry for entry in body["cost"]["entries"]}
    assert set(quality) == set(summary) == {"strong", "weak"}
    for label, arm in summary.items():
        assert quality[label]["scored"] == arm["n"] > 0
        assert quality[label]["rank"] == arm["quality_rank"]
        assert quality[label]["rate"] == pytest.approx(arm["resolved_rate"])
        assert (quality[label]["ci_low"], quality[label]["ci_high"]) == pytest.approx((arm["ci_low"], arm["ci_high"]))
        assert quality[label]["ci_low"] < quality[label]["rate"] < quality[label]["ci_high"]
        assert speed[label]["latency_p50_ms"] == pytest.approx(arm["latency_p50_ms"])
        assert speed[label]["latency_p95_ms"] == pytest.approx(arm["latency_p95_ms"])
        assert cost[label]["cost_per_task_usd"] == pytest.approx(arm["cost_per_task_usd"])
        assert cost[label]["cost_usd"] == pytest.approx(arm["cost_usd"])
    # Best first: the strong arm resolves more, the weak one answers faster.
    assert [entry["arm"]["label"] for entry in body["quality"]["entries"]] == ["strong", "weak"]
    assert [entry["arm"]["label"] for entry in body["speed"]["entries"]] == ["weak", "strong"]
    assert cost["weak"]["ci_low"] < cost["weak"]["cost_per_task_usd"] <= cost["weak"]["ci_high"]
    assert {entry["profile"] for entry in body["evaluator"]["entries"]} == {"judge:v1 (mock)"}
    assert all(entry["judged"] > 10 for entry in body["evaluator"]["entries"])
    reliability = {row["arm"]: row for row in body["reliability"]}
    assert reliability["strong"]["infrastructure_failures"] > 0 == reliability["weak"]["infrastructure_failures"]
    assert sum(reliability["strong"]["causes"].values()) == reliability["strong"]["infrastructure_failures"]


def test_an_inference_only_run_has_no_quality_board_and_no_pairwise(reader, experiment, dataset):
    run, _ = build_run(experiment, dataset, STRONG_AND_WEAK, inference_only=True)
    refresh_run_summaries(run.pk)
    boards = reader.get(f"/api/runs/{run.code}/leaderboards").json()
    assert boards["quality"] is None
    assert len(boards["speed"]["entries"]) == 2
    pairwise = reader.get(f"/api/runs/{run.code}/pairwise").json()
    assert pairwise["pairs"] == [] and "inference-only" in pairwise["refusal"]


def test_the_pairwise_matrix_is_the_pages(reader, judged_run):
    response = reader.get(f"/api/runs/{judged_run.code}/pairwise")
    assert response.status_code == 200, response.content
    body = response.json()
    expected = run_pairwise(judged_run)
    assert body["arms"] == expected.labels == ["strong", "weak"]
    [pair] = body["pairs"]
    [verdict] = expected.pairs
    assert (pair["a"], pair["b"], pair["shared_tasks"]) == (verdict.a, verdict.b, verdict.verdict.shared_tasks)
    assert pair["p_value"] == pytest.approx(verdict.verdict.p_value)
    assert (pair["ci_low"], pair["ci_high"]) == pytest.approx((verdict.verdict.ci_low, verdict.verdict.ci_high))
    assert pair["verdict"] == verdict.sentence
    assert body["matrix"][0][0]["win_rate"] is None
    assert body["matrix"][0][1]["win_rate"] == pytest.approx(expected.matrix[0][1].win_rate)
    assert [rating["arm"] for rating in body["ratings"]] == [rated.label for rated in expected.ratings]


def test_the_cross_run_board_pools_each_arms_tasks_and_compares_arms_pair_by_pair(reader, experiment, dataset):
    first, _ = build_run(experiment, dataset, STRONG_AND_WEAK, seed=1)
    second, _ = build_run(experiment, dataset, STRONG_AND_WEAK, seed=2)
    for run in (first, second):
        refresh_run_summaries(run.pk)
    response = reader.get("/api/leaderboards/cross-run", {"runs": [str(first.code), str(second.code)]})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["runs"] == [str(first.code), str(second.code)]
    [pair] = body["pairs"]
    assert (pair["a"], pair["b"]) == ("strong", "weak")
    strong_tasks = TaskSummary.objects.filter(arm__label="strong").values("task_id").distinct().count()
    assert pair["shared_tasks"] == strong_tasks  # the weak arm scored on every task
    strong = next(entry for entry in body["entries"] if entry["arm"]["label"] == "strong")
    assert strong["runs"] == body["runs"]
    pooled = Attempt.objects.filter(arm__label="strong", outcome__in=["model_success", "model_failure"])
    assert strong["scored"] == pooled.count()
    assert strong["successes"] == pooled.filter(resolved=True).count()
    assert [len(trend["points"]) for trend in body["trends"]] == [2, 2]


def test_the_cross_run_board_refuses_as_its_page_does(reader, org, experiment, dataset, charlie):
    run, _ = build_run(experiment, dataset, STRONG_AND_WEAK)

    foreign = build_run(experiment, dataset, STRONG_AND_WEAK)[0]
    foreign.org = Organization.objects.get(slug="other")
    foreign.save(update_fields=["org"])
    unknown = "00000000-0000-0000-0000-000000000000"
    messages = []
    for missing in (unknown, str(foreign.code)):
        response = reader.get("/api/leaderboards/cross-run", {"runs": [str(run.code), missing]})
        assert response.status_code == 422
        error = error_of(response)
        assert error["field"] == "runs"
        messages.append(error["message"].replace(missing, "ID"))
    assert messages[0] == messages[1] == "Run ID: not found."
    nothing = reader.get("/api/leaderboards/cross-run")
    assert nothing.status_code == 422 and error_of(nothing)["field"] == "runs"
    inference_only, _ = build_run(experiment, dataset, STRONG_AND_WEAK, inference_only=True)
    refused = reader.get("/api/leaderboards/cross-run", {"runs": [str(run.code), str(inference_only.code)]})
    assert refused.status_code == 422 and "inference-only" in error_of(refused)["message"]


def test_an_outsider_gets_404_for_every_run_endpoint(outsider, judged_run):
    attempt = judged_run.attempts.first()
    for path in (
        f"/api/runs/{judged_run.code}/leaderboards",
        f"/api/runs/{judged_run.code}/pairwise",
        f"/api/runs/{judged_run.code}/attempts",
        f"/api/attempts/{attempt.code}",
        f"/api/runs/{judged_run.code}/exports/csv",
        f"/api/runs/{judged_run.code}/attempts.csv",
        f"/api/runs/{judged_run.code}/attempts.parquet",
    ):
        response = outsider.get(path)
        assert response.status_code == 404, path
        assert error_of(response)["code"] == "not_found"


def test_a_key_without_the_read_scope_reads_nothing(org, judged_run):
    client = api_client(make_api_key(org, ["run"]))
    for path in (f"/api/runs/{judged_run.code}/leaderboards", f"/api/runs/{judged_run.code}/attempts.parquet"):
        assert client.get(path).status_code == 403, path


# --- attempts ----------------------------------------------------------------------------------


def test_attempts_are_paged_and_filtered_as_the_run_page_filters_them(reader, judged_run):
    path = f"/api/runs/{judged_run.code}/attempts"
    seen, cursor = [], None
    while True:
        page = reader.get(path, {"limit": 40, **({"cursor": cursor} if cursor else {})}).json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == judged_run.attempts.count()
    weak_failures = reader.get(path, {"arm": "weak", "status": "completed", "limit": 500}).json()["items"]
    assert {(item["arm"], item["status"]) for item in weak_failures} == {("weak", "completed")}
    assert len(weak_failures) == judged_run.attempts.filter(arm__label="weak", status="completed").count()
    infrastructure = reader.get(path, {"outcome": "infrastructure_failure", "limit": 500}).json()["items"]
    assert infrastructure and {item["error_category"] for item in infrastructure} <= {"server_error", "rate_limited"}
    for name, value in (("arm", "nobody"), ("status", "lost"), ("outcome", "bad luck")):
        response = reader.get(path, {name: value})
        assert response.status_code == 422, name
        assert error_of(response)["field"] == name


def test_an_attempt_shows_what_its_page_shows(org, experiment, start):
    run = start(experiment)
    work_queue()
    client = api_client(make_api_key(org, ["read"]))
    attempt = run.attempts.filter(status="completed", patch_present=True).order_by("sequence").first()
    response = client.get(f"/api/attempts/{attempt.code}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == str(attempt.code)
    assert (body["status"], body["outcome"], body["resolved"]) == (attempt.status, attempt.outcome, attempt.resolved)
    assert body["tokens"]["input"] == attempt.input_tokens > 0
    assert body["patch"] == attempt.extracted_answer and body["patch"].startswith("diff --git")
    assert body["validation"]["status"] == attempt.artifacts.get(kind="validation").status
    assert body["validation"]["tests"], "the task's tests, each with its role"
    assert {test["role"] for test in body["validation"]["tests"]} <= {"must fix", "must keep passing", ""}
    # What the model was sent is shown on purpose (its messages, as its page shows them); the
    # raw provider request and response, and the rest of the stored request, never are.
    assert body["messages"] == attempt.request["messages"] and body["messages"][0]["content"]
    assert "request" not in body and "raw_response" not in body and "raw_request" not in body
    assert "seed_key" not in json.dumps(body)


def test_no_evaluator_rationale_in_any_response(org, judged_run):
    """The rationale is staff-only: no endpoint, export or notebook file carries it."""
    assert Verdict.objects.filter(attempt__run=judged_run, rationale__startswith="SECRET-RATIONALE").count() > 20
    client = api_client(make_api_key(org, ["read"]))
    judged = Attempt.objects.filter(verdicts__isnull=False).order_by("sequence")[:5]
    paths = [
        f"/api/runs/{judged_run.code}/leaderboards",
        f"/api/runs/{judged_run.code}/pairwise",
        f"/api/runs/{judged_run.code}/attempts?limit=500",
        *(f"/api/attempts/{attempt.code}" for attempt in judged),
        *(f"/api/runs/{judged_run.code}/exports/{format}" for format in EXPORT_FORMATS),
        f"/api/runs/{judged_run.code}/attempts.csv",
    ]
    for path in paths:
        response = client.get(path)
        assert response.status_code == 200, (path, response.content[:300])
        content = b"".join(response.streaming_content) if response.streaming else response.content
        text = readable(content)
        # Neither its text nor a field for it (the HTML report says in words that it is left out).
        assert "SECRET-RATIONALE" not in text and '"rationale"' not in text, path
    detail = client.get(f"/api/attempts/{judged[0].code}").json()
    assert detail["verdicts"][0]["overall"] is not None  # the scores are there, the words are not
    parquet = parquet_of(client, judged_run)
    assert not parquet.astype(str).apply(lambda column: column.str.contains("SECRET-RATIONALE")).any().any()


def readable(content: bytes) -> str:
    from tests.conftest import readable_export

    return readable_export(content)


# --- exports -----------------------------------------------------------------------------------


def test_every_export_is_the_run_pages_download(org, bob, experiment, start):
    run = start(experiment)
    work_queue()
    browser, client = client_for(bob), api_client(make_api_key(org, ["read"]))
    for format in EXPORT_FORMATS:
        page = browser.get(reverse("experiments:run_export", args=[run.code, format]))
        response = client.get(f"/api/runs/{run.code}/exports/{format}")
        assert response.status_code == 200, (format, response.content)
        assert response["Content-Type"] == page["Content-Type"] == EXPORT_FORMATS[format].content_type
        assert response["Content-Disposition"] == page["Content-Disposition"]
        api_body = b"".join(response.streaming_content)
        page_body = b"".join(page.streaming_content)
        if format != "html":  # the report says when it was made
            assert api_body == page_body, format
    one = client.get(f"/api/runs/{run.code}/exports/swebench-preds", {"arm": "oracle"})
    assert one.status_code == 200
    assert one["Content-Type"] == "application/x-ndjson"
    assert all(json.loads(line)["model_name_or_path"] for line in b"".join(one.streaming_content).splitlines())


def test_an_unknown_or_refused_export_is_422_with_the_reason(reader, experiment, dataset, judged_run):
    unknown = reader.get(f"/api/runs/{judged_run.code}/exports/xlsx")
    assert unknown.status_code == 422
    assert error_of(unknown)["field"] == "format"
    no_arm = reader.get(f"/api/runs/{judged_run.code}/exports/swebench-preds", {"arm": "nobody"})
    assert no_arm.status_code == 422
    assert error_of(no_arm)["field"] == "arm" and "'strong'" in error_of(no_arm)["message"]
    inference_only, _ = build_run(experiment, dataset, STRONG_AND_WEAK, inference_only=True)
    report = reader.get(f"/api/runs/{inference_only.code}/exports/swebench-report")
    assert report.status_code == 422
    assert "inference-only" in error_of(report)["message"]


# --- notebooks ---------------------------------------------------------------------------------


def parquet_of(client, run) -> pd.DataFrame:
    response = client.get(f"/api/runs/{run.code}/attempts.parquet")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/vnd.apache.parquet"
    return pd.read_parquet(io.BytesIO(b"".join(response.streaming_content)))


def test_the_notebook_files_have_the_csv_exports_columns_and_values(reader, judged_run):
    export = reader.get(f"/api/runs/{judged_run.code}/exports/csv")
    exported = b"".join(export.streaming_content)
    response = reader.get(f"/api/runs/{judged_run.code}/attempts.csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert b"".join(response.streaming_content) == exported
    from_csv = pd.read_csv(io.BytesIO(exported), keep_default_na=False, na_values=[""])
    from_parquet = parquet_of(reader, judged_run)
    # The CSV's columns, then the rest of each transcript (the messages, the raw answer, the grading).
    assert list(from_csv.columns) == ATTEMPT_COLUMNS
    assert (
        list(from_parquet.columns)
        == TRANSCRIPT_COLUMNS
        == [*ATTEMPT_COLUMNS, "output", "messages", "grading", "trajectory"]
    )
    assert len(from_parquet) == len(from_csv) == judged_run.attempts.count()
    # Typed: counts are integers (nullable), figures floats, flags booleans, not text.
    assert str(from_parquet["repetition"].dtype) == "int64"
    assert from_parquet["latency_ms"].dtype.kind in "if"
    assert from_parquet["cost_usd"].dtype.kind == "f"
    assert from_parquet["cached"].dtype == bool
    for column in ATTEMPT_COLUMNS:
        a, b = from_parquet[column], from_csv[column]
        if column in ("question", "extracted_answer", "expected_answer"):  # whole in Parquet, cut in the CSV
            # Text in both; pandas reads a CSV column that is empty throughout as floats (NaN).
            texts = b.astype(object).where(b.notna(), "").tolist()
            assert [spreadsheet_safe(cut_cell(text)) for text in a.fillna("")] == texts, column
        elif ATTEMPT_ARROW_TYPES[column].equals(ATTEMPT_ARROW_TYPES["status"]):  # text
            assert a.fillna("").tolist() == b.fillna("").astype(str).tolist(), column
        elif str(ATTEMPT_ARROW_TYPES[column]) == "bool":
            assert a.map(_flag).tolist() == b.map(_flag).tolist(), column
        else:
            assert a.astype(float).tolist() == pytest.approx(b.astype(float).tolist(), nan_ok=True), column


def _flag(value) -> str:
    return "" if value is None or (isinstance(value, float) and value != value) else str(bool(value))


def test_a_run_without_attempts_gives_an_empty_parquet_file_with_its_columns(reader, experiment, dataset):
    run, _ = build_run(experiment, dataset, [])
    frame = parquet_of(reader, run)
    assert list(frame.columns) == TRANSCRIPT_COLUMNS and len(frame) == 0


def test_the_boards_are_kept_per_refresh_and_follow_the_next_one(reader, judged_run):
    """The endpoint keeps its answer under the summaries' refresh: the same answer until the
    run's summaries are refreshed, then the new figures."""
    from experiments.models import Attempt

    url = f"/api/runs/{judged_run.code}/leaderboards"

    def weak_rate() -> float:
        entries = reader.get(url).json()["quality"]["entries"]
        return next(entry["rate"] for entry in entries if entry["arm"]["label"] == "weak")

    before = weak_rate()
    weak = Attempt.objects.filter(run=judged_run, arm__label="weak", resolved=False)
    weak.filter(pk__in=list(weak.values_list("pk", flat=True)[:5])).update(resolved=True, score=1)
    assert weak_rate() == before  # not refreshed yet: the kept answer
    refresh_run_summaries(judged_run.pk)
    assert weak_rate() > before


def test_a_page_of_attempts_reads_only_what_it_shows_in_constant_queries(reader, judged_run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def page_queries(limit: int) -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            response = reader.get(f"/api/runs/{judged_run.code}/attempts", {"limit": limit})
        assert response.status_code == 200 and len(response.json()["items"]) == limit
        return [query["sql"] for query in captured.captured_queries]

    page_queries(1)  # the key's first use also writes its "last used"
    small, large = page_queries(2), page_queries(40)
    assert len(small) == len(large)  # no query per attempt, whatever the page's size
    for heavy in ('"raw_response"', '"output"', '"gold_patch"', '"problem_statement"'):
        assert not any(heavy in sql for sql in large if "experiments_attempt" in sql), heavy
