"""Code execution (HumanEval): a function's signature and docstring in, its code out, run
with the task's hidden tests in the sandbox PR validation uses.

The program is built as HumanEval builds it: the task's prompt, the completion, the task's
``test`` (which defines ``check(candidate)``) and ``check(<entry_point>)``. It passes when
the tests run to their end and it exits 0. A program that runs out of time failed (an
infinite loop is the program's fault, not the platform's); only a sandbox that could not
start it is the infrastructure's failure.

A completion may be a body (what HumanEval's completions are), a whole function with its
``def`` (what chat models write), or either in a fenced block. A whole function still comes
after the prompt: it replaces the prompt's stub, and keeps the imports and helper functions
the prompt defines and a model's function often uses without repeating them
(``from typing import List``; HumanEval/10's ``is_palindrome``).
"""

from __future__ import annotations

import json
import keyword
import os
import re
import secrets
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.sandbox import SandboxFailed, sandbox_session
from evaluation.validation import ValidationStatus
from evaluation.workloads.base import ArtifactRow, Context, Evaluation, GradingRow, Workload
from evaluation.workloads.wording import Said, TaskColumn, Wording, answer_of, payload_of
from prbench.inputs import storable_problem

PAYLOAD_FIELDS = ("prompt", "entry_point", "test", "canonical_solution")
FIELD_MAX = 100_000  # characters; HumanEval's longest field is under 2,000
DEFAULT_PROMPT = """Complete the following Python function. Reply with the whole function in a ```python fenced block.

{{problem_statement}}"""

# How a completion was put into the program.
BODY, FUNCTION = "body", "function"
# What became of the program (the answer artifact's "outcome").
PASSED = "passed"
FAILED = "failed"  # an assertion, an exception, a syntax error: a non-zero exit
TIMED_OUT = "timed_out"  # the program's failure: it ran out of its time
EXITED_EARLY = "exited_early"  # exit 0 before the tests had finished (sys.exit(0), os._exit(0))
NO_CODE = "no_code"  # nothing to run
SANDBOX_FAILED = "sandbox_failed"  # the platform's failure: the program never started
NOT_RUN = "not_run"  # an inference-only run
ARTIFACT_STATUS = {
    PASSED: ValidationStatus.PASSED,
    TIMED_OUT: ValidationStatus.TIMED_OUT,
    NOT_RUN: ValidationStatus.SKIPPED,
    SANDBOX_FAILED: "",
}
OUTCOME_WORDS = {
    PASSED: "passed: the hidden tests ran to their end",
    FAILED: "failed: the program exited non-zero (an assertion, an exception, a syntax error)",
    TIMED_OUT: "failed: the program ran out of time",
    EXITED_EARLY: "failed: the program exited before the tests had finished",
    NO_CODE: "not run: no code in the answer",
    SANDBOX_FAILED: "not run: the sandbox could not start the program (the platform's failure)",
    NOT_RUN: "not run: an inference-only run",
}
COMPLETION_FORMS = {BODY: "the function's body, after the prompt", FUNCTION: "a whole function, after the prompt"}
OUTPUT_TAIL = 2000  # characters of the program's output kept in the answer artifact

# Fenced blocks; one a truncated answer never closed runs to the end of the output.
FENCE = re.compile(r"^```[ \t]*(?P<language>[\w+.-]*)[^\n]*\n(?P<code>.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)
PYTHON_FENCES = ("", "python", "py", "python3")
CHECK_DEFINED = re.compile(r"^def\s+check\s*\(", re.MULTILINE)

# The program runs under this runner. It says it started (so a program that never started
# is told from one that failed), and after the program returns it prints a token of this
# run, read from stdin, that the program's text cannot know: a completion that exits 0
# early (sys.exit(0), os._exit(0)) never reaches it, so it does not pass. The program can
# still find the token in this process's memory if written to look for it: the runner
# stops completions that cheat in passing, not ones built against PRBench. The program is
# not run as __main__: as under HumanEval's harness (exec in a fresh namespace), a model's
# own ``if __name__ == "__main__":`` demo, which may read input or loop, does not run.
PROGRAM = "program.py"
STARTED = "prbench: program started"
RUNNER = f"""\
import os, runpy, sys
done = sys.stdin.readline().strip().encode()
sys.stdin = open(os.devnull)
os.write(1, b"{STARTED}\\n")
sys.argv = ["{PROGRAM}"]
runpy.run_path("{PROGRAM}", run_name="program")
sys.stdout.flush()
sys.stderr.flush()
os.write(1, b"\\n" + done + b"\\n")
"""

# Programs are CPU work: more at once than there are cores only slows each one towards its
# time limit, and a slow machine's timeout would count against the model. The pool threads
# of a job share these slots (PR validation has its own in the pipeline).
_slots = threading.BoundedSemaphore(os.cpu_count() or 1)


BUILTIN_PROMPTS = {
    "plain@1": DEFAULT_PROMPT,
    "cot@1": "Complete the following Python function. First think through the algorithm and its edge cases "
    "in a few sentences, then give the whole function in a ```python fenced block.\n\n{{problem_statement}}",
    "few-shot@1": "Functions completed from their signature and docstring:\n\n{{examples}}\n\nComplete the "
    "following Python function. Reply with the whole function in a ```python fenced block.\n\n{{problem_statement}}",
}


def _said(words: Wording, row: Any, inference_only: bool) -> Said:
    if row.resolved:
        return Said(words.right, "good")
    if row.resolved is None:
        return Said("the sandbox gave no verdict" if row.outcome == "infrastructure_failure" else "not run")
    return Said(words.wrong if answer_of(row) else "no code in the answer", "bad")


def _tests(task: Any) -> str:
    test = payload_of(task, "test") or ""
    asserts = test.count("assert")
    lines = len(test.splitlines())
    return f"{asserts} assert{'s' if asserts != 1 else ''}, {lines} line{'s' if lines != 1 else ''}"


WORDS = Wording(
    kind="code_exec",
    verdict="Passed",
    rate="passed",
    question="Function to complete",
    answer="completion",
    expected="Canonical solution",
    right="passed its tests",
    wrong="failed its tests",
    success="passed",
    right_filter="passing",
    wrong_filter="failing",
    per_success="Per passing answer",
    not_graded="no program was run, so none passed or failed",
    said=_said,
    task_columns=(
        TaskColumn("Entry point", lambda task: payload_of(task, "entry_point") or "", code=True),
        TaskColumn("Tests", _tests),
    ),
)


class CodeExec(Workload):
    kind = "code_exec"
    label = "Code execution"
    words = WORDS
    quality_metric = ("Passed", "passes")
    default_prompt = DEFAULT_PROMPT
    builtin_prompts = BUILTIN_PROMPTS
    shows_pass_at_k = True

    def payload_errors(self, payload: dict) -> list[str]:
        return payload_errors(payload)

    def reference_output(self, task: Any) -> str:
        return task.payload["canonical_solution"]  # a body: the prompt followed by it runs

    def distractors(self, task: Any) -> tuple[str, ...]:
        return ("    return None\n", "    raise NotImplementedError('not solved')\n")

    def grading_rows(self, task: Any, detail: dict[str, Any]) -> list[GradingRow]:
        """What became of the program built with the task's hidden tests, and its output."""
        outcome = str(detail.get("outcome", ""))
        rows = [GradingRow("Tests", OUTCOME_WORDS.get(outcome, outcome))]
        if form := str(detail.get("form") or ""):
            rows.append(GradingRow("Completion used as", COMPLETION_FORMS.get(form, form)))
        if detail.get("exit_code") is not None:
            rows.append(GradingRow("Exit code", str(detail["exit_code"])))
        if detail.get("duration_ms") is not None:
            limit = f" of {detail['timeout_s']:g} s allowed" if detail.get("timeout_s") else ""
            rows.append(GradingRow("Ran for", f"{detail['duration_ms']} ms{limit}"))
        if detail.get("problem"):
            rows.append(GradingRow("Sandbox", str(detail["problem"])))
        if outcome not in (NO_CODE, NOT_RUN):
            rows.append(GradingRow("Test output", str(detail.get("output_tail") or "(none)"), block=True))
        return rows

    def evaluate(self, task: Any, output: str, context: Context) -> Evaluation:
        payload = task.payload
        code = extract_code(output, payload["entry_point"])
        if context.inference_only:
            return _verdict(code, "", Ran(NOT_RUN))
        if not code.strip():
            return _verdict(code, "", Ran(NO_CODE))
        program, form = build_program(payload, code)
        return _verdict(code, form, run_program(program, settings.PRBENCH_CODE_EXEC_TIMEOUT_SECONDS))


def payload_errors(payload: dict) -> list[str]:
    """What is missing or wrong, each naming its field; the program the canonical solution
    makes must at least compile."""
    errors = [f"{name}: {problem}" for name in PAYLOAD_FIELDS if (problem := _text_problem(payload.get(name)))]
    if errors:
        return errors
    entry_point = payload["entry_point"]
    if not entry_point.isidentifier() or keyword.iskeyword(entry_point):
        return [f"entry_point: {entry_point[:80]!r} is not a Python function name"]
    if not defines(payload["prompt"], entry_point):
        errors.append(f"prompt: does not define {entry_point}() (no line 'def {entry_point}(...')")
    if not CHECK_DEFINED.search(payload["test"]):
        errors.append("test: does not define check(candidate) (no line 'def check(...')")
    if errors:
        return errors
    program, _ = build_program(payload, payload["canonical_solution"])
    if problem := compile_problem(program):
        return [f"canonical_solution: with the prompt and the test it makes a program that does not compile: {problem}"]
    return []


def _text_problem(value: Any) -> str | None:
    if value is None or value == "":
        return "missing or empty"
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    if not value.strip():
        return "blank (only whitespace)"
    if len(value) > FIELD_MAX:
        return f"is {len(value):,} characters long; at most {FIELD_MAX:,} are allowed"
    return storable_problem(value)


def defines(code: str, entry_point: str) -> bool:
    """Whether ``code`` defines the function at its top level."""
    return re.search(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def extract_code(output: str, entry_point: str) -> str:
    """The code in a model's output: its Python fenced block (the one defining the entry
    point when there are several), else the output as it is (a bare body or function)."""
    blocks = [m["code"] for m in FENCE.finditer(output) if m["language"].lower() in PYTHON_FENCES]
    if not blocks:
        return output
    return next((block for block in blocks if defines(block, entry_point)), blocks[0])


def build_program(payload: dict, code: str) -> tuple[str, str]:
    """The program to run, and whether ``code`` went in as a body or a whole function."""
    prompt, entry_point = payload["prompt"], payload["entry_point"]
    if defines(code, entry_point):
        # After a prompt that is a module of its own (HumanEval's are), so its imports and
        # helpers stay; after nothing when the prompt is only the start of a function.
        head = prompt if compile_problem(prompt) is None else ""
        form = FUNCTION
        if head and not head.endswith("\n"):
            head += "\n"
    else:
        head, form, code = prompt, BODY, as_body(code)
    return f"{head}{code}\n{payload['test']}\n\ncheck({entry_point})\n", form


def as_body(code: str) -> str:
    """A body as given, or indented when a chat model wrote it from the left margin."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    return code if first[:1] in (" ", "\t") else textwrap.indent(code, "    ")


def compile_problem(source: str) -> str | None:
    """Why ``source`` does not compile, or None. Compiling runs nothing."""
    try:
        compile(source, PROGRAM, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class Ran:
    """What became of a program."""

    outcome: str
    exit_code: int | None = None
    output_tail: str = ""
    duration_ms: int | None = None
    timeout_s: float | None = None
    problem: str = ""  # why the sandbox could not run it


def run_program(program: str, timeout_s: float) -> Ran:
    """Run ``program`` in the sandbox (no network, limits, a user of its own) in a fresh
    directory, at most one program per core at a time."""
    token = secrets.token_hex(16)
    with _slots:
        try:
            with tempfile.TemporaryDirectory(prefix="prbench-code-") as workdir:
                Path(workdir, PROGRAM).write_text(program, encoding="utf-8")
                with sandbox_session(Path(workdir)) as box:
                    started = time.monotonic()
                    finished = box.run([sys.executable, "-I", "-c", RUNNER], timeout_s, stdin=token + "\n")
                    duration_ms = round((time.monotonic() - started) * 1000)
        except (OSError, SandboxFailed) as exc:
            return Ran(SANDBOX_FAILED, problem=f"{type(exc).__name__}: {exc}", timeout_s=timeout_s)
    output = finished.output
    if STARTED not in output:
        # Say why when the sandbox did ("sandbox: failed to execute ...: No such file or directory").
        why = output.strip().splitlines()[-1][:300] if output.strip() else ""
        problem = f"the program never started: {why}" if why else "the program never started"
        return Ran(SANDBOX_FAILED, finished.returncode, _tail(output), duration_ms, timeout_s, problem)
    if finished.timed_out:
        outcome = TIMED_OUT
    elif finished.returncode != 0:
        outcome = FAILED
    else:
        outcome = PASSED if token in output else EXITED_EARLY
    program_output = output.replace(STARTED + "\n", "", 1).replace(token, "")
    return Ran(outcome, finished.returncode, _tail(program_output), duration_ms, timeout_s)


def _tail(output: str) -> str:
    output = output.strip("\n")
    return output if len(output) <= OUTPUT_TAIL else "…" + output[-OUTPUT_TAIL:]


def _verdict(code: str, form: str, ran: Ran) -> Evaluation:
    judged = ran.outcome not in (NOT_RUN, SANDBOX_FAILED)
    passed = ran.outcome == PASSED
    answer = {
        "outcome": ran.outcome,
        "form": form,
        "exit_code": ran.exit_code,
        "duration_ms": ran.duration_ms,
        "timeout_s": ran.timeout_s,
        "output_tail": ran.output_tail,
        "completion": code,
    }
    if ran.problem:
        answer["problem"] = ran.problem
    status = ARTIFACT_STATUS.get(ran.outcome, ValidationStatus.FAILED)
    return Evaluation(
        answer=code,
        correct=passed if judged else None,
        score=float(passed) if judged else None,
        artifacts=(ArtifactRow("answer", json.dumps(answer), status, ran.duration_ms),),
        validated=ran.outcome not in (NOT_RUN, NO_CODE),
        harness_failed=ran.outcome == SANDBOX_FAILED,
    )
