"""An attempt's transcript (issue 24): its page reads, in order, what the model was asked, what
came back, what the kind read, what was expected and how it was graded, in the kind's words;
the API's attempt has the same fields; every way an attempt is recorded keeps its messages or
says why there are none."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from datasets.models import Dataset
from evaluation.workloads.multiple_choice import list_choices
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import Attempt, AttemptStatus, RunStatus
from experiments.prompts import render_prompt
from orgs.models import Organization
from prbench.recovery import run_recovery_sweep
from providers.errors import ErrorCategory
from providers.models import AllowedProvider
from tests.conftest import api_client, as_if_its_worker_died, client_for, make_api_key, work_queue
from tests.factories import import_file, import_into, predictions_file
from tests.samples import JEOPARDY, MMLU

ORACLE = ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})
WRONG = ArmSpec("wrong", "mock", "mock-wrong", {"mode": "wrong"})
SECTIONS = ("What was asked", "What came back", "What was read", "What was expected", "How it was graded")


def run_experiment(org, alice, start, dataset, arms, **spec):
    experiment = do_save_experiment(org, ExperimentSpec(name="t", dataset=dataset, arms=arms, **spec), alice)
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    return run


def page_of(user, attempt) -> str:
    response = client_for(user).get(reverse("experiments:attempt", args=[attempt.code]))
    assert response.status_code == 200
    return response.content.decode()


def assert_in_order(content: str, *parts: str) -> None:
    positions = [content.index(part) for part in parts]
    assert positions == sorted(positions), parts


def user_message(attempt) -> str:
    [message] = attempt.request["messages"]
    assert message["role"] == "user"
    return message["content"]


def assert_a_transcript(content: str, attempt) -> None:
    """The sections in order, with the rendered user message, the raw answer and what was read."""
    assert_in_order(content, *(f"<h2>{section}</h2>" for section in SECTIONS))
    assert "User message" in content and escape(user_message(attempt)) in content
    assert escape(attempt.output) in content
    assert attempt.extracted_answer and escape(attempt.extracted_answer) in content


def assert_no_patch_or_evaluator_rows(content: str) -> None:
    for row in ("<dt>Patch</dt>", "<dt>Build / lint</dt>", "<dt>Evaluator</dt>", "<dt>Resolved</dt>"):
        assert row not in content, row


# --- each kind's page ------------------------------------------------------------------------


def test_a_multiple_choice_attempt_reads_wrong_b_expected_d(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    run = run_experiment(org, alice, start, Dataset.objects.get(name="mmlu"), [ORACLE, WRONG], sample_size=2)
    wrong = run.attempts.filter(arm__label="wrong").select_related("task").first()
    task = wrong.task
    expected = task.payload["answer"]
    assert wrong.resolved is False and wrong.extracted_answer not in ("", expected)
    content = page_of(alice, wrong)
    assert_a_transcript(content, wrong)
    verdict = f"wrong: {wrong.extracted_answer}, expected {expected}"
    assert f'<dt>Correct</dt><dd><span class="bad">{verdict}</span>' in content
    # The expected answer in a person's words: its letter and its option.
    choice = task.payload["choices"]["ABCD".index(expected)]
    assert escape(f"{expected}. {choice}") in content
    # How it was graded: the options, the letter read and how it was read.
    assert escape(list_choices(task.payload["choices"])) in content
    assert f"<th>Letter read</th><td>{wrong.extracted_answer}, from an &quot;Answer: X&quot; line</td>" in content
    assert_no_patch_or_evaluator_rows(content)
    oracle = run.attempts.filter(arm__label="oracle", task=task).get()
    assert f'<dt>Correct</dt><dd><span class="good">right: {expected}</span>' in page_of(alice, oracle)


def test_a_jeopardy_attempt_shows_the_normalised_forms_similarity_and_threshold(org, alice, start):
    import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
    dataset = Dataset.objects.get(name="jeopardy")
    run = run_experiment(org, alice, start, dataset, [WRONG], sample_size=1, grading="jeopardy")
    attempt = run.attempts.select_related("task").get()
    grading = json.loads(attempt.artifacts.get(kind="answer").content)
    content = page_of(alice, attempt)
    assert_a_transcript(content, attempt)
    answer = attempt.task.payload["answer"]
    assert f'<span class="bad">wrong: {escape(attempt.extracted_answer)}, expected {escape(answer)}</span>' in content
    assert "<th>Grading mode</th><td>jeopardy</td>" in content
    # The task is named by its id and the clue's first words, as on the run page.
    clue_start = " ".join(attempt.task.problem_statement.split()[:3])
    assert f"{attempt.task.external_id} · {escape(clue_start)}" in content
    assert f"<th>Response, normalised</th><td>{escape('; '.join(grading['response_forms']))}</td>" in content
    assert f"<th>Expected, normalised</th><td>{escape('; '.join(grading['expected_forms']))}</td>" in content
    similarity = f"{grading['similarity']:.2f}, threshold {grading['threshold']:.2f}"
    assert f"<th>Similarity</th><td>{similarity}" in content and ": rejected</td>" in content
    assert_no_patch_or_evaluator_rows(content)


def test_a_code_attempt_shows_the_test_output(org, alice, start, humaneval):
    run = run_experiment(org, alice, start, humaneval, [ORACLE, WRONG], sample_size=1)
    wrong = run.attempts.get(arm__label="wrong")
    grading = json.loads(wrong.artifacts.get(kind="answer").content)
    assert grading["outcome"] == "failed" and grading["output_tail"]
    content = page_of(alice, wrong)
    assert_a_transcript(content, wrong)
    assert "def " in user_message(wrong)  # the function's signature, as the kind renders it
    assert '<dt>Passed</dt><dd><span class="bad">failed its tests</span>' in content
    assert "<th>Test output</th>" in content and escape(grading["output_tail"]) in content
    assert "<th>Exit code</th><td>1</td>" in content
    assert_no_patch_or_evaluator_rows(content)
    oracle = run.attempts.get(arm__label="oracle")
    assert '<dt>Passed</dt><dd><span class="good">passed its tests</span>' in page_of(alice, oracle)


def test_a_pr_attempt_folds_its_long_prompt_and_shows_its_diff_and_validation(experiment, start, alice):
    run = start(experiment)
    work_queue()
    attempt = run.attempts.filter(arm__label="oracle", status=AttemptStatus.COMPLETED).first()
    content = page_of(alice, attempt)
    assert_in_order(content, *(f"<h2>{section}</h2>" for section in SECTIONS))
    prompt = user_message(attempt)
    assert "{{" not in prompt and "Repository files:" in prompt
    # The prompt with the repository's files is long: its first lines, then all of it folded, with its size.
    assert len(prompt) > 3000
    size = f"{len(prompt):,} characters, {prompt.count(chr(10)) + 1:,} lines"
    assert f'<details class="fold"><summary>The message in full: {size}</summary>' in content
    assert escape(prompt) in content
    assert '<dt>Resolved</dt><dd><span class="good">resolved</span>' in content
    assert "<dt>Patch</dt>" in content and "<dt>Build / lint</dt>" in content
    assert '<span class="add">+' in content  # the diff read from the answer
    assert "<h3>Validation <span" in content and '<table class="tests">' in content
    assert "The task's reference patch" in content  # the gold patch, folded


# --- attempts recorded before the transcript, and the outsider ---------------------------------


def test_an_attempt_recorded_before_extracted_answers_were_kept_still_reads(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    run = run_experiment(org, alice, start, Dataset.objects.get(name="mmlu"), [WRONG], sample_size=1)
    attempt = run.attempts.select_related("task").get()
    letter = attempt.extracted_answer
    Attempt.objects.filter(pk=attempt.pk).update(extracted_answer="")
    content = page_of(alice, attempt)
    # What was read comes from the answer artifact, as it did before.
    assert f"wrong: {letter}, expected {attempt.task.payload['answer']}" in content
    section = content.split("<h2>What was read</h2>")[1].split("<h2>")[0]
    assert f'<pre class="prose">{letter}</pre>' in section


def test_an_outsider_gets_404_for_the_transcript_on_the_page_and_the_api(org, alice, start, charlie):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    run = run_experiment(org, alice, start, Dataset.objects.get(name="mmlu"), [WRONG], sample_size=1)
    attempt = run.attempts.get()
    assert client_for(charlie).get(reverse("experiments:attempt", args=[attempt.code])).status_code == 404
    outsider = api_client(make_api_key(Organization.objects.get(slug="other"), ["read"]))
    assert outsider.get(f"/api/attempts/{attempt.code}").status_code == 404


# --- the API ------------------------------------------------------------------------------------


def test_the_apis_attempt_carries_the_transcript(org, alice, start):
    import_file(org, "mmlu", MMLU / "abstract_algebra_dev.csv", dataset="mmlu")
    run = run_experiment(org, alice, start, Dataset.objects.get(name="mmlu"), [WRONG], sample_size=1)
    attempt = run.attempts.select_related("task").get()
    response = api_client(make_api_key(org, ["read"])).get(f"/api/attempts/{attempt.code}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["messages"] == [{"role": "user", "content": user_message(attempt)}]
    assert body["messages_note"] == ""
    assert body["output"] == attempt.output
    assert body["extracted_answer"] == attempt.extracted_answer
    letter = attempt.task.payload["answer"]
    assert body["expected_answer"] == f"{letter}. {attempt.task.payload['choices']['ABCD'.index(letter)]}"
    assert body["grading"] == json.loads(attempt.artifacts.get(kind="answer").content)
    assert body["grading"]["letter"] == attempt.extracted_answer
    # What was sent is shown on purpose; the raw provider request and response never are.
    assert "request" not in body and "raw_response" not in body and "raw_request" not in json.dumps(body)


# --- every way an attempt is recorded -----------------------------------------------------------


def rendered(attempt) -> str:
    run = attempt.run
    snapshot = run.config_snapshot
    return render_prompt(snapshot["prompt_template"], attempt.task, snapshot.get("context_mode", "oracle"))


def test_an_answered_and_a_failed_attempt_keep_the_messages_they_were_sent(org, dataset, start, alice):
    broken = ArmSpec("broken", "mock", "mock-broken", {"mode": "error", "failure_category": "bad_request"})
    run = run_experiment(org, alice, start, dataset, [ORACLE, broken], sample_size=2)
    answered = run.attempts.filter(arm__label="oracle").select_related("run", "task__dataset").first()
    failed = run.attempts.filter(arm__label="broken").select_related("run", "task__dataset").first()
    assert (answered.status, failed.status, failed.error_category) == ("completed", "failed", "bad_request")
    for attempt in (answered, failed):
        assert user_message(attempt) == rendered(attempt)
    content = page_of(alice, failed)
    assert escape(user_message(failed)) in content and "No answer: bad_request." in content


def test_an_attempt_refused_before_any_call_says_it_sent_nothing(experiment, start, alice):
    run = start(experiment)
    AllowedProvider.objects.create(org=experiment.org, provider="openai")  # the mock is no longer allowed
    work_queue()
    attempt = run.attempts.select_related("task").first()
    assert (attempt.status, attempt.error_category, attempt.request) == ("failed", ErrorCategory.NOT_ALLOWED, {})
    content = page_of(alice, attempt)
    assert "None: the attempt failed before any call was made (not_allowed)" in content
    assert "The task's question" in content and escape(attempt.task.problem_statement) in content
    body = api_client(make_api_key(experiment.org, ["read"])).get(f"/api/attempts/{attempt.code}").json()
    assert body["messages"] == [] and body["messages_note"].startswith("None: the attempt failed before any call")


def test_a_reused_answer_keeps_the_messages_of_its_own_request(org, dataset, alice, start):
    arm = ArmSpec("mock", "mock", "mock-oracle", {"mode": "oracle", "temperature": 0})
    spec = ExperimentSpec(name="Cached", dataset=dataset, arms=[arm], sample_size=2, response_cache=True)
    experiment = do_save_experiment(org, spec, alice)
    for _ in range(2):
        run = start(experiment)
        work_queue()
    reused = run.attempts.filter(response_cached=True).select_related("run", "task__dataset").first()
    assert reused is not None and user_message(reused) == rendered(reused)
    assert escape(user_message(reused)) in page_of(alice, reused)


def test_a_replayed_answer_says_no_prompt_was_sent(four_tasks, tmp_path, start, alice):
    experiment, tasks = four_tasks
    import_into(experiment, predictions_file(tmp_path, tasks))
    run = start(experiment)
    work_queue()
    replayed = run.attempts.filter(arm__label="agent", status=AttemptStatus.COMPLETED).first()
    content = page_of(alice, replayed)
    assert "None: a replayed answer, read from imported predictions; no prompt was sent." in content
    assert "User message" not in content
    body = api_client(make_api_key(experiment.org, ["read"])).get(f"/api/attempts/{replayed.code}").json()
    assert body["messages"] == [] and "replayed" in body["messages_note"]


def test_a_retired_poison_attempt_says_its_request_was_never_kept(experiment, start, settings, alice):
    from experiments import pipeline

    settings.PRBENCH_MAX_ATTEMPT_CLAIMS = 1
    run = start(experiment, inference_only=True)
    victim = run.attempts.order_by("sequence").first()
    assert pipeline.claim_attempt(victim.pk)  # its worker dies with it
    as_if_its_worker_died(victim.pk)
    run_recovery_sweep(stale_after_seconds=60)
    work_queue()
    victim.refresh_from_db()
    assert (victim.status, victim.error_category) == (AttemptStatus.FAILED, ErrorCategory.PLATFORM_ERROR)
    run.refresh_from_db()
    assert run.status in (RunStatus.COMPLETED, RunStatus.FAILED)
    content = page_of(alice, victim)
    assert "None recorded: the platform failed on this attempt before its request was kept" in content


def test_messages_a_budget_stopped_are_shown_as_never_sent(experiment, start, alice):
    run = start(experiment)
    work_queue()
    attempt = run.attempts.filter(status=AttemptStatus.COMPLETED).first()
    Attempt.objects.filter(pk=attempt.pk).update(status="failed", error_category=ErrorCategory.BUDGET_EXCEEDED)
    content = page_of(alice, attempt)
    assert "Prepared but never sent: the call was stopped before it was made (budget_exceeded)." in content
    assert escape(user_message(attempt)) in content


@pytest.mark.parametrize("status", ["queued", "cancelled"])
def test_an_attempt_that_never_ran_says_so(experiment, start, alice, status):
    run = start(experiment)
    attempt = run.attempts.first()
    Attempt.objects.filter(pk=attempt.pk).update(status=status)
    content = page_of(alice, attempt)
    note = {"queued": "None yet: the attempt has not run.", "cancelled": "None: the attempt was cancelled"}[status]
    assert note in content and "Nothing: there is no answer to read." in content
