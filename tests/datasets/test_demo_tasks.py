"""Every shipped demo task is a real bug: its tests fail before the gold patch and pass after."""

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from datasets.demo import demo_task_dirs, read_task_dir
from evaluation.patches import check_patch
from evaluation.validation import ValidationStatus, validate_patch, write_files

TASK_DIRS = demo_task_dirs()


def test_there_are_at_least_twelve():
    assert len(TASK_DIRS) >= 12


@pytest.mark.parametrize("path", TASK_DIRS, ids=lambda p: p.name)
def test_tests_fail_before_and_pass_after_the_gold_patch(path: Path):
    task = read_task_dir(path, 0)
    assert task["title"] and len(task["problem_statement"]) > 80
    stats = check_patch(task["gold_patch"])
    assert not any("test" in name for name in task["gold_patch"].split("\n") if name.startswith("+++")), (
        "gold must not edit tests"
    )
    assert 0 < stats.lines_changed <= 20
    with tempfile.TemporaryDirectory() as workdir:
        write_files(Path(workdir), task["repo_files"])
        before = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert before.returncode == 1, before.stdout  # 1 = tests failed (not a collection error)
    after = validate_patch(task["repo_files"], task["gold_patch"], task["test_command"], 60)
    assert after.status == ValidationStatus.PASSED, after.log
