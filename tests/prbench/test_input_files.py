"""Files named on a command line: anything but a regular file within the command's size limit
is refused by name before a byte is read (prbench.inputs.open_input_file), and nothing changes.

A named pipe would block the command for ever and /dev/zero never end, so those cases run
``manage.py`` in a subprocess with a timeout: a command that hangs fails the test instead of
hanging the suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import CommandError
from django.test import override_settings

from datasets.models import Dataset, TaskInstance
from experiments.models import ModelArm
from orgs.models import Organization
from prbench.inputs import json_nesting
from providers.models import Price
from tests.cli import assert_clean_refusal, refused, run_command, run_manage

SWEBENCH = Path(__file__).parents[1] / "data" / "swebench" / "SWE-bench_Lite_dev.jsonl"


@pytest.fixture
def fifo(tmp_path) -> str:
    path = tmp_path / "tasks.jsonl"
    os.mkfifo(path)
    return str(path)


def import_tasks_args(path: str) -> list[str]:
    return ["import_tasks", "--org", "acme", "--dataset", "d", "--format", "swebench", path]


# --- on the command line: no hang, no traceback --------------------------------------------------


@pytest.mark.parametrize(
    ("special", "message"),
    [
        ("{fifo}", "{fifo}: not a regular file (a named pipe); nothing read"),
        ("/dev/zero", "/dev/zero: not a regular file (a character device); nothing read"),
        ("/proc/self/mem", "/proc/self/mem: cannot read: Input/output error"),
        ("{dir}", "{dir} is a directory; give a SWE-bench file"),
    ],
)
def test_import_tasks_refuses_special_files(transactional_db, fifo, tmp_path, special, message):
    Organization.objects.create(slug="acme", name="Acme")
    path = special.format(fifo=fifo, dir=tmp_path)

    result = run_manage(*import_tasks_args(path), timeout=60)

    assert_clean_refusal(result, message.format(fifo=fifo, dir=tmp_path))
    assert not TaskInstance.objects.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["prices", "import", "{path}"],
        ["apply_experiment", "--org", "acme", "{path}"],
    ],
)
def test_other_file_reading_commands_refuse_a_named_pipe(transactional_db, fifo, command):
    Organization.objects.create(slug="acme", name="Acme")
    prices = Price.objects.count()

    result = run_manage(*[arg.format(path=fifo) for arg in command], timeout=60)

    assert_clean_refusal(result, f"{fifo}: not a regular file (a named pipe); nothing read")
    assert Price.objects.count() == prices


# --- in process: every file-reading command goes through the one check ---------------------------


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["prices", "import", "{path}"], "{path}: not a regular file (a directory); nothing read"),
        (["apply_experiment", "--org", "acme", "{path}"], "{path}: not a regular file (a directory); nothing read"),
        (
            ["import_predictions", "--org", "acme", "--experiment", "Mock duel", "--arm", "agent", "{path}"],
            "{path}: not a regular file (a directory); nothing read",
        ),
        (["prices", "import", "/proc/self/mem"], "/proc/self/mem: cannot read: Input/output error; nothing read"),
    ],
)
def test_file_reading_commands_refuse_what_is_not_a_regular_file(experiment, tmp_path, command, message):
    arms, prices = ModelArm.objects.count(), Price.objects.count()

    error = refused(*[arg.format(path=tmp_path) for arg in command])

    assert error == message.format(path=tmp_path)
    assert (ModelArm.objects.count(), Price.objects.count()) == (arms, prices)


@override_settings(PRBENCH_UPLOAD_MAX_BYTES=100_000)
def test_import_tasks_applies_the_uploads_size_limit(org):
    size = SWEBENCH.stat().st_size

    error = refused(*import_tasks_args(str(SWEBENCH)))

    assert error == (
        f"{SWEBENCH}: larger than 100,000 bytes (PRBENCH_UPLOAD_MAX_BYTES, as for uploads), it has {size:,}; "
        "nothing read"
    )
    assert not Dataset.objects.exists()


@override_settings(PRBENCH_UPLOAD_MAX_BYTES=100_000)
def test_each_file_of_a_directory_is_held_to_the_limit(org, tmp_path):
    (tmp_path / "a_test.csv").write_text("What is 1+1?,1,2,3,4,B\n")
    (tmp_path / "b_test.csv").write_bytes(b"x" * 100_001)

    error = refused("import_tasks", "--org", "acme", "--dataset", "d", "--format", "mmlu", str(tmp_path))

    assert error.startswith(f"{tmp_path / 'b_test.csv'}: larger than 100,000 bytes")
    assert not Dataset.objects.exists()


@override_settings(PRBENCH_UPLOAD_MAX_BYTES=1_000_000)
def test_a_file_within_the_limit_imports(org):
    output = run_command(*import_tasks_args(str(SWEBENCH)))

    assert "Created dataset 'd': 23 task(s)" in output


@override_settings(PRBENCH_UPLOAD_MAX_BYTES=1_000)
def test_import_predictions_applies_the_uploads_size_limit(experiment, tmp_path):
    path = tmp_path / "preds.jsonl"
    path.write_bytes(b" " * 1_001)

    with pytest.raises(CommandError, match=r"preds.jsonl: larger than 1,000 bytes \(PRBENCH_UPLOAD_MAX_BYTES"):
        run_command("import_predictions", "--org", "acme", "--experiment", "Mock duel", "--arm", "agent", str(path))
    assert not ModelArm.objects.filter(label="agent").exists()


# --- JSON nesting is measured in one pass ----------------------------------------------------------


def test_an_unterminated_string_runs_to_the_end_of_the_text():
    """Brackets after an unterminated string are inside it. Were the string no match, the
    search would start again at every later quote and scan to the end from each: quadratic,
    hours for one malformed 8 MiB line of escaped quotes."""
    assert json_nesting('[["a", "b\\"' + '\\"' * 50 + "[[[[") == 2
    assert json_nesting('[["a\\\\", "[[[["]]') == 2


@override_settings(PRBENCH_UPLOAD_MAX_BYTES=1_000)
def test_a_file_that_says_it_is_empty_is_still_held_to_the_limit(org):
    """Files of /proc give their size as 0 whatever they hold: the limit counts what is read."""
    error = refused("import_tasks", "--org", "acme", "--dataset", "d", "--format", "jsonl", "/proc/self/status")

    assert error == (
        "/proc/self/status: larger than 1,000 bytes (PRBENCH_UPLOAD_MAX_BYTES, as for uploads), it has more; "
        "nothing read"
    )
    assert not Dataset.objects.exists()
