"""Apply a patch to a clean copy of a task's files and run its tests, in isolation.

Each validation gets a fresh temporary directory, a minimal environment, a wall-clock
limit (the whole process group is killed on expiry) and CPU / memory rlimits.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import models

from evaluation.patches import PatchRejected, check_leaves_tests_alone, check_patch, check_relative_path

LOG_LIMIT = 20_000
MEMORY_LIMIT_BYTES = 2 * 1024**3


class ValidationStatus(models.TextChoices):
    PASSED = "passed"  # applied, tests passed
    FAILED = "failed"  # applied, tests failed
    TIMED_OUT = "timed_out"  # applied, tests exceeded the time limit
    NOT_APPLIED = "not_applied"  # git apply refused it
    REJECTED = "rejected"  # malformed, binary or escaping: never touched a disk
    SKIPPED = "skipped"  # inference-only run


@dataclass(frozen=True)
class ValidationResult:
    status: ValidationStatus
    log: str
    duration_ms: int

    @property
    def applied(self) -> bool:
        return self.status in (ValidationStatus.PASSED, ValidationStatus.FAILED, ValidationStatus.TIMED_OUT)

    @property
    def passed(self) -> bool:
        return self.status == ValidationStatus.PASSED


def validate_patch(files: dict[str, str], patch: str, test_command: list[str], timeout_s: float) -> ValidationResult:
    started = time.monotonic()

    def result(status: ValidationStatus, log: str) -> ValidationResult:
        return ValidationResult(status, truncate(log), round((time.monotonic() - started) * 1000))

    try:
        check_patch(patch)
        check_leaves_tests_alone(patch)
    except PatchRejected as exc:
        return result(ValidationStatus.REJECTED, str(exc))
    with tempfile.TemporaryDirectory(prefix="prbench-validate-") as workdir:
        write_files(Path(workdir), files)
        applied = _run(["git", "apply", "--whitespace=nowarn", "-"], workdir, 30, stdin=patch)
        if applied.returncode != 0:
            return result(ValidationStatus.NOT_APPLIED, "git apply refused the patch:\n" + applied.output)
        command = [sys.executable if part == "{python}" else part for part in test_command]
        tests = _run(command, workdir, timeout_s)
    if tests.timed_out:
        return result(ValidationStatus.TIMED_OUT, f"tests exceeded {timeout_s:g}s\n{tests.output}")
    status = ValidationStatus.PASSED if tests.returncode == 0 else ValidationStatus.FAILED
    return result(status, tests.output)


def write_files(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        check_relative_path(relative)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def truncate(log: str) -> str:
    if len(log) <= LOG_LIMIT:
        return log
    half = LOG_LIMIT // 2
    return f"{log[:half]}\n… [{len(log) - LOG_LIMIT} characters truncated] …\n{log[-half:]}"


@dataclass(frozen=True)
class _Finished:
    returncode: int
    output: str
    timed_out: bool


def _limit_resources(cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _run(command: list[str], cwd: str, timeout_s: float, stdin: str | None = None) -> _Finished:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": cwd,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    cpu = int(timeout_s) + 5
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # so a timeout kills the tests' children too
        preexec_fn=lambda: _limit_resources(cpu),
    )
    output = _BoundedOutput()
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
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join(timeout=10)
    return _Finished(process.returncode, output.text(), timed_out=timed_out)


class _BoundedOutput:
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
