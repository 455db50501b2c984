"""The run page while a run goes on: its live part polls until the run and its judging are
over, and its attempts list (its own URL) pages, sorts, filters and refreshes itself."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from evaluation.models import EvaluatorProfile, Verdict, VerdictStatus
from evaluation.workloads import workload_for
from experiments.actions import do_run_action, do_start_run
from experiments.attempt_list import PAGE_SIZE
from experiments.forms import SORT_CHOICES
from experiments.models import AttemptStatus, RunStatus
from tests.conftest import client_for
from tests.experiments.attempt_list import NAVIGATE, expected_order, link, list_url, live_url, pages_forward, shown
from tests.factories import run_in_every_state

LIVE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "live"}
REFRESH = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "attempt-rows"}
RATIONALE = "Staff only: the patch copies the gold patch's comments word for word."


@pytest.fixture
def run(experiment, alice):
    """A running run of 8 queued attempts (its jobs are never enqueued: no commit)."""
    return do_start_run(experiment, alice)


@pytest.fixture
def judge(db):
    return EvaluatorProfile.objects.create(name="judge", provider="mock", model_name="mock-judge")


@pytest.fixture
def answered_run(run, judge):
    """The run, finished: every attempt answered, judged by ``judge`` (no verdict yet)."""
    run.attempts.update(status=AttemptStatus.COMPLETED)
    run.status, run.evaluator_profile = RunStatus.COMPLETED, judge
    run.save()
    return run


@pytest.fixture
def wide_run(org, dataset, alice):
    return run_in_every_state(org, dataset, alice, repetitions=5)


# --- the live part -----------------------------------------------------------------------


def test_it_keeps_polling_while_the_evaluator_judges_and_stops_after(bob, answered_run, judge):
    client = client_for(bob)
    attempts = list(answered_run.attempts.order_by("sequence"))

    response = client.get(live_url(answered_run), **LIVE)  # no judging job has started yet
    assert response.status_code == 200
    assert 'hx-trigger="every 1s"' in response.content.decode()
    assert "Judging: 0 of 8 answers judged" in response.content.decode()

    for attempt in attempts[:3]:
        Verdict.objects.create(attempt=attempt, profile=judge, status=VerdictStatus.JUDGED, overall=70)
    Verdict.objects.create(attempt=attempts[3], profile=judge, status=VerdictStatus.EVALUATOR_ERROR)
    Verdict.objects.create(attempt=attempts[4], profile=judge, status=VerdictStatus.PENDING)
    response = client.get(live_url(answered_run), **LIVE)
    assert response.status_code == 200
    assert "Judging: 4 of 8 answers judged" in response.content.decode()
    assert 'hx-trigger="every 1s"' in response.content.decode()

    Verdict.objects.filter(attempt=attempts[4]).update(status=VerdictStatus.JUDGED)
    for attempt in attempts[5:]:
        Verdict.objects.create(attempt=attempt, profile=judge, status=VerdictStatus.JUDGED, overall=40)
    response = client.get(live_url(answered_run), **LIVE)
    assert response.status_code == 286  # htmx stops polling
    content = response.content.decode()
    assert "hx-trigger" not in content
    assert "8 judged" in content and "judging" not in content


def test_another_profiles_verdicts_do_not_count(bob, answered_run, judge):
    other = EvaluatorProfile.objects.create(name="other", provider="mock", model_name="mock-judge")
    for attempt in answered_run.attempts.all():
        Verdict.objects.create(attempt=attempt, profile=other, status=VerdictStatus.JUDGED, overall=50)

    response = client_for(bob).get(live_url(answered_run), **LIVE)

    assert response.status_code == 200
    assert "Judging: 0 of 8 answers judged" in response.content.decode()


def test_the_full_page_says_how_far_judging_has_got(bob, answered_run, judge):
    attempt = answered_run.attempts.order_by("sequence").first()
    Verdict.objects.create(attempt=attempt, profile=judge, status=VerdictStatus.JUDGED, overall=90)

    response = client_for(bob).get(live_url(answered_run))

    assert response.status_code == 200
    content = response.content.decode()
    assert "Judging: 1 of 8 answers judged" in content
    assert f'hx-get="{live_url(answered_run)}" hx-trigger="every 1s"' in content


def test_the_page_and_its_polled_fragment_are_cached_apart(bob, run):
    """The live poll asks the run page's own address for a fragment: the browser must not
    keep the fragment as the page (going back to the page showed the fragment alone)."""
    client = client_for(bob)
    page, fragment = client.get(live_url(run)), client.get(live_url(run), HTTP_HX_REQUEST="true")
    assert 'id="attempts' in page.content.decode() and 'id="attempts' not in fragment.content.decode()
    for response in (page, fragment):
        assert "HX-Request" in response.headers["Vary"]


def test_a_run_without_an_evaluator_stops_polling_once_finished(bob, run):
    run.attempts.update(status=AttemptStatus.COMPLETED)
    run.status = RunStatus.COMPLETED
    run.save()

    response = client_for(bob).get(live_url(run), **LIVE)

    assert response.status_code == 286
    assert "judging" not in response.content.decode() and " judged</" not in response.content.decode()


def test_a_cancelled_run_keeps_polling_while_its_running_attempts_answer(bob, run):
    first = run.attempts.order_by("sequence").first()
    run.attempts.filter(pk=first.pk).update(status=AttemptStatus.RUNNING)
    do_run_action(run, "cancel")
    client = client_for(bob)

    response = client.get(live_url(run), **LIVE)
    assert response.status_code == 200
    assert "1 running · 0 queued · 0 failed · 7 cancelled" in response.content.decode()

    run.attempts.filter(pk=first.pk).update(status=AttemptStatus.COMPLETED)
    assert client.get(live_url(run), **LIVE).status_code == 286


def test_no_page_shows_the_evaluators_rationale(bob, answered_run, judge):
    for attempt in answered_run.attempts.all():
        Verdict.objects.create(
            attempt=attempt, profile=judge, status=VerdictStatus.JUDGED, overall=60, rationale=RATIONALE
        )
    client = client_for(bob)

    for response in (
        client.get(live_url(answered_run)),
        client.get(live_url(answered_run), **LIVE),
        client.get(list_url(answered_run), **NAVIGATE),
        client.get(list_url(answered_run), **REFRESH),
    ):
        assert response.status_code in (200, 286)
        assert "8 judged" in response.content.decode() or "attempt-rows" in response.content.decode()
        assert RATIONALE not in response.content.decode()


# --- the attempts list: paging and sorting -----------------------------------------------


def test_the_first_page_shows_the_first_attempts_in_execution_order(bob, wide_run):
    response = client_for(bob).get(list_url(wide_run), **NAVIGATE)

    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="attempts">')
    assert "<html" not in content and 'id="live"' not in content
    assert shown(response) == list(range(PAGE_SIZE))
    next_page = f"?after={PAGE_SIZE - 1}"
    assert f'href="{live_url(wide_run)}{next_page}#attempts" hx-get="{list_url(wide_run)}{next_page}"' in content
    assert "Previous" not in content
    # The address bar shows the run page with this list, for a reload or a shared link.
    assert response["HX-Push-Url"] == f"{live_url(wide_run)}#attempts"


def test_each_row_links_to_its_attempt_and_its_task_on_the_run(bob, wide_run):
    """A guard: the rows' addresses are put together from one reversed address each, not
    reversed row by row; they must be the ones reverse() gives."""
    response = client_for(bob).get(live_url(wide_run), {"sort": "-latency"})

    rows = re.findall(
        r'<tr><td class="num"><a href="([^"]+)">(\d+)</a></td><td class="task"><a href="([^"]+)">',
        html.unescape(response.content.decode()),
    )
    attempts = {a.sequence: a for a in wide_run.attempts.select_related("task")}
    assert len(rows) == PAGE_SIZE
    for url, sequence, task_url in rows:
        attempt = attempts[int(sequence)]
        assert url == reverse("experiments:attempt", args=[attempt.code])
        assert task_url == reverse("experiments:run_task", args=[wide_run.code, attempt.task.code])


def test_page_two_has_the_next_rows_in_order(bob, wide_run):
    client = client_for(bob)

    second = client.get(list_url(wide_run), {"after": PAGE_SIZE - 1}, **NAVIGATE)

    assert second.status_code == 200
    assert shown(second) == list(range(PAGE_SIZE, 2 * PAGE_SIZE))
    assert second["HX-Push-Url"] == f"{live_url(wide_run)}?after={PAGE_SIZE - 1}#attempts"
    assert link(second, "next") == QueryDict(f"after={2 * PAGE_SIZE - 1}")
    assert link(second, "prev") == QueryDict(f"before={PAGE_SIZE}")
    back = client.get(list_url(wide_run), link(second, "prev"), **NAVIGATE)
    assert shown(back) == list(range(PAGE_SIZE))
    assert link(back, "prev") is None


@pytest.mark.parametrize("sort", [value for value, _ in SORT_CHOICES])
def test_every_sort_pages_through_every_attempt_once_in_order(bob, wide_run, sort):
    client = client_for(bob)

    pages = pages_forward(client, wide_run, {"sort": sort})

    assert [sequence for page in pages for sequence in page] == expected_order(wide_run, sort)
    assert [len(page) for page in pages] == [PAGE_SIZE, PAGE_SIZE, wide_run.total_attempts - 2 * PAGE_SIZE]
    # Back from the last page, each page is the same as on the way forward.
    last = client.get(list_url(wide_run), {"sort": sort, "after": pages[1][-1]}, **NAVIGATE)
    previous = client.get(list_url(wide_run), link(last, "prev"), **NAVIGATE)
    assert shown(previous) == pages[1]


def test_a_column_heading_sorts_by_it_then_reverses_it(bob, wide_run):
    client = client_for(bob)
    page = client.get(live_url(wide_run)).content.decode()
    assert f'href="{live_url(wide_run)}?sort=latency#attempts"' in page

    by_latency = client.get(list_url(wide_run), {"sort": "latency", "after": 3}, **NAVIGATE)
    content = by_latency.content.decode()
    assert '<th class="num" aria-sort="ascending">' in content
    assert f'hx-get="{list_url(wide_run)}?sort=-latency"' in content  # reversed, from the first page


# --- the attempts list: filters ----------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "filters"),
    [
        ({"arm": "oracle"}, {"arm__label": "oracle"}),
        ({"status": "queued"}, {"status": "queued"}),
        ({"status": "failed", "sort": "-cost"}, {"status": "failed"}),
        ({"outcome": "model_success"}, {"status": "completed", "sequence__regex": "[^3]$"}),
        ({"outcome": "model_failure"}, {"status": "failed", "error_category": "timeout"}),
        (
            # The rate-limited failures and the answers the harness gave no verdict on.
            {"outcome": "infrastructure_failure", "sort": "latency"},
            {"sequence__regex": "[03]$"},
        ),
        ({"status": "completed", "outcome": "infrastructure_failure", "sort": "-cost"}, {"sequence__regex": "3$"}),
        (
            {"arm": "noisy", "outcome": "model_success", "sort": "-cost"},
            {"arm__label": "noisy", "status": "completed", "sequence__regex": "[^3]$"},
        ),
        ({"status": "queued", "outcome": "model_failure"}, {"pk": None}),
    ],
)
def test_each_filter_lists_its_attempts_only(bob, wide_run, params, filters):
    pages = pages_forward(client_for(bob), wide_run, params)

    listed = [sequence for page in pages for sequence in page]
    assert listed == expected_order(wide_run, params.get("sort", "sequence"), **filters)
    assert (listed != []) == ("pk" not in filters)


def test_the_filter_form_keeps_what_it_filters(bob, wide_run):
    response = client_for(bob).get(live_url(wide_run), {"arm": "noisy", "outcome": "model_failure"})

    assert response.status_code == 200
    content = response.content.decode()
    assert '<option value="noisy" selected>noisy</option>' in content
    assert '<option value="model_failure" selected>model failure</option>' in content
    assert set(shown(response)) == set(
        wide_run.attempts.filter(arm__label="noisy", error_category="timeout").values_list("sequence", flat=True)
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"status": "exploded"}, "Status: Select a valid choice. exploded is not one of the available choices."),
        ({"arm": "nobody"}, "Arm: Select a valid choice. nobody is not one of the available choices."),
        ({"outcome": "lucky"}, "Outcome: Select a valid choice. lucky is not one of the available choices."),
        ({"sort": "id"}, "Sort: Select a valid choice. id is not one of the available choices."),
        ({"after": "ten"}, "After: Enter a whole number."),
        ({"after": "99999999999"}, "After: Ensure this value is less than or equal to 2147483647."),
        ({"before": "100000"}, "Before: This run has no attempt #100000 to start the page from."),
        ({"after": "1", "before": "5"}, "A page starts after one attempt or ends before one, not both."),
    ],
)
def test_a_bad_filter_gets_a_clear_message_not_an_error(bob, wide_run, params, message):
    client = client_for(bob)

    for response in (client.get(live_url(wide_run), params), client.get(list_url(wide_run), params, **NAVIGATE)):
        assert response.status_code == 200
        content = response.content.decode()
        assert f"<li>{message}</li>" in html.unescape(content)
        assert '<table class="attempts">' not in content
        assert "Show every attempt" in content


# --- the attempts list: access and refreshing --------------------------------------------


def test_it_checks_ownership(charlie, wide_run):
    client = client_for(charlie)

    assert client.get(list_url(wide_run), **NAVIGATE).status_code == 404
    assert client.get(list_url(wide_run), **REFRESH).status_code == 404
    assert client.get(list_url(wide_run), {"after": 3}).status_code == 404


def test_a_viewer_may_read_it(vera, wide_run):
    assert client_for(vera).get(list_url(wide_run), **NAVIGATE).status_code == 200


def test_without_htmx_it_sends_the_browser_to_the_run_page(bob, wide_run):
    response = client_for(bob).get(list_url(wide_run), {"status": "failed", "sort": "-cost"})

    assert response.status_code == 302
    assert response["Location"] == f"{live_url(wide_run)}?status=failed&sort=-cost#attempts"


def test_the_rows_refresh_while_the_run_goes_on_and_stop_when_it_ends(bob, wide_run):
    client = client_for(bob)
    params = {"status": "completed", "sort": "-latency", "after": 5}
    refresh = f'hx-get="{list_url(wide_run)}?status=completed&amp;sort=-latency&amp;after=5" hx-trigger="every 2s"'

    response = client.get(list_url(wide_run), params, **REFRESH)
    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<div id="attempt-rows"')
    assert "<form" not in content  # a refresh leaves the filter form alone
    assert refresh in content
    assert "HX-Push-Url" not in response  # a refresh is not a new place in the history
    assert refresh in client.get(live_url(wide_run), params).content.decode()

    do_run_action(wide_run, "cancel")
    response = client.get(list_url(wide_run), params, **REFRESH)
    assert response.status_code == 200
    assert "hx-trigger" not in response.content.decode()
    assert "hx-trigger" not in client.get(live_url(wide_run), params).content.decode().split('id="attempts"')[1]


def test_a_page_of_the_list_costs_the_same_queries_whatever_the_run_size(bob, org, dataset, alice, wide_run):
    small_run = run_in_every_state(org, dataset, alice, repetitions=1)
    assert (small_run.total_attempts, wide_run.total_attempts) == (24, 120)
    client = client_for(bob)

    def queries(of_run) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(list_url(of_run), {"sort": "-cost", "after": 3}, **NAVIGATE).status_code == 200
        return len(captured.captured_queries)

    queries(small_run)  # warm up anything cached per process
    assert queries(small_run) == queries(wide_run)


# --- the boards while the run records -------------------------------------------------------


def test_the_boards_fill_in_while_the_run_records_with_no_worker_free(
    bob, experiment, alice, django_capture_on_commit_callbacks
):
    """Every worker may be busy with the run's attempt jobs until its last are taken: the job
    that records refreshes the boards itself, rather than queue a refresh behind them."""
    from experiments.jobs import execute_attempts
    from leaderboards.models import ArmSummary
    from prbench.queues import get_queue

    run = do_start_run(experiment, alice)  # not committed: no job queued, as if all were taken
    first_half = list(run.attempts.order_by("sequence").values_list("pk", flat=True)[:4])
    run.attempts.exclude(pk__in=first_half).update(status=AttemptStatus.RUNNING)  # in the other workers' jobs

    with django_capture_on_commit_callbacks(execute=True):
        assert execute_attempts(run.pk, first_half) == 4

    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # four attempts still to come
    assert sum(ArmSummary.objects.filter(run=run).values_list("scored", flat=True)) == 4
    assert not [job for job in get_queue().get_jobs() if job.id.startswith("summaries-")]
    response = client_for(bob).get(live_url(run), **LIVE)
    assert response.status_code == 200
    boards = response.context["boards"]
    assert sum(entry.arm.n for entry in boards.quality.entries) == 4
    assert "figures as of" in response.content.decode()


def test_a_poll_after_a_fold_shows_the_figures_it_added(bob, experiment, alice, django_capture_on_commit_callbacks):
    """The boards' HTML is kept between polls of unchanged summaries: the poll after a chunk
    folds must draw them anew, exactly as a first look at the page would."""
    from experiments.jobs import execute_attempts
    from leaderboards.pages import rendered_board_section

    run = do_start_run(experiment, alice)
    first, second = (
        list(ids) for ids in (run.attempts.order_by("sequence").values_list("pk", flat=True)[i : i + 2] for i in (0, 2))
    )
    run.attempts.exclude(pk__in=first).update(status=AttemptStatus.RUNNING)  # in other workers' jobs
    client = client_for(bob)
    with django_capture_on_commit_callbacks(execute=True):
        assert execute_attempts(run.pk, first) == 2
    before = boards_section(client.get(live_url(run), **LIVE))
    assert boards_section(client.get(live_url(run), **LIVE)) == before  # kept

    run.attempts.filter(pk__in=second).update(status=AttemptStatus.QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        assert execute_attempts(run.pk, second) == 2
    after = boards_section(client.get(live_url(run), **LIVE))

    assert after != before
    assert after == rendered_board_section(run, live_url(run), QueryDict()).strip()
    reliability = after[after.index('id="reliability"') : after.index("</table>", after.index('id="reliability"'))]
    assert sum(int(n) for n in re.findall(r'<tr><td>[^<]+</td><td class="num">(\d+)</td>', reliability)) == 4


def boards_section(response) -> str:
    content = response.content.decode()
    start = content.index('<section class="boards"')
    return content[start : content.index("</section>", start) + len("</section>")]


def test_the_page_reads_the_runs_arms_once_for_all_it_shows_of_them(bob, run):
    """Their limits, the arms stopped as misconfigured, the arm filter and the SWE-bench
    downloads per arm all come from one read of the run's arms (the boards, kept as drawn,
    read none)."""
    first, *rest = list(run.arms.all())
    first.misconfigured_at = timezone.now()
    first.misconfigured_error, first.misconfigured_message = "auth", "the key was refused"
    first.save()
    client = client_for(bob)
    client.get(live_url(run))  # the boards are drawn, and kept while the summaries stand still
    with CaptureQueriesContext(connection) as captured:
        response = client.get(live_url(run))

    assert response.status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if 'FROM "experiments_runarm"' in q["sql"]]
    assert len(reads) == 1, "\n".join(reads)
    page = html.unescape(response.content.decode())
    assert f"{first.label} stopped after" in page and "the key was refused" in page
    assert not [arm for arm in rest if f"{arm.label} stopped after" in page]
    arm_filter = page.split('<select name="arm"')[1].split("</select>")[0]
    assert all(f'<option value="{arm.label}"' in arm_filter for arm in [first, *rest]), arm_filter
    assert workload_for(run.experiment.dataset.kind).answers_are_patches  # so SWE-bench downloads, per arm
    assert all(f"<code>{arm.label}</code>" in page for arm in [first, *rest])  # a predictions file each
