"""An agent's working copy of a task, made as validation makes one: the edits it makes through
the tools are a diff that validates like any answer, and the task's hidden tests are not in it."""

import shutil
import subprocess
from pathlib import Path

import pytest

from datasets.models import Dataset
from datasets.validation import agent_workspace, validate_task
from evaluation.patches import check_patch
from evaluation.validation import ValidationStatus
from providers.types import ToolCall
from tests.factories import ingest_textkit


def call(name, **arguments):
    return ToolCall(id="c1", name=name, arguments=arguments)


def make_the_gold_edits(ws, gold_patch: str, scratch: Path) -> None:
    """What the gold patch does, written file by file through the tools, as an agent would."""
    paths = check_patch(gold_patch).paths
    for path in paths:
        if (ws.root / path).is_file():
            (scratch / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ws.root / path, scratch / path)
    subprocess.run(["git", "apply", "-"], cwd=scratch, input=gold_patch, text=True, check=True)
    for path in paths:
        written = ws.run(call("write_file", path=path, content=(scratch / path).read_text()))
        assert not written.is_error, written.content


def test_a_self_contained_tasks_edits_validate(dataset, tmp_path):
    task = dataset.tasks.order_by("position").first()
    with agent_workspace(task, 4000) as ws:
        listed = ws.run(call("list_files")).content.splitlines()
        assert listed == sorted(task.repo_files)
        before = ws.run(call("run_tests"))
        assert not before.content.startswith("exit status 0")
        make_the_gold_edits(ws, task.gold_patch, tmp_path)
        assert ws.run(call("run_tests")).content.startswith("exit status 0")
        diff = ws.diff()
    result = validate_task(task, diff)
    assert result.status == ValidationStatus.PASSED, result.log


def test_a_repository_tasks_edits_validate_and_its_hidden_tests_stay_hidden(org, plain_textkit, tmp_path):
    ingest_textkit(org, plain_textkit, "--max", "1")
    task = Dataset.objects.get(org=org, name="textkit").tasks.get()
    hidden = task.fail_to_pass[0].split("::")[-1]
    with agent_workspace(task, 4000, tool_set="no_tests") as ws:
        assert ws.run(call("search", pattern=hidden)).content == f"no match for {hidden!r}"
        assert ws.plan.test_patch == "" and ws.plan.fail_to_pass == () and ws.plan.pass_to_pass == ()
        assert ws.run(call("run_tests")).is_error  # not in this tool set
        make_the_gold_edits(ws, task.gold_patch, tmp_path)
        diff = ws.diff()
    assert diff and "tests/" not in diff
    result = validate_task(task, diff)
    assert result.status == ValidationStatus.PASSED, result.log
    assert result.tally is not None and result.tally.fail_to_pass_passed == 1


def test_the_test_command_does_not_name_the_hidden_test_files(org, plain_textkit):
    ingest_textkit(org, plain_textkit, "--max", "1")
    task = Dataset.objects.get(org=org, name="textkit").tasks.get()
    (hidden_file,) = check_patch(task.test_patch).paths
    task.test_command = ["{python}", "-m", "pytest", "-q", hidden_file]
    with agent_workspace(task, 4000) as ws:
        assert ws.plan.command == ["{python}", "-m", "pytest", "-q"]
        ran = ws.run(call("run_tests"))
    assert ran.content.startswith("exit status 0"), ran.content  # the base commit's tests, without the hidden one


@pytest.fixture(autouse=True)
def validation_time_limit(settings):
    settings.PRBENCH_VALIDATION_TIMEOUT_SECONDS = 60
