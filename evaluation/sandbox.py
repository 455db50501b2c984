"""Running untrusted code (a task's tests after a model's patch) with limits.

Every command gets a scrubbed environment, a wall-clock limit (its whole process tree is
killed on expiry), CPU-time and address-space rlimits, and, where the machine allows it:

- no network and no view of other processes: ``unshare`` puts it in fresh network, PID and
  mount namespaces (only a loopback that is down; its own ``/proc``, so it cannot read the
  worker's environment through ``/proc/<pid>/environ``); when the namespace's first process
  dies the kernel kills every process left in it, including ones that called ``setsid``;
- a process limit: a ``pids`` cgroup per command (a fork bomb gets EAGAIN, and the machine
  keeps its PIDs). Without a writable cgroup, RLIMIT_NPROC, which does not bind root.

What it does not provide (a container does; see the README): a private filesystem. The
code runs as the worker's user and can read what that user can read.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import shutil
import signal
import subprocess
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

LOG_LIMIT = 20_000
NAMESPACES = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
CGROUP_ROOTS = (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup"))


@dataclass(frozen=True)
class Isolation:
    """What this machine lets the sandbox do, probed once per process."""

    namespaces: bool  # no network, own PID namespace and /proc
    pids_cgroup: Path | None  # where per-command pids cgroups are made

    def describe(self) -> str:
        network = "no network (namespaces)" if self.namespaces else "network NOT isolated (unshare unavailable)"
        processes = "pids cgroup" if self.pids_cgroup else "RLIMIT_NPROC (does not bind root)"
        return f"sandbox: {network}; process limit by {processes}"


@functools.cache
def isolation() -> Isolation:
    found = Isolation(namespaces=_namespaces_work(), pids_cgroup=_pids_cgroup_root())
    if not (found.namespaces and found.pids_cgroup):  # said once per process, where operators look
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


def _pids_cgroup_root() -> Path | None:
    for root in CGROUP_ROOTS:
        if not (root / "cgroup.procs").exists():
            continue
        parent = root / "prbench"
        probe = parent / f"probe-{os.getpid()}"
        try:
            probe.mkdir(parents=True, exist_ok=True)
            (probe / "pids.max").write_text("16")
            probe.rmdir()
        except OSError:
            with contextlib.suppress(OSError):
                probe.rmdir()
            continue
        return parent
    return None


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


def run_limited(command: list[str], cwd: str, timeout_s: float, stdin: str | None = None) -> Finished:
    """Run ``command`` in ``cwd`` inside the sandbox; its output is kept bounded."""
    _check_program(command[0], cwd)
    found = isolation()
    with _process_group_limit(found.pids_cgroup) as cgroup:
        wrapped = [shutil.which("unshare") or "unshare", *NAMESPACES, "--", *command] if found.namespaces else command
        cpu = int(timeout_s) + 5
        process = subprocess.Popen(
            wrapped,
            cwd=cwd,
            env=scrubbed_environment(cwd),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills the tests' children too
            preexec_fn=functools.partial(_enter_limits, cpu, cgroup),
        )
        output = BoundedOutput()
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


def _check_program(program: str, cwd: str) -> None:
    """Raise FileNotFoundError as Popen would: behind ``unshare`` a missing program would
    look like a failing test run instead of a broken test command."""
    path = Path(cwd, program) if "/" in program else None
    found = path.is_file() if path else shutil.which(program) is not None
    if not found:
        raise FileNotFoundError(f"the program {program!r} was not found")


def _enter_limits(cpu_seconds: int, cgroup: Path | None) -> None:
    """In the child, before exec: the limits every process it starts inherits."""
    if cgroup:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    else:
        nproc = settings.PRBENCH_SANDBOX_MAX_PROCESSES
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
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

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.dropped = 0

    def drain(self, pipe: Any) -> None:
        while chunk := pipe.read1(65536):
            self.buffer += chunk
            if len(self.buffer) > 4 * LOG_LIMIT:
                self._trim()
        if self.dropped:
            self._trim()
        pipe.close()

    def _trim(self) -> None:
        half = LOG_LIMIT // 2 - 200  # room for the marker, so truncate() leaves it alone
        self.dropped += len(self.buffer) - 2 * half
        self.buffer = self.buffer[:half] + self.buffer[-half:]

    def text(self) -> str:
        text = self.buffer.decode(errors="replace")
        if not self.dropped:
            return text
        half = len(text) // 2
        return f"{text[:half]}\n… [{self.dropped} bytes of output dropped] …\n{text[half:]}"


def truncate(log: str) -> str:
    if len(log) <= LOG_LIMIT:
        return log
    half = LOG_LIMIT // 2
    return f"{log[:half]}\n… [{len(log) - LOG_LIMIT} characters truncated] …\n{log[-half:]}"
