"""Running untrusted code (a task's tests after a model's patch) with limits.

Every command gets a scrubbed environment, a wall-clock limit (its whole process tree is
killed on expiry), CPU-time and address-space rlimits, and, where the machine allows it:

- no network and no view of other processes: ``unshare`` puts it in fresh network, PID and
  mount namespaces (only a loopback that is down; its own ``/proc``, so it cannot read the
  worker's environment through ``/proc/<pid>/environ``); nothing it started outlives it,
  not even a process that called ``setsid``;
- a process limit: a ``pids`` cgroup (a fork bomb gets EAGAIN, and the machine keeps its
  PIDs). Without a writable cgroup, RLIMIT_NPROC, which does not bind root.

- where the worker is root and namespaces work: a user of its own. Each validation gets a
  uid no other process has, owns its checkout and nothing else (so it cannot write the
  repository cache, the project or another validation's checkout, nor move itself out of
  its cgroup), and its mount namespace covers the worker's state with empty tmpfs mounts:
  ``VAR_DIR`` (database, embedded Redis socket, repository cache), the worker's home and
  ``/run`` (the Postgres socket). The interpreter's own directory is put back if it was
  under one of them.

Where namespaces work, a validation's sandbox (namespaces, mounts, pids cgroup, uid) is set
up once, by ``sandbox_session``, and a server inside it (evaluation/sandbox_server.py, the
namespace's PID 1) runs the validation's commands one after another, each with its own
limits, and kills whatever a command leaves behind before it answers: setting a sandbox up
costs about 35 ms, six times per validation when each command had its own. The pids cgroup
is then the validation's, not each command's. Elsewhere, and for a ``Box`` made without a
session, each command is sandboxed on its own (``run_limited``).

What it does not provide (a container does; see the README): a private filesystem beyond
that. The code can read whatever is world-readable, and without a separate user (a worker
that is not root) it runs as the worker's user.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.sandbox_server import BoundedOutput, exited_within

logger = logging.getLogger(__name__)

LOG_LIMIT = 20_000
NAMESPACES = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
# Uids for sandboxed commands: above any distribution's range, one drawn per validation.
SANDBOX_UIDS = (2_000_000, 2_999_999)
FILE_SIZE_LIMIT = 1024**3  # no single file beyond 1 GiB
# Run as root inside the new mount namespace, then drops to the sandbox user for good:
# set aside the directories to keep, cover the hidden ones, put the kept ones back read-only.
ENTER_SANDBOX = r"""
set -e
uid=$1 stash=$2 keep=$3 hide=$4 writable=$5
shift 5
IFS=:
i=0
for dir in $keep $writable; do mkdir "$stash/$i"; mount --bind "$dir" "$stash/$i"; i=$((i+1)); done
for dir in $hide; do if [ -d "$dir" ]; then mount -t tmpfs -o mode=755,size=64k prbench-hidden "$dir"; fi; done
i=0
for dir in $keep; do mkdir -p "$dir"; mount --move "$stash/$i" "$dir"; mount -o remount,bind,ro "$dir"; i=$((i+1)); done
for dir in $writable; do mkdir -p "$dir"; mount --move "$stash/$i" "$dir"; i=$((i+1)); done
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
        each = "validation" if self.sessions else "command"
        return f"sandbox: {network}; process limit by {processes}; runs as {user}; one sandbox per {each}"

    @property
    def sessions(self) -> bool:
        """One sandbox per validation (``sandbox_session``): it needs a PID namespace."""
        return self.namespaces and settings.PRBENCH_SANDBOX_SESSIONS


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


@dataclass(frozen=True)
class Surroundings:
    """What a sandboxed command sees beyond its own directory. ``keep``: directories the
    sandbox would hide that must stay visible (a task's environment under the var directory,
    the interpreter it was made from under a home); the sandbox user can read them, never
    write them (they are the worker's, and mounted read-only). ``variables`` are added to the scrubbed
    environment (an environment's PATH, PYTHONPATH, the recipe's own). ``network``: only an
    environment's build has it (to reach the package index); tests never do."""

    variables: tuple[tuple[str, str], ...] = ()
    keep: tuple[str, ...] = ()
    network: bool = False
    writable: tuple[str, ...] = ()  # kept visible and writable: only a build's own directories

    @property
    def own_python(self) -> bool:
        return any(name == "VIRTUAL_ENV" for name, _ in self.variables)


NOTHING_MORE = Surroundings()


def scrubbed_environment(home: str, surroundings: Surroundings = NOTHING_MORE) -> dict[str, str]:
    """Only what a test runner needs: no provider keys, no database or Redis URL."""
    variables = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "TMPDIR": home,
    }
    if not surroundings.own_python:
        # Tests run by the worker's own interpreter must not load the worker's pytest plugins
        # (pytest-django would look for the worker's settings in the code under test).
        variables["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return variables | dict(surroundings.variables)


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
    """One validation's directory, the user its commands run as and, where there is one,
    the sandbox session they run in (else each command is sandboxed on its own)."""

    workdir: str
    uid: int | None = None
    session: SandboxSession | None = None
    surroundings: Surroundings = NOTHING_MORE

    def run(
        self, command: list[str], timeout_s: float, stdin: str | None = None, output_limit: int = LOG_LIMIT
    ) -> Finished:
        if self.session:
            finished = self.session.run(command, timeout_s, stdin, output_limit)
        else:
            finished = run_limited(
                command, self.workdir, timeout_s, stdin, self.uid, output_limit, surroundings=self.surroundings
            )
        root = self.workdir.rstrip("/")
        if len(root) < 2:
            return finished
        # Logs reach customer pages: they name the checkout, not where it lies on the server.
        return replace(finished, output=finished.output.replace(root, CHECKOUT_MARK))


@contextlib.contextmanager
def sandbox_session(root: Path, surroundings: Surroundings = NOTHING_MORE) -> Iterator[Box]:
    """A box for one validation's commands in ``root``, handed over to a fresh sandbox user
    (where there is one). Where namespaces work, one sandbox for all of its commands, set
    up here and torn down (with anything still running in it) on the way out."""
    uid = sandbox_user()
    hand_over(root, uid)
    with _scratch(uid, surroundings) as surroundings:
        found = isolation()
        if not found.sessions:
            yield Box(str(root), uid, surroundings=surroundings)
            return
        with _process_group_limit(found.pids_cgroup) as cgroup, _stash(uid) as stash:
            session = SandboxSession.start(str(root), uid, cgroup, stash, surroundings)
            try:
                yield Box(str(root), uid, session, surroundings)
            finally:
                session.close()


@contextlib.contextmanager
def _scratch(uid: int | None, surroundings: Surroundings) -> Iterator[Surroundings]:
    """In a task's own environment, its tests' temporary files go outside the checkout, as in
    the harness's containers: the checkout is on the import path, and a test that makes a
    module "outside the path" (astroid's) must find it outside."""
    if not surroundings.own_python:
        yield surroundings
        return
    with tempfile.TemporaryDirectory(prefix="prbench-tmp-") as scratch:
        hand_over(Path(scratch), uid)
        yield replace(surroundings, variables=(*surroundings.variables, ("TMPDIR", scratch)))


class SandboxFailed(RuntimeError):
    """The sandbox itself failed: its command server died, or stopped answering. The
    harness's failure, not the code's under test; the session's later commands fail too."""


# How long past a command's own limit its answer may take (the server kills the command's
# tree, then reaps it) before the session is given up for dead; and how long setting the
# sandbox up may take.
SERVER_GRACE_S = 30.0
SERVER_START_S = 30.0
DIAGNOSTICS_LIMIT = 4000  # of what the sandbox writes to stderr (a mount that failed, a traceback)
ANSWER_KEYS = {"returncode", "output", "timed_out"}


class SandboxSession:
    """One validation's sandbox: namespaces, mounts, pids cgroup and uid set up once, and a
    command server inside it (evaluation/sandbox_server.py) that runs its commands in turn.
    Used by one thread at a time, as a validation is."""

    def __init__(
        self,
        process: subprocess.Popen,
        workdir: str,
        uid: int | None,
        cgroup: Path | None,
        surroundings: Surroundings = NOTHING_MORE,
    ) -> None:
        self.process = process
        self.workdir, self.uid, self.cgroup = workdir, uid, cgroup
        self.surroundings = surroundings
        self.failure = ""  # why the session was given up, once it was
        self._answers = bytearray()
        self._requests = 0
        self._diagnostics = BoundedOutput(DIAGNOSTICS_LIMIT)
        self._diagnostics_reader = threading.Thread(target=self._diagnostics.drain, args=(process.stderr,), daemon=True)
        self._diagnostics_reader.start()

    @classmethod
    def start(
        cls, workdir: str, uid: int | None, cgroup: Path | None, stash: str, surroundings: Surroundings = NOTHING_MORE
    ) -> SandboxSession:
        server = [sys.executable, "-I", "-S", "-c", _server_source()]
        limits = _limits(None, cgroup is not None, uid)  # no CPU limit: the server sets one per command
        process = subprocess.Popen(
            _wrapped(server, isolation(), uid, stash, surroundings),
            cwd=workdir,
            env=scrubbed_environment(workdir, surroundings),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=functools.partial(_enter_limits, cgroup, limits),
        )
        assert process.stdin is not None
        os.set_blocking(process.stdin.fileno(), False)
        session = cls(process, workdir, uid, cgroup, surroundings)
        ready = session._exchange(None, time.monotonic() + SERVER_START_S)
        if not ready.get("ready"):
            raise session._given_up(f"the sandbox did not start: it said {ready!r}")
        return session

    def run(self, command: list[str], timeout_s: float, stdin: str | None, output_limit: int) -> Finished:
        _check_program(command[0], self.workdir)
        if self.failure:
            raise SandboxFailed(f"this validation's sandbox failed earlier: {self.failure}")
        self._requests += 1
        request = {
            "id": self._requests,
            "command": command,
            "cwd": self.workdir,
            "env": scrubbed_environment(self.workdir, self.surroundings),
            "timeout_s": timeout_s,
            "stdin": stdin,
            "output_limit": output_limit,
            "limits": _limits(int(timeout_s) + 5, self.cgroup is not None, self.uid),
        }
        answer = self._exchange(request, time.monotonic() + timeout_s + SERVER_GRACE_S)
        if answer.get("id") != self._requests or not answer.keys() >= ANSWER_KEYS:
            raise self._given_up(f"the sandbox's command server answered {answer!r}")
        return Finished(answer["returncode"], answer["output"], answer["timed_out"])

    def close(self) -> None:
        """End the session: the server ends when its requests do, and its namespace (with
        anything left in it) with it."""
        if not self.failure:
            assert self.process.stdin is not None
            self.process.stdin.close()
            exited_within(self.process, 5)
        self._kill()  # nothing to do, unless the server would not end
        assert self.process.stdout is not None
        self.process.stdout.close()
        self._diagnostics_reader.join(timeout=2)

    def _exchange(self, request: dict[str, Any] | None, deadline: float) -> dict[str, Any]:
        """Send ``request`` (if any) and read the server's next line, before the deadline."""
        try:
            if request is not None:
                self._send(request, deadline)
            return self._receive(deadline)
        except SandboxFailed as exc:
            raise self._given_up(str(exc)) from None
        except BaseException:  # interrupted mid-command: the server's next answer would be this one's
            self._given_up("interrupted")
            raise

    def _send(self, request: dict[str, Any], deadline: float) -> None:
        assert self.process.stdin is not None
        fd = self.process.stdin.fileno()
        pending = memoryview(json.dumps(request).encode() + b"\n")
        while pending:
            if not _ready(fd, select.POLLOUT, deadline):
                raise SandboxFailed("the sandbox's command server took no request in time")
            try:
                pending = pending[os.write(fd, pending) :]
            except BrokenPipeError:
                raise SandboxFailed("the sandbox's command server is gone") from None
            except BlockingIOError:
                continue

    def _receive(self, deadline: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        searched = 0
        while (end := self._answers.find(b"\n", searched)) < 0:
            searched = len(self._answers)
            if not _ready(fd, select.POLLIN, deadline):
                raise SandboxFailed("the sandbox's command server gave no answer in time")
            if not (chunk := os.read(fd, 1024**2)):
                raise SandboxFailed("the sandbox's command server died")
            self._answers += chunk
        line = bytes(self._answers[:end])
        del self._answers[: end + 1]
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SandboxFailed(f"the sandbox's command server wrote {line[:200]!r}")
        return answer

    def _given_up(self, reason: str) -> SandboxFailed:
        """Kill the session for good and say why: its later commands fail at once."""
        self._kill()
        self._diagnostics_reader.join(timeout=2)
        said = self._diagnostics.text().strip()
        self.failure = reason + (f"; it wrote: {said}" if said else "")
        logger.warning("validation sandbox given up: %s", self.failure)
        return SandboxFailed(self.failure)

    def _kill(self) -> None:
        if self.process.poll() is None:  # once reaped, its pid (and group) may be another's
            with contextlib.suppress(ProcessLookupError):
                # unshare and the server (its group): the namespace dies with the server.
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if self.cgroup:
            _kill_cgroup(self.cgroup)


def _ready(fd: int, event: int, deadline: float) -> bool:
    """Whether ``fd`` is ready for ``event`` before the deadline (poll: any fd number)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    poller = select.poll()
    poller.register(fd, event)
    return bool(poller.poll(remaining * 1000))


@functools.cache
def _server_source() -> str:
    # Passed as text (python -c): the project's directory may be hidden in the sandbox.
    return Path(__file__).with_name("sandbox_server.py").read_text()


def run_limited(
    command: list[str],
    cwd: str,
    timeout_s: float,
    stdin: str | None = None,
    uid: int | None = None,
    output_limit: int = LOG_LIMIT,
    surroundings: Surroundings = NOTHING_MORE,
) -> Finished:
    """Run ``command`` in ``cwd`` in a sandbox of its own, as ``uid`` when given (see
    ``sandbox_user``; ``cwd`` must be handed over to it); its output is kept to about
    ``output_limit`` characters, head and tail."""
    _check_program(command[0], cwd)
    found = isolation()
    with _process_group_limit(found.pids_cgroup) as cgroup, _stash(uid) as stash:
        wrapped = _wrapped(command, found, uid, stash, surroundings)
        limits = _limits(int(timeout_s) + 5, cgroup is not None, uid)
        process = subprocess.Popen(
            wrapped,
            cwd=cwd,
            env=scrubbed_environment(cwd, surroundings),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills the tests' children too
            preexec_fn=functools.partial(_enter_limits, cgroup, limits),
        )
        output = BoundedOutput(output_limit)
        reader = threading.Thread(target=output.drain, args=(process.stdout,), daemon=True)
        reader.start()
        if stdin is not None and process.stdin:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write(stdin.encode())
            process.stdin.close()
        timed_out = not exited_within(process, timeout_s)
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if cgroup:
            _kill_cgroup(cgroup)  # whatever escaped the process group (setsid, double fork)
        reader.join(timeout=10)
    return Finished(process.returncode, output.text(), timed_out=timed_out)


def _stash(uid: int | None) -> contextlib.AbstractContextManager[str]:
    """Where ENTER_SANDBOX sets kept directories aside: only a sandbox that changes user needs it."""
    if uid is None:
        return contextlib.nullcontext("")
    return tempfile.TemporaryDirectory(prefix="prbench-keep-")


def _wrapped(
    command: list[str], found: Isolation, uid: int | None, stash: str, surroundings: Surroundings = NOTHING_MORE
) -> list[str]:
    if not found.namespaces:
        return command
    namespaces = [flag for flag in NAMESPACES if flag != "--net"] if surroundings.network else NAMESPACES
    unshare = [shutil.which("unshare") or "unshare", *namespaces, "--"]
    if uid is None:
        return [*unshare, *command]
    hidden = _hidden_directories()
    wanted = (sys.base_prefix, sys.prefix, *surroundings.keep)
    kept = [path for path in wanted if any(_within(path, h) for h in hidden)]
    writable = [path for path in surroundings.writable if any(_within(path, h) for h in hidden)]
    args = [str(uid), stash, ":".join(dict.fromkeys(kept)), ":".join(hidden), ":".join(writable)]
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


def _limits(cpu_seconds: int | None, has_cgroup: bool, uid: int | None) -> dict[str, int]:
    """The rlimits of a sandboxed command (by resource name): no CPU limit for a session's
    server, which gives each of its commands one."""
    limits = {"RLIMIT_FSIZE": FILE_SIZE_LIMIT, "RLIMIT_AS": settings.PRBENCH_SANDBOX_MEMORY_BYTES}
    if cpu_seconds is not None:
        limits["RLIMIT_CPU"] = cpu_seconds
    if uid is not None or not has_cgroup:
        # Counted per user, so only for the sandbox's own uid (a worker's user may run
        # more than this elsewhere), or where nothing else limits processes.
        limits["RLIMIT_NPROC"] = settings.PRBENCH_SANDBOX_MAX_PROCESSES
    return limits


def _enter_limits(cgroup: Path | None, limits: dict[str, int]) -> None:
    """In the child, before exec: the limits every process it starts inherits."""
    if cgroup:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


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
