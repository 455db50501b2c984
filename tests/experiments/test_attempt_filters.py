"""The run page's attempts list filtered to wrong (or right) answers, by error category, by
task, by text in the question and by text in the answer: each alone and together, paged,
in the URL with and without htmx, and never for an outsider."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext

from experiments import attempt_list
from experiments.attempt_list import PAGE_SIZE
from experiments.models import Attempt, AttemptStatus
from providers.errors import ErrorCategory
from tests.conftest import client_for
from tests.experiments.attempt_list import NAVIGATE, expected_order, link, list_url, live_url, pages_forward, shown
from tests.factories import run_in_every_state

NEEDLE = "Needle"  # in some answers, in mixed case


@pytest.fixture
def graded_run(org, dataset, alice):
    return grade(run_in_every_state(org, dataset, alice, repetitions=5))


def grade(run):
    """The answered attempts graded (a third right), each with an answer that says its
    sequence; one in seven holds the needle."""
    attempts = list(run.attempts.filter(status=AttemptStatus.COMPLETED))
    for attempt in attempts:
        attempt.resolved = attempt.sequence % 3 == 0
        needle = "with a nEEDle in it" if attempt.sequence % 7 == 0 else "plain"
        attempt.extracted_answer = f"answer {attempt.sequence}: {needle}"
        attempt.latency_ms = attempt.latency_ms or 100
        attempt.cost_usd = attempt.cost_usd if attempt.cost_usd is not None else Decimal("0.001")
    run.attempts.bulk_update(attempts, ["resolved", "extracted_answer", "latency_ms", "cost_usd"])
    return run


def listed(client, run, params) -> list[int]:
    return [sequence for page in pages_forward(client, run, params) for sequence in page]


def a_task(run, position: int = 3):
    return run.experiment.dataset.tasks.order_by("position")[position]


@pytest.mark.parametrize(
    ("params", "filters"),
    [
        ({"result": "wrong"}, {"status": "completed", "resolved": False}),
        ({"result": "right", "sort": "-latency"}, {"status": "completed", "resolved": True}),
        (
            {"result": "wrong", "outcome": "model_success", "sort": "cost"},
            {"resolved": False, "outcome": "model_success"},
        ),
        ({"error": "rate_limited"}, {"error_category": ErrorCategory.RATE_LIMITED}),
        ({"error": "timeout", "sort": "-cost"}, {"error_category": ErrorCategory.TIMEOUT}),
        ({"error": "timeout", "arm": "noisy"}, {"error_category": ErrorCategory.TIMEOUT, "arm__label": "noisy"}),
        ({"error": "connection"}, {"pk": None}),
        ({"answer": NEEDLE}, {"extracted_answer__icontains": "needle"}),
        ({"answer": NEEDLE, "sort": "-latency"}, {"extracted_answer__icontains": "needle"}),
        ({"answer": NEEDLE, "result": "right"}, {"extracted_answer__icontains": "needle", "resolved": True}),
        ({"answer": NEEDLE, "status": "failed"}, {"pk": None}),
        ({"result": "wrong", "status": "queued"}, {"pk": None}),
    ],
)
def test_each_filter_and_their_combinations_list_their_attempts_only(bob, graded_run, params, filters):
    found = listed(client_for(bob), graded_run, params)

    assert found == expected_order(graded_run, params.get("sort", "sequence"), **filters)
    assert (found != []) == ("pk" not in filters)


def test_a_task_lists_its_attempts_alone(bob, graded_run):
    task = a_task(graded_run)

    found = listed(client_for(bob), graded_run, {"task": task.external_id, "sort": "-cost"})

    assert found == expected_order(graded_run, "-cost", task=task)
    assert len(found) == 2 * 5  # two arms, five repetitions


def test_text_in_the_question_lists_the_attempts_at_the_tasks_that_ask_it(bob, graded_run):
    task = a_task(graded_run, 5)
    words = " ".join(task.problem_statement.splitlines()[0].split()[1:4])
    asking = graded_run.experiment.dataset.tasks.filter(problem_statement__icontains=words)
    assert asking.count() >= 1

    client = client_for(bob)
    found = listed(client, graded_run, {"question": words.upper()})
    assert found == expected_order(graded_run, "sequence", task__in=asking)

    # With the other filters: the same tasks' wrong answers, and text in their answers.
    both = listed(client, graded_run, {"question": words, "result": "wrong", "answer": "plain"})
    assert both == expected_order(
        graded_run, "sequence", task__in=asking, resolved=False, extracted_answer__icontains="plain"
    )
    nothing = listed(client, graded_run, {"question": "words no question has"})
    assert nothing == []


def test_a_question_matching_many_tasks_lists_the_first_ones_and_says_so(bob, graded_run, monkeypatch):
    from experiments import forms

    monkeypatch.setattr(forms, "QUESTION_TASKS", 2)
    first_two = list(graded_run.experiment.dataset.tasks.order_by("position")[:2])

    response = client_for(bob).get(list_url(graded_run), {"question": " "}, **NAVIGATE)  # blank: no filter
    assert "More than" not in response.content.decode()
    response = client_for(bob).get(list_url(graded_run), {"question": "e"}, **NAVIGATE)

    content = html.unescape(response.content.decode())
    assert "More than 2 tasks have this text in their problem statement" in content
    assert set(shown(response)) <= set(expected_order(graded_run, "sequence", task__in=first_two))


def test_an_answer_search_reads_a_bounded_window_a_page_and_pages_through_every_match(bob, graded_run, monkeypatch):
    monkeypatch.setattr(attempt_list, "SEARCH_WINDOW", 9)
    monkeypatch.setattr(attempt_list, "PAGE_SIZE", 2)
    client = client_for(bob)
    expected = expected_order(graded_run, "-latency", extracted_answer__icontains="needle")

    pages = pages_forward(client, graded_run, {"answer": NEEDLE, "sort": "-latency"})

    assert [sequence for page in pages for sequence in page] == expected
    assert all(len(page) <= 2 for page in pages)
    # A window without a match still leads on, so a rare text is found a window at a time.
    assert [] in pages


def test_an_answer_search_pages_back_to_the_start(bob, graded_run, monkeypatch):
    monkeypatch.setattr(attempt_list, "SEARCH_WINDOW", 9)
    monkeypatch.setattr(attempt_list, "PAGE_SIZE", 2)
    client = client_for(bob)
    params = {"answer": NEEDLE, "sort": "latency"}
    expected = expected_order(graded_run, "latency", extracted_answer__icontains="needle")
    response = client.get(list_url(graded_run), params, **NAVIGATE)
    while link(response, "next") is not None:
        response = client.get(list_url(graded_run), link(response, "next"), **NAVIGATE)

    # Back from the last page, page by page: each in order, every match on one of them (the
    # first page, reached from behind, is the first page as it is read from the start).
    back = [shown(response)]
    while (query := link(response, "prev")) is not None:
        response = client.get(list_url(graded_run), query, **NAVIGATE)
        back.insert(0, shown(response))
    assert all(page == sorted(page, key=expected.index) for page in back)
    assert sorted({sequence for page in back for sequence in page}, key=expected.index) == expected


def test_a_page_with_a_filter_pages_back_and_forth(bob, graded_run):
    client = client_for(bob)
    params = {"result": "wrong", "sort": "latency"}
    expected = expected_order(graded_run, "latency", status="completed", resolved=False)
    assert len(expected) > PAGE_SIZE

    first = client.get(list_url(graded_run), params, **NAVIGATE)
    following = link(first, "next")
    assert following is not None and following["result"] == "wrong"
    second = client.get(list_url(graded_run), following, **NAVIGATE)
    assert shown(first) + shown(second) == expected[: len(shown(first)) + len(shown(second))]
    again = client.get(list_url(graded_run), link(second, "prev"), **NAVIGATE)
    assert shown(again) == shown(first)


def test_the_filters_are_in_the_url_with_and_without_htmx(bob, graded_run):
    client = client_for(bob)
    task = a_task(graded_run)
    params = {"result": "wrong", "task": task.external_id, "answer": "plain"}
    expected = expected_order(
        graded_run, "sequence", task=task, status="completed", resolved=False, extracted_answer__icontains="plain"
    )

    with_htmx = client.get(list_url(graded_run), params, **NAVIGATE)
    assert shown(with_htmx) == expected
    pushed = with_htmx["HX-Push-Url"]
    assert pushed.startswith(live_url(graded_run) + "?") and pushed.endswith("#attempts")
    assert QueryDict(pushed.split("?")[1].split("#")[0]) == QueryDict(
        f"result=wrong&task={task.external_id}&answer=plain"
    )

    # The address it pushed is the run page with the same list, as a shared link opens it.
    page = client.get(pushed.split("#")[0])
    assert page.status_code == 200 and shown(page) == expected
    content = html.unescape(page.content.decode())
    assert '<option value="wrong" selected>not resolved</option>' in content
    assert f'name="task" value="{task.external_id}"' in content and 'name="answer" value="plain"' in content

    without = client.get(list_url(graded_run), params)
    assert without.status_code == 302 and without["Location"].startswith(live_url(graded_run) + "?result=wrong")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"result": "maybe"}, "Result: Select a valid choice. maybe is not one of the available choices."),
        ({"error": "gremlins"}, "Error: Select a valid choice. gremlins is not one of the available choices."),
        ({"task": "no-such-task"}, "Task: This run's dataset has no task 'no-such-task'."),
        (
            {"error": "timeout", "result": "wrong"},
            "An attempt that ended in an error has no answer: filter by its error, or by its answer, not both.",
        ),
        ({"answer": "x" * 201}, "Answer: Ensure this value has at most 200 characters (it has 201)."),
    ],
)
def test_a_bad_filter_gets_a_clear_message(bob, graded_run, params, message):
    response = client_for(bob).get(live_url(graded_run), params)

    assert response.status_code == 200
    content = html.unescape(response.content.decode())
    assert f"<li>{message}</li>" in content and '<table class="attempts">' not in content


def test_the_filters_check_ownership(charlie, graded_run):
    client = client_for(charlie)
    task = a_task(graded_run)

    for params in ({"result": "wrong"}, {"task": task.external_id}, {"question": "the"}, {"answer": NEEDLE}):
        assert client.get(list_url(graded_run), params, **NAVIGATE).status_code == 404
        assert client.get(live_url(graded_run), params).status_code == 404


def test_a_filtered_page_costs_the_same_queries_whatever_the_run_size(bob, org, dataset, alice, graded_run):
    small = grade(run_in_every_state(org, dataset, alice, repetitions=1))
    client = client_for(bob)
    task = a_task(graded_run)

    def queries(run, params) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(list_url(run), params, **NAVIGATE).status_code == 200
        return len(captured.captured_queries)

    for params in (
        {"result": "wrong", "sort": "-cost", "after": 3},
        {"error": "timeout", "sort": "latency"},
        {"task": task.external_id, "question": "e", "result": "right"},
        {"answer": NEEDLE, "sort": "cost"},
    ):
        queries(small, params)  # warm up anything cached per process
        assert queries(small, params) == queries(graded_run, params), params


def test_a_swapped_list_settles_no_style_attribute(bob, graded_run):
    """Chromium gives the filters' text inputs a style attribute; htmx carried it over to the
    list swapped in (its "settle"), and the Content-Security-Policy refused each one: no style
    attribute ever applies under it, so htmx is told to settle none."""
    content = client_for(bob).get(live_url(graded_run)).content.decode()

    config = html.unescape(content.split('<meta name="htmx-config" content=')[1].split(">")[0]).strip("'")
    assert "style" not in json.loads(config)["attributesToSettle"]
    assert 'name="answer"' in content and 'type="text"' in content


def test_a_page_reads_its_streams_in_one_query_and_builds_no_attempt(bob, graded_run):
    """Each stream (status, outcome class, verdict) gives up to a page's worth of rows, most
    of which the merge drops: they are read as keys, every stream in one UNION ALL where the
    database allows it (Postgres; SQLite reads them one by one), and only the rows the page
    shows are read whole, in one more query, as plain values: no attempt is made a model."""
    client = client_for(bob)
    built: list[Attempt] = []

    def count(sender, instance, **kwargs) -> None:
        built.append(instance)

    last = graded_run.attempts.order_by("-sequence").values_list("sequence", flat=True)[0]
    assert last > PAGE_SIZE  # a full page before it
    post_init.connect(count, sender=Attempt)
    try:
        for params in ({}, {"sort": "-latency"}, {"result": "wrong", "sort": "cost", "after": 3}, {"before": last}):
            built.clear()
            with CaptureQueriesContext(connection) as captured:
                response = client.get(list_url(graded_run), params, **NAVIGATE)
            assert response.status_code == 200
            attempts = [q["sql"] for q in captured.captured_queries if 'FROM "experiments_attempt"' in q["sql"]]
            cursor = [sql for sql in attempts if '"experiments_attempt"."sequence" = ' in sql]
            whole = [sql for sql in attempts if '"experiments_attempt"."id" IN (' in sql]
            streams = [sql for sql in attempts if sql not in cursor and sql not in whole]
            in_execution_order = set(params) <= {"before"}  # every attempt: one range, no stream to merge
            if in_execution_order or connection.features.supports_slicing_ordering_in_compound:
                assert len(streams) == 1, params
                assert (streams[0].count("UNION ALL") > 1) != in_execution_order, params
            assert len(whole) == 1, params
            assert len(shown(response)) > 0 and built == [], params
    finally:
        post_init.disconnect(count, sender=Attempt)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres' planner")
@pytest.mark.parametrize("params", [{"status": "completed"}, {"sort": "-latency"}, {"sort": "cost", "before": 40}])
def test_each_verdict_of_the_answered_is_one_index_range_whatever_the_statistics(bob, graded_run, params):
    """The answered attempts without a verdict (``resolved IS NULL``) are a stream of their
    own, read from the answered index in the list's order. Postgres takes IS NULL for a
    range, not a constant, so unless the stream orders by the verdict first it cannot see
    that the index gives the order: at a million attempts, once statistics made a sort look
    dear, it walked the (run, status, sequence) index past every answered attempt to find
    none, 1.2 s for the first page. Here a sort is made dear outright (and a plan that needs
    one loses): no stream may then filter the answered attempts by verdict row by row."""
    with CaptureQueriesContext(connection) as captured:
        assert client_for(bob).get(list_url(graded_run), params, **NAVIGATE).status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if "UNION ALL" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        try:
            plans = []
            for sql in reads:
                cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
                plans.append(cursor.fetchone()[0][0]["Plan"])
        finally:
            cursor.execute("RESET enable_sort")

    scans = [node for plan in plans for node in _nodes(plan)]
    assert not [node["Filter"] for node in scans if "resolved" in node.get("Filter", "")], params
    assert sum("resolved IS NULL" in node.get("Index Cond", "") for node in scans) >= 2, params


@pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres' planner")
@pytest.mark.parametrize("params", [{}, {"after": 40}, {"sort": "-sequence", "before": 40}])
def test_every_attempt_in_execution_order_is_one_range_of_the_sequence_index(bob, graded_run, params):
    """The run page's default list (no filter, execution order) needs no streams: the (run,
    sequence) index gives it in order, so the page reads one range and sorts nothing, even
    with sorting made dear."""
    with CaptureQueriesContext(connection) as captured:
        response = client_for(bob).get(list_url(graded_run), params, **NAVIGATE)
    assert response.status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if re.search(r"ORDER BY .* LIMIT 51", q["sql"])]
    assert len(reads) == 1 and "UNION" not in reads[0], reads
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        try:
            cursor.execute("EXPLAIN (FORMAT JSON) " + reads[0])
            plan = cursor.fetchone()[0][0]["Plan"]
        finally:
            cursor.execute("RESET enable_sort")
        nodes = list(_nodes(plan))
        scanned = [node["Index Name"] for node in nodes if "Index Name" in node]
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname = ANY(%s)", [scanned])
        definitions = dict(cursor.fetchall())
    assert not [node for node in nodes if node["Node Type"] == "Sort"], plan
    assert [name for name in scanned if definitions[name].endswith("(run_id, sequence)")], definitions


def _nodes(plan: dict) -> Iterator[dict]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)
