"""A failed or stopped run says why at the top of its page: the errors its attempts failed
with (grouped, the most common first, from a bounded read), who cancelled it and when, the
budget that refused its calls."""

from __future__ import annotations

import html
import re
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from experiments import stoppage
from experiments.actions import ArmSpec, do_replace_arms, do_run_action, do_start_run
from experiments.models import AttemptStatus, RunStatus
from providers.errors import ErrorCategory
from providers.models import ProviderCredential
from tests.conftest import client_for, work_queue
from tests.factories import run_in_every_state

KEY = "sk-test-refused-0000000000"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_page(user, run, **headers) -> str:
    response = client_for(user).get(reverse("experiments:run", args=[run.code]), **headers)
    assert response.status_code in (200, 286)
    return html.unescape(response.content.decode())


@pytest.fixture
def refused_run(org, experiment, start):
    """A run whose only arm's provider refuses every connection: it fails."""
    port = closed_port()
    credential = ProviderCredential(org=org, provider="openai", base_url=f"http://127.0.0.1:{port}/v1")
    credential.set_api_key(KEY)
    credential.save()
    do_replace_arms(experiment, [ArmSpec("local", "openai", "gpt-4o", {"max_retries": 0})])
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    run.port = port
    return run


def test_a_run_whose_provider_refuses_connections_says_so_at_the_top(bob, refused_run):
    assert refused_run.status == RunStatus.FAILED
    assert set(refused_run.attempts.values_list("error_category", flat=True)) == {ErrorCategory.CONNECTION}

    content = run_page(bob, refused_run)

    message = f"could not connect to the provider at 127.0.0.1:{refused_run.port}: connection refused"
    top = content.split('class="runbar"')[0]
    assert "Failed: all 4 attempts failed with the same error." in top
    assert f"4 ×</span> <code>connection</code> {message}</li>" in top
    assert "The most common errors among" not in top  # all of them were read
    assert KEY not in content and KEY[:12] not in content
    # No more than each attempt's own page says.
    attempt = refused_run.attempts.first()
    attempt_page = client_for(bob).get(reverse("experiments:attempt", args=[attempt.code])).content.decode()
    assert message in html.unescape(attempt_page)
    # The last poll of the live part says it too.
    assert "Failed: all 4 attempts" in run_page(bob, refused_run, HTTP_HX_REQUEST="true")


def test_a_cancelled_run_says_who_cancelled_it_and_when(bob, alice, experiment):
    run = do_start_run(experiment, alice)
    client = client_for(alice)

    response = client.post(reverse("experiments:run_action", args=[run.code, "cancel"]))
    assert response.status_code == 302

    run.refresh_from_db()
    assert (run.status, run.cancelled_by) == (RunStatus.CANCELLED, alice)
    at = timezone.localtime(run.finished_at).strftime("%H:%M")
    content = run_page(bob, run)
    assert f"Cancelled by alice@example.com at {at}: 8 attempts were not made." in content.split('class="runbar"')[0]


def test_a_run_cancelled_from_the_command_line_says_when(bob, experiment):
    run = do_start_run(experiment)
    first = run.attempts.order_by("sequence").first()
    run.attempts.filter(pk=first.pk).update(status=AttemptStatus.FAILED, error_category=ErrorCategory.TIMEOUT)
    do_run_action(run, "cancel")
    run.refresh_from_db()

    content = run_page(bob, run)

    at = timezone.localtime(run.finished_at).strftime("%H:%M")
    assert f"Cancelled at {at}: 7 attempts were not made." in content
    assert "1 ×</span> <code>timeout</code>" in content


def test_a_running_or_completed_run_has_no_banner(bob, experiment, start):
    run = do_start_run(experiment)
    assert 'class="stopped"' not in run_page(bob, run)
    done = start(experiment)
    work_queue()
    done.refresh_from_db()
    assert done.status == RunStatus.COMPLETED and 'class="stopped"' not in run_page(bob, done)


def test_the_errors_are_grouped_from_a_bounded_read(bob, org, dataset, alice, monkeypatch):
    monkeypatch.setattr(stoppage, "FAILURES_READ", 5)
    run = run_in_every_state(org, dataset, alice, repetitions=5)
    run.attempts.filter(status=AttemptStatus.QUEUED).update(status=AttemptStatus.CANCELLED)
    run.status = RunStatus.FAILED
    run.save()
    failed = run.attempts.filter(status=AttemptStatus.FAILED).count()

    content = run_page(bob, run)

    assert "Failed: no attempt was answered; " in content
    assert f"The most common errors among 5 of its {failed} failed attempts." in content
    causes = content.split('class="causes"')[1].split("</ul>")[0]
    assert sum(int(n) for n in re.findall(r'<span class="count">(\d+) ×</span>', causes)) == 5


def test_the_banner_costs_the_same_queries_whatever_the_failures(bob, org, dataset, alice):
    def queries(run) -> int:
        client = client_for(bob)
        client.get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")  # warm up
        with CaptureQueriesContext(connection) as captured:
            client.get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")
        return len(captured.captured_queries)

    small, large = (run_in_every_state(org, dataset, alice, repetitions=n) for n in (1, 5))
    for run in (small, large):
        run.status = RunStatus.FAILED
        run.save()
    assert queries(small) == queries(large)
