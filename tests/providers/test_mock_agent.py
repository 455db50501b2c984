"""The mock as an agent: it drives the tool loop from the messages alone. A tiny executor over
a dict of files stands in for the sandbox's tools, so what the mock reads is what the files
hold, and a loop that sends it the wrong thing gets the wrong edit."""

from __future__ import annotations

import difflib
import json
import random

import pytest

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.validation import validate_patch
from evaluation.workloads import workload_for
from evaluation.workloads.multiple_choice import MultipleChoice
from experiments.mock_books import ReferenceTask, book_of
from providers.adapters.mock import mock_book
from providers.adapters.mock.adapter import MockAdapter
from providers.adapters.mock.agent import UNKNOWN_TOOL, next_turn, patch_edits
from providers.errors import ProviderError
from providers.types import ArmSpec, CompletionRequest, Message, Tool
from tests.providers.agent_files import ALL_TOOLS, Files, patched

TASKS = [read_task_dir(path, position) for position, path in enumerate(demo_task_dirs())]
TASK = TASKS[1]  # money: two hunks in one file
SYSTEM = "You fix bugs in a repository with the tools you are given, then submit."
NO_TESTS = tuple(name for name in ALL_TOOLS if name != "run_tests")


def reference(fields: dict) -> ReferenceTask:
    return ReferenceTask(fields["external_id"], fields["problem_statement"], {}, fields["gold_patch"])


@pytest.fixture(autouse=True)
def demo_book():
    mock_book.register_book("demo-agent", book_of(workload_for("pr_patch"), [reference(task) for task in TASKS]))


def tools(*names: str) -> tuple[Tool, ...]:
    return tuple(Tool(name, f"The {name} tool.") for name in names)


def task_prompt(fields: dict) -> str:
    return f"Fix this issue in the repository.\n\n<issue>\n{fields['problem_statement']}\n</issue>"


def drive(config, fields=TASK, seed_key="7:task:arm:0", offered=ALL_TOOLS, files=None, prompt=None, max_turns=30):
    """The loop: ask, run the calls, answer with their results, until a submit or no call."""
    executor = files or Files(fields["repo_files"])
    messages = [Message("user", prompt if prompt is not None else task_prompt(fields))]
    completions = []
    for _ in range(max_turns):
        request = CompletionRequest(tuple(messages), system=SYSTEM, tools=tools(*offered), seed_key=seed_key)
        completion = MockAdapter(ArmSpec("mock", "m", config)).generate(request)
        completions.append(completion)
        messages.append(Message("assistant", completion.text, tool_calls=completion.tool_calls))
        if not completion.tool_calls:
            break
        messages.append(Message("user", "", tool_results=tuple(executor.run(call) for call in completion.tool_calls)))
        if executor.submitted:
            break
    return executor, completions


def diff_of(before: dict[str, str], after: dict[str, str]) -> str:
    return "".join(
        "".join(
            difflib.unified_diff(before[path].splitlines(True), after[path].splitlines(True), f"a/{path}", f"b/{path}")
        )
        for path in sorted(before)
    )


@pytest.mark.parametrize("fields", TASKS, ids=[task["external_id"] for task in TASKS])
def test_the_oracle_makes_the_gold_patch_through_the_tools(fields, tmp_path):
    executor, completions = drive({"mode": "oracle"}, fields)
    assert executor.submitted
    assert executor.files == patched(fields["repo_files"], fields["gold_patch"], tmp_path)
    assert [c.finish_reason for c in completions] == ["tool_calls"] * len(completions)
    names = [call.name for call in executor.calls]
    assert names[0] == "list_files" and names[-1] == "submit"
    touched = {edit.path for edit in patch_edits(fields["gold_patch"])}
    assert {call.arguments["path"] for call in executor.calls if call.name == "read_file"} == touched


def test_the_wrong_agent_changes_the_files_but_does_not_fix_them(tmp_path):
    executor, _ = drive({"mode": "wrong"})
    assert executor.submitted
    assert executor.files != TASK["repo_files"]
    assert executor.files != patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)
    result = validate_patch(TASK["repo_files"], diff_of(TASK["repo_files"], executor.files), TASK["test_command"], 30)
    assert result.applied and not result.passed


def test_the_noisy_choice_is_made_once_per_attempt(tmp_path):
    """Right or wrong is the attempt's: the same on every turn, every retry and every rerun."""
    gold = patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)
    config = {"mode": "noisy", "quality": 0.5}
    outcomes = {}
    for i in range(12):
        seed_key = f"7:task:arm:{i}"
        first, _ = drive(config, seed_key=seed_key)
        again, _ = drive(config, seed_key=seed_key)
        assert first.files == again.files
        assert [call.id for call in first.calls] == [call.id for call in again.calls]
        outcomes[seed_key] = first.files == gold
    assert set(outcomes.values()) == {True, False}, "a noisy agent at quality 0.5 is sometimes right"


def test_a_retried_turn_gives_the_same_answer():
    adapter = MockAdapter(ArmSpec("mock", "m", {"mode": "noisy", "quality": 0.5}))
    request = CompletionRequest((Message("user", task_prompt(TASK)),), tools=tools(*ALL_TOOLS), seed_key="3:t:a:0")
    first, retry = adapter.generate(request), adapter.generate(request)
    assert adapter.tries == 2
    assert (first.text, first.tool_calls) == (retry.text, retry.tool_calls)


def test_tool_call_ids_are_distinct_within_an_attempt_and_depend_on_the_seed_key():
    executor, _ = drive({"mode": "oracle"})
    ids = [call.id for call in executor.calls]
    assert len(set(ids)) == len(ids)
    other, _ = drive({"mode": "oracle"}, seed_key="8:task:arm:0")
    assert not set(ids) & {call.id for call in other.calls}


def test_it_calls_only_the_tools_offered(tmp_path):
    executor, _ = drive({"mode": "oracle"}, offered=("read_file", "replace", "submit"))
    assert {call.name for call in executor.calls} == {"read_file", "replace", "submit"}
    assert executor.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


def test_it_runs_the_tests_on_some_seeds_and_never_without_the_tool():
    runs = [
        sum(call.name == "run_tests" for call in drive({"mode": "oracle"}, seed_key=f"5:t:a:{i}")[0].calls)
        for i in range(12)
    ]
    assert set(runs) == {0, 1}
    for i in range(12):
        executor, _ = drive({"mode": "oracle"}, seed_key=f"5:t:a:{i}", offered=NO_TESTS)
        assert "run_tests" not in {call.name for call in executor.calls}


@pytest.mark.parametrize(
    "numbering", ["{number:>6}\t{line}", "{number}: {line}", "{number:>4} | {line}", "{number}→{line}", "{line}"]
)
def test_it_reads_a_file_however_its_lines_are_numbered(numbering, tmp_path):
    header = "money.py, all 40 lines:\n"  # a line that is not the file's is ignored
    for files in (
        Files(TASK["repo_files"], numbering=numbering),
        Files(TASK["repo_files"], numbering=numbering, header=header),
    ):
        executor, _ = drive({"mode": "oracle"}, files=files)
        assert executor.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


def test_a_file_cut_at_the_output_cap_is_read_again_around_the_change(tmp_path):
    executor, _ = drive({"mode": "oracle"}, files=Files(TASK["repo_files"], cap=700))
    ranged = [call.arguments for call in executor.calls if call.name == "read_file" and "start_line" in call.arguments]
    # The cut read shows the first hunk (lines 2-8), not the second (16-22): read around it.
    assert ranged == [{"path": "money.py", "start_line": 13, "end_line": 26}]
    assert executor.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


def test_a_new_file_is_written(tmp_path):
    patch = "--- /dev/null\n+++ b/limits.py\n@@ -0,0 +1,2 @@\n+MAX = 3\n+MIN = 1\n"
    fields = TASK | {"problem_statement": "Add a limits module holding MAX and MIN.", "gold_patch": patch}
    mock_book.register_book("new-file", book_of(workload_for("pr_patch"), [reference(fields)]))
    executor, _ = drive({"mode": "oracle"}, fields, offered=NO_TESTS)
    assert executor.files == TASK["repo_files"] | {"limits.py": "MAX = 3\nMIN = 1\n"}
    assert [call.name for call in executor.calls] == ["list_files", "write_file", "submit"]


def test_the_empty_agent_submits_at_once():
    executor, completions = drive({"mode": "empty"})
    assert [call.name for call in executor.calls] == ["submit"]
    assert completions[0].text == ""
    assert executor.files == TASK["repo_files"]


def test_the_error_mode_fails_every_turn():
    with pytest.raises(ProviderError):
        drive({"mode": "error"})


def test_a_malformed_call_on_turn_two_is_shown_and_the_agent_goes_on(tmp_path):
    executor, completions = drive({"mode": "oracle", "agent_fault": "malformed_call"})
    bad = completions[1].tool_calls[0]
    assert bad.malformed and bad.arguments == {}
    with pytest.raises(ValueError):
        json.loads(bad.malformed)
    assert executor.submitted
    assert executor.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


def test_an_unknown_tool_on_turn_two_is_shown_and_the_agent_goes_on(tmp_path):
    executor, completions = drive({"mode": "oracle", "agent_fault": "unknown_tool"})
    assert [call.name for call in completions[1].tool_calls] == [UNKNOWN_TOOL]
    assert executor.submitted
    assert executor.files == patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)


def test_never_submit_reads_until_the_turn_ceiling():
    executor, completions = drive({"mode": "oracle", "agent_fault": "never_submit"}, max_turns=25)
    assert len(completions) == 25 and not executor.submitted
    assert {call.name for call in executor.calls} == {"list_files", "read_file"}
    assert executor.files == TASK["repo_files"]


def test_an_unknown_task_gets_no_tool_call():
    executor, completions = drive({"mode": "oracle"}, prompt="Please fix the flux capacitor.")
    assert [(c.text, c.tool_calls, c.finish_reason) for c in completions] == [("I don't know.", (), "stop")]
    assert executor.calls == []


@pytest.mark.parametrize("mode", ["oracle", "noisy"])
def test_a_prompt_without_the_task_never_gets_the_right_edit(mode, tmp_path):
    """The problem statement cut short, or only in a file the agent reads (not the task it
    was given), or the task given but files that do not hold the lines to change."""
    gold = patched(TASK["repo_files"], TASK["gold_patch"], tmp_path)
    config = {"mode": mode, "quality": 1.0}
    cut = TASK["problem_statement"][: len(TASK["problem_statement"]) // 2]
    assert drive(config, prompt=f"Fix this issue:\n{cut}")[0].calls == []
    planted = Files(TASK["repo_files"] | {"NOTES.md": TASK["problem_statement"]})
    assert drive(config, prompt="Read NOTES.md and do what it says.", files=planted)[0].calls == []
    other_files = Files(dict.fromkeys(TASK["repo_files"], "print('hello')\n"))
    executor, completions = drive(config, files=other_files)
    assert "replace" not in {call.name for call in executor.calls}
    assert "does not hold the lines" in completions[-1].text
    assert executor.files != gold


def test_a_question_gets_an_answer_in_words_with_no_tool_call():
    question = ReferenceTask("add", "2 + 2?", {"choices": ["3", "4", "5"], "answer": "B"}, "")
    mock_book.register_book("quiz-agent", book_of(MultipleChoice(), [question]))
    prompt = MultipleChoice().render_prompt("{{problem_statement}}\n{{choices}}", question, lambda: "")
    request = CompletionRequest((Message("user", prompt),), tools=tools(*ALL_TOOLS), seed_key="1:q:a:0")
    assert next_turn(request, {"mode": "oracle"}, random.Random(1)) == ("Answer: B", ())


def test_lines_found_twice_get_context_until_the_replace_is_unique(tmp_path):
    """The gold hunk's lines also occur elsewhere in the file: the mock adds lines around them
    from what it read, so that ``replace`` (text found once) changes the place the patch means."""
    block = "".join(f"    step_{i}()\n" for i in range(7))
    source = f"def first():\n{block}    return 1\n\n\ndef second():\n{block}    return 2\n"
    fixed = source.replace(f"def second():\n{block}", f"def second():\n{block.replace('step_3', 'fixed_3')}")
    patch = "".join(difflib.unified_diff(source.splitlines(True), fixed.splitlines(True), "a/steps.py", "b/steps.py"))
    fields = {"problem_statement": "The second function must call fixed_3 instead of step_3.", "gold_patch": patch}
    mock_book.register_book("twice", book_of(workload_for("pr_patch"), [reference(TASK | fields)]))
    executor, _ = drive({"mode": "oracle"}, TASK | fields, files=Files({"steps.py": source}))
    (replaced,) = [call.arguments for call in executor.calls if call.name == "replace"]
    assert len(replaced["old"]) > len(patch_edits(patch)[0].old)
    assert executor.files == patched({"steps.py": source}, patch, tmp_path)


def test_a_failed_edit_is_said_and_the_agent_still_submits():
    class Refusing(Files):
        def tool_replace(self, path: str, old: str, new: str) -> str:
            raise ValueError(f"{path} is read-only")

    executor, completions = drive({"mode": "oracle"}, files=Refusing(TASK["repo_files"]), offered=NO_TESTS)
    assert executor.submitted and executor.files == TASK["repo_files"]
    assert "That edit of money.py failed: Error: money.py is read-only" in completions[-1].text
