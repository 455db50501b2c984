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
