from pathlib import Path

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.validation import LOG_LIMIT, CheckStatus, ValidationStatus, truncate, validate_patch

TASK = read_task_dir(demo_task_dirs()[0], 0)


def validate(patch, command=None, timeout=30):
    return validate_patch(TASK["repo_files"], patch, command or TASK["test_command"], timeout)


def test_the_gold_patch_passes():
    result = validate(TASK["gold_patch"])
    assert result.status == ValidationStatus.PASSED, result.log
    assert result.applied and result.passed
    assert "passed" in result.log


def unappliable(patch: str) -> str:
    """The patch with the first line it removes changed: no method can find that line."""
    lines = patch.splitlines(keepends=True)
    removed = next(i for i, line in enumerate(lines) if line.startswith("-") and not line.startswith("---"))
    lines[removed] = "-NOT IN THE FILE " + lines[removed][1:]
    return "".join(lines)


def test_a_patch_that_does_not_apply_is_recorded():
    patch = unappliable(TASK["gold_patch"])
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


FILES = {"calc.py": "def add(a, b):\n    return a + b\n", "README.md": "calc\n"}
PASSING = ["{python}", "-c", "pass"]


def check(patch):
    return validate_patch(FILES, patch, PASSING, 30)


def test_the_gold_patch_builds_and_lints_clean():
    result = validate(TASK["gold_patch"])
    assert (result.build.status, result.lint.status) == (CheckStatus.PASSED, CheckStatus.PASSED)
    assert result.build.ok is True and result.lint.ok is True


def test_lint_findings_in_the_changed_files_are_reported():
    patch = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,3 @@\n+import os\n def add(a, b):\n     return a + b\n"
    result = check(patch)
    assert result.status == ValidationStatus.PASSED and result.build.ok is True
    assert result.lint.status == CheckStatus.FAILED and "F401" in result.lint.log and "calc.py" in result.lint.log


def test_a_file_that_does_not_compile_fails_the_build():
    patch = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return a +\n"
    result = check(patch)
    assert result.build.status == CheckStatus.FAILED and "SyntaxError" in result.build.log
    assert result.lint.ok is False


def test_a_patch_cannot_switch_the_lint_rules_off_for_itself():
    patch = (
        '--- /dev/null\n+++ b/ruff.toml\n@@ -0,0 +1,2 @@\n+[lint]\n+ignore = ["F401"]\n'
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,3 @@\n+import os\n def add(a, b):\n     return a + b\n"
    )
    assert check(patch).lint.ok is False


def test_a_patch_that_changes_no_python_file_is_not_built_or_linted():
    result = check("--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-calc\n+a calculator\n")
    assert (result.build.status, result.lint.status) == (CheckStatus.SKIPPED, CheckStatus.SKIPPED)
    assert result.build.ok is None and result.lint.ok is None


def test_findings_the_file_had_before_the_patch_are_not_the_patchs():
    files = {"calc.py": "import os\n\n\ndef add(a, b):\n    return a + b\n"}
    patch = "--- a/calc.py\n+++ b/calc.py\n@@ -4,2 +4,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n"
    result = validate_patch(files, patch, PASSING, 30)
    assert result.lint.ok is True and "F401" in result.lint.log  # reported, but not held against it
    worse = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,3 @@\n import os\n+import sys\n \n"
    result = validate_patch(files, worse, PASSING, 30)
    assert result.lint.ok is False and result.lint.log.startswith("new findings: F401 in calc.py")


# Fails unless the checkout holds no .orig or .rej file: patch with fuzz must leave none behind.
NO_LEFTOVERS = [
    "{python}",
    "-c",
    "import glob, sys; left = glob.glob('**/*.orig', recursive=True) + glob.glob('**/*.rej', recursive=True); "
    "print(left); sys.exit(1 if left else 0)",
]


def drifted(patch: str) -> str:
    """The patch with the first context line of its first hunk changed, as a model that
    misremembers a comment writes it: git apply refuses it, patch --fuzz=5 takes it."""
    lines = patch.splitlines(keepends=True)
    first_hunk = next(i for i, line in enumerate(lines) if line.startswith("@@"))
    context = next(i for i in range(first_hunk + 1, len(lines)) if lines[i].startswith(" "))
    lines[context] = " # a line the file does not have\n"
    return "".join(lines)


def test_a_clean_patch_applies_with_git_apply():
    result = validate(TASK["gold_patch"])
    assert result.apply_method == "git_apply"


def test_a_patch_git_apply_refuses_applies_with_fuzz_as_the_harness_would():
    patch = drifted(TASK["gold_patch"])

    fuzzed = validate(patch)
    leftovers = validate(patch, NO_LEFTOVERS)

    assert fuzzed.status == ValidationStatus.PASSED, fuzzed.log
    assert fuzzed.apply_method == "patch_fuzz"
    assert leftovers.status == ValidationStatus.PASSED, leftovers.log


def test_a_patch_no_method_takes_says_what_each_said():
    result = validate(unappliable(TASK["gold_patch"]))
    assert result.status == ValidationStatus.NOT_APPLIED and result.apply_method == ""
    assert "git apply refused" in result.log and "patch --fuzz=5 could not apply it either" in result.log
