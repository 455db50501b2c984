"""An agent's tools on a working copy: what each shows the model, the model's mistakes as
errors it can read, the working copy as the only thing it can reach, and the diff it leaves."""

import os
import shutil
import subprocess
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from evaluation.agent_tools import MAX_FILE_BYTES, TOOL_SETS, tool_specs, without_selection, workspace
from evaluation.patches import check_patch
from evaluation.sandbox import SandboxFailed, isolation
from evaluation.validation import TestPlan
from providers.adapters import config
from providers.types import ToolCall

FILES = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_one():\n    assert 1\n",
    "pkg/notes.txt": "alpha\nbeta\nalphabet",  # no final newline
    "pkg/__pycache__/calc.cpython-311.pyc": "compiled",
}
TESTS = TestPlan(["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"])


def call(name, **arguments):
    return ToolCall(id="c1", name=name, arguments=arguments)


@pytest.fixture
def copy():
    """A working copy the sandbox user may reach, as a checkout under /tmp is."""
    parent = Path(tempfile.mkdtemp(prefix="prbench-agent-"))
    parent.chmod(0o755)
    root = parent / "copy"
    for path, content in FILES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    yield root
    shutil.rmtree(parent)


@pytest.fixture
def ws(copy):
    with workspace(nullcontext(copy), TESTS, 60, 2000) as opened:
        yield opened


def fresh_copy_takes(diff: str, tmp_path: Path) -> dict[str, str]:
    """The files ``git apply`` leaves in a fresh copy of FILES given ``diff``."""
    fresh = tmp_path / "fresh"
    for path, content in FILES.items():
        (fresh / path).parent.mkdir(parents=True, exist_ok=True)
        (fresh / path).write_text(content)
    subprocess.run(["git", "apply", "-"], cwd=fresh, input=diff, text=True, check=True)
    return {str(path.relative_to(fresh)): path.read_text() for path in fresh.rglob("*") if path.is_file()}


def test_the_specs_name_the_settings_tool_sets_and_say_the_cap():
    assert set(TOOL_SETS) == set(config.TOOL_SETS)
    every = tool_specs("all", 1234)
    assert [tool.name for tool in every] == [
        "list_files",
        "read_file",
        "search",
        "replace",
        "write_file",
        "run_tests",
        "submit",
    ]
    assert [tool.name for tool in tool_specs("no_tests", 1234)] == [
        name for name in TOOL_SETS["all"] if name != "run_tests"
    ]
    specs = {tool.name: tool for tool in every}
    assert "1234 characters is cut" in specs["read_file"].description
    assert "last 1234 characters" in specs["run_tests"].description
    assert specs["replace"].parameters["required"] == ["path", "old", "new"]
    assert specs["read_file"].parameters["properties"]["start_line"]["type"] == "integer"
    assert specs["submit"].parameters["properties"] == {}


def test_it_lists_reads_and_searches(ws):
    listed = ws.run(call("list_files"))
    assert listed.content.splitlines() == ["calc.py", "pkg/notes.txt", "test_calc.py"]
    assert not listed.is_error and not listed.submitted
    assert ws.run(call("list_files", path="pkg/")).content == "pkg/notes.txt"
    assert ws.run(call("read_file", path="calc.py")).content == "1\tdef add(a, b):\n2\t    return a - b"
    assert ws.run(call("read_file", path="./pkg/notes.txt", start_line=2, end_line=9)).content == "2\tbeta\n3\talphabet"
    assert ws.run(call("search", pattern="alpha")).content == "pkg/notes.txt:1: alpha\npkg/notes.txt:3: alphabet"
    assert ws.run(call("search", pattern="^alpha$", regex=True, path="pkg")).content == "pkg/notes.txt:1: alpha"
    assert ws.run(call("search", pattern="add(", path="test_calc.py")).content == (
        "test_calc.py:4: def test_add():\ntest_calc.py:5:     assert add(2, 2) == 4"
    )
    assert ws.run(call("search", pattern="nowhere")).content == "no match for 'nowhere'"


def test_output_past_the_cap_is_cut_and_says_how_much_was_shown(copy):
    (copy / "long.py").write_text("".join(f"line = {number}\n" for number in range(1, 501)))
    with workspace(nullcontext(copy), TESTS, 60, 300) as ws:
        read = ws.run(call("read_file", path="long.py"))
        assert read.truncated and len(read.content) < 420
        assert read.content.endswith(
            "[output cut at 300 characters: lines 1-24 of 500 shown; read on from start_line=25]"
        )
        (copy / "one_line.js").write_text("x" * 1000)
        long_line = ws.run(call("read_file", path="one_line.js"))
        assert long_line.truncated and long_line.content.endswith(
            "[line 1 cut: its first 300 of 1002 characters shown; search finds text in it]"
        )
        found = ws.run(call("search", pattern="line"))
        assert found.truncated and "lines shown; narrow the path or the pattern]" in found.content
        assert ws.run(call("read_file", path="long.py", start_line=25, end_line=26)).content == (
            "25\tline = 25\n26\tline = 26"
        )


def test_it_refuses_binary_and_huge_files_and_directories(ws, copy):
    (copy / "blob.bin").write_bytes(b"\x00\x01\x02")
    (copy / "latin.txt").write_bytes("café".encode("latin-1"))
    (copy / "huge.txt").write_text("x" * (MAX_FILE_BYTES + 1))
    assert ws.run(call("read_file", path="blob.bin")).content.startswith("blob.bin is a binary file (3 bytes)")
    assert ws.run(call("read_file", path="latin.txt")).is_error
    assert "more than the tools read" in ws.run(call("read_file", path="huge.txt")).content
    assert "is a directory: list_files lists it" in ws.run(call("read_file", path="pkg")).content
    assert ws.run(call("search", pattern="x")).content == "no match for 'x'"  # huge and binary files are skipped
    assert "is a binary file" in ws.run(call("replace", path="blob.bin", old="\x01", new="")).content


def test_replace_needs_the_old_text_exactly_once(ws, copy):
    assert (
        ws.run(call("replace", path="calc.py", old="a - b", new="a + b")).content == "replaced 1 occurrence in calc.py"
    )
    assert (copy / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    none = ws.run(call("replace", path="calc.py", old="a * b", new="b"))
    assert none.is_error and "old occurs 0 times in calc.py, not exactly once" in none.content
    twice = ws.run(call("replace", path="pkg/notes.txt", old="alpha", new="omega"))
    assert twice.is_error and "old occurs 2 times" in twice.content
    assert (copy / "pkg/notes.txt").read_text() == FILES["pkg/notes.txt"]
    assert ws.run(call("replace", path="calc.py", old="", new="x")).is_error


def test_the_models_mistakes_are_errors_it_can_read(copy):
    with workspace(nullcontext(copy), TESTS, 60, 2000, tool_set="no_tests") as ws:
        said = {
            "unknown": ws.run(call("delete_everything")),
            "not in the set": ws.run(call("run_tests")),
            "malformed": ws.run(ToolCall(id="c", name="read_file", malformed='{"path": "calc.py"')),
            "missing": ws.run(call("read_file")),
            "ill-typed": ws.run(call("read_file", path="calc.py", start_line="3")),
            "boolean for integer": ws.run(call("read_file", path="calc.py", start_line=True)),
            "unexpected": ws.run(call("read_file", path="calc.py", mode="rb")),
            "missing file": ws.run(call("read_file", path="nothing.py")),
            "missing directory": ws.run(call("list_files", path="nowhere")),
            "file as directory": ws.run(call("read_file", path="calc.py/x")),
            "bad range": ws.run(call("read_file", path="calc.py", start_line=5, end_line=2)),
            "past the end": ws.run(call("read_file", path="calc.py", start_line=9)),
            "bad regex": ws.run(call("search", pattern="(", regex=True)),
        }
    assert all(outcome.is_error and not outcome.submitted for outcome in said.values())
    assert said["unknown"].content.startswith("there is no tool 'delete_everything'; the tools are: list_files,")
    assert "run_tests" not in said["not in the set"].content.split(":")[1]
    assert "are not a JSON object" in said["malformed"].content and "nothing was run" in said["malformed"].content
    assert said["missing"].content == "read_file needs the argument 'path'"
    assert said["ill-typed"].content == "read_file's argument 'start_line' must be an integer"
    assert said["boolean for integer"].is_error
    assert said["unexpected"].content == "read_file takes no argument mode; it takes: path, start_line, end_line"
    assert said["missing file"].content == "nothing.py: no such file"
    assert said["missing directory"].content == "nowhere: no such directory"
    assert said["file as directory"].content == "calc.py is a file, not a directory"
    assert "calc.py has 2 lines" in said["past the end"].content
    assert "not a valid regular expression" in said["bad regex"].content


def test_null_optional_arguments_are_their_defaults(ws):
    assert ws.run(call("read_file", path="calc.py", start_line=None, end_line=None)).content.startswith("1\tdef")


def test_paths_cannot_leave_the_working_copy(ws, copy, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the worker's\n")
    (copy / "link.txt").symlink_to(secret)
    (copy / "linked_dir").symlink_to(tmp_path)
    os.link(secret, copy / "hard.txt")
    refused = [
        ws.run(call("read_file", path=str(secret))),
        ws.run(call("read_file", path="../secret.txt")),
        ws.run(call("read_file", path="pkg/../../secret.txt")),
        ws.run(call("read_file", path="link.txt")),
        ws.run(call("read_file", path="linked_dir/secret.txt")),
        ws.run(call("read_file", path="hard.txt")),
        ws.run(call("list_files", path="linked_dir")),
        ws.run(call("search", pattern="worker", path="linked_dir")),
        ws.run(call("write_file", path=str(tmp_path / "new.txt"), content="x")),
        ws.run(call("write_file", path="../new.txt", content="x")),
        ws.run(call("write_file", path="link.txt", content="overwritten")),
        ws.run(call("write_file", path="linked_dir/secret.txt", content="overwritten")),
        ws.run(call("write_file", path="linked_dir/new.txt", content="x")),
        ws.run(call("write_file", path="hard.txt", content="overwritten")),
        ws.run(call("replace", path="link.txt", old="worker", new="model")),
        ws.run(call("write_file", path=".git/hooks/pre-commit", content="x")),
        ws.run(call("write_file", path="pkg/__pycache__/calc.cpython-311.pyc", content="x")),
    ]
    assert [outcome.is_error for outcome in refused] == [True] * len(refused)
    assert "is absolute" in refused[0].content and "'..' is refused" in refused[1].content
    assert refused[3].content == "link.txt is a symbolic link: links are not followed"
    assert refused[4].content == "linked_dir is a symbolic link: links are not followed"
    assert refused[5].content == "hard.txt has other hard links: refused"
    assert secret.read_text() == "the worker's\n"
    assert not (tmp_path / "new.txt").exists()
    assert ws.run(call("search", pattern="worker")).content == "no match for 'worker'"
    assert "link.txt (a symbolic link: not followed)" in ws.run(call("list_files")).content
    assert ws.diff() == ""


def test_links_and_fifos_the_tests_plant_are_refused(copy):
    """The tests run as the sandbox user and may leave anything in the working copy."""
    planting = "import os\ndef test_plant():\n    os.symlink('/etc/passwd', 'passwd')\n    os.mkfifo('pipe')\n"
    (copy / "test_plant.py").write_text(planting)
    plan = TestPlan(["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plant.py"])
    with workspace(nullcontext(copy), plan, 60, 2000) as ws:
        assert "exit status 0" in ws.run(call("run_tests")).content
        assert ws.run(call("read_file", path="passwd")).content == "passwd is a symbolic link: links are not followed"
        assert ws.run(call("write_file", path="passwd", content="root::0:0::/:/bin/sh\n")).is_error
        started = time.monotonic()
        assert ws.run(call("read_file", path="pipe")).content == "pipe is not a regular file"
        assert ws.run(call("write_file", path="pipe", content="x")).is_error
        assert time.monotonic() - started < 2  # never waits for a writer
    assert "root::0:0" not in Path("/etc/passwd").read_text()


def test_written_files_belong_to_the_sandbox_user_and_the_tests_use_them(ws, copy):
    written = ws.run(call("write_file", path="lib/deep/helper.py", content="def two():\n    return 2\n"))
    assert written.content == "wrote lib/deep/helper.py (2 lines)"
    test = "from lib.deep.helper import two\n\n\ndef test_two():\n    assert two() == 2\n"
    ws.run(call("write_file", path="test_calc.py", content=test))
    ran = ws.run(call("run_tests"))
    assert ran.content.startswith("exit status 0\n") and "1 passed" in ran.content
    if isolation().separate_user:
        owner = ws.box.uid
        assert {(copy / path).stat().st_uid for path in ("lib", "lib/deep", "lib/deep/helper.py")} == {owner}
        assert (copy / "lib/deep/helper.py").stat().st_mode & 0o777 == 0o644


def test_run_tests_shows_the_tail_and_narrows_to_one_test(copy):
    with workspace(nullcontext(copy), TESTS, 60, 300) as ws:
        failed = ws.run(call("run_tests"))
        assert not failed.is_error and failed.content.startswith("exit status 1\n[output cut: the last 300 of ")
        assert failed.truncated and "1 failed, 1 passed" in failed.content
        one = ws.run(call("run_tests", test="test_calc.py::test_one"))
        assert "1 passed" in one.content and "failed" not in one.content
        assert ws.run(call("run_tests", test="--collect-only")).is_error
        assert ws.run(call("run_tests", test="../elsewhere.py")).is_error


def test_the_command_loses_its_own_selection_when_narrowed(copy):
    command = ["{python}", "-m", "pytest", "-c", "pytest.ini", "--rootdir", "pkg", "-q", "test_calc.py", "a.py::t"]
    assert without_selection(command, copy) == [
        "{python}",
        "-m",
        "pytest",
        "-c",
        "pytest.ini",
        "--rootdir",
        "pkg",
        "-q",
    ]
    runner = ["{python}", "test_calc.py", "--verbosity", "2", "pkg"]
    assert without_selection(runner, copy) == ["{python}", "test_calc.py", "--verbosity", "2"]


def test_a_test_that_hangs_is_cut_at_the_time_limit(copy):
    (copy / "test_calc.py").write_text("import time\n\n\ndef test_hangs():\n    time.sleep(60)\n")
    with workspace(nullcontext(copy), TESTS, 1, 2000) as ws:
        ran = ws.run(call("run_tests"))
        assert ran.content.startswith("timed out after 1s") and not ran.is_error


def test_a_dead_sandbox_raises(ws):
    if ws.box.session is None:
        pytest.skip("no sandbox session on this machine")
    ws.box.session._kill()
    with pytest.raises(SandboxFailed):
        ws.run(call("run_tests"))


def test_submit_says_so(ws):
    submitted = ws.run(call("submit"))
    assert submitted.submitted and not submitted.is_error


def test_the_diff_applies_to_a_fresh_copy(ws, copy, tmp_path):
    assert ws.diff() == ""
    ws.run(call("replace", path="calc.py", old="a - b", new="a + b"))
    ws.run(call("replace", path="pkg/notes.txt", old="beta", new="gamma"))
    ws.run(call("write_file", path="docs/new.md", content="# New\nno final newline"))
    ws.run(call("write_file", path="empty.txt", content=""))
    ws.run(call("write_file", path="test_calc.py", content="changed\n"))
    ws.run(call("write_file", path="test_calc.py", content=FILES["test_calc.py"]))  # back as it was
    diff = ws.diff()
    assert "test_calc.py" not in diff
    assert "--- /dev/null\n+++ b/docs/new.md\n" in diff and "new file mode 100644" in diff
    assert "+alphabet\n\\ No newline at end of file\n" not in diff  # an unchanged last line is context
    assert " alphabet\n\\ No newline at end of file\n" in diff
    assert check_patch(diff).paths == ("calc.py", "docs/new.md", "empty.txt", "pkg/notes.txt")
    taken = fresh_copy_takes(diff, tmp_path)
    assert taken["calc.py"] == "def add(a, b):\n    return a + b\n"
    assert taken["pkg/notes.txt"] == "alpha\ngamma\nalphabet"
    assert taken["docs/new.md"] == "# New\nno final newline"
    assert taken["empty.txt"] == ""


def test_a_final_newline_added_or_removed_is_in_the_diff(ws, tmp_path):
    ws.run(call("write_file", path="pkg/notes.txt", content="alpha\nbeta\nalphabet\n"))
    ws.run(call("write_file", path="calc.py", content="def add(a, b):\n    return a + b"))
    taken = fresh_copy_takes(ws.diff(), tmp_path)
    assert taken["pkg/notes.txt"] == "alpha\nbeta\nalphabet\n"
    assert taken["calc.py"] == "def add(a, b):\n    return a + b"


def test_a_changed_file_the_tests_removed_is_a_deletion(ws, copy, tmp_path):
    ws.run(call("replace", path="calc.py", old="a - b", new="a + b"))
    ws.run(call("write_file", path="scratch.py", content="x = 1\n"))
    (copy / "calc.py").unlink()
    (copy / "scratch.py").unlink()
    diff = ws.diff()
    assert diff.startswith("diff --git a/calc.py b/calc.py\ndeleted file mode 100644\n--- a/calc.py\n+++ /dev/null\n")
    assert "scratch.py" not in diff
    assert "calc.py" not in fresh_copy_takes(diff, tmp_path)


def test_a_name_a_diff_cannot_carry_is_refused(ws):
    written = ws.run(call("write_file", path="tab\there.py", content="x"))
    assert written.is_error and "control character" in written.content
