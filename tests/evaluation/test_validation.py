from pathlib import Path

from evaluation.validation import LOG_LIMIT, ValidationStatus, truncate, validate_patch
from experiments.demo import demo_task_dirs, read_task_dir

TASK = read_task_dir(demo_task_dirs()[0], 0)


def validate(patch, command=None, timeout=30):
    return validate_patch(TASK["repo_files"], patch, command or TASK["test_command"], timeout)


def test_the_gold_patch_passes():
    result = validate(TASK["gold_patch"])
    assert result.status == ValidationStatus.PASSED, result.log
    assert result.applied and result.passed
    assert "passed" in result.log


def test_a_patch_that_does_not_apply_is_recorded():
    patch = TASK["gold_patch"].replace("\n-", "\n-NOT IN THE FILE ", 1)
    result = validate(patch)
    assert result.status == ValidationStatus.NOT_APPLIED
    assert "git apply refused" in result.log


def test_an_escaping_patch_is_rejected_and_touches_nothing(tmp_path):
    target = tmp_path / "escaped.txt"
    relative = "../" * 12 + str(target).lstrip("/")
    patch = f"--- /dev/null\n+++ b/{relative}\n@@ -0,0 +1 @@\n+owned\n"
    result = validate(patch)
    assert result.status == ValidationStatus.REJECTED
    assert "escapes the work directory" in result.log
    assert not target.exists()


def test_tests_that_hang_are_killed():
    command = ["{python}", "-c", "import time; time.sleep(30)"]
    result = validate(TASK["gold_patch"], command, timeout=1)
    assert result.status == ValidationStatus.TIMED_OUT
    assert result.duration_ms < 10_000


def test_failing_tests_are_failed_with_their_log():
    result = validate(TASK["gold_patch"], ["{python}", "-c", "import sys; print('boom'); sys.exit(3)"])
    assert result.status == ValidationStatus.FAILED
    assert "boom" in result.log


def test_each_validation_starts_from_a_clean_copy():
    command = [
        "{python}",
        "-c",
        "import pathlib, sys; p = pathlib.Path('marker'); sys.exit(1 if p.exists() else p.write_text('x') and 0)",
    ]
    assert validate(TASK["gold_patch"], command).passed
    assert validate(TASK["gold_patch"], command).passed
    assert not Path("marker").exists()


def test_long_logs_keep_head_and_tail():
    log = "head" + "x" * (3 * LOG_LIMIT) + "tail"
    short = truncate(log)
    assert len(short) < LOG_LIMIT + 100
    assert short.startswith("head") and short.endswith("tail") and "truncated" in short


CHEAT = """--- /dev/null
+++ b/tests/conftest.py
@@ -0,0 +1,6 @@
+import pytest
+@pytest.hookimpl(hookwrapper=True)
+def pytest_runtest_makereport(item, call):
+    outcome = yield
+    report = outcome.get_result()
+    report.outcome = "passed"
"""


def test_a_patch_may_not_rewrite_the_tests_or_their_harness():
    result = validate(CHEAT)
    assert result.status == ValidationStatus.REJECTED
    assert "changes the tests or their harness (tests/conftest.py)" in result.log
    for path in ("conftest.py", "pytest.py", "tests/test_slugify.py", "pkg/tests/data.txt", "x.pth", "setup.cfg"):
        patch = f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
        assert validate(patch).status == ValidationStatus.REJECTED, path


def test_a_flood_of_output_is_kept_bounded():
    command = [
        "{python}",
        "-c",
        "import sys\nfor _ in range(200000): sys.stdout.write('spam' * 40 + '\\n')\nprint('END')",
    ]
    result = validate(TASK["gold_patch"], command)
    assert result.status == ValidationStatus.PASSED
    assert len(result.log) < 2 * LOG_LIMIT
    assert "bytes of output dropped" in result.log and result.log.rstrip().endswith("END")


def test_undecodable_output_does_not_crash():
    command = ["{python}", "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe bad bytes'); sys.exit(1)"]
    result = validate(TASK["gold_patch"], command)
    assert result.status == ValidationStatus.FAILED and "bad bytes" in result.log
