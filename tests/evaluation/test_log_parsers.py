"""Per-repository log parsers, on output captured from each real runner (tests/evaluation/logs,
whose README says how each file was made): the ids must be the ones SWE-bench's harness
reads from the same output, since those are the ids in a task's FAIL_TO_PASS / PASS_TO_PASS."""

import time
from pathlib import Path

import pytest

from datasets import validation
from datasets.models import Dataset, TaskInstance
from evaluation.log_parsers import (
    log_parser_for,
    parse_django,
    parse_log,
    parse_matplotlib,
    parse_pytest,
    parse_pytest_options,
    parse_sympy,
)
from evaluation.test_results import TestOutcome, maintained_ids, parse_junit, passing_ids
from evaluation.validation import LOG_LIMIT, TestPlan, _tally, validate_in, written_files

LOGS = Path(__file__).parent / "logs"


def outcomes_of(parsed) -> dict[str, str]:
    return {outcome.id: outcome.outcome for outcome in parsed}


def log(name: str) -> str:
    return (LOGS / name).read_text()


SAMPLE = "tests/test_sample.py"
PYTEST_OUTCOMES = {
    f"{SAMPLE}::test_adds": "passed",
    f"{SAMPLE}::test_fails_with_a_message": "failed",
    f"{SAMPLE}::test_parametrised[plain]": "passed",
    f"{SAMPLE}::test_parametrised[with space]": "passed",
    f"{SAMPLE}::test_parametrised[a[1]]": "passed",
    f"{SAMPLE}::test_parametrised[/usr/lib/x.so]": "passed",
    f"{SAMPLE}::test_expected_failure": "xfailed",
    f"{SAMPLE}::TestGroup::test_in_class": "passed",
    f"{SAMPLE}::TestGroup::test_error_in_class": "error",
    f"{SAMPLE}::test_mouse_button[MouseButton.LEFT]": "passed",
    f"{SAMPLE}::test_mouse_button[MouseButton.RIGHT]": "passed",
    "tests/checks_sample.py::test_in_a_file_not_named_test": "passed",
    "tests/Legacy_checks.py::test_in_a_capitalised_module": "passed",
}


def test_pytest_summary_ids_keep_spaces_and_brackets_and_drop_messages():
    """-rA: the skip's "SKIPPED [1] path:line: reason" names no test and is not one."""
    assert outcomes_of(parse_pytest(log("pytest_rA.log"))) == PYTEST_OUTCOMES


def test_pytest_verbose_lines_are_read_too():
    """seaborn's and astropy's parsers also read "path::id PASSED [ 7%]": here they add the
    skipped test the summary only counts."""
    assert outcomes_of(parse_pytest(log("pytest_rA_verbose.log"))) == {
        **PYTEST_OUTCOMES,
        f"{SAMPLE}::test_skipped": "skipped",
    }


def test_a_status_wrapped_onto_its_own_line_is_read_as_the_harness_reads_it():
    """A test that logs during its call has its -v status on a line of its own, padded to the
    progress column (real spacing: "PASSED", 67 spaces, "[ 50%]"). The harness takes the first
    word after the status, so pytest-dev__pytest-5227, -5262 and -7521 name "[100%]" and "["
    among their PASS_TO_PASS ids; the -v lines with their padding and the summary still count."""
    outcomes = outcomes_of(parse_pytest(log("pytest_live_log.log")))
    assert "PASSED" + " " * 67 + "[ 50%]" in log("pytest_live_log.log").splitlines()
    names = ("test_quiet", "test_logs_in_its_call", "test_logs_in_teardown", "test_logs_last")
    assert outcomes == {"[": "passed", "[100%]": "passed", **{f"tests/test_live_log.py::{n}": "passed" for n in names}}
    assert passing_ids(
        ["[100%]", "[", "tests/test_live_log.py::test_logs_last"], parse_pytest(log("pytest_live_log.log"))
    ) == {
        "[100%]",
        "[",
        "tests/test_live_log.py::test_logs_last",
    }


def test_requests_pydicom_and_pylint_keep_the_last_part_of_a_path_parameter():
    outcomes = outcomes_of(parse_pytest_options(log("pytest_rA.log")))
    assert f"{SAMPLE}::test_parametrised[/x.so]" in outcomes
    assert f"{SAMPLE}::test_parametrised[/usr/lib/x.so]" not in outcomes
    assert outcomes[f"{SAMPLE}::test_parametrised[with space]"] == "passed"


def test_matplotlib_spells_mouse_buttons_as_numbers():
    outcomes = outcomes_of(parse_matplotlib(log("pytest_rA.log")))
    assert outcomes[f"{SAMPLE}::test_mouse_button[1]"] == outcomes[f"{SAMPLE}::test_mouse_button[3]"] == "passed"
    assert f"{SAMPLE}::test_mouse_button[MouseButton.LEFT]" not in outcomes


def test_django_ids_are_names_or_a_docstrings_first_line():
    """Django's runner at -v 2: a test with a docstring is known by its docstring's first line
    (as the harness has it), one without by its name as the runner printed it: Python 3.11
    repeats the name inside the parentheses, and so do SWE-bench's Django 5.0 tasks' ids.
    Output printed before "ok" does not lose the test."""
    assert outcomes_of(parse_django(log("django_verbosity2.log"))) == {
        "test_error (shelf.tests.ShelfTests.test_error)": "error",
        "A failing test with a docstring ... still reports its first line.": "failed",
        "test_known_bug (shelf.tests.ShelfTests.test_known_bug)": "xfailed",
        "test_plain (shelf.tests.ShelfTests.test_plain)": "passed",
        "test_prints_before_its_result (shelf.tests.ShelfTests.test_prints_before_its_result)": "passed",
        "test_skipped (shelf.tests.ShelfTests.test_skipped)": "skipped",
        "Regression for #9362: a shelf keeps its order.": "passed",
    }


# The runner's output before Python 3.11, as older Django tasks' logs hold it.
SHORT_FORM_LOG = "test_plain (shelf.tests.ShelfTests) ... ok\ntest_error (shelf.tests.ShelfTests) ... ERROR\n"


@pytest.mark.parametrize(
    ("output", "ids"),
    [
        (log("django_verbosity2.log"), ["test_plain (shelf.tests.ShelfTests.test_plain)"]),  # Django 5.0's tasks
        (log("django_verbosity2.log"), ["test_plain (shelf.tests.ShelfTests)"]),  # older tasks, run on 3.11
        (SHORT_FORM_LOG, ["test_plain (shelf.tests.ShelfTests)"]),  # older tasks, as recorded
        (SHORT_FORM_LOG, ["test_plain (shelf.tests.ShelfTests.test_plain)"]),
    ],
)
def test_a_django_id_matches_in_either_pythons_form(output, ids):
    """A task's ids take the form of the Python its runner ran on when it was recorded, which
    need not be the one here: either form is graded against either; a different test is not."""
    outcomes = parse_django(output)
    assert passing_ids(ids, outcomes) == set(ids)
    error = ids[0].replace("test_plain", "test_error")
    assert passing_ids([error], outcomes) == maintained_ids([error], outcomes) == set()
    assert (
        passing_ids(["test_plain (shelf.tests.OtherTests)", "test_plain (shelf.tests.ShelfTests.other)"], outcomes)
        == set()
    )


def test_sympy_ids_are_bare_names_from_its_runner():
    """ok / F / E; f (expected to fail) and s are not passes; a file's last line ends in [OK]."""
    assert outcomes_of(parse_sympy(log("sympy_verbose.log"))) == {
        "test_expand_square": "passed",
        "test_rational_sum": "passed",
        "test_wrong_root": "failed",
        "test_raises_error": "error",
        "test_raises_as_expected": "passed",
        "test_known_failure": "xfailed",
        "test_skipped_here": "skipped",
        "test_diff_power": "passed",
        "test_diff_constant": "passed",
    }


@pytest.mark.parametrize("report", ["pytest_junit_xunit1.xml", "pytest_junit_xunit2.xml"])
def test_junit_ids_are_right_for_files_not_named_test(report):
    """With ``file`` (xunit1) or without it (pytest's default, xunit2), the node id of a test in
    checks_sample.py and of a test in a class are what pytest's own summary calls them."""
    parsed = outcomes_of(parse_junit(log(report)))
    assert parsed["tests/checks_sample.py::test_in_a_file_not_named_test"] == "passed"
    assert parsed[f"{SAMPLE}::TestGroup::test_in_class"] == "passed"
    # pytest writes an expected failure as a skip of type pytest.xfail: graded apart from one.
    assert (parsed[f"{SAMPLE}::test_expected_failure"], parsed[f"{SAMPLE}::test_skipped"]) == ("xfailed", "skipped")


def test_the_reports_file_attribute_names_the_module():
    """Only ``file`` tells a capitalised module from a class: with it every id is the one
    pytest's own summary gives."""
    assert set(outcomes_of(parse_junit(log("pytest_junit_xunit1.xml")))) == set(
        outcomes_of(parse_pytest(log("pytest_rA_verbose.log")))
    )


def test_an_id_swebench_cut_at_a_space_stands_for_the_tests_it_begins():
    """SWE-bench holds "test_parametrised[with" for "test_parametrised[with space]"; an exact
    id still needs an exact match, and a cut id whose tests disagree is not a pass."""
    outcomes = parse_pytest(log("pytest_rA.log"))
    expected = [f"{SAMPLE}::test_parametrised[with", f"{SAMPLE}::test_adds", f"{SAMPLE}::test_add"]
    assert passing_ids(expected, outcomes) == {f"{SAMPLE}::test_parametrised[with", f"{SAMPLE}::test_adds"}
    assert passing_ids([f"{SAMPLE}::test_"], outcomes) == set()  # not cut inside brackets: exact only


def test_named_tests_are_graded_as_the_harness_grades_them():
    """swebench/harness/grading.py: a FAIL_TO_PASS test is fixed when it passed or failed as
    expected (XFAIL), never when skipped; a PASS_TO_PASS test is kept when it passed, failed
    as expected or was skipped; failed, error and not run at all are failures of both."""
    outcomes = parse_pytest(log("pytest_rA_verbose.log"))
    names = ["test_adds", "test_expected_failure", "test_skipped", "test_fails_with_a_message", "not_run"]
    tests = tuple(f"{SAMPLE}::{name}" for name in names)
    fixed = {f"{SAMPLE}::{name}" for name in ("test_adds", "test_expected_failure")}
    assert passing_ids(tests, outcomes) == fixed
    assert maintained_ids(tests, outcomes) == fixed | {f"{SAMPLE}::test_skipped"}
    tally = _tally(TestPlan(["pytest"], fail_to_pass=tests[:3], pass_to_pass=tests[1:]), outcomes)
    assert (tally.fail_to_pass_passed, tally.pass_to_pass_failed) == (2, 2)


def test_an_unexpected_pass_is_a_failure_as_in_the_harness():
    """The harness's parsers do not record pytest's XPASS, so the test counts as not run."""
    outcomes = [TestOutcome("t::x", "xpassed")]
    assert passing_ids(["t::x"], outcomes) == maintained_ids(["t::x"], outcomes) == set()


@pytest.mark.parametrize(
    ("repo", "metadata", "family"),
    [
        ("django/django", {}, "django"),
        ("sympy/sympy", {}, "sympy"),
        ("matplotlib/matplotlib", {}, "matplotlib"),
        ("psf/requests", {}, "pytest_options"),
        ("sqlfluff/sqlfluff", {}, "pytest"),
        ("", {"log_parser": "parse_log_sympy"}, "sympy"),  # the harness's name for it
        ("acme/app", {"log_parser": "django"}, "django"),
        ("django/django", {"log_parser": "parse_log_jest"}, "django"),  # unknown: the repository's
        ("acme/app", {"source": "ingest_prs"}, ""),  # a mined task: JUnit, then the log
    ],
)
def test_the_parser_comes_from_the_tasks_metadata_then_its_repository(repo, metadata, family):
    assert log_parser_for(repo, metadata) == family


def test_parse_log_dispatches_by_family():
    assert outcomes_of(parse_log("sympy", log("sympy_verbose.log")))["test_wrong_root"] == "failed"
    assert parse_log("django", log("sympy_verbose.log")) == []


# A unittest module whose test has a docstring: unittest -v prints it as Django's runner does.
DOCSTRING_TASK = {
    "shelf.py": "def order(items):\n    return list(items)\n",
    "test_shelf.py": (
        "import unittest\n\nfrom shelf import order\n\n\n"
        "class ShelfTests(unittest.TestCase):\n"
        "    def test_keeps_items(self):\n        self.assertEqual(len(order([2, 1])), 2)\n\n"
        "    def test_sorts(self):\n"
        '        """Regression for #9362: a shelf keeps its order."""\n'
        "        self.assertEqual(order([2, 1]), [1, 2])\n"
    ),
}
SORTING_FIX = """--- a/shelf.py
+++ b/shelf.py
@@ -1,2 +1,2 @@
 def order(items):
-    return list(items)
+    return sorted(items)
"""


@pytest.mark.parametrize(("log_parser", "status"), [("django", "passed"), ("", "failed")])
def test_validation_reads_the_log_with_the_tasks_parser(log_parser, status):
    """The fix resolves the task when its docstring test's id is read as the harness reads it;
    today's default reads "test_sorts (test_shelf.ShelfTests)" and finds no such test."""
    plan = TestPlan(
        ["{python}", "-m", "unittest", "-v", "test_shelf"],
        fail_to_pass=("Regression for #9362: a shelf keeps its order.",),
        pass_to_pass=("test_keeps_items (test_shelf.ShelfTests)",),
        log_parser=log_parser,
    )
    result = validate_in(written_files(DOCSTRING_TASK), SORTING_FIX, plan, 30)
    assert result.status == status
    assert result.tally is not None and result.tally.pass_to_pass_failed == 0
    assert result.tally.fail_to_pass_passed == (1 if log_parser else 0)


@pytest.mark.django_db
def test_a_tasks_plan_names_its_parser(org):
    dataset = Dataset.objects.create(org=org, name="lite", kind="pr_patch", test_command=["pytest"])
    django_task = TaskInstance.objects.create(dataset=dataset, external_id="django__django-1", repo="django/django")
    mined = TaskInstance.objects.create(dataset=dataset, external_id="m-1", repo="acme/app", metadata={"source": "x"})
    named = TaskInstance.objects.create(
        dataset=dataset, external_id="s-1", repo="acme/app", metadata={"log_parser": "parse_log_sympy"}
    )
    assert [validation.test_plan(task).log_parser for task in (django_task, mined, named)] == ["django", "", "sympy"]


def test_the_parser_reads_every_test_of_a_suite_whose_log_is_longer_than_the_stored_log():
    """A thousand tests print far more than the log kept for display (LOG_LIMIT, and the
    sandbox keeps only the head and tail of four times that): the parser still reads the
    whole -rA summary, so no pass-to-pass test in its middle goes missing."""
    name = "test_" + "a_long_name_so_that_the_summary_grows_well_beyond_the_displayed_log_" * 2
    files = {
        "test_many.py": f"import pytest\n\n\n@pytest.mark.parametrize('n', range(1000))\ndef {name}(n):\n    pass\n",
        "shelf.py": DOCSTRING_TASK["shelf.py"],
    }
    ids = tuple(f"test_many.py::{name}[{n}]" for n in range(1000))
    command = ["{python}", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_many.py"]
    result = validate_in(
        written_files(files), SORTING_FIX, TestPlan(command, pass_to_pass=ids, log_parser="pytest"), 60
    )
    assert len(result.log) <= LOG_LIMIT + 100 and len(result.tests) == 1000
    assert result.status == "passed" and result.tally is not None and result.tally.pass_to_pass_failed == 0


def test_a_long_line_that_merely_looks_like_a_result_is_read_in_linear_time():
    """Code under test writes the log: a megabyte of "x PASSED (" on one line took a whole-line
    regex minutes of backtracking; a validation's log may now hold 4 MB."""
    started = time.monotonic()
    assert parse_pytest("a::b " + "x PASSED (" * 100_000) == []
    assert time.monotonic() - started < 2
