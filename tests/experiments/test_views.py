"""Browser views of experiments, runs, attempts and datasets (experiments/urls.py)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from datasets.demo import DEMO_DATASET, load_demo_dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_run_action, do_save_experiment, do_start_run
from experiments.attempt_queue import run_has_jobs
from experiments.models import (
    Artifact,
    Attempt,
    AttemptStatus,
    Experiment,
    ModelArm,
    Run,
    RunStatus,
)
from orgs.access import SESSION_KEY
from orgs.models import Membership, Organization, Role
from providers import limits
from tests.conftest import client_for, work_queue
from tests.factories import ZERO_LATENCY_ARMS
from tests.forms import ORACLE, browser_submission, form_data

NOISY = {"label": "noisy", "provider": "mock", "model_name": "mock-noisy", "config": {"mode": "noisy", "quality": 0.3}}


# --- helpers -----------------------------------------------------------------------------


def arms_of(experiment) -> list[tuple]:
    return list(experiment.arms.order_by("position").values_list("label", "provider", "model_name", "config"))


def db_state() -> dict:
    """Everything a request in these tests could change."""
    return {
        "experiments": list(
            Experiment.objects.order_by("pk").values_list(
                "pk", "org_id", "name", "description", "sample_size", "sample_seed", "updated_at"
            )
        ),
        "arms": list(
            ModelArm.objects.order_by("pk").values_list(
                "pk", "experiment_id", "label", "provider", "model_name", "config"
            )
        ),
        "runs": list(Run.objects.order_by("pk").values_list("pk", "status", "seed", "finished_at")),
        "attempts": list(Attempt.objects.order_by("pk").values_list("pk", "status")),
        "artifacts": Artifact.objects.count(),
        "memberships": list(Membership.objects.order_by("pk").values_list("pk", "user_id", "org_id", "role")),
    }


def no_exceptions_client(user) -> Client:
    """A client that returns a 500 instead of raising, like a browser would see it."""
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture
def run(experiment, alice):
    """A running run whose 8 attempts are queued (its jobs are never enqueued: no commit)."""
    return do_start_run(experiment, alice)


@pytest.fixture
def attempt(run):
    return run.attempts.order_by("sequence").first()


@pytest.fixture
def finished_run(experiment, alice, django_capture_on_commit_callbacks):
    """An executed inference-only run (no validation, so it is quick)."""
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, alice, inference_only=True)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    return run


@pytest.fixture
def validated_attempt(org, dataset, alice, django_capture_on_commit_callbacks):
    """One oracle attempt, executed with real patch validation (about a second)."""
    spec = ExperimentSpec(name="Solo oracle", dataset=dataset, arms=[ArmSpec(**ORACLE)], sample_size=1, seed=3)
    experiment = do_save_experiment(org, spec, alice)
    with django_capture_on_commit_callbacks(execute=True):
        run = do_start_run(experiment, alice)
    work_queue()
    return Attempt.objects.get(run=run)


@pytest.fixture
def urls(experiment, run, attempt, dataset) -> dict[str, str]:
    return {
        "home": reverse("experiments:home"),
        "list": reverse("experiments:list"),
        "create": reverse("experiments:create"),
        "detail": reverse("experiments:detail", args=[experiment.code]),
        "edit": reverse("experiments:edit", args=[experiment.code]),
        "run_start": reverse("experiments:run_start", args=[experiment.code]),
        "run": reverse("experiments:run", args=[run.code]),
        "pause": reverse("experiments:run_action", args=[run.code, "pause"]),
        "resume": reverse("experiments:run_action", args=[run.code, "resume"]),
        "cancel": reverse("experiments:run_action", args=[run.code, "cancel"]),
        "attempt": reverse("experiments:attempt", args=[attempt.code]),
        "datasets": reverse("datasets:list"),
        "dataset": reverse("datasets:detail", args=[dataset.code]),
    }


# --- anonymous ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "list"),
        ("get", "create"),
        ("post", "create"),
        ("get", "detail"),
        ("get", "edit"),
        ("post", "edit"),
        ("post", "run_start"),
        ("get", "run"),
        ("post", "pause"),
        ("post", "cancel"),
        ("get", "attempt"),
        ("get", "datasets"),
        ("get", "dataset"),
    ],
)
def test_anonymous_is_redirected_to_login(urls, method, name, django_capture_on_commit_callbacks):
    before = db_state()
    with django_capture_on_commit_callbacks() as callbacks:
        response = getattr(Client(), method)(urls[name])

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={urls[name]}"
    assert db_state() == before
    assert callbacks == []


def test_home_sends_anonymous_to_login_and_members_to_the_list(alice):
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("account_login")

    response = client_for(alice).get("/")
    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:list")


# --- experiment list ---------------------------------------------------------------------


def test_list_works(bob, experiment, run):
    response = client_for(bob).get(reverse("experiments:list"))

    assert response.status_code == 200
    content = response.content.decode()
    assert f'href="{reverse("experiments:detail", args=[experiment.code])}">Mock duel</a>' in content
    assert DEMO_DATASET in content
    assert f'href="{reverse("experiments:run", args=[run.code])}"' in content
    assert f'href="{reverse("experiments:create")}"' in content
    row = response.context["experiments"][0]
    assert (row.name, row.arm_count, row.run_count) == ("Mock duel", 2, 1)


def test_list_is_empty_for_a_new_org(bob, dataset):
    response = client_for(bob).get(reverse("experiments:list"))

    assert response.status_code == 200
    assert "No experiments yet." in response.content.decode()
    assert "No runs yet." in response.content.decode()


# --- experiment create -------------------------------------------------------------------


def test_create_page_works(bob, dataset):
    response = client_for(bob).get(reverse("experiments:create"))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h1>New experiment</h1>" in content
    assert 'name="arms-TOTAL_FORMS" value="1"' in content  # one mock arm to start from; "Add an arm" brings more
    assert f'<option value="{dataset.pk}">{DEMO_DATASET}</option>' in content


def test_the_form_sets_the_files_context_and_quarantine_choice(bob, dataset):
    client = client_for(bob)
    data = form_data(dataset, [ORACLE], context_mode="bm25", include_quarantined="on")
    response = client.post(reverse("experiments:create"), data)
    assert response.status_code == 302
    experiment = Experiment.objects.get()
    assert (experiment.context_mode, experiment.include_quarantined) == ("bm25", True)
    page = client.get(response["Location"]).content.decode()
    assert "Retrieved: BM25 over the repository" in page
    bad = client.post(reverse("experiments:create"), form_data(dataset, [ORACLE], name="x", context_mode="grep"))
    assert "Select a valid choice. grep is not one of the available choices." in bad.content.decode()


def test_create_works(bob, org, dataset):
    client = client_for(bob)
    response = client.post(reverse("experiments:create"), form_data(dataset, [ORACLE, NOISY | {"config": ""}]))

    assert response.status_code == 302
    experiment = Experiment.objects.get()
    assert response["Location"] == reverse("experiments:detail", args=[experiment.code])
    assert (experiment.org, experiment.name, experiment.description, experiment.dataset) == (
        org,
        "Shootout",
        "Two mocks",
        dataset,
    )
    assert (experiment.sample_size, experiment.sample_strategy, experiment.sample_seed, experiment.repetitions) == (
        3,
        "first",
        5,
        2,
    )
    assert experiment.created_by == bob
    assert arms_of(experiment) == [
        ("oracle", "mock", "mock-oracle", {"mode": "oracle"}),
        ("noisy", "mock", "mock-noisy", {}),
    ]
    page = client.get(response["Location"]).content.decode()
    assert "Saved Shootout." in page


def test_create_ignores_the_blank_extra_row_and_deleted_rows(bob, dataset):
    data = form_data(dataset, [ORACLE, NOISY]) | {
        "arms-1-DELETE": "on",
        "arms-TOTAL_FORMS": "3",
        "arms-2-label": "",
        "arms-2-provider": "",
        "arms-2-model_name": "",
        "arms-2-config": "{}",
    }
    response = client_for(bob).post(reverse("experiments:create"), data)

    assert response.status_code == 302
    assert arms_of(Experiment.objects.get()) == [("oracle", "mock", "mock-oracle", {"mode": "oracle"})]


def test_create_rejects_an_arm_config_the_mock_refuses(bob, dataset):
    bad = {"label": "broken", "provider": "mock", "model_name": "m", "config": {"mode": "bogus"}}
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, [ORACLE, bad]))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    assert ModelArm.objects.count() == 0
    assert "Arm &#x27;broken&#x27;: config.mode must be one of oracle, noisy, empty, error" in response.content.decode()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            '{"mode": "noisy", "quality": 2}',
            "Arm &#x27;broken&#x27;: config.quality must be a number between 0.0 and 1.0",
        ),
        ("[1, 2]", "Arm &#x27;broken&#x27;: config must be an object"),
        ("{not json", "Enter a valid JSON."),
    ],
)
def test_create_names_the_problem_with_an_arm_config(bob, dataset, config, message):
    bad = {"label": "broken", "provider": "mock", "model_name": "m", "config": config}
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, [bad]))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    assert message in response.content.decode()


def test_create_rejects_duplicate_arm_labels(bob, dataset):
    twin = ORACLE | {"label": "twin"}
    response = client_for(bob).post(
        reverse("experiments:create"), form_data(dataset, [twin, NOISY, twin | {"model_name": "other"}])
    )

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    assert ModelArm.objects.count() == 0
    assert "Arm labels must be unique: twin" in response.content.decode()


def test_create_needs_an_arm(bob, dataset):
    data = form_data(dataset, []) | {
        "arms-TOTAL_FORMS": "1",
        "arms-0-label": "",
        "arms-0-model_name": "",
        "arms-0-config": "{}",
    }
    response = client_for(bob).post(reverse("experiments:create"), data)

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    assert "An experiment needs at least one arm." in response.content.decode()


def test_create_refuses_a_duplicate_name(bob, experiment, dataset):
    before = db_state()
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, [ORACLE], name="  Mock duel "))

    assert response.status_code == 200
    assert db_state() == before
    assert "Another experiment in this organisation has that name." in response.content.decode()


def test_create_allows_a_name_used_in_another_org(charlie, experiment):
    other_dataset = load_demo_dataset(Organization.objects.get(slug="other"))
    response = client_for(charlie).post(
        reverse("experiments:create"), form_data(other_dataset, [ORACLE], name="Mock duel")
    )

    assert response.status_code == 302
    assert sorted(Experiment.objects.values_list("org__slug", "name")) == [
        ("acme", "Mock duel"),
        ("other", "Mock duel"),
    ]


def test_create_refuses_another_orgs_dataset(charlie, dataset):
    response = client_for(charlie).post(reverse("experiments:create"), form_data(dataset, [ORACLE]))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    assert "Select a valid choice." in response.content.decode()


def test_create_refuses_sample_size_zero(bob, dataset):
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, [ORACLE], sample_size=0))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0


def test_create_refuses_nan_in_an_arm_config(bob, dataset):
    arm = ORACLE | {"config": '{"mode": "oracle", "temperature": NaN}'}
    response = no_exceptions_client(bob).post(reverse("experiments:create"), form_data(dataset, [arm]))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0


# --- experiment detail -------------------------------------------------------------------


def test_detail_works(bob, experiment, run):
    response = client_for(bob).get(reverse("experiments:detail", args=[experiment.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h1>Mock duel</h1>" in content
    assert "4 tasks, random (seeded)" in content
    assert "<td>oracle</td>" in content and "<td>noisy</td>" in content
    assert f'action="{reverse("experiments:run_confirm", args=[experiment.code])}"' in content
    assert f'href="{reverse("experiments:edit", args=[experiment.code])}"' in content
    assert f'href="{reverse("experiments:run", args=[run.code])}"' in content
    assert "0 / 8" in content


# --- experiment edit ---------------------------------------------------------------------


def test_edit_page_works(bob, experiment):
    response = client_for(bob).get(reverse("experiments:edit", args=[experiment.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h1>Edit Mock duel</h1>" in content
    assert 'name="arms-TOTAL_FORMS" value="2"' in content  # the arms, no spare row
    assert 'name="arms-0-label" value="oracle"' in content
    assert 'name="arms-1-label" value="noisy"' in content


def test_edit_replaces_the_arms(bob, experiment, run):
    old_arm_ids = set(experiment.arms.values_list("pk", flat=True))
    data = form_data(
        experiment.dataset,
        [{"label": "solo", "provider": "mock", "model_name": "mock-solo", "config": {"mode": "empty"}}],
        name="Mock solo",
    )
    response = client_for(bob).post(reverse("experiments:edit", args=[experiment.code]), data)

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:detail", args=[experiment.code])
    experiment.refresh_from_db()
    assert (experiment.name, experiment.sample_size, experiment.repetitions) == ("Mock solo", 3, 2)
    assert arms_of(experiment) == [("solo", "mock", "mock-solo", {"mode": "empty"})]
    assert not ModelArm.objects.filter(pk__in=old_arm_ids).exists()
    assert Experiment.objects.count() == 1
    # The run keeps its own snapshot of the arms.
    assert list(run.arms.values_list("label", flat=True)) == ["oracle", "noisy"]


def test_edit_keeps_its_own_name(bob, experiment):
    data = form_data(experiment.dataset, [ORACLE, NOISY], name="Mock duel", description="renamed nothing")
    response = client_for(bob).post(reverse("experiments:edit", args=[experiment.code]), data)

    assert response.status_code == 302
    experiment.refresh_from_db()
    assert (experiment.name, experiment.description) == ("Mock duel", "renamed nothing")
    assert [a[0] for a in arms_of(experiment)] == ["oracle", "noisy"]


def test_edit_refuses_another_experiments_name(bob, org, dataset, experiment):
    do_save_experiment(org, ExperimentSpec(name="Taken", dataset=dataset, arms=[ArmSpec(**ORACLE)]), bob)
    before = db_state()
    response = client_for(bob).post(
        reverse("experiments:edit", args=[experiment.code]), form_data(dataset, [ORACLE], name="Taken")
    )

    assert response.status_code == 200
    assert db_state() == before
    assert "Another experiment in this organisation has that name." in response.content.decode()


def test_edit_with_an_invalid_arm_changes_nothing(bob, experiment):
    before = db_state()
    bad = {"label": "broken", "provider": "mock", "model_name": "m", "config": {"mode": "bogus"}}
    response = client_for(bob).post(
        reverse("experiments:edit", args=[experiment.code]), form_data(experiment.dataset, [ORACLE, bad])
    )

    assert response.status_code == 200
    assert db_state() == before
    assert "Arm &#x27;broken&#x27;: config.mode must be one of oracle, noisy, empty, error" in response.content.decode()


def test_edit_with_duplicate_labels_changes_nothing(bob, experiment):
    before = db_state()
    response = client_for(bob).post(
        reverse("experiments:edit", args=[experiment.code]),
        form_data(experiment.dataset, [ORACLE, NOISY | {"label": "oracle"}]),
    )

    assert response.status_code == 200
    assert db_state() == before
    assert "Arm labels must be unique: oracle" in response.content.decode()


def test_edit_form_saves_as_a_browser_submits_it(bob, experiment):
    client = client_for(bob)
    url = reverse("experiments:edit", args=[experiment.code])
    page = client.get(url)
    assert page.status_code == 200
    data = browser_submission(page.content.decode(), "arms-TOTAL_FORMS")
    assert data["arms-TOTAL_FORMS"] == "2" and "arms-2-label" not in data
    data["description"] = "edited in a browser"

    response = client.post(url, data)

    assert response.status_code == 302
    experiment.refresh_from_db()
    assert experiment.description == "edited in a browser"
    assert [a[0] for a in arms_of(experiment)] == ["oracle", "noisy"]


def test_create_form_saves_as_a_browser_submits_it(bob, dataset):
    """The create page's single row is the one the user fills in, so it does save."""
    client = client_for(bob)
    page = client.get(reverse("experiments:create"))
    assert page.status_code == 200
    data = browser_submission(page.content.decode(), "arms-TOTAL_FORMS")
    data |= {"name": "From the browser", "dataset": str(dataset.pk), "arms-0-label": "a", "arms-0-model_name": "m"}

    response = client.post(reverse("experiments:create"), data)

    assert response.status_code == 302
    experiment = Experiment.objects.get()
    assert experiment.name == "From the browser"
    assert arms_of(experiment) == [("a", "mock", "m", {})]


# --- run start ---------------------------------------------------------------------------


def test_run_start_works(bob, experiment, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client_for(bob).post(reverse("experiments:run_start", args=[experiment.code]), {"seed": "5"})

    assert response.status_code == 302
    run = Run.objects.get()
    assert response["Location"] == reverse("experiments:run", args=[run.code])
    assert (run.experiment, run.org, run.created_by) == (experiment, experiment.org, bob)
    assert (run.status, run.seed, run.inference_only, run.total_attempts) == (RunStatus.RUNNING, 5, False, 8)
    assert list(run.attempts.values_list("status", flat=True)) == [AttemptStatus.QUEUED] * 8
    assert run.config_snapshot["arms"][0]["label"] == "oracle"
    assert len(callbacks) == 1
    assert run_has_jobs(run.pk)


def test_run_start_defaults_to_the_experiment_seed_and_can_skip_validation(bob, experiment):
    response = client_for(bob).post(
        reverse("experiments:run_start", args=[experiment.code]), {"seed": "", "inference_only": "on"}
    )

    assert response.status_code == 302
    run = Run.objects.get()
    assert (run.seed, run.inference_only) == (11, True)


def test_run_start_refuses_an_experiment_without_arms(bob, org, dataset):
    experiment = do_save_experiment(org, ExperimentSpec(name="Empty", dataset=dataset, arms=[]), bob)
    client = client_for(bob)
    response = client.post(reverse("experiments:run_start", args=[experiment.code]))

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:detail", args=[experiment.code])
    assert Run.objects.count() == 0
    assert "Cannot start a run: the experiment has no arms" in client.get(response["Location"]).content.decode()


def test_run_start_names_an_arm_that_became_invalid(bob, experiment):
    experiment.arms.filter(label="noisy").update(config={"mode": "psychic"})
    client = client_for(bob)
    response = client.post(reverse("experiments:run_start", args=[experiment.code]))

    assert response.status_code == 302
    assert Run.objects.count() == 0
    assert "arm &#x27;noisy&#x27;: config.mode must be one of" in client.get(response["Location"]).content.decode()


def test_run_start_is_post_only(bob, experiment):
    response = client_for(bob).get(reverse("experiments:run_start", args=[experiment.code]))

    assert response.status_code == 405
    assert Run.objects.count() == 0


@pytest.mark.parametrize("seed", ["--1", "99999999999999999999"])
def test_run_start_survives_a_bad_seed(bob, experiment, seed):
    response = no_exceptions_client(bob).post(reverse("experiments:run_start", args=[experiment.code]), {"seed": seed})

    assert response.status_code == 302
    assert Run.objects.count() <= 1


# --- run detail --------------------------------------------------------------------------


def test_run_detail_works(bob, run):
    response = client_for(bob).get(reverse("experiments:run", args=[run.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<html" in content
    assert f"Run <code>{str(run.code)[:8]}</code>" in content
    assert '<span class="status running">running</span>' in content
    assert "0 / 8 attempts" in content
    assert "0 running · 8 queued · 0 failed" in content
    assert "<h2>Quality</h2>" in content and 'class="board quality"' in content
    quality = response.context["boards"].quality
    assert sorted((e.arm.label, e.arm.n, e.arm.resolved_rate, e.rank) for e in quality.entries) == [
        ("noisy", 0, None, None),
        ("oracle", 0, None, None),
    ]
    assert content.count("not scored") == 2
    assert content.count('href="/attempts/') == 8
    assert f'action="{reverse("experiments:run_action", args=[run.code, "pause"])}"' in content


def test_run_detail_shows_the_leaderboard_of_a_finished_run(bob, finished_run):
    response = client_for(bob).get(reverse("experiments:run", args=[finished_run.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert '<span class="status completed">completed</span>' in content
    assert "8 / 8 attempts" in content
    # Inference-only: nothing was validated, so there is no quality board, and it says why.
    assert response.context["boards"].quality is None and "was inference-only" in content
    assert "<code>mock/mock-oracle</code>" in content and "<code>mock/mock-noisy</code>" in content
    speed = response.context["boards"].speed
    assert sorted((e.arm.label, e.extra["calls"]) for e in speed.entries) == [("noisy", 4), ("oracle", 4)]
    assert "/pause/" not in content and "/cancel/" not in content


def test_run_detail_htmx_returns_the_live_partial_while_running(bob, run):
    response = client_for(bob).get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    content = response.content.decode()
    assert "<html" not in content
    assert "<h2>Attempts</h2>" not in content
    assert content.lstrip().startswith('<section id="live"')
    assert 'hx-trigger="every 1s"' in content
    assert "0 / 8 attempts" in content


def test_run_detail_shows_calls_waiting_for_a_slot_and_for_the_rate_limit(bob, run):
    arm_key = f"run-arm:{run.arms.order_by('pk').first().pk}"
    rate = limits.RateLimit(credential_id=1, requests_per_minute=1)
    assert limits.take_rate_budget(rate, 0, time.time()) == 0  # the minute's one request
    url = reverse("experiments:run", args=[run.code])

    def take_the_slot():
        with limits.arm_slot(arm_key, 1):
            pass

    with limits.arm_slot(arm_key, 1):
        waiters = [
            threading.Thread(target=take_the_slot),
            threading.Thread(target=limits.wait_for_rate_budget, args=(rate, 0, arm_key, time.monotonic() + 120)),
        ]
        for waiter in waiters:
            waiter.start()
        wait_until(lambda: limits.waiting_for([arm_key]) == limits.Waiting(for_slot=1, for_rate_limit=1))
        response = client_for(bob).get(url, HTTP_HX_REQUEST="true")
        limits.get_connection().delete(limits.rate_key(1))  # a full bucket again: the waiter goes
    for waiter in waiters:
        waiter.join(5)

    assert response.status_code == 200
    assert (
        '1 waiting for a provider slot</span> · <span class="flag">1 waiting for the credential\'s rate limit'
        in response.content.decode()
    )
    assert limits.waiting_for([arm_key]) == limits.Waiting()
    assert "waiting for" not in client_for(bob).get(url, HTTP_HX_REQUEST="true").content.decode()


def wait_until(condition, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_run_detail_htmx_stops_polling_once_finished(bob, finished_run):
    response = client_for(bob).get(reverse("experiments:run", args=[finished_run.code]), HTTP_HX_REQUEST="true")

    assert response.status_code == 286
    content = response.content.decode()
    assert "<html" not in content
    assert "hx-trigger" not in content
    assert '<span class="status completed">completed</span>' in content
    assert "8 / 8 attempts" in content


def test_run_detail_htmx_stops_polling_once_cancelled(bob, run):
    do_run_action(run, "cancel")
    response = client_for(bob).get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")

    assert response.status_code == 286
    assert "8 cancelled" in response.content.decode()


# --- run actions -------------------------------------------------------------------------


def test_pause_works(bob, run, django_capture_on_commit_callbacks):
    client = client_for(bob)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(reverse("experiments:run_action", args=[run.code, "pause"]))

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:run", args=[run.code])
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED
    assert run.attempts.filter(status=AttemptStatus.QUEUED).count() == 8
    assert callbacks == []
    content = client.get(response["Location"]).content.decode()
    assert '<span class="status paused">paused</span>' in content
    assert f'action="{reverse("experiments:run_action", args=[run.code, "resume"])}"' in content


def test_resume_works(bob, run, django_capture_on_commit_callbacks):
    do_run_action(run, "pause")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = client_for(bob).post(reverse("experiments:run_action", args=[run.code, "resume"]))

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert run.attempts.filter(status=AttemptStatus.QUEUED).count() == 8
    assert len(callbacks) == 1
    assert run_has_jobs(run.pk)


@pytest.mark.parametrize("paused_first", [False, True])
def test_cancel_works(bob, run, paused_first):
    if paused_first:
        do_run_action(run, "pause")
    client = client_for(bob)
    response = client.post(reverse("experiments:run_action", args=[run.code, "cancel"]))

    assert response.status_code == 302
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert run.finished_at is not None
    assert list(run.attempts.values_list("status", flat=True)) == [AttemptStatus.CANCELLED] * 8
    content = client.get(response["Location"]).content.decode()
    assert '<span class="status cancelled">cancelled</span>' in content
    assert "8 / 8 attempts" in content


@pytest.mark.parametrize(
    ("setup", "action", "message"),
    [
        (None, "resume", "cannot resume a run that is running"),
        ("pause", "pause", "cannot pause a run that is paused"),
        ("cancel", "cancel", "cannot cancel a run that is cancelled"),
        ("cancel", "resume", "cannot resume a run that is cancelled"),
        (None, "explode", "unknown action &#x27;explode&#x27;: choose pause, resume or cancel"),
    ],
)
def test_invalid_transition_changes_nothing(bob, run, setup, action, message, django_capture_on_commit_callbacks):
    if setup:
        do_run_action(run, setup)
    before = db_state()
    client = client_for(bob)
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(reverse("experiments:run_action", args=[run.code, action]))

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:run", args=[run.code])
    assert db_state() == before
    assert callbacks == []
    assert message in client.get(response["Location"]).content.decode()


def test_run_action_is_post_only(bob, run):
    response = client_for(bob).get(reverse("experiments:run_action", args=[run.code, "cancel"]))

    assert response.status_code == 405
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING


# --- attempt detail ----------------------------------------------------------------------


def test_attempt_detail_works(bob, validated_attempt):
    response = client_for(bob).get(reverse("experiments:attempt", args=[validated_attempt.code]))

    assert response.status_code == 200
    assert validated_attempt.status == AttemptStatus.COMPLETED
    assert validated_attempt.resolved is True
    # The patch is the attempt's answer, kept once: no artifact repeats it.
    assert dict(validated_attempt.artifacts.values_list("kind", "status")) == {
        "validation": "passed",
        "build": "passed",
        "lint": "passed",
        "tests": "",
    }
    assert validated_attempt.build_ok is True and validated_attempt.lint_clean is True
    content = response.content.decode()
    task_url = reverse("experiments:run_task", args=[validated_attempt.run.code, validated_attempt.task.code])
    task = validated_attempt.task
    assert f'oracle on <a href="{task_url}">{task.external_id} · {escape(task.title)[:20]}' in content
    assert '<span class="status passed">Passed</span>' in content
    assert '<span class="hdr">+++ b/' in content
    assert '<span class="hunk">@@ ' in content
    assert '<span class="add">+' in content and '<span class="del">-' in content
    assert '<dt>Resolved</dt><dd><span class="good">resolved</span></dd>' in content
    assert '<span class="good">compiles</span> · <span class="good">lint clean</span>' in content
    assert '<h3>Lint <span class="status passed">Passed</span></h3>' in content
    assert '<table class="tests">' in content and '<span class="status passed">passed</span>' in content
    assert "::test_" in content
    assert "reference_output" not in content


def test_attempt_detail_of_an_inference_only_attempt(bob, finished_run):
    attempt = finished_run.attempts.get(sequence=0)
    response = client_for(bob).get(reverse("experiments:attempt", args=[attempt.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "Not validated: the run is inference-only." in content
    assert not attempt.artifacts.exists()  # no empty "skipped" row: the run says it
    if attempt.patch_present:
        assert '<span class="hunk">@@ ' in content  # the patch, from the attempt's answer
    assert "reference_output" not in content


def test_attempt_detail_of_a_queued_attempt(bob, attempt):
    response = client_for(bob).get(reverse("experiments:attempt", args=[attempt.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert '<span class="status queued">queued</span>' in content
    assert "None yet: the attempt has not run." in content  # no messages sent yet
    assert "Nothing: there is no answer to read." in content  # and no patch
    assert "Not validated." in content
    assert "reference_output" not in content


# --- datasets ----------------------------------------------------------------------------


def test_datasets_works(bob, dataset):
    response = client_for(bob).get(reverse("datasets:list"))

    assert response.status_code == 200
    content = response.content.decode()
    assert f'<a href="{reverse("datasets:detail", args=[dataset.code])}">{DEMO_DATASET}</a>' in content
    assert '<td class="num">12</td>' in content


def test_datasets_lists_only_the_current_org(charlie, dataset):
    response = client_for(charlie).get(reverse("datasets:list"))

    assert response.status_code == 200
    assert DEMO_DATASET not in response.content.decode()


def test_dataset_works(bob, dataset):
    response = client_for(bob).get(reverse("datasets:detail", args=[dataset.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert f"<h1>{DEMO_DATASET}" in content
    assert "<code>01-slugify-max-length</code>" in content
    assert content.count('<tr><td class="num">') == 12


# --- ownership ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "detail"),
        ("get", "edit"),
        ("post", "edit"),
        ("post", "run_start"),
        ("get", "run"),
        ("post", "pause"),
        ("post", "resume"),
        ("post", "cancel"),
        ("get", "attempt"),
        ("get", "dataset"),
    ],
)
def test_it_checks_ownership(charlie, urls, experiment, method, name, django_capture_on_commit_callbacks):
    before = db_state()
    data = form_data(experiment.dataset, [ORACLE], name="Hijacked") if name == "edit" else {"seed": "1"}
    with django_capture_on_commit_callbacks() as callbacks:
        response = getattr(client_for(charlie), method)(urls[name], data if method == "post" else None)

    assert response.status_code == 404
    assert db_state() == before
    assert callbacks == []
    assert "Mock duel" not in response.content.decode()


def test_it_checks_ownership_with_htmx(charlie, run):
    response = client_for(charlie).get(reverse("experiments:run", args=[run.code]), HTTP_HX_REQUEST="true")

    assert response.status_code == 404


def test_outsider_list_shows_only_their_org(charlie, experiment, run):
    response = client_for(charlie).get(reverse("experiments:list"))

    assert response.status_code == 200
    content = response.content.decode()
    assert "Mock duel" not in content
    assert str(run.code)[:8] not in content
    assert "No experiments yet." in content


@pytest.mark.parametrize("name", ["experiments:detail", "experiments:run", "experiments:attempt", "datasets:detail"])
def test_unknown_code_is_404(bob, name):
    response = client_for(bob).get(reverse(name, args=["00000000-0000-0000-0000-000000000000"]))

    assert response.status_code == 404


# --- viewers -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["list", "detail", "run", "attempt", "datasets", "dataset"])
def test_viewer_can_read(vera, urls, name):
    response = client_for(vera).get(urls[name])

    assert response.status_code == 200
    content = response.content.decode()
    assert urls["create"] not in content
    assert urls["edit"] not in content
    assert urls["run_start"] not in content
    assert urls["pause"] not in content and urls["cancel"] not in content


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "create"),
        ("post", "create"),
        ("get", "edit"),
        ("post", "edit"),
        ("post", "run_start"),
        ("post", "pause"),
        ("post", "cancel"),
    ],
)
def test_viewer_cannot_write(vera, urls, experiment, method, name, django_capture_on_commit_callbacks):
    before = db_state()
    data = form_data(experiment.dataset, [ORACLE], name="By a viewer") if name in ("create", "edit") else {"seed": "1"}
    with django_capture_on_commit_callbacks() as callbacks:
        response = getattr(client_for(vera), method)(urls[name], data if method == "post" else None)

    assert response.status_code == 403
    assert db_state() == before
    assert callbacks == []


def test_viewer_cannot_resume_run(vera, run, django_capture_on_commit_callbacks):
    do_run_action(run, "pause")
    before = db_state()
    with django_capture_on_commit_callbacks() as callbacks:
        response = client_for(vera).post(reverse("experiments:run_action", args=[run.code, "resume"]))

    assert response.status_code == 403
    assert db_state() == before
    assert callbacks == []


def test_viewer_sees_no_write_controls_while_switched_to_an_org_she_owns(vera, experiment, run):
    own = Organization.objects.create(slug="vera-co", name="Vera Co")
    Membership.objects.create(user=vera, org=own, role=Role.OWNER)
    client = client_for(vera)
    assert client.post(reverse("orgs:switch", args=[own.code])).status_code == 302
    assert client.session[SESSION_KEY] == str(own.code)

    detail = client.get(reverse("experiments:detail", args=[experiment.code]))
    run_page = client.get(reverse("experiments:run", args=[run.code]))

    assert (detail.status_code, run_page.status_code) == (200, 200)
    assert reverse("experiments:run_start", args=[experiment.code]) not in detail.content.decode()
    assert reverse("experiments:edit", args=[experiment.code]) not in detail.content.decode()
    assert reverse("experiments:run_action", args=[run.code, "cancel"]) not in run_page.content.decode()


# --- query counts ------------------------------------------------------------------------


def count_queries(client, url, **extra) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **extra)
    assert response.status_code in (200, 286)
    return len(ctx.captured_queries)


def test_list_query_count_does_not_grow_with_experiments(
    bob, org, dataset, experiment, alice, django_assert_max_num_queries
):
    do_start_run(experiment, alice)
    client = client_for(bob)
    url = reverse("experiments:list")
    client.get(url)  # warm up anything cached per process
    with django_assert_max_num_queries(12):
        one = count_queries(client, url)

    for i in range(5):
        more = do_save_experiment(
            org, ExperimentSpec(name=f"Extra {i}", dataset=dataset, arms=[ArmSpec(**ORACLE), ArmSpec(**NOISY)]), alice
        )
        do_start_run(more, alice)
    response = client.get(url)
    assert response.status_code == 200
    assert response.content.decode().count('href="/runs/') == 6

    assert count_queries(client, url) == one


def test_experiment_detail_query_count_does_not_grow_with_runs(bob, experiment, alice):
    do_start_run(experiment, alice)
    client = client_for(bob)
    url = reverse("experiments:detail", args=[experiment.code])
    client.get(url)
    one = count_queries(client, url)

    for _ in range(4):
        do_start_run(experiment, alice)

    assert count_queries(client, url) == one


def test_run_detail_query_count_does_not_grow_with_attempts(
    bob, org, dataset, alice, finished_run, django_capture_on_commit_callbacks, django_assert_max_num_queries
):
    small = do_save_experiment(
        org, ExperimentSpec(name="Tiny", dataset=dataset, arms=[ZERO_LATENCY_ARMS[0]], sample_size=1), alice
    )
    with django_capture_on_commit_callbacks(execute=True):
        tiny_run = do_start_run(small, alice, inference_only=True)
    work_queue()
    assert (
        tiny_run.attempts.filter(status=AttemptStatus.COMPLETED).count(),
        finished_run.attempts.filter(status=AttemptStatus.COMPLETED).count(),
    ) == (1, 8)
    client = client_for(bob)
    # Both pages once first: the breakdowns under the boards are counted once per refresh of
    # the run's summaries and then read from the cache, for the small run and the large alike.
    client.get(reverse("experiments:run", args=[tiny_run.code]))
    client.get(reverse("experiments:run", args=[finished_run.code]))

    # The attempts list reads one range per status and outcome class, the answered ones' per
    # verdict too (eleven); the SWE-bench download menus read the run's arms; one SUM counts
    # the calls made again after a worker died mid-call.
    with django_assert_max_num_queries(25):
        one = count_queries(client, reverse("experiments:run", args=[tiny_run.code]))
    eight = count_queries(client, reverse("experiments:run", args=[finished_run.code]))
    one_live = count_queries(client, reverse("experiments:run", args=[tiny_run.code]), HTTP_HX_REQUEST="true")
    eight_live = count_queries(client, reverse("experiments:run", args=[finished_run.code]), HTTP_HX_REQUEST="true")

    assert eight == one
    assert eight_live == one_live


def test_attempt_detail_says_whether_the_patch_is_well_formed(bob, finished_run):
    attempt = finished_run.attempts.filter(arm__label="oracle").first()
    url = reverse("experiments:attempt", args=[attempt.code])
    content = client_for(bob).get(url).content.decode()
    assert f"well formed, {attempt.lines_changed} lines in {attempt.files_changed} file" in content
    finished_run.attempts.filter(pk=attempt.pk).update(patch_well_formed=False)
    content = client_for(bob).get(url).content.decode()
    assert "present, malformed," in content and "well formed" not in content


def test_a_task_page_shows_the_gold_patch_and_every_arms_attempt_side_by_side(bob, charlie, finished_run):
    attempt = finished_run.attempts.select_related("task").order_by("sequence").first()
    task = attempt.task
    url = reverse("experiments:run_task", args=[finished_run.code, task.code])
    response = client_for(bob).get(url)
    assert response.status_code == 200
    content = response.content.decode()
    assert task.external_id in content and "<h2>Gold patch</h2>" in content
    first_gold_line = next(line for line in task.gold_patch.splitlines() if line.startswith("+") and line[1:2] != "+")
    assert f'<span class="add">{escape(first_gold_line)}</span>' in content
    assert content.count('<section class="card">') == 2  # oracle and noisy, side by side
    oracle = finished_run.attempts.get(task=task, arm__label="oracle")
    assert reverse("experiments:attempt", args=[oracle.code]) in content
    # The run page links each attempt's task here.
    assert url in client_for(bob).get(reverse("experiments:run", args=[finished_run.code])).content.decode()
    # An outsider, and a task that is not in this run, get 404.
    assert client_for(charlie).get(url).status_code == 404
    other = reverse("experiments:run_task", args=[finished_run.code, uuid.uuid4()])
    assert client_for(bob).get(other).status_code == 404
