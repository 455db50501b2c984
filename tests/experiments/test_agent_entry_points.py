"""An experiment with a single-turn arm and an agent arm of the same mock model, made and
started every way a user can (the browser, a spec file, the API, ``start_run``); a tool that
runs out of time mid-trajectory; and a worker's bound on agent sessions."""

from __future__ import annotations

import json
import threading

import pytest
import yaml
from django.urls import reverse

from datasets.demo import load_demo_dataset
from datasets.models import Dataset, DatasetKind, TaskInstance
from experiments import agent
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Experiment, RunStatus
from tests.cli import run_command
from tests.conftest import api_client, client_for, make_api_key, work_queue
from tests.forms import form_data
from tests.providers.fake_server import Reply

SINGLE = {"label": "single", "provider": "mock", "model_name": "mock-oracle", "config": {"mode": "oracle"}}
AGENT = {
    "label": "agent",
    "provider": "mock",
    "model_name": "mock-oracle",
    "config": {"mode": "oracle", "solver": "agent"},
}


def assert_both_arms_ran(run) -> None:
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    single, agent_attempts = run.attempts.filter(arm__label="single"), run.attempts.filter(arm__label="agent")
    assert single.count() == agent_attempts.count() > 0
    assert single.filter(resolved=True).count() == agent_attempts.filter(resolved=True).count() == single.count()
    assert not single.filter(turns__isnull=False).exists()
    assert not agent_attempts.filter(turns__isnull=True).exists()


def test_from_the_browser(org, alice, start):
    dataset = load_demo_dataset(org)
    client = client_for(alice)
    page = client.get(reverse("experiments:create")).content.decode()
    assert "set_solver" in page and "agent" in page  # the solver is one of the arm's settings
    response = client.post(reverse("experiments:create"), form_data(dataset, [SINGLE, AGENT], repetitions="1"))
    assert response.status_code == 302, response.content.decode()[:2000]
    experiment = Experiment.objects.get(name="Shootout")
    assert experiment.arms.get(label="agent").config["solver"] == "agent"
    run = start(experiment)
    work_queue()
    assert_both_arms_ran(run)
    attempt = run.attempts.filter(arm__label="agent").first()
    page = client.get(reverse("experiments:attempt", args=[attempt.code])).content.decode()
    assert "list_files" in page and "replace" in page and "submit" in page


def test_from_a_spec_file_and_start_run(org, tmp_path, django_capture_on_commit_callbacks):
    load_demo_dataset(org)
    spec = {"name": "Both ways", "dataset": "Demo: small Python bugs", "sample_size": 3, "arms": [SINGLE, AGENT]}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert "Created experiment 'Both ways'" in run_command("apply_experiment", "--org", org.slug, str(path))
    with django_capture_on_commit_callbacks(execute=True):
        out = run_command("start_run", "--org", org.slug, "--experiment", "Both ways")
    work_queue()
    run = Experiment.objects.get(name="Both ways").runs.get()
    assert out.splitlines()[0] == str(run.code)
    assert_both_arms_ran(run)


def test_from_the_api(org, alice, django_capture_on_commit_callbacks):
    load_demo_dataset(org)
    from orgs.api_keys import do_create_api_key

    client = api_client(do_create_api_key(org, "ci", ["read", "run", "admin"], None, user=alice)[1])
    spec = {"name": "API agents", "dataset": "Demo: small Python bugs", "sample_size": 2, "arms": [SINGLE, AGENT]}
    created = client.post("/api/experiments", json.dumps(spec), content_type="application/json")
    assert created.status_code == 201, created.content
    experiment = Experiment.objects.get(name="API agents")
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"/api/experiments/{experiment.code}/runs", "{}", content_type="application/json")
    assert started.status_code in (200, 201, 202), started.content
    work_queue()
    run = experiment.runs.get()
    assert_both_arms_ran(run)
    attempt = run.attempts.filter(arm__label="agent").first()
    body = api_client(make_api_key(org, ["read"])).get(f"/api/attempts/{attempt.code}").json()
    assert body["turns"] == attempt.turns and body["trajectory"]["steps"][0]["tool_calls"]


def test_a_bad_agent_setting_is_refused_by_the_api_with_its_field(org, alice):
    load_demo_dataset(org)
    client = api_client(make_api_key(org, ["read", "run", "admin"]))
    bad = {**AGENT, "config": {"mode": "oracle", "solver": "agent", "max_turns": "many"}}
    spec = {"name": "Bad agent", "dataset": "Demo: small Python bugs", "arms": [bad]}
    refused = client.post("/api/experiments", json.dumps(spec), content_type="application/json")
    assert refused.status_code == 422 and "config.max_turns" in refused.content.decode()
    assert not Experiment.objects.filter(name="Bad agent").exists()


# A model that runs the tests, then submits: the tests never finish within the limit.
HANGING_TEST = "import time\n\n\ndef test_waits():\n    time.sleep(60)\n"


def scripted_openai(calls: list[tuple[str, dict]]):
    """An OpenAI chat completions server whose model makes these calls, one per turn."""

    def respond(seen):
        turn = sum(1 for message in seen.body["messages"] if message["role"] == "assistant")
        name, arguments = calls[min(turn, len(calls) - 1)]
        call = {
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return Reply(
            200,
            {
                "id": f"chatcmpl-{turn}",
                "object": "chat.completion",
                "created": 0,
                "model": "llama3",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
            },
        )

    return respond


def test_a_tool_that_times_out_is_the_models_to_read(org, alice, fake, settings, start):
    from providers.models import ProviderCredential

    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 2
    dataset = Dataset.objects.create(org=org, name="hangs", kind=DatasetKind.PR_PATCH)
    TaskInstance.objects.create(
        dataset=dataset,
        external_id="hang-1",
        position=0,
        problem_statement="The tests take too long.",
        repo_files={"test_slow.py": HANGING_TEST},
        test_command=["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_slow.py"],
    )
    credential = ProviderCredential(org=org, provider="openai_compatible", base_url=fake.url + "/v1")
    credential.set_api_key("sk-local-0000")
    credential.save()
    fake.responder = scripted_openai([("run_tests", {}), ("submit", {})])
    arm = ArmSpec("agent", "openai_compatible", "llama3", {"solver": "agent", "stream": False, "max_retries": 0})
    run = start(do_save_experiment(org, ExperimentSpec(name="slow", dataset=dataset, arms=[arm]), alice))
    work_queue()
    attempt = run.attempts.get()
    from experiments.models import Artifact, ArtifactKind
    from experiments.trajectory import Trajectory

    steps = Trajectory.from_json(Artifact.objects.get(attempt=attempt, kind=ArtifactKind.TRAJECTORY).content).steps
    result = steps[0].results[0]
    assert "timed out" in result["content"] or "time" in result["content"].lower()
    assert steps[-1].tool_calls[0]["name"] == "submit" and attempt.turns == 2
    # The loop went on after the timeout; the attempt ended with the model's (empty) answer.
    assert attempt.status == "completed" and attempt.patch_present is False


def test_a_workers_agent_sessions_are_bounded(settings):
    settings.PRBENCH_AGENT_SESSIONS = 1
    agent.reset_session_slots()
    entered = threading.Event()

    def second():
        with agent.session_slot():
            entered.set()

    with agent.session_slot():
        waiting = threading.Thread(target=second)
        waiting.start()
        assert not entered.wait(0.3), "a second session started while the only one was taken"
    assert entered.wait(5), "the waiting attempt never got the session back"
    waiting.join()
    agent.reset_session_slots()


@pytest.fixture(autouse=True)
def fresh_sessions():
    agent.reset_session_slots()
    yield
    agent.reset_session_slots()
