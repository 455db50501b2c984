"""One sandbox per validation (evaluation/sandbox.py's sessions): the commands of a validation
share its namespaces, uid and cgroup, each keeps limits of its own, nothing a command starts
outlives it, and a sandbox that fails fails the rest of its validation at once."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from evaluation import sandbox
from evaluation.sandbox import SandboxFailed, isolation, sandbox_session

# What a command sees of its sandbox: its PID, network and mount namespaces, its uid and its
# own PID there (1 when the namespace is the command's own).
WHERE_AM_I = ["sh", "-c", "readlink /proc/self/ns/pid /proc/self/ns/net /proc/self/ns/mnt; id -u; echo $$"]
# Every process the command can see, by name.
PROCESSES = ["sh", "-c", "cat /proc/[0-9]*/comm"]


@pytest.fixture
def checkout():
    """A directory the sandbox user may reach, as a checkout under /tmp is."""
    parent = Path(tempfile.mkdtemp(prefix="prbench-session-"))
    parent.chmod(0o755)
    (parent / "checkout").mkdir()
    yield parent / "checkout"
    shutil.rmtree(parent)


@pytest.fixture(autouse=True)
def needs_namespaces():
    if not isolation().namespaces:
        pytest.skip("unshare is unavailable here: each command is sandboxed on its own, as far as it can be")


def processes_in(directory: Path) -> list[str]:
    """The processes (of any namespace) working in ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if os.readlink(proc / "cwd").startswith(str(directory)):
                found.append(proc.name)
        except OSError:
            continue
    return found


def server_pid(box: sandbox.Box) -> int:
    """The command server, as the worker sees it: the only child of the session's unshare."""
    assert box.session is not None
    unshare = box.session.process.pid
    return int(Path(f"/proc/{unshare}/task/{unshare}/children").read_text().split()[0])


def test_a_validations_commands_share_one_sandbox(checkout):
    with sandbox_session(checkout) as box, sandbox_session(checkout) as other:
        first = box.run(WHERE_AM_I, 10).output.split()
        second = box.run(WHERE_AM_I, 10).output.split()
        another = other.run(WHERE_AM_I, 10).output.split()

    assert first[:4] == second[:4] and "1" not in (first[4], second[4])
    worker = [os.readlink(f"/proc/self/ns/{kind}") for kind in ("pid", "net", "mnt")]
    assert not set(first[:3]) & set(worker)  # not the worker's namespaces
    assert not set(first[:3]) & set(another[:3])  # and another validation has its own
    if isolation().separate_user:
        assert first[3] == str(box.uid) and box.uid != 0
    assert processes_in(checkout) == []


def test_without_sessions_each_command_has_a_sandbox_of_its_own(checkout, settings):
    settings.PRBENCH_SANDBOX_SESSIONS = False
    with sandbox_session(checkout) as box:
        assert box.session is None
        first = box.run(WHERE_AM_I, 10).output.split()
        second = box.run(WHERE_AM_I, 10).output.split()
    assert first[4] == second[4] == "1"  # each the first process of a namespace of its own
    assert first[3] == second[3]  # the validation's uid all the same


def test_each_command_keeps_limits_of_its_own(checkout):
    with sandbox_session(checkout) as box:
        short = box.run(["sh", "-c", "ulimit -t; ulimit -v"], 10)
        long = box.run(["sh", "-c", "ulimit -t"], 100)
    memory_kib = sandbox.settings.PRBENCH_SANDBOX_MEMORY_BYTES // 1024
    assert short.output.split() == ["15", str(memory_kib)]  # CPU seconds: the wall-clock limit and 5
    assert long.output.split() == ["105"]


def test_a_commands_input_reaches_it_whole_or_waits_for_nothing(checkout):
    """A patch far larger than a pipe holds: read whole by one command, ignored by another."""
    patch = "x" * 3_000_000
    with sandbox_session(checkout) as box:
        counted = box.run(["wc", "-c"], 10, stdin=patch)
        started = time.monotonic()
        ignored = box.run(["true"], 10, stdin=patch)
    assert counted.output.strip() == "3000000"
    assert (ignored.returncode, ignored.timed_out) == (0, False) and time.monotonic() - started < 5


def test_a_command_that_times_out_loses_its_whole_tree_and_the_next_one_runs(checkout):
    with sandbox_session(checkout) as box:
        started = time.monotonic()
        hung = box.run(["sh", "-c", "setsid sleep 300 & sleep 300"], 1)
        assert hung.timed_out and time.monotonic() - started < 10
        after = box.run(PROCESSES, 10)
    assert after.returncode == 0 and not after.timed_out
    assert sorted(after.output.split()) == ["python", "sh"]  # the server, and this command
    assert processes_in(checkout) == []


def test_what_a_command_leaves_running_dies_when_it_ends(checkout):
    """A daemon holding the command's output open neither survives nor keeps it waiting."""
    with sandbox_session(checkout) as box:
        started = time.monotonic()
        left = box.run(["sh", "-c", "setsid sleep 300 & echo started"], 30)
        assert time.monotonic() - started < 10
        after = box.run(PROCESSES, 10)
    assert (left.returncode, left.output, left.timed_out) == (0, "started\n", False)
    assert sorted(after.output.split()) == ["python", "sh"]


def test_a_command_that_kills_its_parent_and_everything_else_leaves_the_sandbox_standing(checkout):
    with sandbox_session(checkout) as box:
        killer = box.run(["sh", "-c", "sleep 300 & kill -9 $PPID; kill -9 -1; echo still here"], 10)
        after = box.run(["echo", "next"], 10)
    assert killer.output == "still here\n"
    assert (after.returncode, after.output) == (0, "next\n")


def test_a_command_cannot_reach_the_servers_pipes(checkout):
    """Same uid as the server, but it is not dumpable: no /proc/1/fd to forge answers through."""
    if not isolation().separate_user:
        pytest.skip("commands keep the worker's user here, root inside their namespace")
    with sandbox_session(checkout) as box:
        snoop = box.run(["sh", "-c", "ls /proc/1/fd; echo '{\"id\": 3}' > /proc/1/fd/4"], 10)
        after = box.run(["echo", "answered"], 10)
    assert snoop.returncode != 0 and "Permission denied" in snoop.output
    assert after.output == "answered\n"


def test_a_server_that_dies_fails_its_command_and_every_later_one(checkout):
    with sandbox_session(checkout) as box:
        assert box.run(["true"], 10).returncode == 0
        threading.Timer(1, os.kill, (server_pid(box), signal.SIGKILL)).start()
        started = time.monotonic()
        with pytest.raises(SandboxFailed, match="command server died"):
            box.run(["sleep", "60"], 30)
        assert time.monotonic() - started < 10
        with pytest.raises(SandboxFailed, match="failed earlier: the sandbox's command server died"):
            box.run(["true"], 10)
    assert processes_in(checkout) == []


def test_a_server_that_stops_answering_is_given_up_after_the_grace(checkout, monkeypatch):
    monkeypatch.setattr(sandbox, "SERVER_GRACE_S", 1.0)
    with sandbox_session(checkout) as box:
        os.kill(server_pid(box), signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(SandboxFailed, match="gave no answer in time"):
            box.run(["true"], 1)
        assert time.monotonic() - started < 10
    assert processes_in(checkout) == []


def test_the_server_refuses_to_run_outside_a_pid_namespace_of_its_own():
    """There, its kill(-1) would reach every process of its user."""
    server = Path(sandbox.__file__).with_name("sandbox_server.py")
    refused = subprocess.run([sys.executable, "-I", "-S", str(server)], input=b"", capture_output=True, timeout=30)
    assert refused.returncode == 2
    assert b"not the first process of a PID namespace of its own" in refused.stderr
