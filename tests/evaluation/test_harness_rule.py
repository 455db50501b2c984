"""What counts as a patch changing the tests: everything test-like for mined tasks (STRICT),
the task's own tests and the runner's hooks for imported SWE-bench tasks (TASK), as the
harness has it. Paths are those of real SWE-bench Lite tasks (pytest-dev__pytest-5227 fixes
src/_pytest/logging.py and its test patch changes testing/logging/test_reporting.py;
django__django-11099's test patch is tests/auth_tests/test_validators.py)."""

import re

import pytest

from evaluation.patches import HarnessRule, PatchRejected, check_leaves_tests_alone, gold_patch_refusal, patch_paths


def change(path: str) -> str:
    return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-old = 1\n+new = 1\n"


PYTEST_TESTS = change("testing/logging/test_reporting.py")
DJANGO_TESTS = change("tests/auth_tests/test_validators.py")


@pytest.mark.parametrize(
    "path",
    ["src/_pytest/logging.py", "setup.cfg", "pyproject.toml", "tox.ini", "django/test/testcases.py", "src/pytest.ini"],
)
def test_a_fix_to_a_test_framework_or_its_packaging_is_allowed_for_an_imported_task(path):
    check_leaves_tests_alone(change(path), protected=patch_paths(PYTEST_TESTS), rule=HarnessRule.TASK)
    with pytest.raises(PatchRejected, match="changes the tests or their harness"):
        check_leaves_tests_alone(change(path), protected=patch_paths(PYTEST_TESTS))  # mined tasks: refused


@pytest.mark.parametrize(
    ("path", "tests", "reason"),
    [
        ("testing/logging/test_reporting.py", PYTEST_TESTS, "changes the task's test file"),
        ("testing/logging/helpers.py", PYTEST_TESTS, "task's tests or their runner (testing/logging/helpers.py)"),
        ("tests/auth_tests/models.py", DJANGO_TESTS, "task's tests or their runner"),
        ("src/conftest.py", PYTEST_TESTS, "task's tests or their runner (src/conftest.py)"),
        ("lib/sitecustomize.py", PYTEST_TESTS, "task's tests or their runner"),
        ("src/_pytest/test_hack.py", PYTEST_TESTS, "task's tests or their runner"),
        ("evil.pth", PYTEST_TESTS, "task's tests or their runner"),
    ],
)
def test_the_tasks_own_tests_and_the_runners_hooks_stay_refused(path, tests, reason):
    with pytest.raises(PatchRejected, match=re.escape(reason)):
        check_leaves_tests_alone(change(path), protected=patch_paths(tests), rule=HarnessRule.TASK)


def test_a_test_file_at_the_root_protects_itself_not_the_whole_repository():
    tests = change("test_root.py")
    check_leaves_tests_alone(change("module.py"), protected=patch_paths(tests), rule=HarnessRule.TASK)
    with pytest.raises(PatchRejected):
        check_leaves_tests_alone(change("test_root.py"), protected=patch_paths(tests), rule=HarnessRule.TASK)


def test_a_gold_patch_refusal_says_why():
    assert gold_patch_refusal(change("src/_pytest/logging.py"), PYTEST_TESTS, HarnessRule.TASK) == ""
    assert "src/_pytest/logging.py" in gold_patch_refusal(change("src/_pytest/logging.py"), PYTEST_TESTS, "strict")
    assert gold_patch_refusal("", PYTEST_TESTS, HarnessRule.TASK) == ""
