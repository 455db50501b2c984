"""The code_exec kind: HumanEval's programs built and run in the sandbox, and judged.

No database: ``evaluate`` runs on pool threads and reads only the task handed to it."""

from __future__ import annotations

import json
import os
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings

from evaluation.sandbox import isolation
from evaluation.workloads import workload_for
from evaluation.workloads.base import Context
from evaluation.workloads.code_exec import BODY, FUNCTION, build_program, extract_code, payload_errors
from tests.samples import PROBLEMS

FIELDS = ("prompt", "entry_point", "test", "canonical_solution")
WORKLOAD = workload_for("code_exec")


def task(problem: dict) -> SimpleNamespace:
    """What evaluate reads of a TaskInstance."""
    return SimpleNamespace(payload={f: problem[f] for f in FIELDS}, problem_statement=problem["prompt"])


def by_id(task_id: str) -> SimpleNamespace:
    return task(next(p for p in PROBLEMS if p["task_id"] == task_id))


def answer(evaluation) -> dict:
    (row,) = evaluation.artifacts
    assert row.kind == "answer"
    return json.loads(row.content)


def evaluate(task_id: str, output: str, **context):
    return WORKLOAD.evaluate(by_id(task_id), output, Context(**context))


def test_every_canonical_solution_of_humaneval_passes_in_the_sandbox():
    assert len(PROBLEMS) == 164
    tasks = [task(problem) for problem in PROBLEMS]
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # as a job's threads would
        evaluations = list(pool.map(lambda t: WORKLOAD.evaluate(t, WORKLOAD.reference_output(t), Context()), tasks))
    failed = [(p["task_id"], answer(e)) for p, e in zip(PROBLEMS, evaluations, strict=True) if not e.correct]
    assert failed == []
    assert all(e.score == 1.0 and e.validated and not e.harness_failed for e in evaluations)
    assert {answer(e)["outcome"] for e in evaluations} == {"passed"}


@pytest.mark.parametrize("problem", PROBLEMS[:12], ids=lambda p: p["task_id"])
def test_the_mocks_wrong_answers_fail(problem):
    for distractor in WORKLOAD.distractors(task(problem)):
        evaluation = WORKLOAD.evaluate(task(problem), distractor, Context())
        assert evaluation.correct is False and evaluation.score == 0.0
        assert answer(evaluation)["outcome"] == "failed"


def test_a_wrong_body_fails_with_the_assertion_in_its_output():
    evaluation = evaluate("HumanEval/0", "    return False\n")
    assert evaluation.correct is False and evaluation.score == 0.0 and not evaluation.harness_failed
    verdict = answer(evaluation)
    assert verdict["outcome"] == "failed" and verdict["exit_code"] == 1 and verdict["form"] == BODY
    assert "AssertionError" in verdict["output_tail"] and "prbench" not in verdict["output_tail"]
    assert verdict["duration_ms"] > 0 and verdict["timeout_s"] == settings.PRBENCH_CODE_EXEC_TIMEOUT_SECONDS


def test_a_chat_models_fenced_function_passes():
    output = (
        "Here you go:\n\n```python\nfrom typing import List\n\n\ndef has_close_elements(numbers: List[float], "
        "threshold: float) -> bool:\n    return any(abs(a - b) < threshold for i, a in enumerate(numbers) "
        "for j, b in enumerate(numbers) if i != j)\n```\n\nThis compares every pair."
    )
    evaluation = evaluate("HumanEval/0", output)
    assert evaluation.correct is True and answer(evaluation)["form"] == FUNCTION
    assert evaluation.answer.startswith("from typing import List")


def test_a_function_may_use_the_prompts_imports_and_helpers_without_repeating_them():
    # HumanEval/10's prompt defines is_palindrome, which make_palindrome is meant to call.
    output = (
        "```python\ndef make_palindrome(string: str) -> str:\n    for i in range(len(string) + 1):\n"
        "        if is_palindrome(string[i:]):\n            return string + string[:i][::-1]\n```"
    )
    assert evaluate("HumanEval/10", output).correct is True
    # List comes from the prompt's "from typing import List".
    function = (
        "def has_close_elements(numbers: List[float], t: float) -> bool:\n"
        "    return any(abs(a - b) < t for i, a in enumerate(numbers) for b in numbers[i + 1:])\n"
    )
    assert evaluate("HumanEval/0", function).correct is True


def test_a_body_written_from_the_left_margin_is_indented():
    output = "```py\nreturn [x for x in strings if substring in x]\n```"
    evaluation = evaluate("HumanEval/7", output)
    assert evaluation.correct is True and answer(evaluation)["form"] == BODY


def test_of_several_blocks_the_one_defining_the_entry_point_runs():
    output = (
        "Usage:\n```python\nprint(add(1, 2))\n```\nCode:\n```python\ndef add(x: int, y: int):\n    return x + y\n```"
    )
    assert extract_code(output, "add") == "def add(x: int, y: int):\n    return x + y\n"
    assert evaluate("HumanEval/53", output).correct is True
    assert extract_code("```\n    return 1\n", "f") == "    return 1\n"  # cut off before its closing fence


def test_prose_alone_fails_and_no_code_is_not_run():
    assert answer(evaluate("HumanEval/53", "I would add the numbers."))["outcome"] == "failed"
    nothing = evaluate("HumanEval/53", "")
    assert nothing.correct is False and nothing.score == 0.0 and not nothing.validated
    assert answer(nothing)["outcome"] == "no_code"


def test_an_inference_only_run_judges_nothing():
    evaluation = evaluate("HumanEval/53", "    return x + y\n", inference_only=True)
    assert evaluation.correct is None and evaluation.score is None and not evaluation.validated
    assert answer(evaluation)["outcome"] == "not_run"


def test_an_infinite_loop_times_out_and_is_the_models_failure(settings):
    settings.PRBENCH_CODE_EXEC_TIMEOUT_SECONDS = 1
    evaluation = evaluate("HumanEval/53", "    while True:\n        pass\n")
    assert evaluation.correct is False and evaluation.score == 0.0
    assert not evaluation.harness_failed  # the program's fault: it counts against the model
    verdict = answer(evaluation)
    assert verdict["outcome"] == "timed_out" and 1000 <= verdict["duration_ms"] < 5000
    assert evaluation.artifacts[0].status == "timed_out"


@pytest.mark.parametrize("exit_call", ["import sys; sys.exit(0)", "import os; os._exit(0)", "exit()"])
def test_exiting_0_before_the_tests_end_does_not_pass(exit_call):
    evaluation = evaluate("HumanEval/53", f"    {exit_call}\n")
    assert evaluation.correct is False and answer(evaluation)["outcome"] == "exited_early"


def test_a_models_own_main_block_does_not_run():
    # As under HumanEval's harness; this one would fail reading input there is none of.
    output = (
        "```python\ndef add(x, y):\n    return x + y\n\n"
        "if __name__ == '__main__':\n    print(add(int(input()), 1))\n```"
    )
    assert evaluate("HumanEval/53", output).correct is True


def test_a_program_that_prints_cannot_pass_by_printing():
    # Printing what the runner prints when it starts, or anything else, decides nothing.
    evaluation = evaluate("HumanEval/53", "    print('prbench: program started')\n    return None\n")
    assert evaluation.correct is False and answer(evaluation)["outcome"] == "failed"


@pytest.mark.skipif(not isolation().namespaces, reason="the sandbox has no network namespace on this machine")
def test_a_completion_that_tries_the_network_gets_nothing():
    # A listener on this machine's loopback: a program that could reach it would reach the
    # network. The sandbox's own loopback is down and is not this one. Nothing leaves the host.
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.settimeout(0.2)
    connected: list[bool] = []

    def accept() -> None:
        try:
            listener.accept()
            connected.append(True)
        except OSError:
            pass

    waiting = threading.Thread(target=accept)
    waiting.start()
    body = (
        "    import socket\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'out')\n"
        "    return x + y\n"
    )
    evaluation = evaluate("HumanEval/53", body)
    waiting.join()
    listener.close()
    assert connected == []
    assert evaluation.correct is False
    assert "OSError" in answer(evaluation)["output_tail"] or "unreachable" in answer(evaluation)["output_tail"]


@pytest.mark.skipif(not isolation().separate_user, reason="the sandbox has no user of its own on this machine")
def test_a_completion_that_writes_outside_its_directory_gets_nothing(tmp_path):
    target = tmp_path / "worker-files"
    target.mkdir()
    victim = target / "victim.txt"
    victim.write_text("the worker's\n")
    planted = Path(settings.VAR_DIR) / "planted-by-a-program"
    body = (
        "    import os\n"
        f"    for path, text in (({str(victim)!r}, 'overwritten'), ({str(target / 'new.txt')!r}, 'new'),"
        f" ({str(planted)!r}, 'planted')):\n"
        "        try:\n"
        "            with open(path, 'w') as handle:\n"
        "                handle.write(text)\n"
        "            print('wrote', path)\n"
        "        except OSError as exc:\n"
        "            print('refused', type(exc).__name__)\n"
        "    return x + y\n"
    )
    evaluation = evaluate("HumanEval/53", body)
    assert evaluation.correct is True  # it ran to the end: the writes were refused, not skipped
    output = answer(evaluation)["output_tail"]  # each of check's calls tried all three
    assert "wrote" not in output and "refused PermissionError" in output
    assert victim.read_text() == "the worker's\n"
    assert not (target / "new.txt").exists() and not planted.exists()


def test_a_sandbox_that_cannot_start_the_program_is_the_platforms_failure(monkeypatch):
    monkeypatch.setattr("evaluation.workloads.code_exec.sys.executable", "/bin/false")  # starts, runs nothing
    evaluation = evaluate("HumanEval/53", WORKLOAD.reference_output(by_id("HumanEval/53")))
    assert evaluation.harness_failed and evaluation.correct is None and evaluation.score is None
    assert answer(evaluation)["outcome"] == "sandbox_failed"
    monkeypatch.setattr("evaluation.workloads.code_exec.sys.executable", "/nonexistent/python")
    evaluation = evaluate("HumanEval/53", WORKLOAD.reference_output(by_id("HumanEval/53")))
    # Without sessions the interpreter is not found; with them the sandbox's own server cannot start.
    problem = answer(evaluation)["problem"]
    assert evaluation.harness_failed and ("not found" in problem or "No such file or directory" in problem)


def test_a_humaneval_program_is_prompt_completion_test_and_check():
    problem = by_id("HumanEval/53").payload
    program, form = build_program(problem, problem["canonical_solution"])
    assert form == BODY
    assert program == f"{problem['prompt']}{problem['canonical_solution']}\n{problem['test']}\n\ncheck(add)\n"


def test_payload_errors_name_their_field():
    good = by_id("HumanEval/53").payload
    assert payload_errors(good) == []
    assert payload_errors({**good, "test": "", "prompt": 3}) == [
        "prompt: must be text, not int",
        "test: missing or empty",
    ]
    assert payload_errors({**good, "entry_point": "not a name"}) == [
        "entry_point: 'not a name' is not a Python function name"
    ]
    assert payload_errors({**good, "entry_point": "subtract"}) == [
        "prompt: does not define subtract() (no line 'def subtract(...')"
    ]
    assert payload_errors({**good, "test": "assert True\n"}) == [
        "test: does not define check(candidate) (no line 'def check(...')"
    ]
    broken = payload_errors({**good, "canonical_solution": "    return x +\n"})
    assert len(broken) == 1 and broken[0].startswith("canonical_solution: ") and "line 10" in broken[0]
    assert payload_errors({**good, "canonical_solution": "    return 1\x00\n"}) == [
        "canonical_solution: contains a NUL character at character 13"
    ]
