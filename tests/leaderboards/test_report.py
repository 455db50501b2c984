"""The run's HTML report (leaderboards/report.py): the run page's "HTML report" download and
`export_run --format html`."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from evaluation.models import Verdict
from experiments.models import RunArm
from leaderboards.pairwise import run_pairwise
from leaderboards.report import run_report
from leaderboards.summaries import refresh_run_summaries
from tests.conftest import client_for
from tests.factories import ArmPlan, make_tasks, record

PLANS = [
    ArmPlan("strong", quality=0.9, latency_ms=3000, price="0.004"),
    ArmPlan("weak", quality=0.2, latency_ms=400, price="0.001", infrastructure_failure_rate=0.1),
]
GENERATED = re.compile(r'^<p class="generated">Generated \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</p>\n', re.M)


@pytest.fixture
def judged_run(built_run):
    run, _ = built_run(PLANS, repetitions=3, verdicts=True)
    run.started_at = timezone.now() - timedelta(hours=1)
    run.finished_at = timezone.now()
    run.save(update_fields=["started_at", "finished_at"])
    refresh_run_summaries(run.pk)
    return run


@pytest.fixture
def duel(built_run, dataset):
    """40 shared tasks: A resolves the first 30, B the first 20 (test_views' known verdict)."""
    run, _ = built_run([])
    tasks = make_tasks(dataset, 40)
    a = RunArm.objects.create(run=run, label="A", provider="mock", model_name="a", position=0)
    b = RunArm.objects.create(run=run, label="B", provider="mock", model_name="b", position=1)
    record(run, a, tasks, set(range(30)))
    record(run, b, tasks, set(range(20)))
    refresh_run_summaries(run.pk)
    return run


def download(client: Client, run) -> object:
    return client.get(reverse("experiments:run_export", args=[run.code, "html"]))


def body(response) -> str:
    return b"".join(response.streaming_content).decode()


def without_generation_time(report: str) -> str:
    assert len(GENERATED.findall(report)) == 1
    return GENERATED.sub("", report)


def test_a_member_downloads_it(bob, judged_run):
    response = download(client_for(bob), judged_run)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="prbench-run-{judged_run.code}.html"'
    report = body(response)
    assert report.startswith("<!doctype html>") and report.rstrip().endswith("</html>")


def test_it_checks_ownership(charlie, judged_run):
    assert download(client_for(charlie), judged_run).status_code == 404


def test_anonymous_is_sent_to_log_in(judged_run):
    response = download(Client(), judged_run)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_run_page_offers_it(bob, judged_run):
    page = client_for(bob).get(reverse("experiments:run", args=[judged_run.code])).content.decode()
    assert f'href="{reverse("experiments:run_export", args=[judged_run.code, "html"])}">HTML report</a>' in page


def test_it_has_the_run_its_arms_every_board_and_the_charts(judged_run):
    report = run_report(judged_run)

    assert f"<code>{judged_run.code}</code>" in report
    assert f"<dt>Seed</dt><dd>{judged_run.seed}</dd>" in report
    assert "<dt>Status</dt><dd>Completed</dd>" in report
    assert "<td>strong</td><td>mock</td><td><code>mock-strong</code></td>" in report
    headings = ["Quality", "Speed", "Cost", "Evaluator", "Reliability", "Pairwise verdicts", "Bradley–Terry ratings"]
    for heading in headings:
        assert f"<h2>{heading}</h2>" in report, heading
    for board in ["quality", "speed", "cost", "evaluator"]:
        assert f'<table class="board {board}">' in report, board
    assert report.count("<svg ") == 3  # cost and quality, latency, the win-rate heatmap
    fallbacks = ["The chart's figures", "Calls per latency bucket", "Win rate of the row arm against the column arm"]
    for caption in fallbacks:
        assert f"<caption>{caption}</caption>" in report, caption
    assert "PRBench 0.1.0" in report


def test_it_says_which_arm_is_better_in_words(duel):
    report = run_report(duel)

    (pair,) = run_pairwise(duel).pairs
    assert pair.sentence.startswith("A resolves 25.0 points more than B")
    assert escape(pair.sentence) in report


def test_it_is_self_contained(judged_run):
    report = run_report(judged_run)

    assert "<script" not in report
    assert "http://" not in report and "https://" not in report
    assert not re.search(r"\b(href|src|hx-[a-z]+)=", report)  # nothing to follow or load, offline or not
    assert "<style>\n:root { --fg:" in report  # app.css, inlined
    assert ".report-facts {" in report  # and the report's own rules


def test_it_has_no_evaluator_rationale(judged_run):
    rationales = list(Verdict.objects.filter(attempt__run=judged_run).values_list("rationale", flat=True))
    assert rationales and all(r.startswith("SECRET-RATIONALE-") for r in rationales)

    report = run_report(judged_run)

    assert "<h2>Evaluator</h2>" in report
    assert "SECRET-RATIONALE" not in report


def test_it_is_the_same_document_each_time_but_for_its_generation_time(judged_run):
    first = run_report(judged_run)
    cache.clear()  # the pairwise verdicts drawn afresh, from the same seed

    second = run_report(judged_run)

    assert without_generation_time(first) == without_generation_time(second)


def test_the_command_writes_the_document_the_download_gives(bob, judged_run):
    out = io.StringIO()
    call_command("export_run", str(judged_run.code), "--format", "html", stdout=out)

    downloaded = body(download(client_for(bob), judged_run))

    assert without_generation_time(out.getvalue()) == without_generation_time(downloaded)


def test_it_reads_the_summaries_never_the_attempts(judged_run):
    with CaptureQueriesContext(connection) as queries:
        run_report(judged_run)

    assert not [q["sql"] for q in queries.captured_queries if '"experiments_attempt"' in q["sql"]]
    assert len(queries) <= 12


def test_an_inference_only_run_says_why_it_has_no_quality_board_nor_verdicts(built_run):
    run, _ = built_run(PLANS, inference_only=True)
    refresh_run_summaries(run.pk)

    report = run_report(run)

    assert "This run was inference-only: no patch was validated, so none can be resolved" in report
    assert "nothing to compare pair by pair" in report
    assert "<h2>Speed</h2>" in report and "<script" not in report
