"""Running untrusted code (a task's tests after a model's patch) with limits.

Every command gets a scrubbed environment, a wall-clock limit (its whole process tree is
killed on expiry), CPU-time and address-space rlimits, and, where the machine allows it:

- no network and no view of other processes: ``unshare`` puts it in fresh network, PID and
  mount namespaces (only a loopback that is down; its own ``/proc``, so it cannot read the
  worker's environment through ``/proc/<pid>/environ``); when the namespace's first process
  dies the kernel kills every process left in it, including ones that called ``setsid``;
- a process limit: a ``pids`` cgroup per command (a fork bomb gets EAGAIN, and the machine
  keeps its PIDs). Without a writable cgroup, RLIMIT_NPROC, which does not bind root.

- where the worker is root and namespaces work: a user of its own. Each validation gets a
  uid no other process has, owns its checkout and nothing else (so it cannot write the
  repository cache, the project or another validation's checkout, nor move itself out of
  its cgroup), and its mount namespace covers the worker's state with empty tmpfs mounts:
  ``VAR_DIR`` (database, embedded Redis socket, repository cache), the worker's home and
  ``/run`` (the Postgres socket). The interpreter's own directory is put back if it was
  under one of them.

What it does not provide (a container does; see the README): a private filesystem beyond
that. The code can read whatever is world-readable, and without a separate user (a worker
that is not root) it runs as the worker's user.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

LOG_LIMIT = 20_000
NAMESPACES = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
# Uids for sandboxed commands: above any distribution's range, one drawn per validation.
SANDBOX_UIDS = (2_000_000, 2_999_999)
FILE_SIZE_LIMIT = 1024**3  # no single file beyond 1 GiB
# Run as root inside the new mount namespace, then drops to the sandbox user for good:
# set aside the directories to keep, cover the hidden ones, put the kept ones back.
ENTER_SANDBOX = r"""
set -e
uid=$1 stash=$2 keep=$3 hide=$4
shift 4
IFS=:
i=0
for dir in $keep; do mkdir "$stash/$i"; mount --bind "$dir" "$stash/$i"; i=$((i+1)); done
for dir in $hide; do if [ -d "$dir" ]; then mount -t tmpfs -o mode=755,size=64k prbench-hidden "$dir"; fi; done
i=0
for dir in $keep; do mkdir -p "$dir"; mount --move "$stash/$i" "$dir"; i=$((i+1)); done
unset IFS
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- "$@"
"""
CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the sandbox do, probed once per process."""

    namespaces: bool  # no network, own PID namespace and /proc
    pids_cgroup: Path | None  # where per-command pids cgroups are made
    separate_user: bool = False  # a uid of its own, the worker's state hidden
    pids_cgroup_problem: str = ""  # why there is no pids cgroup, when there is none

    def describe(self) -> str:
        network = "no network (namespaces)" if self.namespaces else "network NOT isolated (unshare unavailable)"
        processes = "pids cgroup" if self.pids_cgroup else f"RLIMIT_NPROC ({self.pids_cgroup_problem})"
        user = "a user of its own" if self.separate_user else "the worker's user"
        return f"sandbox: {network}; process limit by {processes}; runs as {user}"


@functools.cache
def isolation() -> Isolation:
    namespaces = _namespaces_work()
    separate_user = namespaces and os.geteuid() == 0 and shutil.which("setpriv") is not None
    pids_cgroup, problem = _pids_cgroup_root()
    found = Isolation(namespaces, pids_cgroup, separate_user, problem)
    if not (found.namespaces and found.pids_cgroup and found.separate_user):  # once, where operators look
        logger.warning("validation runs with less isolation than it could: %s", found.describe())
    return found


def _namespaces_work() -> bool:
    unshare = shutil.which("unshare")
    if not unshare or not settings.PRBENCH_SANDBOX_NAMESPACES:
        return False
    try:
        probe = subprocess.run([unshare, *NAMESPACES, "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _pids_cgroup_root() -> tuple[Path | None, str]:
    """Where per-command pids cgroups can be made, or None and why not."""
    problems = []
    for root in CGROUP_ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        parent = root / "prbench"
        probe = parent / f"probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir(parents=True, exist_ok=True)
            (probe / "pids.max").write_text("16")
        except OSError as exc:
            problems.append(f"{root}: {exc}")
            continue
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
        return parent, ""
    return None, "; ".join(problems) or "no pids cgroup hierarchy is mounted"


@dataclass(frozen=True)
class Finished:
    returncode: int
    output: str
    timed_out: bool


def scrubbed_environment(home: str) -> dict[str, str]:
    """Only what a test runner needs: no provider keys, no database or Redis URL."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "TMPDIR": home,
    }


def sandbox_user() -> int | None:
    """A fresh uid for one validation's commands, or None where commands keep the worker's."""
    if not isolation().separate_user:
        return None
    return random.SystemRandom().randint(*SANDBOX_UIDS)


def hand_over(path: Path, uid: int | None) -> None:
    """Give a directory tree to the sandbox user (nothing to do without one)."""
    if uid is None:
        return
    os.chown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, uid)


CHECKOUT_MARK = "<checkout>"


@dataclass(frozen=True)
class Box:
    """One validation's directory, and the user its commands run as."""

    workdir: str
    uid: int | None = None

    def run(
        self, command: list[str], timeout_s: float, stdin: str | None = None, output_limit: int = LOG_LIMIT
    ) -> Finished:
        finished = run_limited(command, self.workdir, timeout_s, stdin, self.uid, output_limit)
        root = self.workdir.rstrip("/")
        if len(root) < 2:
            return finished
        # Logs reach customer pages: they name the checkout, not where it lies on the server.
        return replace(finished, output=finished.output.replace(root, CHECKOUT_MARK))


def box_for(root: Path) -> Box:
    """Hand ``root`` over to a fresh sandbox user (where there is one) and box it."""
    uid = sandbox_user()
    hand_over(root, uid)
    return Box(str(root), uid)


def run_limited(
    command: list[str],
    cwd: str,
    timeout_s: float,
    stdin: str | None = None,
    uid: int | None = None,
    output_limit: int = LOG_LIMIT,
) -> Finished:
    """Run ``command`` in ``cwd`` inside the sandbox, as ``uid`` when given (see
    ``sandbox_user``; ``cwd`` must be handed over to it); its output is kept to about
    ``output_limit`` characters, head and tail."""
    _check_program(command[0], cwd)
    found = isolation()
    # Only a command that changes user needs somewhere to set kept directories aside.
    keep = tempfile.TemporaryDirectory(prefix="prbench-keep-") if uid is not None else contextlib.nullcontext("")
    with _process_group_limit(found.pids_cgroup) as cgroup, keep as stash:
        wrapped = _wrapped(command, found, uid, stash)
        cpu = int(timeout_s) + 5
        process = subprocess.Popen(
            wrapped,
            cwd=cwd,
            env=scrubbed_environment(cwd),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills the tests' children too
            preexec_fn=functools.partial(_enter_limits, cpu, cgroup, uid),
        )
        output = BoundedOutput(output_limit)
        reader = threading.Thread(target=output.drain, args=(process.stdout,), daemon=True)
        reader.start()
        if stdin is not None and process.stdin:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(stdin.encode())
            process.stdin.close()
        timed_out = False
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if cgroup:
            _kill_cgroup(cgroup)  # whatever escaped the process group (setsid, double fork)
        reader.join(timeout=10)
    return Finished(process.returncode, output.text(), timed_out=timed_out)


def _wrapped(command: list[str], found: Isolation, uid: int | None, stash: str) -> list[str]:
    if not found.namespaces:
        return command
    unshare = [shutil.which("unshare") or "unshare", *NAMESPACES, "--"]
    if uid is None:
        return [*unshare, *command]
    hidden = _hidden_directories()
    kept = [path for path in (sys.base_prefix, sys.prefix) if any(_within(path, h) for h in hidden)]
    args = [str(uid), stash, ":".join(dict.fromkeys(kept)), ":".join(hidden)]
    return [*unshare, "/bin/sh", "-c", ENTER_SANDBOX, "prbench-sandbox", *args, *command]


def _hidden_directories() -> list[str]:
    """The worker's state: its var directory (database, Redis socket, repository cache), its
    home and /run (the Postgres socket). Not /tmp: checkouts live there, each its own uid's."""
    candidates = [settings.VAR_DIR, settings.PRBENCH_REPO_CACHE_DIR, Path.home(), Path("/run")]
    return [
        str(Path(path).resolve()) for path in candidates if Path(path).is_dir() and Path(path).resolve() != Path("/")
    ]


def _within(path: str, directory: str) -> bool:
    return Path(path).resolve().is_relative_to(directory)


def _check_program(program: str, cwd: str) -> None:
    """Raise FileNotFoundError as Popen would: behind ``unshare`` a missing program would
    look like a failing test run instead of a broken test command."""
    path = Path(cwd, program) if "/" in program else None
    found = path.is_file() if path else shutil.which(program) is not None
    if not found:
        raise FileNotFoundError(f"the program {program!r} was not found")


def _enter_limits(cpu_seconds: int, cgroup: Path | None, uid: int | None) -> None:
    """In the child, before exec: the limits every process it starts inherits."""
    if cgroup:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    if uid is not None or cgroup is None:
        # Counted per user, so only for the sandbox's own uid (a worker's user may run
        # more than this elsewhere), or where nothing else limits processes.
        nproc = settings.PRBENCH_SANDBOX_MAX_PROCESSES
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    memory = settings.PRBENCH_SANDBOX_MEMORY_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


@contextlib.contextmanager
def _process_group_limit(parent: Path | None) -> Any:
    if parent is None:
        yield None
        return
    cgroup = parent / uuid.uuid4().hex
    try:
        cgroup.mkdir()
        (cgroup / "pids.max").write_text(str(settings.PRBENCH_SANDBOX_MAX_PROCESSES))
    except OSError:
        logger.warning("could not make a pids cgroup under %s; falling back to RLIMIT_NPROC", parent)
        yield None
        return
    try:
        yield cgroup
    finally:
        _kill_cgroup(cgroup)
        with contextlib.suppress(OSError):
            cgroup.rmdir()


def _kill_cgroup(cgroup: Path) -> None:
    for _ in range(50):
        try:
            pids = [int(pid) for pid in (cgroup / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        threading.Event().wait(0.02)


class BoundedOutput:
    """Keeps the head and the tail of a process's output in bounded memory: a test that
    floods stdout must not take the worker down with it."""

    def __init__(self, limit: int = LOG_LIMIT) -> None:
        self.buffer = bytearray()
        self.dropped = 0
        self.limit = limit

    def drain(self, pipe: Any) -> None:
        while chunk := pipe.read1(65536):
            self.buffer += chunk
            if len(self.buffer) > 4 * self.limit:
                self._trim()
        if self.dropped:
            self._trim()
        pipe.close()

    def _trim(self) -> None:
        half = self.limit // 2 - 200  # room for the marker, so truncate() leaves it alone
        self.dropped += len(self.buffer) - 2 * half
        self.buffer = self.buffer[:half] + self.buffer[-half:]

    def text(self) -> str:
        text = self.buffer.decode(errors="replace")
        if not self.dropped:
            return text
        half = len(text) // 2
        return f"{text[:half]}\n… [{self.dropped} bytes of output dropped] …\n{text[half:]}"


# BoundedOutput's note, which truncate() must not cut away unsaid: a test log is kept far
# longer than LOG_LIMIT for the parsers, then truncated for display.
DROPPED_NOTE = re.compile(r"\n… \[(\d+) bytes of output dropped\] …\n")


def truncate(log: str) -> str:
    if len(log) <= LOG_LIMIT:
        return log
    half = LOG_LIMIT // 2
    note = f"{len(log) - LOG_LIMIT} characters truncated"
    if dropped := sum(int(count) for count in DROPPED_NOTE.findall(log, half, len(log) - half)):
        note += f", and before that {dropped} bytes of output dropped"
    return f"{log[:half]}\n… [{note}] …\n{log[-half:]}"
