"""Per-test outcomes read from a runner's log the way SWE-bench's harness reads each
repository family's log (swebench/harness/log_parsers/python.py), so that the ids are the
ones a task's FAIL_TO_PASS / PASS_TO_PASS lists hold:

- pytest ``-rA`` summary lines (``PASSED path::test[param with spaces]``, ``FAILED id - message``),
  also the verbose ``path::test PASSED     [ 50%]`` form, and a verbose status wrapped onto a
  line of its own (``PASSED     [100%]``), read as the harness reads it (the id ``[100%]``);
  requests, pydicom and pylint shorten a parameter that is an absolute path to its last part;
  matplotlib's ids spell mouse buttons as numbers;
- Django's runner at ``--verbosity 2``: ``test_x (module.Class) ... ok`` (``test_x
  (module.Class.test_x)`` from Python 3.11), or, for a test with a docstring, the
  docstring's first line on the next line, which is then the test's id;
- sympy's own runner (``bin/test --verbose``): bare names, ``test_x ok`` / ``F`` / ``E``.

Which family a task uses comes from its ``log_parser`` metadata (the harness's own names,
``parse_log_django``, are understood) or its repository; tasks of neither keep the default
(JUnit XML, then whichever runner's lines the log holds: evaluation/validation.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from evaluation.test_results import MAX_TESTS, TestOutcome

# Colour codes some runners write even into a pipe (the harness strips them the same way).
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
PYTEST_STATUSES = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
                   "XFAIL": "xfailed", "XPASS": "xpassed"}  # fmt: skip
_STATUS = "|".join(PYTEST_STATUSES)
# "PASSED tests/test_a.py::test_x[a b]" or "FAILED tests/test_a.py::test_y - assert 1 == 2"
PYTEST_SUMMARY = re.compile(rf"^(?P<status>{_STATUS}) (?P<id>\S.*)$")
# A test that logs (live logging) or prints before its status has the status wrapped onto a
# line of its own, padded to the progress column: "PASSED" and 67 spaces, then "[ 50%]". The
# harness takes the first word after the status for an id, and SWE-bench's lists hold what it
# took ("[100%]", and "[" from "[ 50%]": pytest-dev__pytest-5227, -5262, -7521).
PYTEST_WRAPPED_STATUS = re.compile(rf"^(?P<status>{_STATUS})  +(?P<id>\S+)")
# -v: "tests/test_a.py::test_x PASSED   [ 50%]", "tests/test_a.py::test_z SKIPPED (reason)  [ 75%]"
# (found with a plain search, then checked: one regex for the whole line backtracks badly
# on a long line of output that merely looks like one)
PYTEST_VERBOSE_STATUS = re.compile(rf" (?P<status>{_STATUS})(?= |$)")
PYTEST_PROGRESS = re.compile(r"\[ *\d+%\]$")
# "SKIPPED [2] tests/test_a.py:17: reason" counts skips at one place; it names no test.
PYTEST_SKIP_COUNT = re.compile(r"^\[\d+\]$")
# A parameter that is an absolute path differs from machine to machine: requests, pydicom
# and pylint's ids keep only its last part ("test_x[/tmp/abc/file.dcm]" -> "test_x[/file.dcm]").
PATH_PARAMETER = re.compile(r"^(?P<test>.*?)\[(?P<path>/(?!/)[^*]*)\]$")
# Older Pythons printed IntEnum parameters by name, newer ones by value; the harness keeps values.
MOUSE_BUTTONS = {"MouseButton.LEFT": "1", "MouseButton.RIGHT": "3"}

_DJANGO_OUTCOME = r"(?P<outcome>ok|OK|FAIL|ERROR|skipped(?: .*)?|expected failure|unexpected success)"
# "test_x (module.Class) ... ok" or "Docstring's first line ... FAIL"; also "... skipped 'why'".
DJANGO_RESULT = re.compile(rf"^(?P<test>.+?) \.\.\. {{1,2}}{_DJANGO_OUTCOME}$")
# A test that writes output between its "..." and its result: "test_x (m.C) ... some output",
# then, on a later line of its own, "ok".
DJANGO_STARTED = re.compile(r"^(?P<test>.+?) \.\.\. ")
DJANGO_LATE_RESULT = re.compile(rf"^{_DJANGO_OUTCOME}$")
DJANGO_OUTCOMES = {"ok": "passed", "OK": "passed", "FAIL": "failed", "ERROR": "error", "skipped": "skipped",
                   "expected failure": "xfailed", "unexpected success": "xpassed"}  # fmt: skip

# "test_expand ok", "test_root F", "test_skipped reason s", the file's last one with "[OK]".
SYMPY_RESULT = re.compile(r"^(?P<name>test_\w+)(?: .*)? (?P<mark>ok|F|E|f|s|w|X|T)(?:\s+\[(?:OK|FAIL)\])?$")
SYMPY_OUTCOMES = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "s": "skipped", "w": "skipped",
                  "X": "xpassed", "T": "failed"}  # fmt: skip


def parse_pytest(log: str) -> list[TestOutcome]:
    """pytest's ``-rA`` summary (and ``-v`` lines): the whole rest of the line is the id,
    spaces in parameters included, up to the `` - message`` pytest adds to all but PASSED.
    A status padded by several spaces is a wrapped ``-v`` status, whose first word the harness
    reads as an id (PYTEST_WRAPPED_STATUS)."""
    outcomes: dict[str, str] = {}
    for line in ANSI_ESCAPE.sub("", log).splitlines():
        line = line.rstrip()
        if wrapped := PYTEST_WRAPPED_STATUS.match(line):
            status, test = wrapped["status"], wrapped["id"]
        elif summary := PYTEST_SUMMARY.match(line):
            status, test = summary["status"], summary["id"]
            if status == "SKIPPED" and PYTEST_SKIP_COUNT.match(test.split()[0]):
                continue
            if status != "PASSED":
                test = test.split(" - ", 1)[0]
        elif verbose := _verbose_line(line):
            test, status = verbose
        else:
            continue
        outcomes[test.rstrip()] = PYTEST_STATUSES[status]  # the summary comes last, and wins
    return _listed(outcomes.items())


def _verbose_line(line: str) -> tuple[str, str] | None:
    """``path::id STATUS``, then nothing but a reason in parentheses and the progress."""
    found = PYTEST_VERBOSE_STATUS.search(line)
    if not found or "::" not in line[: found.start()] or line[:1].isspace():
        return None
    rest = PYTEST_PROGRESS.sub("", line[found.end() :]).strip()
    if rest and not (rest.startswith("(") and rest.endswith(")")):
        return None
    return line[: found.start()], found["status"]


def parse_pytest_options(log: str) -> list[TestOutcome]:
    """pytest, with a parameter that is an absolute path cut to its last part."""
    return [TestOutcome(_short_path_parameter(outcome.id), outcome.outcome) for outcome in parse_pytest(log)]


def _short_path_parameter(test: str) -> str:
    found = PATH_PARAMETER.match(test)
    if not found:
        return test
    return f"{found['test']}[/{found['path'].rsplit('/', 1)[-1]}]"


def parse_matplotlib(log: str) -> list[TestOutcome]:
    """pytest, with mouse buttons in parameters spelt as numbers."""
    for name, number in MOUSE_BUTTONS.items():
        log = log.replace(name, number)
    return parse_pytest(log)


def parse_django(log: str) -> list[TestOutcome]:
    """Django's runner at ``--verbosity 2``. A test with a docstring prints its name alone,
    then the docstring's first line with the result: that line is its id, as in the harness.
    A test that prints between ``...`` and its result gets the result from a later line.
    Ids keep the form the runner printed, as the harness's do: ``test_x (module.Class)`` before
    Python 3.11, ``test_x (module.Class.test_x)`` from it (SWE-bench's Django 5.0 tasks name
    theirs so); grading matches either form against either (test_results.same_test)."""
    outcomes: dict[str, str] = {}
    started = None  # the test whose "..." line had output instead of a result
    for line in log.splitlines():
        line = line.strip()
        if result := DJANGO_RESULT.match(line):
            outcomes[result["test"]] = _django_outcome(result["outcome"])
            started = None
        elif begun := DJANGO_STARTED.match(line):
            started = begun["test"]
        elif started and (late := DJANGO_LATE_RESULT.match(line)):
            outcomes[started] = _django_outcome(late["outcome"])
            started = None
    return _listed(outcomes.items())


def _django_outcome(result: str) -> str:
    return DJANGO_OUTCOMES["skipped" if result.startswith("skipped") else result]


def parse_sympy(log: str) -> list[TestOutcome]:
    """sympy's runner, verbose: one ``name mark`` line per test under its file's header."""
    outcomes = {
        found["name"]: SYMPY_OUTCOMES[found["mark"]]
        for line in log.splitlines()
        if (found := SYMPY_RESULT.match(line.strip()))
    }
    return _listed(outcomes.items())


def _listed(outcomes: Iterable[tuple[str, str]]) -> list[TestOutcome]:
    return [TestOutcome(test, outcome) for _, (test, outcome) in zip(range(MAX_TESTS), outcomes, strict=False)]


LOG_PARSERS: dict[str, Callable[[str], list[TestOutcome]]] = {
    "pytest": parse_pytest,
    "pytest_options": parse_pytest_options,
    "matplotlib": parse_matplotlib,
    "django": parse_django,
    "sympy": parse_sympy,
}
# The harness's parser names (a task's ``log_parser`` field) and the family each belongs to.
HARNESS_PARSERS = {
    **dict.fromkeys(
        ["pytest", "pytest_v2", "seaborn", "astroid", "flask", "marshmallow", "pvlib", "pyvista", "sqlfluff",
         "xarray", "astropy", "scikit", "sphinx"],
        "pytest",
    ),
    **dict.fromkeys(["pytest_options", "pydicom", "requests", "pylint"], "pytest_options"),
    "matplotlib": "matplotlib",
    "django": "django",
    "sympy": "sympy",
}  # fmt: skip
REPOSITORY_PARSERS = {
    "django/django": "django",
    "sympy/sympy": "sympy",
    "matplotlib/matplotlib": "matplotlib",
    "psf/requests": "pytest_options",
    "pydicom/pydicom": "pytest_options",
    "pylint-dev/pylint": "pytest_options",
    **dict.fromkeys(
        ["astropy/astropy", "marshmallow-code/marshmallow", "mwaskom/seaborn", "pallets/flask", "pvlib/pvlib-python",
         "pydata/xarray", "pylint-dev/astroid", "pytest-dev/pytest", "pyvista/pyvista", "scikit-learn/scikit-learn",
         "sqlfluff/sqlfluff", "sphinx-doc/sphinx"],
        "pytest",
    ),
}  # fmt: skip


def log_parser_for(repo: str, metadata: dict) -> str:
    """The family whose log parser reads a task's test output: its ``log_parser`` field
    (a family name or the harness's ``parse_log_<name>``), else its repository's; "" for
    the default (JUnit, then whichever runner's lines the log holds), as for mined tasks."""
    named = str(metadata.get("log_parser") or "").removeprefix("parse_log_")
    return HARNESS_PARSERS.get(named) or REPOSITORY_PARSERS.get(repo, "")


def parse_log(log_parser: str, log: str) -> list[TestOutcome]:
    return LOG_PARSERS[log_parser](log)
