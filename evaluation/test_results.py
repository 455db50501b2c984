"""Per-test outcomes of a validation: from the JUnit XML report pytest (and most runners,
unittest through xmlrunner) write, or, when there is none, from the log: pytest's summary
lines, else unittest's verbose lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

MAX_TESTS = 5_000  # a table, not a dump: a suite larger than this is cut, and says so
MESSAGE_LIMIT = 300
# Not "FAILED (failures=1)": that is unittest's last line.
SUMMARY_LINE = re.compile(r"^(?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?P<id>[^\s(]\S*)", re.MULTILINE)
LOG_OUTCOMES = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
                "XFAIL": "xfailed", "XPASS": "xpassed"}  # fmt: skip


# "test_add (tests.test_calc.TestCalc) ... ok", or, from Python 3.11, with the method's
# name repeated at the end of the dotted path.
UNITTEST_LINE = re.compile(
    r"^(?P<name>\w+) \((?P<path>[\w.]+)\)(?:\n.*?)?? \.\.\. (?P<outcome>ok|FAIL|ERROR|skipped|expected failure"
    r"|unexpected success)",
    re.MULTILINE,
)
UNITTEST_OUTCOMES = {"ok": "passed", "FAIL": "failed", "ERROR": "error", "skipped": "skipped",
                     "expected failure": "xfailed", "unexpected success": "xpassed"}  # fmt: skip
UNITTEST_ID = re.compile(r"^(?P<name>\w+) \((?P<path>[\w.]+)\)$")
# How SWE-bench grades a named test (swebench/harness/grading.py): a FAIL_TO_PASS test is
# fixed when it passed or failed as expected (XFAIL); a PASS_TO_PASS test is kept when it
# also did that or was skipped. Anything else (failed, error, an unexpected pass, or not run
# at all) is a failure of the patch.
PASSING = frozenset({"passed", "xfailed"})
MAINTAINED = PASSING | {"skipped"}


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False  # not a pytest test class, whatever its name

    id: str  # pytest's node id, e.g. tests/test_calc.py::test_add
    outcome: str  # passed, failed, error, skipped, xfailed (failed as expected) or xpassed (passed unexpectedly)
    seconds: float | None = None
    message: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def parse_junit(xml: str) -> list[TestOutcome] | None:
    """The report's test cases, or None when it is not a JUnit report we can read.
    defusedxml, because the report is written by code under test: no entity bombs."""
    try:
        root = ElementTree.fromstring(xml)
    except (ElementTree.ParseError, DefusedXmlException, ValueError):
        return None
    cases = root.iter("testcase")
    return [_case(case) for _, case in zip(range(MAX_TESTS), cases, strict=False)]


def _case(case) -> TestOutcome:
    classname, name = case.get("classname", ""), case.get("name", "")
    outcome, message = "passed", ""
    for tag, kind in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        found = case.find(tag)
        if found is not None:
            outcome, message = kind, (found.get("message") or "")[:MESSAGE_LIMIT]
            if found.get("type") == "pytest.xfail":  # pytest reports an expected failure as a skip
                outcome = "xfailed"
            break
    try:
        seconds = round(float(case.get("time", "")), 3)
    except ValueError:
        seconds = None
    return TestOutcome(_node_id(classname, name, case.get("file", "")), outcome, seconds, message)


def _node_id(classname: str, name: str, file: str = "") -> str:
    """pytest writes classname "tests.test_calc" (or "tests.test_calc.TestAdd"): turn it
    back into the node id SWE-bench's FAIL_TO_PASS lists use. The module's path is the
    report's ``file`` when pytest writes one (``junit_family=xunit1``); else the module is
    the dotted path up to the first class, since pytest collects classes named ``Test*`` and
    unittest classes are CamelCase too, whatever the file is called (``commands_test.py``,
    ``unittest_nodes.py``)."""
    if not classname:
        return name
    parts = classname.split(".")
    module_parts = file.removesuffix(".py").split("/") if file.endswith(".py") else []
    if module_parts and parts[: len(module_parts)] == module_parts:
        return "::".join([file, *parts[len(module_parts) :], name])
    first_class = next((index for index, part in enumerate(parts) if part[:1].isupper()), len(parts))
    if first_class == 0:  # no module at all: not a pytest classname
        return f"{classname}::{name}"
    return "::".join(["/".join(parts[:first_class]) + ".py", *parts[first_class:], name])


def parse_pytest_log(log: str) -> list[TestOutcome]:
    """pytest's short summary (``-rA`` lists every test; ``-q`` at least the failures)."""
    return [
        TestOutcome(match["id"], LOG_OUTCOMES[match["outcome"]])
        for _, match in zip(range(MAX_TESTS), SUMMARY_LINE.finditer(log), strict=False)
    ]


def parse_unittest_log(log: str) -> list[TestOutcome]:
    """unittest's verbose lines (``-v``), as ``name (module.Class)``: the form SWE-bench's
    FAIL_TO_PASS lists use for Django and other unittest suites."""
    outcomes = []
    for _, match in zip(range(MAX_TESTS), UNITTEST_LINE.finditer(log), strict=False):
        name, path = match["name"], match["path"]
        if path.endswith(f".{name}"):  # Python 3.11+ repeats the method's name
            path = path[: -len(name) - 1]
        outcomes.append(TestOutcome(f"{name} ({path})", UNITTEST_OUTCOMES[match["outcome"]]))
    return outcomes


def parse_test_log(log: str) -> list[TestOutcome]:
    """Whichever runner's lines the log holds."""
    return parse_pytest_log(log) or parse_unittest_log(log)


def passing_ids(expected: Iterable[str], outcomes: Iterable[TestOutcome]) -> set[str]:
    """Which of the ``expected`` ids passed, as the harness grades a FAIL_TO_PASS test."""
    return ids_graded(expected, outcomes, PASSING)


def maintained_ids(expected: Iterable[str], outcomes: Iterable[TestOutcome]) -> set[str]:
    """Which of the ``expected`` ids still pass (or were skipped), as the harness grades a
    PASS_TO_PASS test."""
    return ids_graded(expected, outcomes, MAINTAINED)


def ids_graded(expected: Iterable[str], outcomes: Iterable[TestOutcome], accepted: frozenset[str]) -> set[str]:
    """Which of the ``expected`` ids had an ``accepted`` outcome. SWE-bench cut some ids at a
    space inside their parameters (``test_x[a``, its issue 290); as its grading does, such an
    id stands for the tests whose id it begins when they all were accepted or all were not,
    never for an exact id. A unittest id matches in either Python's form (``same_test``)."""
    passed: dict[str, set[bool]] = {}
    for outcome in outcomes:
        passed.setdefault(same_test(outcome.id), set()).add(outcome.outcome in accepted)
    found = set()
    for test in expected:
        if same_test(test) in passed:
            verdicts = passed[same_test(test)]
        elif test.count("[") > test.count("]"):
            verdicts = set().union(*(verdict for other, verdict in passed.items() if other.startswith(test)))
        else:
            verdicts = set()
        if verdicts == {True}:
            found.add(test)
    return found


def same_test(test: str) -> str:
    """One spelling of a unittest id whichever Python printed it: from 3.11 the runner repeats
    the method's name (``test_x (module.Class.test_x)``), before it did not (``test_x
    (module.Class)``). A task's ids are in the form of the Python its runner ran on when it was
    recorded (SWE-bench's Django 5.0 tasks the long one, older Django the short one), which
    need not be the Python that runs it here; any other id is its own spelling."""
    named = UNITTEST_ID.match(test)
    if named and named["path"].endswith(f".{named['name']}"):
        return f"{named['name']} ({named['path'][: -len(named['name']) - 1]})"
    return test
