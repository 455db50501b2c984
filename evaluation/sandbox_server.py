"""The command server of a sandbox session (evaluation/sandbox.py starts one per validation).

The sandbox (namespaces, mounts, cgroup, user) is set up once; this server runs inside it
and starts each of the validation's commands, with the command's own rlimits, scrubbed
environment, wall-clock limit and output limit. It is started as ``python -I -S -c <this
file's text>``, so it uses the standard library alone: the project may lie in a directory
the sandbox hides. One JSON request a line on stdin, one JSON answer a line on stdout; its
first line says it is ready.

It is the first process of its PID namespace (PID 1 there), and relies on it:

- ``kill(-1)`` reaches every other process of the namespace and nothing outside it, so
  after each command nothing the command started survives (a daemon, a ``setsid`` double
  fork, a fork bomb), as when each command had a namespace of its own that died with it;
- the kernel drops every signal sent to it from inside the namespace that it does not
  handle, SIGKILL included: a test that kills its parent, or kills everything, leaves it
  standing;
- orphans are reparented to it, and it reaps them.

It also makes itself non-dumpable, so a command running as the same user can neither
trace it nor open its pipes through ``/proc/1/fd`` to read requests or forge answers.

``BoundedOutput`` lives here so that the server and the per-command path keep output the
same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

CHUNK = 65536
PR_SET_DUMPABLE = 4  # from <linux/prctl.h>


class BoundedOutput:
    """Keeps the head and the tail of a process's output in bounded memory: a test that
    floods stdout must not take the worker (or the server) down with it."""

    def __init__(self, limit: int) -> None:
        self.buffer = bytearray()
        self.dropped = 0
        self.limit = limit

    def drain(self, pipe: Any) -> None:
        while chunk := pipe.read1(CHUNK):
            self.add(chunk)
        pipe.close()

    def add(self, chunk: bytes) -> None:
        self.buffer += chunk
        if len(self.buffer) > 4 * self.limit:
            self._trim()

    def _trim(self) -> None:
        half = self.limit // 2 - 200  # room for the marker, so truncate() leaves it alone
        self.dropped += len(self.buffer) - 2 * half
        self.buffer = self.buffer[:half] + self.buffer[-half:]

    def text(self) -> str:
        if self.dropped:
            self._trim()  # what came after the last trim
        text = self.buffer.decode(errors="replace")
        if not self.dropped:
            return text
        half = len(text) // 2
        return f"{text[:half]}\n… [{self.dropped} bytes of output dropped] …\n{text[half:]}"


def exited_within(process: subprocess.Popen, timeout_s: float) -> bool:
    """Wait for ``process`` to exit, woken by the kernel (a pidfd) rather than by
    Popen.wait's polling, which sleeps up to 50 ms past the exit."""
    with _exit_notice(process) as notice:
        if notice is not None and process.poll() is None:
            selector = selectors.DefaultSelector()
            selector.register(notice, selectors.EVENT_READ)
            selector.select(max(timeout_s, 0))
            selector.close()
    try:
        process.wait(timeout=0 if notice is not None else timeout_s)
    except subprocess.TimeoutExpired:
        return False
    return True


@contextlib.contextmanager
def _exit_notice(process: subprocess.Popen) -> Iterator[int | None]:
    """A pidfd of ``process`` (readable once it exits), or None where the kernel has none."""
    try:
        notice = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        yield None
        return
    try:
        yield notice
    finally:
        os.close(notice)


def main() -> int:
    if os.getpid() != 1:
        # kill(-1) outside a PID namespace of its own would reach every process of its user.
        print("sandbox server: not the first process of a PID namespace of its own", file=sys.stderr)
        return 2
    _make_undumpable()
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    # The channel now lives on descriptors no command inherits (dup'd ones are not inheritable).
    nothing = os.open(os.devnull, os.O_RDWR)
    os.dup2(nothing, 0)
    os.dup2(nothing, 1)
    _answer(answers, {"ready": True, "uid": os.getuid()})
    for line in requests:
        request = json.loads(line)
        try:
            answer = run(request)
        except Exception as exc:  # the server's own failure: said, and the worker gives the session up
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        _answer(answers, {"id": request["id"], **answer})
    return 0


def _make_undumpable() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _answer(answers: Any, answer: dict[str, Any]) -> None:
    answers.write(json.dumps(answer, ensure_ascii=False).encode() + b"\n")
    answers.flush()


def run(request: dict[str, Any]) -> dict[str, Any]:
    """Run one command and, whatever it did, leave nothing of it behind."""
    command, stdin = request["command"], request["stdin"]
    try:
        process = subprocess.Popen(
            command,
            cwd=request["cwd"],
            env=request["env"],
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=lambda: _set_limits(request["limits"]),
        )
    except OSError as exc:
        # The log says why nothing ran, as setpriv's "failed to execute" did per command.
        failure = f"sandbox: failed to execute {command[0]}: {exc.strerror or exc}\n"
        return {"returncode": 127, "output": failure, "timed_out": False}
    output = BoundedOutput(request["output_limit"])
    in_time = _communicate(process, (stdin or "").encode(), output, time.monotonic() + request["timeout_s"])
    if not in_time:
        _kill_all()
    process.wait()  # its status, before _sweep reaps it along with the rest
    _sweep()
    assert process.stdout is not None
    _read_to_end(process.stdout.fileno(), output)  # every writer is gone now: no waiting on a daemon
    process.stdout.close()
    if process.stdin:  # still open when the command ended before taking all of its input
        process.stdin.close()
    return {"returncode": process.returncode, "output": output.text(), "timed_out": not in_time}


def _set_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))


def _communicate(process: subprocess.Popen, stdin: bytes, output: BoundedOutput, deadline: float) -> bool:
    """Feed the command its input and keep its output until it exits: False when the
    deadline comes first."""
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as selector, _exit_notice(process) as notice:
        if notice is not None:
            selector.register(notice, selectors.EVENT_READ)
        assert process.stdout is not None
        selector.register(process.stdout, selectors.EVENT_READ)
        if process.stdin and pending:
            os.set_blocking(process.stdin.fileno(), False)
            selector.register(process.stdin, selectors.EVENT_WRITE)
        elif process.stdin:
            process.stdin.close()
        while process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in selector.select(remaining if notice is not None else min(remaining, 0.01)):
                if key.fileobj is process.stdout:
                    if chunk := os.read(key.fd, CHUNK):
                        output.add(chunk)
                    else:
                        selector.unregister(key.fileobj)
                elif key.fileobj is process.stdin:
                    pending = _feed(key.fd, pending)
                    if not pending:
                        selector.unregister(key.fileobj)
                        process.stdin.close()
    return True


def _feed(fd: int, pending: memoryview) -> memoryview:
    try:
        written = os.write(fd, pending[:CHUNK])
    except BrokenPipeError:  # the command stopped reading: what it did not take is dropped
        return pending[:0]
    except BlockingIOError:
        return pending
    return pending[written:]


def _kill_all() -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)  # as PID 1 of its namespace: every process of it but this one


def _sweep() -> None:
    """Kill and reap every process left in the namespace. Killing again after each reaped
    one catches a process forked while the previous kill went round."""
    while True:
        _kill_all()
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _read_to_end(fd: int, output: BoundedOutput) -> None:
    os.set_blocking(fd, True)
    while chunk := os.read(fd, CHUNK):
        output.add(chunk)


if __name__ == "__main__":
    raise SystemExit(main())
