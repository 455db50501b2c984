"""Each kind in its own words: a multiple-choice, a Jeopardy, a HumanEval and a PR run through
the real pipeline (mock arms: one that knows, one that answers wrongly), then every page that
shows them: the run page and its attempts list, the task side by side, the answers matrix,
the dataset and experiment pages, and the HTML report."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from datasets.models import Dataset
from evaluation.workloads.wording import task_label, wording_for
from experiments import answer_matrix
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.models import AttemptStatus, RunStatus
from leaderboards.report import run_report
from tests.cli import run_command
from tests.conftest import client_for, work_queue
from tests.factories import import_file, run_in_every_state
from tests.samples import JEOPARDY, MMLU, PROBLEMS

ORACLE = ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})
WRONG = ArmSpec("wrong", "mock", "mock-wrong", {"mode": "wrong"})
PATCH_WORDS = ("no patch", "did not apply", "tests fail", "Gold patch", "Repository", "Base commit")


def run_of(org, alice, start, dataset, **spec):
    experiment = do_save_experiment(
        org, ExperimentSpec(name=f"{dataset.name} run", dataset=dataset, arms=[ORACLE, WRONG], **spec), alice
    )
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED
    return run


@pytest.fixture
def mmlu_run(org, alice, start):
    import_file(org, "mmlu", MMLU, dataset="mmlu")
    return run_of(org, alice, start, Dataset.objects.get(org=org, name="mmlu"), sample_size=6, seed=2)


@pytest.fixture
def jeopardy_run(org, alice, start):
    import_file(org, "jeopardy", JEOPARDY, dataset="jeopardy")
    return run_of(org, alice, start, Dataset.objects.get(org=org, name="jeopardy"), sample_size=4, seed=2)


@pytest.fixture
def code_run(org, alice, start, tmp_path):
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(problem) + "\n" for problem in PROBLEMS[:3]))
    run_command("import_tasks", "--org", org.slug, "--dataset", "humaneval", "--format", "humaneval", str(path))
    return run_of(org, alice, start, Dataset.objects.get(org=org, name="humaneval"))


@pytest.fixture
def pr_run(experiment, start):
    run = start(experiment)
    work_queue()
    run.refresh_from_db()
    return run


def page(user, name, *args, **params) -> str:
    response = client_for(user).get(reverse(name if ":" in name else f"experiments:{name}", args=args), params)
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def wrong_attempt(run):
    return run.attempts.select_related("task").filter(arm__label="wrong").order_by("sequence").first()


def right_attempt(run):
    return run.attempts.select_related("task").filter(arm__label="oracle").order_by("sequence").first()


# --- the run page ---------------------------------------------------------------------------------


def test_a_multiple_choice_run_says_which_letter_was_wrong_and_which_was_expected(bob, mmlu_run):
    content = page(bob, "run", mmlu_run.code)

    wrong, right = wrong_attempt(mmlu_run), right_attempt(mmlu_run)
    assert wrong.resolved is False and wrong.extracted_answer != wrong.task.payload["answer"]
    assert f"wrong: {wrong.extracted_answer}, expected {wrong.task.payload['answer']}" in content
    assert f"right: {right.task.payload['answer']}" in content
    assert not any(word in content for word in PATCH_WORDS)
    # Task ids come with the question's first words.
    words = wording_for("multiple_choice")
    label = task_label(words, wrong.task.external_id, wrong.task.title, wrong.task.problem_statement)
    assert " · " in label and label in content
    # Never judged by the evaluator: no evaluator board, no link to one, no page of its own.
    assert 'id="board-evaluator"' not in content and "/evaluator/" not in content
    evaluator = reverse("leaderboards:board", args=[mmlu_run.code, "evaluator"])
    assert client_for(bob).get(evaluator).status_code == 404
    assert "Per right answer" in content and "Per resolved task" not in content


def test_a_jeopardy_run_quotes_the_response_and_the_expected_one(bob, jeopardy_run):
    content = page(bob, "run", jeopardy_run.code)

    wrong = wrong_attempt(jeopardy_run)
    assert wrong.extracted_answer  # the response the kind read, without "What is"
    assert f"wrong: {wrong.extracted_answer}, expected {wrong.task.payload['answer']}" in content
    assert "right: " in content
    assert not any(word in content for word in PATCH_WORDS)
    assert 'id="board-evaluator"' not in content


def test_a_code_run_says_whether_the_function_passed_its_tests(bob, code_run):
    content = page(bob, "run", code_run.code)

    assert "passed its tests" in content and "failed its tests" in content
    assert not any(word in content for word in PATCH_WORDS)
    assert 'id="board-evaluator"' not in content
    first = right_attempt(code_run).task
    assert f"{first.external_id} · {first.payload['entry_point']}" in content  # the function's name


def test_a_pr_run_keeps_its_patch_words_and_its_evaluator(bob, pr_run):
    content = page(bob, "run", pr_run.code)

    assert "resolved" in content
    assert 'id="board-evaluator"' in content
    assert client_for(bob).get(reverse("leaderboards:board", args=[pr_run.code, "evaluator"])).status_code == 200
    assert "Per resolved task" in content
    assert "right: " not in content and "expected " not in content.split('id="attempts"')[1]


# --- the task, side by side ----------------------------------------------------------------------


def test_a_question_task_shows_its_options_its_expected_answer_and_each_arms(bob, charlie, mmlu_run):
    wrong = wrong_attempt(mmlu_run)
    task = wrong.task
    content = page(bob, "run_task", mmlu_run.code, task.code)

    assert "<h2>Question</h2>" in content and task.problem_statement in content
    letter = task.payload["answer"]
    expected = f"{letter}. {task.payload['choices']['ABCD'.index(letter)]}"
    assert "<h2>Expected answer</h2>" in content and f"<strong>{expected}</strong>" in content
    for index, choice in enumerate(task.payload["choices"]):
        assert f"<strong>{'ABCD'[index]}.</strong> {choice}" in content
    assert content.count("✓ expected") == 1
    given = wrong.extracted_answer
    assert f"Answer: <strong>{given}. {task.payload['choices']['ABCD'.index(given)]}</strong>" in content
    assert f"wrong: {given}, expected {letter}" in content
    assert f"Answer: <strong>{expected}</strong>" in content  # the oracle's
    assert not any(word in content for word in PATCH_WORDS)
    url = reverse("experiments:run_task", args=[mmlu_run.code, task.code])
    assert client_for(charlie).get(url).status_code == 404


def test_a_code_task_shows_the_function_the_canonical_solution_and_each_arms_code(bob, code_run):
    task = right_attempt(code_run).task
    content = page(bob, "run_task", code_run.code, task.code)

    assert "<h2>Function to complete</h2>" in content and "<h2>Canonical solution</h2>" in content
    assert task.payload["canonical_solution"].strip() in content
    assert "passed its tests" in content and "failed its tests" in content
    assert "Gold patch" not in content


# --- the answers matrix --------------------------------------------------------------------------


def test_the_matrix_has_a_row_per_task_and_a_column_per_arm(bob, mmlu_run):
    content = page(bob, "run_answers", mmlu_run.code)

    head = content.split("<thead>")[1].split("</thead>")[0]
    assert re.findall(r"<th>([^<]+)</th>", head) == ["Task", "Expected answer", "oracle", "wrong"]
    rows = content.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    assert len(rows) == 6
    wrong = wrong_attempt(mmlu_run)
    row = next(r for r in rows if str(wrong.task.code) in r)
    assert f'<td class="expected">{wrong.task.payload["answer"]}</td>' in row
    assert f"✓ {wrong.task.payload['answer']}</a>" in row  # the oracle's cell
    assert f"✗ {wrong.extracted_answer}</a>" in row
    assert f'title="wrong: {wrong.extracted_answer}, expected {wrong.task.payload["answer"]}"' in row


def test_the_matrix_pages_by_task_and_back(bob, mmlu_run, monkeypatch):
    monkeypatch.setattr(answer_matrix, "TASKS_PER_PAGE", 4)
    client = client_for(bob)
    url = reverse("experiments:run_answers", args=[mmlu_run.code])

    first = html.unescape(client.get(url).content.decode())
    following = re.search(r'href="\?after=([^"]+)" rel="next"', first)
    assert following and 'rel="prev"' not in first
    second = html.unescape(client.get(url, {"after": following[1]}).content.decode())
    assert 'rel="next"' not in second
    tasks = [re.findall(r"/tasks/([^/]+)/", part.split("<tbody>")[1]) for part in (first, second)]
    assert [len(set(t)) for t in tasks] == [4, 2] and not set(tasks[0]) & set(tasks[1])
    back = re.search(r'href="\?before=([^"]+)" rel="prev"', second)
    assert back
    again = html.unescape(client.get(url, {"before": back[1]}).content.decode())
    assert re.findall(r"/tasks/([^/]+)/", again.split("<tbody>")[1]) == tasks[0]


def test_the_matrix_checks_ownership(charlie, mmlu_run):
    assert client_for(charlie).get(reverse("experiments:run_answers", args=[mmlu_run.code])).status_code == 404


def test_the_matrix_shows_the_first_repetitions_in_queries_that_do_not_grow_with_the_run(
    bob, org, dataset, alice, monkeypatch
):
    monkeypatch.setattr(answer_matrix, "REPETITIONS_SHOWN", 2)
    small, large = (run_in_every_state(org, dataset, alice, repetitions=n) for n in (2, 5))
    client = client_for(bob)

    def queries(run) -> tuple[int, str]:
        url = reverse("experiments:run_answers", args=[run.code])
        client.get(url)  # warm up anything cached per process
        with CaptureQueriesContext(connection) as captured:
            content = client.get(url).content.decode()
        return len(captured.captured_queries), content

    (few, _), (many, content) = queries(small), queries(large)
    assert few == many
    rows = content.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    assert len(rows) == 12 and all(row.count('class="cell') == 2 * 2 for row in rows)  # two arms, two each
    assert "3 more of each are on the tasks' own pages" in content


def test_the_matrix_of_a_code_run_shows_results_not_code(bob, code_run):
    content = page(bob, "run_answers", code_run.code)

    assert "✓ passed its tests" in content and "✗ failed its tests" in content
    assert "def " not in content.split("<tbody>")[1]


# --- the dataset and experiment pages -------------------------------------------------------------


def test_a_multiple_choice_dataset_lists_its_questions_choices_answers_and_categories(bob, mmlu_run):
    dataset = mmlu_run.experiment.dataset
    content = page(bob, "datasets:detail", dataset.code)

    head = content.split("<thead>")[1].split("</thead>")[0]
    assert [h for h in re.findall(r"<th[^>]*>([^<]+)</th>", head)][3:] == ["Question", "Choices", "Answer", "Category"]
    task = dataset.tasks.order_by("position").first()
    letter = task.payload["answer"]
    assert f"<td>{letter}. {task.payload['choices']['ABCD'.index(letter)]}</td>" in content
    assert f"<td>{task.category}</td>" in content
    assert "Base commit" not in content and "Gold patch" not in content and "Repository" not in content


def test_a_code_dataset_lists_its_entry_points_and_tests(bob, code_run):
    dataset = code_run.experiment.dataset
    content = page(bob, "datasets:detail", dataset.code)

    assert "<th>Entry point</th>" in content and "<th>Tests</th>" in content
    task = dataset.tasks.order_by("position").first()
    assert f"<code>{task.payload['entry_point']}</code>" in content
    assert "Base commit" not in content


def test_a_pr_dataset_keeps_its_repository_columns(bob, dataset):
    content = page(bob, "datasets:detail", dataset.code)

    assert "<th>Base commit</th>" in content and "<th>Gold patch</th>" in content


def test_a_question_experiment_shows_its_grading_and_no_repository_setting(bob, jeopardy_run, pr_run):
    content = page(bob, "detail", jeopardy_run.experiment.code)
    assert "<dt>Grading</dt><dd>jeopardy" in content
    assert "Files shown" not in content and "skip validation" not in content
    assert "record the responses, grade none" in content
    assert "<dt>Evaluator</dt>" not in content

    patches = page(bob, "detail", pr_run.experiment.code)
    assert "Files shown" in patches and "skip validation" in patches and "<dt>Evaluator</dt>" in patches


# --- the HTML report --------------------------------------------------------------------------------


def test_the_report_of_a_question_run_speaks_of_answers(mmlu_run, pr_run):
    report = html.unescape(run_report(mmlu_run))

    assert "Per right answer" in report and "Per resolved task" not in report
    assert "<h2>Evaluator</h2>" not in report and "<dt>Evaluator</dt>" not in report
    assert "no answer's text is included" in report and "rationale" not in report
    assert "patch" not in report.split("</style>")[1].lower()  # the stylesheet has its rules for PR runs

    patches = html.unescape(run_report(pr_run))
    assert "Per resolved task" in patches and "<h2>Evaluator</h2>" in patches


def test_an_inference_only_question_run_says_nothing_was_graded(org, alice, start, bob):
    import_file(org, "mmlu", MMLU, dataset="mmlu")
    dataset = Dataset.objects.get(org=org, name="mmlu")
    experiment = do_save_experiment(
        org, ExperimentSpec(name="mmlu, answers only", dataset=dataset, arms=[WRONG], sample_size=2), alice
    )
    run = start(experiment, inference_only=True)
    work_queue()

    content = page(bob, "run", run.code)
    assert "no answer was graded, so none is right or wrong" in content and "no patch" not in content
    attempt = run.attempts.filter(status=AttemptStatus.COMPLETED).first()
    assert f"answered {attempt.extracted_answer}" in content
    assert "no answer was graded, so none is right or wrong" in html.unescape(run_report(run))
