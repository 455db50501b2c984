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


def binary_patch(path: str, old: bytes | None, new: bytes) -> str:
    """What ``git diff --binary --full-index`` writes for the change, as a model's patch carries it."""
    with tempfile.TemporaryDirectory() as work:
        git = ["git", "-C", work, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True)
        target = Path(work) / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if old is not None:
            target.write_bytes(old)
            subprocess.run([*git, "add", "-A"], check=True)
            subprocess.run([*git, "commit", "-qm", "old"], check=True)
        target.write_bytes(new)
        subprocess.run([*git, "add", "-A"], check=True)
        diff = subprocess.run([*git, "diff", "--cached", "--binary", "--full-index"], capture_output=True, check=True)
        return diff.stdout.decode()


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def test_a_binary_hunk_applies_as_the_harness_applies_it(clone):
    """git apply takes a binary hunk with full index lines: the file is written, the tests run."""
    patch = replacing_words_module("X = 1") + binary_patch("textkit/logo.png", None, PNG)
    result = validate(clone, patch)
    assert result.status == ValidationStatus.PASSED, result.log
    assert result.apply_method == "git_apply"


def test_a_binary_hunk_that_does_not_apply_leaves_the_patch_not_applied(clone):
    """Its preimage is not the file's (git checks the full index line), and patch cannot apply
    binary hunks at all: not applied, as the harness counts it, not refused."""
    patch = binary_patch("textkit/words.py", b"def count_words(text):\n    return 0\n", b"\x00binary now")
    result = validate(clone, patch)
    assert result.status == ValidationStatus.NOT_APPLIED
    assert "does not match" in result.log and "git binary diffs are not supported" in result.log


def test_a_binary_hunk_without_content_is_skipped_as_the_harness_skips_it(clone):
    """ "Binary files ... differ" carries no content: git apply refuses it, and patch (the
    harness's last resort) applies the rest."""
    patch = replacing_words_module("X = 1") + (
        "diff --git a/textkit/logo.png b/textkit/logo.png\nnew file mode 100644\nindex 0000000..45a21f1\n"
        "Binary files /dev/null and b/textkit/logo.png differ\n"
    )
    result = validate(clone, patch)
    assert result.status == ValidationStatus.PASSED, result.log
    assert result.apply_method == "patch_fuzz"


def test_compiled_python_is_refused_in_any_form(clone):
    """A cached .pyc or an extension module is imported in place of the source beside it: it
    could stand in for the task's test file or a runner hook without naming either."""
    for path in ("tests/__pycache__/test_words.cpython-311.pyc", "textkit/conftest.cpython-311-x86_64-linux-gnu.so"):
        result = validate(clone, binary_patch(path, None, b"\x00compiled"))
        assert result.status == ValidationStatus.REJECTED
        assert "compiled Python is not accepted" in result.log


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


def test_an_imported_tasks_rule_lets_a_fix_touch_packaging_but_not_its_runner(clone):
    """End to end under the harness's rule: a patch to setup.cfg runs; a conftest.py is refused
    before anything is written."""
    test_patch = "--- /dev/null\n+++ b/checks/verify.py\n@@ -0,0 +1 @@\n+CHECK = True\n"
    packaging = "--- /dev/null\n+++ b/setup.cfg\n@@ -0,0 +1 @@\n+[metadata]\n"
    hook = "--- /dev/null\n+++ b/textkit/conftest.py\n@@ -0,0 +1 @@\n+HOOK = True\n"

    allowed = validate(clone, packaging, test_patch=test_patch, harness_rule="task")
    refused = validate(clone, hook, test_patch=test_patch, harness_rule="task")
    strict = validate(clone, packaging, test_patch=test_patch)

    assert allowed.status != ValidationStatus.REJECTED, allowed.log
    assert refused.status == ValidationStatus.REJECTED and "textkit/conftest.py" in refused.log
    assert strict.status == ValidationStatus.REJECTED and "setup.cfg" in strict.log


# A SWE-bench-like task on the testbed: its test patch adds a test to tests/test_words.py that
# fails until count_words stops counting a lone dash as a word.
DASH_TEST = (
    "--- a/tests/test_words.py\n+++ b/tests/test_words.py\n@@ -11,3 +11,7 @@ def test_counts_words_across_newlines():\n"
    ' \n def test_empty_text_has_no_words():\n     assert count_words("") == 0\n+\n+\n'
    "+def test_a_lone_dash_is_not_a_word():\n"
)
DASH_TESTS = DASH_TEST + '+    assert count_words("one - two") == 2\n'
DASH_FIX = (
    f"--- a/{WORDS}\n+++ b/{WORDS}\n@@ -1,4 +1,4 @@\n def count_words(text):\n"
    '     """How many words the text holds."""\n     # split() with no argument splits on any run of whitespace.\n'
    "-    return len(text.split())\n"
    '+    return len([word for word in text.split() if word != "-"])\n'
)
CHEAT = DASH_TEST + "+    assert True\n"  # the same test, made to pass whatever the code does
NEW_TEST = "--- /dev/null\n+++ b/tests/test_dash.py\n@@ -0,0 +1,5 @@\n+from textkit.words import count_words\n+\n+\n"
DASH_PLAN = {
    "harness_rule": "task",
    "test_patch": DASH_TESTS,
    "fail_to_pass": ("tests/test_words.py::test_a_lone_dash_is_not_a_word",),
    "pass_to_pass": ("tests/test_words.py::test_empty_text_has_no_words",),
}


@pytest.mark.parametrize(
    ("patch", "status", "fixed"),
    [
        (DASH_FIX + DASH_TESTS, ValidationStatus.PASSED, 1),  # a fix that writes the test itself too
        (CHEAT, ValidationStatus.FAILED, 0),  # its change to the test is undone
        (DASH_FIX + CHEAT, ValidationStatus.PASSED, 1),
        (CHEAT + "--- /dev/null\n+++ b/tests/helpers.py\n@@ -0,0 +1 @@\n+HELP = True\n", ValidationStatus.FAILED, 0),
    ],
)
def test_a_patch_that_changes_the_tasks_tests_has_them_put_back_as_the_harness_does(clone, patch, status, fixed):
    """SWE-bench's harness applies the model's patch, checks the test patch's files out at the
    base commit and applies the test patch: a patch that also edits the tests is graded on the
    task's tests, neither refused nor helped by its own version of them."""
    result = validate(clone, patch, **DASH_PLAN)
    assert result.status == status, result.log
    assert result.tally is not None and (result.tally.fail_to_pass_passed, result.tally.pass_to_pass_failed) == (
        fixed,
        0,
    )


def test_a_file_the_test_patch_adds_is_the_test_patchs_not_the_models(clone):
    """The model wrote tests/test_dash.py, which the test patch adds: its version goes, the
    task's comes in (the harness would have failed to apply the test patch over it and run the
    model's), and a package of that name, imported in its place, goes too."""
    test_patch = NEW_TEST + '+def test_dash():\n+    assert count_words("a - b") == 2\n'
    cheat = NEW_TEST + "+def test_dash():\n+    assert True\n"
    shadow = "--- /dev/null\n+++ b/tests/test_dash/__init__.py\n@@ -0,0 +1 @@\n+HIDDEN = True\n"
    plan = {"harness_rule": "task", "test_patch": test_patch, "fail_to_pass": ("tests/test_dash.py::test_dash",)}

    fixed = validate(clone, DASH_FIX + cheat, **plan)
    cheated = validate(clone, cheat + shadow, **plan)

    assert fixed.status == ValidationStatus.PASSED, fixed.log
    assert cheated.status == ValidationStatus.FAILED, cheated.log
    assert "assert 3 == 2" in cheated.log
