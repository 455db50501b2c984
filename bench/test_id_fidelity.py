"""How many SWE-bench tasks name only test ids our parsers can produce: every FAIL_TO_PASS and
PASS_TO_PASS id of a task must be one the parser chosen for it reads from its runner's output,
or its gold patch can never resolve it, whatever environment the tests run in.

    .venv/bin/python bench/test_id_fidelity.py [FILE.jsonl ...]

(default: /work/shared/data/swebench/SWE-bench_Lite_dev.jsonl). For each id the script writes
the line the repository's runner prints for a passing test of that id, in SWE-bench's format
and with the runner's real spacing (pytest ``-rA``, and the ``-v`` status a logging test's
output wraps onto a line of its own, padded to the progress column, whose first word the
harness took for the ids ``[100%]`` and ``[``; Django's runner at ``--verbosity 2`` on the
Python 3.11 here, which prints ``test_x (module.Class.test_x)``, and whose docstring tests
print their name, then the docstring's first line; sympy's ``bin/test --verbose``), and asks
a parser for it:

- today (JUnit): PRBench before issue 14. pytest repositories write a JUnit report (the test
  commands carry ``--junitxml={junit}``), whose test case (classname and name, as pytest's
  default xunit2 writes them) goes through today's node-id rebuilding; Django and sympy
  write none, so their log goes through today's log parser.
- today (log): the same, had there been no JUnit report: today's log parser on every log.
- new: the parser ``log_parser_for`` chooses from the task's ``log_parser`` and repository,
  matched as validation matches (an id cut at a space inside its parameters stands for the
  test it begins).

It measures whether the id's form is one the parser yields, not whether a test passes: no
repository is checked out and nothing runs. The old rules are main's test_results.py as of
issue 14, kept here verbatim-in-behaviour so the comparison does not move with the code.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from evaluation.log_parsers import log_parser_for, parse_log  # noqa: E402
from evaluation.test_results import TestOutcome, passing_ids  # noqa: E402

DEFAULT_FILE = Path("/work/shared/data/swebench/SWE-bench_Lite_dev.jsonl")
UNITTEST_ID = re.compile(r"^(?P<name>\w+) \((?P<path>[\w.]+)\)$")
PLACEHOLDER_TEST = "test_documented (tests.tests.DocumentedTests)"


# Today's rules (main before issue 14), restated so the figure stays comparable.
OLD_SUMMARY_LINE = re.compile(r"^(?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?P<id>[^\s(]\S*)", re.MULTILINE)
OLD_UNITTEST_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<path>[\w.]+)\)(?:\n.*?)?? \.\.\. (?P<outcome>ok|FAIL|ERROR|skipped|expected failure"
    r"|unexpected success)",
    re.MULTILINE,
)


def old_node_id(classname: str, name: str) -> str:
    if not classname:
        return name
    parts = classname.split(".")
    for split in range(len(parts), 0, -1):
        if parts[split - 1].startswith("test") or split == 1:
            module = "/".join(parts[:split]) + ".py"
            return "::".join([module, *parts[split:], name])
    return f"{classname}::{name}"


def old_log_ids(log: str) -> set[str]:
    summary = {match["id"] for match in OLD_SUMMARY_LINE.finditer(log) if match["outcome"] == "PASSED"}
    if summary:
        return summary
    passed = (match for match in OLD_UNITTEST_LINE.finditer(log) if match["outcome"] == "ok")
    return {f"{match['name']} ({match['path']})" for match in passed}


# What each runner prints for a passing test of a given id.
def full_id(test: str) -> str:
    """SWE-bench cut some parametrised ids at a space: the runner prints the whole id."""
    return f"{test} cut]" if test.count("[") > test.count("]") else test


# A -v status wrapped onto a line of its own (the test logged before it): pytest pads it to
# the progress column of an 80-column terminal, "PASSED" and 67 spaces, then "[ 50%]". The
# harness read the first word after the status as an id, so the lists hold "[100%]", "[" (of
# "[ 50%]") and, where pytest 4 wrote a live-log rule straight after the progress,
# "[100%]------------------------------".
PROGRESS_ID = re.compile(r"^\[(?P<percent>\d*%?)\]?(?P<rest>-*)$")
PROGRESS_PADDING = " " * 67
LIVE_LOG_RULE = "-" * 30 + " live log teardown " + "-" * 30


def pytest_output(test: str) -> str:
    if progress := PROGRESS_ID.match(test):
        percent = progress["percent"] or "50%"
        rule = LIVE_LOG_RULE if progress["rest"] else ""
        return f"PASSED{PROGRESS_PADDING}[{percent:>4}]{rule}\n"
    return f"PASSED {full_id(test)}\n"


def junit_case(test: str) -> tuple[str, str]:
    """The classname and name pytest's JUnit report (xunit2) gives a node id."""
    path, _, rest = full_id(test).partition("::")
    if not rest:
        return "", test
    *classes, name = rest.split("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *classes]), name


def django_output(test: str) -> str:
    """Python 3.11's runner (the one here) repeats the method's name, whichever form the
    task's id has: ``test_x (module.Class.test_x)``."""
    if named := UNITTEST_ID.match(test):
        name, path = named["name"], named["path"]
        return f"{name} ({path if path.endswith(f'.{name}') else f'{path}.{name}'}) ... ok\n"
    return f"{PLACEHOLDER_TEST}\n{test} ... ok\n"  # a docstring's first line


def sympy_output(test: str) -> str:
    return f"sympy/core/tests/test_x.py[1] \n{test} ok\n"


RUNNER_OUTPUT: dict[str, Callable[[str], str]] = {"django": django_output, "sympy": sympy_output}


def producible_today(family: str, test: str, junit: bool) -> bool:
    if family not in RUNNER_OUTPUT and junit:
        return old_node_id(*junit_case(test)) == test
    return test in old_log_ids(RUNNER_OUTPUT.get(family, pytest_output)(test))


def producible_now(family: str, test: str) -> bool:
    output = RUNNER_OUTPUT.get(family, pytest_output)(test)
    outcomes: list[TestOutcome] = parse_log(family or "pytest", output)
    return test in passing_ids([test], outcomes)


def task_ids(task: dict) -> list[str]:
    ids: list[str] = []
    for field in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        value = task.get(field) or []
        ids.extend(json.loads(value) if isinstance(value, str) else value)
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path, default=[DEFAULT_FILE])
    options = parser.parse_args()
    counts: dict[str, Counter] = {}
    unproducible: Counter = Counter()
    for path in options.files:
        for line in path.read_text().splitlines():
            task = json.loads(line)
            repo, ids = task["repo"], task_ids(task)
            family = log_parser_for(repo, {"log_parser": task.get("log_parser")})
            tally = counts.setdefault(repo, Counter())
            tally["tasks"] += 1
            tally["today (JUnit)"] += all(producible_today(family, test, junit=True) for test in ids)
            tally["today (log)"] += all(producible_today(family, test, junit=False) for test in ids)
            missing = [test for test in ids if not producible_now(family, test)]
            tally["new"] += not missing
            unproducible.update({repo: len(missing)})
    columns = ["today (JUnit)", "today (log)", "new"]
    print(f"{'repository':32} {'tasks':>5}  " + "  ".join(f"{column:>13}" for column in columns))
    total: Counter = Counter()
    for repo, tally in sorted(counts.items()):
        total.update(tally)
        print(f"{repo:32} {tally['tasks']:>5}  " + "  ".join(f"{tally[column]:>13}" for column in columns))
    print(f"{'total':32} {total['tasks']:>5}  " + "  ".join(f"{total[column]:>13}" for column in columns))
    for column in columns:
        print(f"{column}: {total[column]} of {total['tasks']} tasks have every id producible")
    if any(unproducible.values()):
        print("ids the new parsers cannot produce:", dict(+unproducible))
    return 0


if __name__ == "__main__":
    sys.exit(main())
