"""Per-test outcomes: JUnit XML from the runner, pytest's summary as the fallback."""

import subprocess
import sys

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.test_results import parse_junit, parse_pytest_log, parse_test_log
from evaluation.validation import ValidationStatus, validate_patch
from providers.adapters.mock.adapter import no_op_rewrite

TASK = read_task_dir(demo_task_dirs()[0], 0)

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_calc" name="test_add" time="0.001"/>
<testcase classname="tests.test_calc.TestSub" name="test_sub[1-2]" time="0.002">
  <failure message="assert 3 == -1">long traceback</failure></testcase>
<testcase classname="test_top" name="test_error" time="x"><error message="fixture exploded"/></testcase>
<testcase classname="test_top" name="test_later"><skipped message="not yet"/></testcase>
</testsuite></testsuites>"""


def test_junit_test_cases_become_pytest_node_ids_with_outcomes():
    outcomes = {t.id: (t.outcome, t.message) for t in parse_junit(JUNIT)}
    assert outcomes == {
        "tests/test_calc.py::test_add": ("passed", ""),
        "tests/test_calc.py::TestSub::test_sub[1-2]": ("failed", "assert 3 == -1"),
        "test_top.py::test_error": ("error", "fixture exploded"),
        "test_top.py::test_later": ("skipped", "not yet"),
    }
    assert parse_junit(JUNIT)[0].seconds == 0.001 and parse_junit(JUNIT)[2].seconds is None


def test_a_hostile_or_broken_report_is_not_parsed():
    bomb = '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><t>&b;</t>'
    assert parse_junit(bomb) is None  # entities refused (defusedxml), not expanded
    assert parse_junit("<testsuite><testcase") is None


def test_pytests_summary_is_the_fallback():
    log = "FAILED tests/test_calc.py::test_add - assert 1 == 2\nPASSED tests/test_calc.py::test_sub\n1 failed"
    assert [(t.id, t.outcome) for t in parse_pytest_log(log)] == [
        ("tests/test_calc.py::test_add", "failed"),
        ("tests/test_calc.py::test_sub", "passed"),
    ]


def test_a_validation_reports_each_test():
    passed = validate_patch(TASK["repo_files"], TASK["gold_patch"], TASK["test_command"], 30)
    assert passed.status == ValidationStatus.PASSED and passed.tests
    assert {t.outcome for t in passed.tests} == {"passed"} and all("::" in t.id for t in passed.tests)
    wrong = validate_patch(TASK["repo_files"], no_op_rewrite(TASK["gold_patch"]), TASK["test_command"], 30)
    assert wrong.status == ValidationStatus.FAILED and "failed" in {t.outcome for t in wrong.tests}
    assert {t.id for t in wrong.tests} == {t.id for t in passed.tests}


def test_unittest_verbose_lines_are_read_when_there_is_no_report(tmp_path):
    """A real unittest run, Python's own output: the ids take SWE-bench's Django form."""
    (tmp_path / "test_calc.py").write_text(
        "import unittest\n\n"
        "class TestCalc(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(1 + 1, 2)\n"
        "    def test_sub(self):\n        self.assertEqual(1 - 1, 1)\n"
        "    def test_boom(self):\n        raise RuntimeError('boom')\n"
        "    @unittest.skip('later')\n    def test_later(self):\n        pass\n"
    )
    finished = subprocess.run(
        [sys.executable, "-m", "unittest", "-v", "test_calc"], cwd=tmp_path, capture_output=True, text=True
    )
    outcomes = {t.id: t.outcome for t in parse_test_log(finished.stderr)}
    assert outcomes == {
        "test_add (test_calc.TestCalc)": "passed",
        "test_boom (test_calc.TestCalc)": "error",
        "test_later (test_calc.TestCalc)": "skipped",
        "test_sub (test_calc.TestCalc)": "failed",
    }


def test_the_log_parser_prefers_pytest_lines():
    log = "FAILED tests/test_a.py::test_x - assert 1\ntest_y (m.C) ... ok\n"
    assert [(t.id, t.outcome) for t in parse_test_log(log)] == [("tests/test_a.py::test_x", "failed")]
