"""Hostile patches against a real repository checkout: each is refused before it touches a
disk, or runs and is contained, and the result says which."""

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from datasets.ingest import DEFAULT_TEST_COMMAND
from evaluation.repositories import ensure_commit
from evaluation.sandbox import isolation
from evaluation.testbed import build_testbed
from evaluation.validation import TestPlan, ValidationStatus, validate_in_repository

CANARY = "sk-canary-4f1d9b7e2c"
WORDS = "textkit/words.py"


@pytest.fixture
def clone(tmp_path, settings):
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    repo = build_testbed(tmp_path / "textkit")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    return ensure_commit("local/textkit", str(repo), head), head


@pytest.fixture(params=["one sandbox per validation", "one sandbox per command"])
def each_sandbox(request, settings):
    """Containment holds both where a validation's commands share a sandbox and where each
    command has its own (a machine without namespaces, or sessions switched off)."""
    settings.PRBENCH_SANDBOX_SESSIONS = request.param == "one sandbox per validation"


def validate(clone, patch, timeout_s=60, **plan):
    path, commit = clone
    return validate_in_repository(path, commit, patch, TestPlan(list(DEFAULT_TEST_COMMAND), **plan), timeout_s)


def replacing_words_module(body: str) -> str:
    """A patch that puts ``body`` at the top of textkit/words.py, which every test run imports."""
    lines = body.strip("\n").splitlines()
    added = "".join(f"+{line}\n" for line in lines)
    return (
        f"--- a/{WORDS}\n+++ b/{WORDS}\n@@ -1,3 +1,{3 + len(lines)} @@\n{added}"
        ' def count_words(text):\n     """How many words the text holds."""\n'
        "     # split() with no argument splits on any run of whitespace.\n"
    )


def test_a_well_behaved_patch_runs_normally(clone):
    result = validate(clone, replacing_words_module("X = 1"))
    assert result.status == ValidationStatus.PASSED, result.log


def test_path_traversal_is_refused(clone):
    patch = "--- a/../../outside.py\n+++ b/../../outside.py\n@@ -0,0 +1 @@\n+pwned = True\n"
    result = validate(clone, patch)
    assert result.status == ValidationStatus.REJECTED
    assert "escapes the work directory" in result.log


def test_a_symbolic_link_is_refused(clone):
    patch = (
        "diff --git a/textkit/data b/textkit/data\nnew file mode 120000\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/textkit/data\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
    )
    result = validate(clone, patch)
    assert result.status == ValidationStatus.REJECTED
    assert "symbolic links are not accepted" in result.log


def test_a_binary_patch_is_refused(clone):
    patch = (
        "diff --git a/textkit/blob.bin b/textkit/blob.bin\nnew file mode 100644\nindex 0000000..e69de29\n"
        "GIT binary patch\nliteral 4\nLcmZ?l|Nj60\n\nliteral 0\nHcmV?d00001\n\n"
    )
    result = validate(clone, patch)
    assert result.status == ValidationStatus.REJECTED
    assert "binary patches are not accepted" in result.log


def test_changing_the_tests_is_refused(clone):
    patch = (
        "--- a/tests/test_words.py\n+++ b/tests/test_words.py\n"
        "@@ -1 +1,2 @@\n from textkit.words import count_words\n+X = 1\n"
    )
    result = validate(clone, patch)
    assert result.status == ValidationStatus.REJECTED
    assert "changes the tests or their harness (tests/test_words.py)" in result.log


def test_changing_a_file_of_the_tasks_test_patch_is_refused(clone):
    """The task's tests may live anywhere: whatever its test patch touches is off limits."""
    test_patch = "--- /dev/null\n+++ b/checks/verify.py\n@@ -0,0 +1 @@\n+CHECK = True\n"
    patch = "--- /dev/null\n+++ b/checks/verify.py\n@@ -0,0 +1 @@\n+CHECK = False\n"
    result = validate(clone, patch, test_patch=test_patch)
    assert result.status == ValidationStatus.REJECTED
    assert "changes the task's test file checks/verify.py" in result.log


@pytest.fixture
def process_with_a_secret():
    """A process of the worker's whose real environment holds a key, as a worker's would."""
    process = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"], "OPENAI_API_KEY": CANARY})
    yield process
    process.kill()
    process.wait()


@pytest.mark.usefixtures("each_sandbox")
def test_code_under_test_sees_no_secret_of_the_worker(clone, monkeypatch, process_with_a_secret):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.setenv("DATABASE_URL", f"postgres://user:{CANARY}@db/prbench")
    snoop = """
import glob, os
_found = [k for k, v in os.environ.items() if "canary" in v or k in ("DATABASE_URL", "OPENAI_API_KEY")]
_read = 0
for _path in glob.glob("/proc/*/environ"):
    try:
        _text = open(_path, "rb").read().decode(errors="replace")
    except OSError:
        continue
    _read += 1
    if "canary" in _text:
        _found.append(_path)
raise RuntimeError(f"SNOOPED {_read} environ files, found {_found} in {sorted(os.environ)}")
"""
    result = validate(clone, replacing_words_module(snoop))
    assert result.status == ValidationStatus.FAILED
    assert "SNOOPED" in result.log, result.log  # the snooping code did run
    assert CANARY not in result.log
    assert "found []" in result.log  # neither in its environment nor in another process's


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted = []

    def accept():
        server.settimeout(30)
        with contextlib.suppress(OSError):  # closed at teardown: nobody came
            accepted.append(server.accept())

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.mark.usefixtures("each_sandbox")
def test_code_under_test_cannot_reach_the_network(clone, listener):
    if not isolation().namespaces:
        pytest.skip("unshare is unavailable here, so the sandbox cannot take the network away")
    port, accepted = listener
    connect = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    _result = "CONNECTED"
except OSError as exc:
    _result = f"BLOCKED {{exc}}"
raise RuntimeError(_result)
"""
    result = validate(clone, replacing_words_module(connect))
    assert "BLOCKED" in result.log and "CONNECTED" not in result.log, result.log
    assert not accepted


@pytest.fixture
def own_tmp(monkeypatch):
    """This test's checkouts in a directory of its own (other tests validate alongside),
    one the sandbox user may pass through, as /tmp."""
    directory = Path(tempfile.mkdtemp(prefix="prbench-test-"))
    directory.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    yield directory
    shutil.rmtree(directory)


def sandbox_leftovers(directory: Path) -> list[str]:
    """Processes still working in a checkout under ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if os.readlink(proc / "cwd").startswith(str(directory)):
                found.append(proc.name)
        except OSError:
            continue
    return found


@pytest.mark.usefixtures("each_sandbox")
def test_a_fork_bomb_is_contained(clone, own_tmp):
    if not isolation().pids_cgroup and os.geteuid() == 0:
        reason = isolation().pids_cgroup_problem
        pytest.skip(f"no pids cgroup ({reason}) and running as root: RLIMIT_NPROC would not bound a fork bomb here")
    bomb = """
import os
import shutil
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    started = time.monotonic()
    result = validate(clone, replacing_words_module(bomb), timeout_s=5)
    assert result.status == ValidationStatus.TIMED_OUT
    assert "tests exceeded 5s" in result.log
    assert time.monotonic() - started < 30
    time.sleep(0.5)
    assert sandbox_leftovers(own_tmp) == []
    assert subprocess.run(["true"]).returncode == 0  # the machine can still start processes


@pytest.mark.usefixtures("each_sandbox")
def test_an_infinite_loop_times_out(clone, own_tmp):
    started = time.monotonic()
    result = validate(clone, replacing_words_module("while True:\n    pass"), timeout_s=3)
    assert result.status == ValidationStatus.TIMED_OUT
    assert time.monotonic() - started < 20
    assert sandbox_leftovers(own_tmp) == []


@pytest.mark.usefixtures("each_sandbox")
def test_code_under_test_that_kills_its_parent_and_everything_else_is_contained(clone, own_tmp):
    """The tests go on, the validation gets its verdict, and nothing is left running."""
    killer = """
import os
import signal
import subprocess
for _target in (os.getppid(), -1):
    try:
        os.kill(_target, signal.SIGKILL)
    except OSError:
        pass
subprocess.Popen(["sleep", "300"], start_new_session=True)  # and then a daemon, to outlive the tests
"""
    result = validate(clone, replacing_words_module(killer))
    assert result.status == ValidationStatus.PASSED, result.log
    assert sandbox_leftovers(own_tmp) == []


def test_a_checkout_is_removed_after_validation(clone, own_tmp):
    validate(clone, replacing_words_module("X = 1"))
    assert list(own_tmp.iterdir()) == []


def test_a_dataset_build_command_replaces_byte_compiling(clone):
    """The build runs after both patches, in the sandbox: here it imports the package."""
    build = ("{python}", "-c", "import textkit.words; print('BUILT', textkit.words.X)")
    built = validate(clone, replacing_words_module("X = 41"), build_command=build)
    assert built.build.ok is True and "BUILT 41" in built.build.log
    broken = validate(clone, replacing_words_module("X = undefined_name"), build_command=build)
    assert broken.build.ok is False and "NameError" in broken.build.log


def needs_a_separate_user():
    if not isolation().separate_user:
        pytest.skip("the worker is not root here, so sandboxed commands keep its user")


@pytest.mark.usefixtures("each_sandbox")
def test_code_under_test_cannot_write_the_cache_the_project_or_its_cgroup(clone, settings):
    needs_a_separate_user()
    cache = Path(settings.PRBENCH_REPO_CACHE_DIR)
    before = sorted(str(path) for path in cache.rglob("*"))
    attempts = f"""
import os
import shutil
_results = []
for _path in ({str(clone[0] / "hooks" / "reference-transaction")!r}, {str(settings.BASE_DIR / "pwned.py")!r},
              "/sys/fs/cgroup/pids/cgroup.procs"):
    try:
        with open(_path, "a") as _handle:
            _handle.write(str(os.getpid()))
        _results.append("WROTE " + _path)
    except OSError as _exc:
        _results.append(f"DENIED {{_exc.errno}}")
raise RuntimeError(" | ".join(_results) + f" as uid {{os.getuid()}}")
"""
    result = validate(clone, replacing_words_module(attempts))
    assert "WROTE" not in result.log and "DENIED 13 | DENIED 13 | DENIED 13" in result.log, result.log
    assert "as uid 0" not in result.log
    assert sorted(str(path) for path in cache.rglob("*")) == before
    assert not (settings.BASE_DIR / "pwned.py").exists()


@pytest.mark.usefixtures("each_sandbox")
def test_the_workers_sockets_are_hidden(clone, settings):
    """A Unix socket in the var directory (the embedded Redis's), even one anybody may use."""
    needs_a_separate_user()
    var = Path(tempfile.mkdtemp(prefix="prbench-var-", dir="/tmp"))
    var.chmod(0o755)
    settings.VAR_DIR = var
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(var / "redis.sock"))
    (var / "redis.sock").chmod(0o777)
    server.listen()
    try:
        connect = f"""
import socket
_client = socket.socket(socket.AF_UNIX)
try:
    _client.connect({str(var / "redis.sock")!r})
    _result = "CONNECTED"
except OSError as _exc:
    _result = f"BLOCKED {{_exc}}"
raise RuntimeError(_result)
"""
        result = validate(clone, replacing_words_module(connect))
    finally:
        server.close()
        (var / "redis.sock").unlink()
        var.rmdir()
    assert "BLOCKED" in result.log and "CONNECTED" not in result.log, result.log


def test_a_rewritten_junit_report_is_not_believed(clone):
    """The patch fixes nothing but rewrites the report at exit to say every test passed."""
    test_patch = (
        "--- /dev/null\n+++ b/tests/test_more_words.py\n@@ -0,0 +1,5 @@\n"
        "+from textkit.words import count_words\n+\n+\n+def test_counts_hyphenated_words():\n"
        '+    assert count_words("well-known") == 2\n'
    )
    forger = """
import atexit, sys

def _forge():
    for _arg in sys.argv:
        if _arg.startswith("--junitxml="):
            open(_arg.split("=", 1)[1], "w").write(
                '<testsuite><testcase classname="tests.test_more_words" '
                'name="test_counts_hyphenated_words"/></testsuite>'
            )

atexit.register(_forge)
"""
    f2p = ("tests/test_more_words.py::test_counts_hyphenated_words",)
    result = validate(clone, replacing_words_module(forger), test_patch=test_patch, fail_to_pass=f2p)
    assert result.status == ValidationStatus.FAILED
    assert result.tally is not None and result.tally.fail_to_pass_passed == 0


@pytest.mark.parametrize("mode", ["0120000", "120000\r", "120000 "])
def test_a_symbolic_link_in_any_spelling_is_refused(clone, mode):
    patch = (
        f"diff --git a/textkit/data b/textkit/data\nnew file mode {mode}\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/textkit/data\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
    )
    result = validate(clone, patch)
    assert result.status == ValidationStatus.REJECTED
    assert "symbolic link" in result.log


def test_an_imported_tasks_rule_lets_a_fix_touch_packaging_but_not_its_tests(clone):
    """End to end under the harness's rule: a patch to setup.cfg runs; one to a file beside
    the task's test file is refused before anything is written."""
    test_patch = "--- /dev/null\n+++ b/checks/verify.py\n@@ -0,0 +1 @@\n+CHECK = True\n"
    packaging = "--- /dev/null\n+++ b/setup.cfg\n@@ -0,0 +1 @@\n+[metadata]\n"
    beside = "--- /dev/null\n+++ b/checks/helper.py\n@@ -0,0 +1 @@\n+HELP = True\n"

    allowed = validate(clone, packaging, test_patch=test_patch, harness_rule="task")
    refused = validate(clone, beside, test_patch=test_patch, harness_rule="task")
    strict = validate(clone, packaging, test_patch=test_patch)

    assert allowed.status != ValidationStatus.REJECTED, allowed.log
    assert refused.status == ValidationStatus.REJECTED and "checks/helper.py" in refused.log
    assert strict.status == ValidationStatus.REJECTED and "setup.cfg" in strict.log
