"""Apply a patch to a clean copy of a task's files and run its tests, in isolation.

Each validation gets a fresh temporary directory, a minimal environment, a wall-clock
limit (the whole process group is killed on expiry) and CPU / memory rlimits.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import models

from evaluation.patches import PatchRejected, check_leaves_tests_alone, check_patch, check_relative_path
from evaluation.test_results import TestOutcome, parse_junit, parse_pytest_log

LOG_LIMIT = 20_000
MEMORY_LIMIT_BYTES = 2 * 1024**3


class ValidationStatus(models.TextChoices):
    PASSED = "passed"  # applied, tests passed
    FAILED = "failed"  # applied, tests failed
    TIMED_OUT = "timed_out"  # applied, tests exceeded the time limit
    NOT_APPLIED = "not_applied"  # git apply refused it
    REJECTED = "rejected"  # malformed, binary or escaping: never touched a disk
    SKIPPED = "skipped"  # inference-only run


class CheckStatus(models.TextChoices):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # no Python file changed, or the patch never applied


@dataclass(frozen=True)
class CheckResult:
    """Lint or build of the Python files a patch changed."""

    status: CheckStatus
    log: str = ""

    @property
    def ok(self) -> bool | None:
        return None if self.status == CheckStatus.SKIPPED else self.status == CheckStatus.PASSED


NOT_CHECKED = CheckResult(CheckStatus.SKIPPED)
# ruff's default rules (syntax errors, undefined names, unused imports...), ignoring any
# configuration file, so a patch cannot switch the rules off for itself.
LINT_COMMAND = [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--quiet", "--output-format=concise"]
CHECK_TIMEOUT_S = 60
REPORT_LIMIT = 10 * 1024**2
# "calc.py:2:15: F401 ..." or, for a syntax error, "calc.py:2:15: invalid-syntax: ..."
LINT_FINDING = re.compile(r"^(?P<path>[^:\n]+):\d+:\d+: (?P<rule>[A-Za-z][A-Za-z0-9-]*)", re.MULTILINE)


@dataclass(frozen=True)
class ValidationResult:
    status: ValidationStatus
    log: str
    duration_ms: int
    lint: CheckResult = NOT_CHECKED
    build: CheckResult = NOT_CHECKED
    tests: tuple[TestOutcome, ...] = ()  # per test, when the runner reported them

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
        findings_before = _lint_findings(changed_python_files(patch, Path(workdir)), workdir)
        applied = _run(["git", "apply", "--whitespace=nowarn", "-"], workdir, 30, stdin=patch)
        if applied.returncode != 0:
            return result(ValidationStatus.NOT_APPLIED, "git apply refused the patch:\n" + applied.output)
        python_files = changed_python_files(patch, Path(workdir))
        build = _check([sys.executable, "-m", "py_compile", *python_files], python_files, workdir)
        lint = _lint(python_files, workdir, findings_before)
        with tempfile.TemporaryDirectory(prefix="prbench-report-") as report_dir:
            # Outside the work directory: the patch cannot plant a report there in advance.
            report = Path(report_dir) / "junit.xml"
            tests = _run(_test_command(test_command, report), workdir, timeout_s)
            outcomes = _outcomes(report, tests.output)
    if tests.timed_out:
        status, log = ValidationStatus.TIMED_OUT, f"tests exceeded {timeout_s:g}s\n{tests.output}"
    else:
        status = ValidationStatus.PASSED if tests.returncode == 0 else ValidationStatus.FAILED
        log = tests.output
    duration_ms = round((time.monotonic() - started) * 1000)
    return ValidationResult(status, truncate(log), duration_ms, lint, build, tuple(outcomes))


def _test_command(test_command: list[str], report: Path) -> list[str]:
    """``{python}`` is this interpreter, ``{junit}`` where the runner writes its JUnit XML."""
    return [sys.executable if part == "{python}" else part.replace("{junit}", str(report)) for part in test_command]


def _outcomes(report: Path, log: str) -> list[TestOutcome]:
    try:
        xml = report.read_bytes()[:REPORT_LIMIT].decode(errors="replace") if report.is_file() else ""
    except OSError:
        xml = ""
    parsed = parse_junit(xml) if xml else None
    return parsed if parsed is not None else parse_pytest_log(log)


def changed_python_files(patch: str, root: Path) -> list[str]:
    """The Python files the patch leaves in place (added or modified, not deleted)."""
    files = check_patch(patch).paths
    return sorted(path for path in files if path.endswith(".py") and (root / path).is_file())


def _lint_findings(python_files: list[str], workdir: str) -> tuple[Counter, str]:
    """ruff's findings per (file, rule), and its report."""
    if not python_files:
        return Counter(), ""
    finished = _run([*LINT_COMMAND, *python_files], workdir, CHECK_TIMEOUT_S)
    found = Counter((match["path"], match["rule"]) for match in LINT_FINDING.finditer(finished.output))
    if finished.returncode not in (0, 1) or finished.timed_out:  # ruff itself failed: not a finding
        found[("", "ruff-error")] += 1
    return found, finished.output


def _lint(python_files: list[str], workdir: str, before: tuple[Counter, str]) -> CheckResult:
    """Clean when the patch adds no finding: the files' old findings are not the model's."""
    if not python_files:
        return NOT_CHECKED
    after, report = _lint_findings(python_files, workdir)
    new = after - before[0]
    if not new:
        return CheckResult(CheckStatus.PASSED, truncate(report))
    added = ", ".join(f"{rule} in {path}" if path else rule for (path, rule) in sorted(new))
    return CheckResult(CheckStatus.FAILED, truncate(f"new findings: {added}\n{report}"))


def _check(command: list[str], python_files: list[str], workdir: str) -> CheckResult:
    if not python_files:
        return NOT_CHECKED
    finished = _run(command, workdir, CHECK_TIMEOUT_S)
    passed = finished.returncode == 0 and not finished.timed_out
    return CheckResult(CheckStatus.PASSED if passed else CheckStatus.FAILED, truncate(finished.output))


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
