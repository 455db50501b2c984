"""What counts as a patch changing the tests: everything test-like for mined tasks (STRICT),
the task's own tests and the runner's hooks for imported SWE-bench tasks (TASK), as the
harness has it; a TASK with a test patch has its tests put back rather than the patch refused,
runner hooks excepted. Paths are those of real SWE-bench Lite tasks (pytest-dev__pytest-5227 fixes
src/_pytest/logging.py and its test patch changes testing/logging/test_reporting.py;
django__django-11099's test patch is tests/auth_tests/test_validators.py)."""

import re

import pytest

from evaluation.patches import (
    HarnessRule,
    PatchRejected,
    check_leaves_tests_alone,
    gold_patch_refusal,
    patch_paths,
    paths_to_reset,
)


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
    ("path", "tests"),
    [
        ("src/conftest.py", PYTEST_TESTS),
        ("lib/sitecustomize.py", PYTEST_TESTS),
        ("evil.pth", PYTEST_TESTS),
        ("tests/usercustomize.py", DJANGO_TESTS),
        ("lib/conftest/__init__.py", PYTEST_TESTS),  # a package imported in the hook's place
    ],
)
def test_the_runners_hooks_stay_refused(path, tests):
    with pytest.raises(PatchRejected, match=re.escape(f"changes the task's test runner ({path})")):
        check_leaves_tests_alone(change(path), protected=patch_paths(tests), rule=HarnessRule.TASK)


@pytest.mark.parametrize(
    ("path", "tests"),
    [
        ("testing/logging/test_reporting.py", PYTEST_TESTS),  # the test patch's own file, as the harness resets
        ("testing/logging/helpers.py", PYTEST_TESTS),  # beside it
        ("tests/auth_tests/models.py", DJANGO_TESTS),
        ("src/_pytest/test_hack.py", PYTEST_TESTS),  # a test file by name
        ("testing/logging/test_reporting/__init__.py", PYTEST_TESTS),  # imported in the test file's place
    ],
)
def test_the_tasks_own_tests_are_put_back_instead_of_refused(path, tests):
    """As the harness checks the test patch's files out at the base commit after the model's
    patch: the patch applies, and its change to the tests is undone. Only under TASK: a mined
    task (STRICT) undoes nothing (and refuses what it calls a test)."""
    check_leaves_tests_alone(change(path), protected=patch_paths(tests), rule=HarnessRule.TASK)
    fix = change("src/_pytest/logging.py")
    assert paths_to_reset(fix + change(path), patch_paths(tests), HarnessRule.TASK) == {path}
    assert paths_to_reset(fix, patch_paths(tests), HarnessRule.TASK) == set()
    assert paths_to_reset(change(path), patch_paths(tests), HarnessRule.STRICT) == set()


def test_a_test_patchs_own_hook_is_put_back_not_refused():
    """A test patch that changes a conftest.py makes it the task's: the model's version goes."""
    tests = PYTEST_TESTS + change("testing/conftest.py")
    check_leaves_tests_alone(change("testing/conftest.py"), protected=patch_paths(tests), rule=HarnessRule.TASK)
    assert paths_to_reset(change("testing/conftest.py"), patch_paths(tests), HarnessRule.TASK) == {
        "testing/conftest.py"
    }


def test_a_test_file_at_the_root_protects_itself_not_the_whole_repository():
    tests = change("test_root.py")
    protected = patch_paths(tests)
    check_leaves_tests_alone(change("module.py"), protected=protected, rule=HarnessRule.TASK)
    assert paths_to_reset(change("module.py"), protected, HarnessRule.TASK) == set()
    for path in ("test_root.py", "test_root/__init__.py"):
        assert paths_to_reset(change(path), protected, HarnessRule.TASK) == {path}
        with pytest.raises(PatchRejected, match="changes the task's test file"):
            check_leaves_tests_alone(change(path), protected=protected)


def test_a_gold_patch_refusal_says_why():
    assert gold_patch_refusal(change("src/_pytest/logging.py"), PYTEST_TESTS, HarnessRule.TASK) == ""
    helpers = gold_patch_refusal(change("testing/logging/helpers.py"), PYTEST_TESTS, HarnessRule.TASK)
    assert "puts back (testing/logging/helpers.py)" in helpers  # its own change would be undone
    assert "src/conftest.py" in gold_patch_refusal(change("src/conftest.py"), PYTEST_TESTS, HarnessRule.TASK)
    assert "src/_pytest/logging.py" in gold_patch_refusal(change("src/_pytest/logging.py"), PYTEST_TESTS, "strict")
    assert gold_patch_refusal("", PYTEST_TESTS, HarnessRule.TASK) == ""
