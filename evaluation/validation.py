"""Apply a patch to a fresh copy of a task's files and run its tests in the sandbox.

A self-contained task's files are written to a temporary directory; a task on a real
repository gets a fresh checkout of its base commit (evaluation/repositories.py). Then:
the model's patch (vetted first), its changes to the task's tests undone (an imported task's,
as SWE-bench's harness checks the test files out again; evaluation/patches.py), the task's
test patch, build, lint, and the tests, every command in the validation's one sandbox
(evaluation/sandbox.py). A sandbox that fails itself raises SandboxFailed: the harness's
failure, not the patch's.

In an environment with a checkout build (a project compiling extensions in place), the
checkout starts with what that build made at the base commit, and the build runs again once
the patches are in, before anything else: a patch whose tree does not build fails as the
dataset's build command failing does (``build`` failed), and its tests do not run, since
they would import the extensions of the base commit.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from django.db import models

from evaluation.environments import Runtime, in_environment, warm_start
from evaluation.log_parsers import parse_log
from evaluation.patches import (
    HarnessRule,
    PatchRejected,
    check_leaves_tests_alone,
    check_patch,
    check_relative_path,
    patch_paths,
    paths_to_reset,
)
from evaluation.repositories import checkout
from evaluation.sandbox import (
    CHECKOUT_MARK,
    LOG_LIMIT,
    NOTHING_MORE,
    Box,
    Finished,
    Surroundings,
    hand_over,
    sandbox_session,
    truncate,
)
from evaluation.test_results import TestOutcome, maintained_ids, parse_junit, parse_test_log, passing_ids

__all__ = ["LOG_LIMIT", "truncate"]  # re-exported: callers read logs through this module

APPLY_COMMAND = ["git", "apply", "--whitespace=nowarn", "-"]
# SWE-bench's harness tries, in turn, `git apply`, `git apply --3way`, `git apply --reject` and
# `patch --batch --forward --fuzz=5 -p1`, from a pristine tree each time
# (run_evaluation.GIT_APPLY_CMDS). Here a checkout is a `git archive` with no repository, so
# --3way has no blobs to merge with; --reject exits non-zero whenever a hunk is left out, so
# it succeeds only where plain `git apply` already did. That leaves patch with fuzz: tried
# with --dry-run first, so a patch it cannot take whole leaves the tree as it was, and with
# no backup files (GNU patch writes .orig files for fuzzed hunks by default).
FUZZ_COMMAND = ["patch", "--batch", "--forward", "--fuzz=5", "-p1", "--no-backup-if-mismatch"]


class ApplyMethod(models.TextChoices):
    GIT_APPLY = "git_apply", "git apply"
    PATCH_FUZZ = "patch_fuzz", "patch --fuzz=5"


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
# The test log is where per-test results come from when a task's ids follow its runner's log
# (evaluation/log_parsers.py): a suite of a few thousand tests writes a few hundred kB, far
# more than the LOG_LIMIT kept for display, so the parsers read up to this much (head and tail).
TEST_OUTPUT_LIMIT = 4 * 1024**2
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
    tally: TestTally | None = None  # FAIL_TO_PASS / PASS_TO_PASS, for tasks that name them
    apply_method: str = ""  # an ApplyMethod when the patch applied
    # A module the repository's tests import that no environment provides (environment_missing):
    # the platform's failure, never the patch's.
    environment_missing: str = ""
    # The environment's checkout build failed on the patched tree (``build`` says how): the
    # patch's failure, unless the unpatched tree fails too (``unpatched_build_failure``).
    checkout_build_failed: bool = False

    @property
    def applied(self) -> bool:
        return self.status in (ValidationStatus.PASSED, ValidationStatus.FAILED, ValidationStatus.TIMED_OUT)

    @property
    def passed(self) -> bool:
        return self.status == ValidationStatus.PASSED

    @property
    def timed_out(self) -> bool:
        """The tests ran out of time. Whose failure that is depends on the task's gold patch
        (``Context.gold_times_out``): SWE-bench's harness counts a patch whose tests hang
        against it, in the denominator; only a limit the gold patch hits too is the harness's."""
        return self.status == ValidationStatus.TIMED_OUT


@dataclass(frozen=True)
class TestPlan:
    """How a task judges a patch. With FAIL_TO_PASS / PASS_TO_PASS ids, resolved means every
    one of those passes (other tests may fail, as at the base commit); without them, the
    test command must succeed."""

    __test__ = False  # not a pytest test class, whatever its name

    command: list[str]
    test_patch: str = ""  # the task's own tests, applied after the model's patch
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    build_command: tuple[str, ...] = ()  # empty: byte-compile the changed Python files
    harness_rule: str = HarnessRule.STRICT  # what counts as changing the tests (evaluation/patches.py)
    # How to read per-test results from the log (evaluation/log_parsers.py), for tasks whose
    # ids follow a runner's log (SWE-bench's); empty: the JUnit report, else whatever the log holds.
    log_parser: str = ""
    # The task's environment (evaluation/environments.py); None: the worker's own Python.
    environment: Runtime | None = None

    @property
    def python(self) -> str:
        return self.environment.python if self.environment else sys.executable

    def surroundings(self, checkout: Path) -> Surroundings:
        return self.environment.surroundings(str(checkout)) if self.environment else NOTHING_MORE

    def warm_start(self, checkout: Path) -> None:
        """What the environment's build made in its checkout, put into ``checkout``: the checkout
        build's products, or the Python files an install generates (a ``_version.py``)."""
        if self.environment:
            warm_start(self.environment, checkout)

    def build_checkout(self, box: Box, timeout_s: float) -> CheckResult:
        """The checkout build, run again after the patch (NOT_CHECKED without one)."""
        if not (self.environment and self.environment.checkout_build):
            return NOT_CHECKED
        build = self.environment.checkout_build
        finished = box.run(in_environment(self.environment.root / "venv", build), timeout_s)
        if finished.returncode == 0 and not finished.timed_out:
            return CheckResult(CheckStatus.PASSED, truncate(finished.output))
        why = f"timed out after {timeout_s:g}s" if finished.timed_out else f"exited with {finished.returncode}"
        return CheckResult(CheckStatus.FAILED, truncate(f"`{build}` {why}\n{finished.output}"))

    @property
    def judged_by_test_ids(self) -> bool:
        return bool(self.fail_to_pass or self.pass_to_pass)


def validate_patch(files: dict[str, str], patch: str, test_command: list[str], timeout_s: float) -> ValidationResult:
    """Validate against a self-contained task: its files are written to a fresh directory."""
    return validate_in(written_files(files), patch, TestPlan(test_command), timeout_s)


def validate_in_repository(clone: Path, commit: str, patch: str, plan: TestPlan, timeout_s: float) -> ValidationResult:
    """Validate against a fresh checkout of ``commit`` from a cached clone."""
    return validate_in(checkout(clone, commit), patch, plan, timeout_s)


def validate_in(
    workspace: AbstractContextManager[Path], patch: str, plan: TestPlan, timeout_s: float
) -> ValidationResult:
    started = time.monotonic()
    protected = patch_paths(plan.test_patch)
    try:
        check_patch(patch, binary=True)
        check_leaves_tests_alone(patch, protected=protected, rule=plan.harness_rule)
    except PatchRejected as exc:
        return _nothing_ran(plan, ValidationStatus.REJECTED, str(exc), started)
    reset = paths_to_reset(patch, protected, plan.harness_rule)
    with workspace as root:
        pristine = {path: _pristine(root, path) for path in reset}  # before the sandbox owns the tree
        plan.warm_start(root)
        with sandbox_session(root, plan.surroundings(root)) as box:
            findings_before = _lint_findings(changed_python_files(patch, root, reset), box)
            method, refusal = apply_like_the_harness(box, patch)
            if not method:
                return _nothing_ran(plan, ValidationStatus.NOT_APPLIED, refusal, started)
            if links := _symbolic_links(root, check_patch(patch, binary=True).paths):
                links_made = f"the patch made a symbolic link: {', '.join(links)}"
                return _nothing_ran(plan, ValidationStatus.REJECTED, links_made, started)
            # As the harness checks the test files out at the base commit after the model's
            # patch. Nothing the patch brought has run yet: only git apply or patch wrote the tree.
            try:
                for path in sorted(pristine, key=lambda path: (path.count("/"), path)):  # parents first
                    _put_back(root, path, pristine[path], box.uid)
            except OSError as exc:
                return _nothing_ran(
                    plan,
                    ValidationStatus.NOT_APPLIED,
                    f"the task's tests could not be put back: {str(exc).replace(str(root), CHECKOUT_MARK)}",
                    started,
                )
            if plan.test_patch:
                tests_applied = box.run(APPLY_COMMAND, 30, stdin=plan.test_patch)
                if tests_applied.returncode != 0:
                    return _nothing_ran(
                        plan,
                        ValidationStatus.NOT_APPLIED,
                        "the patch applied, but the task's test patch no longer applies on top of it:\n"
                        + tests_applied.output,
                        started,
                    )
            checkout_built = plan.build_checkout(box, timeout_s)
            if checkout_built.ok is False:
                does_not_build = f"the patched tree does not build: {checkout_built.log}"
                failed = _nothing_ran(plan, ValidationStatus.FAILED, does_not_build, started)
                return replace(failed, build=checkout_built, apply_method=method, checkout_build_failed=True)
            python_files = changed_python_files(patch, root, reset)
            build = _both(checkout_built, _build(plan, python_files, box))
            lint = _lint(python_files, box, findings_before)
            tests, outcomes = run_tests(plan.command, box, timeout_s, plan.log_parser, plan.python)
            missing = environment_missing(tests.output, patch, root) if not tests.timed_out else ""
    if missing:
        log = (
            f"the tests could not import {missing!r}, which the repository needs and this patch does not add: "
            f"the task's environment is missing or incomplete (the platform's failure, not the patch's)\n"
            f"{tests.output}"
        )
        return replace(_nothing_ran(plan, ValidationStatus.FAILED, log, started), environment_missing=missing)
    if tests.timed_out:
        status, log = ValidationStatus.TIMED_OUT, f"tests exceeded {timeout_s:g}s\n{tests.output}"
    else:
        status, log = _judge(plan, tests, outcomes), tests.output
    duration_ms = round((time.monotonic() - started) * 1000)
    return ValidationResult(
        status, truncate(log), duration_ms, lint, build, tuple(outcomes), _tally(plan, outcomes), method
    )


def _nothing_ran(plan: TestPlan, status: ValidationStatus, log: str, started: float) -> ValidationResult:
    """No test ran: none of the task's FAIL_TO_PASS tests is fixed, none of the others broken."""
    tally = TestTally(0, len(plan.fail_to_pass), 0) if plan.judged_by_test_ids else None
    return ValidationResult(status, truncate(log), round((time.monotonic() - started) * 1000), tally=tally)


@dataclass(frozen=True)
class Pristine:
    """A file as the checkout had it: its bytes and mode, or, for a link, where it points."""

    content: bytes = b""
    mode: int = 0o644
    link: str = ""


def _pristine(root: Path, path: str) -> Pristine | None:
    """``path`` as the base commit has it, None where it has no file there."""
    target = root / path
    if target.is_symlink():
        return Pristine(link=os.readlink(target))
    if not target.is_file() or not _inside(root, target.parent):
        return None
    return Pristine(target.read_bytes(), stat.S_IMODE(target.stat().st_mode))


def _put_back(root: Path, path: str, pristine: Pristine | None, uid: int | None) -> None:
    """Undo the patch's change to ``path``: what was there goes back, what was not goes away.
    Never through a link: a directory on the way must lie inside the checkout."""
    target = root / path
    if not _inside(root, target.parent):
        raise OSError(f"{path}'s directory leads outside the checkout")
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if pristine is None:
        return
    created = [parent for parent in reversed(target.parents) if not parent.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    if pristine.link:
        target.symlink_to(pristine.link)
    else:
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, pristine.mode)
        os.fchmod(descriptor, pristine.mode)  # not left to the umask
        with os.fdopen(descriptor, "wb") as written:
            written.write(pristine.content)
    for made in [*created, target]:
        if uid is not None:
            os.lchown(made, uid, uid)


def _inside(root: Path, directory: Path) -> bool:
    return directory.resolve().is_relative_to(root.resolve())


def apply_like_the_harness(box: Box, patch: str) -> tuple[str, str]:
    """Apply the patch as SWE-bench's harness would (see FUZZ_COMMAND): the ApplyMethod that
    took it, or "" and what each method said."""
    applied = box.run(APPLY_COMMAND, 30, stdin=patch)
    if applied.returncode == 0:
        return ApplyMethod.GIT_APPLY, ""
    refusal = "git apply refused the patch:\n" + applied.output
    trial = box.run([*FUZZ_COMMAND, "--dry-run"], 30, stdin=patch)
    if trial.returncode != 0:
        return "", refusal + "\npatch --fuzz=5 could not apply it either:\n" + trial.output
    fuzzed = box.run(FUZZ_COMMAND, 30, stdin=patch)
    if fuzzed.returncode != 0:
        return "", refusal + "\npatch --fuzz=5 failed after its dry run succeeded:\n" + fuzzed.output
    return ApplyMethod.PATCH_FUZZ, ""


def run_tests(
    command: list[str], box: Box, timeout_s: float, log_parser: str = "", python: str = sys.executable
) -> tuple[Finished, list[TestOutcome]]:
    """Run the test command in the box (``{python}`` is ``python``); its outcome and the per-test results."""
    with tempfile.TemporaryDirectory(prefix="prbench-report-") as report_dir:
        # Outside the work directory: the patch cannot plant a report there in advance.
        hand_over(Path(report_dir), box.uid)
        report = Path(report_dir) / "junit.xml"
        finished = box.run(_test_command(command, report, python), timeout_s, output_limit=TEST_OUTPUT_LIMIT)
        return finished, _outcomes(report, finished, log_parser)


@dataclass(frozen=True)
class TestRun:
    """The tests of one checkout after some trusted patches (ingestion's gold runs)."""

    __test__ = False

    apply_error: str  # empty when every patch applied
    timed_out: bool
    outcomes: tuple[TestOutcome, ...]
    log: str
    environment_missing: str = ""  # a module the tests needed and could not import
    build_error: str = ""  # the checkout build failed after the patches (the tests did not run)

    @property
    def passed(self) -> frozenset[str]:
        return frozenset(outcome.id for outcome in self.outcomes if outcome.outcome == "passed")


def run_tests_with(
    clone: Path, commit: str, patches: list[str], command: list[str], timeout_s: float, plan: TestPlan | None = None
) -> TestRun:
    """Check out ``commit``, apply ``patches`` in order, run the tests (in ``plan``'s
    environment, read with its log parser, when given)."""
    plan = plan or TestPlan(command)
    with checkout(clone, commit) as root:
        plan.warm_start(root)
        with sandbox_session(root, plan.surroundings(root)) as box:
            return _patched_test_run(root, box, patches, command, timeout_s, plan)


def unpatched_build_failure(clone: Path, commit: str, plan: TestPlan, timeout_s: float) -> str:
    """What the checkout build says of ``commit`` with no patch, in a sandbox as a validation's
    ("" when it builds): asked only when a patched tree failed to build, to tell the patch's
    failure from the environment's (the sandbox lacking what the build had, say)."""
    with checkout(clone, commit) as root:
        plan.warm_start(root)
        with sandbox_session(root, plan.surroundings(root)) as box:
            built = plan.build_checkout(box, timeout_s)
    return built.log if built.ok is False else ""


def _patched_test_run(
    root: Path, box: Box, patches: list[str], command: list[str], timeout_s: float, plan: TestPlan
) -> TestRun:
    for patch in filter(str.strip, patches):
        applied = box.run(APPLY_COMMAND, 30, stdin=patch)
        if applied.returncode != 0:
            return TestRun(truncate(applied.output) or "git apply failed", False, (), "")
    if (built := plan.build_checkout(box, timeout_s)).ok is False:
        return TestRun("", False, (), built.log, build_error=built.log or "the checkout build failed")
    finished, outcomes = run_tests(command, box, timeout_s, plan.log_parser, plan.python)
    missing = environment_missing(finished.output, "", root) if not finished.timed_out else ""
    return TestRun("", finished.timed_out, tuple(outcomes), truncate(finished.output), missing)


def _judge(plan: TestPlan, tests: Finished, outcomes: list[TestOutcome]) -> ValidationStatus:
    tally = _tally(plan, outcomes)
    if tally is None:
        return ValidationStatus.PASSED if tests.returncode == 0 else ValidationStatus.FAILED
    resolved = tally.fail_to_pass_passed == len(plan.fail_to_pass) and tally.pass_to_pass_failed == 0
    return ValidationStatus.PASSED if resolved else ValidationStatus.FAILED


@dataclass(frozen=True)
class TestTally:
    """How the task's named tests fared, graded as SWE-bench grades them (evaluation/test_results.py):
    a named test that did not run counts as failed."""

    __test__ = False

    fail_to_pass_passed: int = 0
    fail_to_pass_total: int = 0
    pass_to_pass_failed: int = 0

    @property
    def fail_to_pass_fraction(self) -> float | None:
        return self.fail_to_pass_passed / self.fail_to_pass_total if self.fail_to_pass_total else None


def _tally(plan: TestPlan, outcomes: list[TestOutcome]) -> TestTally | None:
    if not plan.judged_by_test_ids:
        return None
    fixed, kept = passing_ids(plan.fail_to_pass, outcomes), maintained_ids(plan.pass_to_pass, outcomes)
    return TestTally(
        fail_to_pass_passed=sum(test in fixed for test in plan.fail_to_pass),
        fail_to_pass_total=len(plan.fail_to_pass),
        pass_to_pass_failed=sum(test not in kept for test in plan.pass_to_pass),
    )


@contextlib.contextmanager
def written_files(files: dict[str, str]) -> Iterator[Path]:
    """A fresh directory holding a self-contained task's files, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="prbench-validate-") as workdir:
        write_files(Path(workdir), files)
        yield Path(workdir)


def _build(plan: TestPlan, python_files: list[str], box: Box) -> CheckResult:
    if plan.build_command:
        command = [plan.python if part == "{python}" else part for part in plan.build_command]
        return _status_of(box.run(command, CHECK_TIMEOUT_S))
    return _check([plan.python, "-m", "py_compile", *python_files], python_files, box)


def _both(first: CheckResult, second: CheckResult) -> CheckResult:
    """Two builds as one check: the checkout build and the dataset's (or the byte-compile)."""
    if first.status == CheckStatus.SKIPPED or second.status == CheckStatus.SKIPPED:
        return second if first.status == CheckStatus.SKIPPED else first
    passed = first.ok and second.ok
    return CheckResult(CheckStatus.PASSED if passed else CheckStatus.FAILED, truncate(f"{first.log}\n{second.log}"))


def _symbolic_links(root: Path, paths: tuple[str, ...]) -> list[str]:
    """A second line of defence behind check_patch's mode check: whatever spelling of a
    link mode got through, the patched files must not be links."""
    return [path for path in paths if (root / path).is_symlink()]


def _test_command(test_command: list[str], report: Path, python: str = sys.executable) -> list[str]:
    """``{python}`` is the task's interpreter, ``{junit}`` where the runner writes its JUnit XML."""
    return [python if part == "{python}" else part.replace("{junit}", str(report)) for part in test_command]


def _outcomes(report: Path, finished: Finished, log_parser: str = "") -> list[TestOutcome]:
    """The task's log parser when it names one and it finds tests (the harness reads only
    the log); else the JUnit report, when believable; else whichever runner's lines the log holds."""
    if log_parser and (from_log := parse_log(log_parser, finished.output)):
        return from_log
    try:
        xml = report.read_bytes()[:REPORT_LIMIT].decode(errors="replace") if report.is_file() else ""
    except OSError:
        xml = ""
    parsed = parse_junit(xml) if xml else None
    if parsed is None or not _agrees(parsed, finished):
        return parse_test_log(finished.output)
    return parsed


def _agrees(outcomes: list[TestOutcome], finished: Finished) -> bool:
    """The report is written from inside the process under test, so code under test can
    rewrite it (an atexit hook, say). A report that contradicts the runner's exit status
    is not believed: 0 means nothing failed, 1 (pytest, unittest) means something did."""
    failed = any(outcome.outcome in ("failed", "error") for outcome in outcomes)
    return not ((finished.returncode == 0 and failed) or (finished.returncode == 1 and not failed))


def changed_python_files(patch: str, root: Path, undone: frozenset[str] = frozenset()) -> list[str]:
    """The Python files the patch leaves in place (added or modified, not deleted, nor its
    changes to the task's tests, which were ``undone``)."""
    files = check_patch(patch, binary=True).paths
    return sorted(path for path in files if path.endswith(".py") and path not in undone and (root / path).is_file())


def _lint_findings(python_files: list[str], box: Box) -> tuple[Counter, str]:
    """ruff's findings per (file, rule), and its report."""
    if not python_files:
        return Counter(), ""
    finished = box.run([*LINT_COMMAND, *python_files], CHECK_TIMEOUT_S)
    found = Counter((match["path"], match["rule"]) for match in LINT_FINDING.finditer(finished.output))
    if finished.returncode not in (0, 1) or finished.timed_out:  # ruff itself failed: not a finding
        found[("", "ruff-error")] += 1
    return found, finished.output


def _lint(python_files: list[str], box: Box, before: tuple[Counter, str]) -> CheckResult:
    """Clean when the patch adds no finding: the files' old findings are not the model's."""
    if not python_files:
        return NOT_CHECKED
    after, report = _lint_findings(python_files, box)
    new = after - before[0]
    if not new:
        return CheckResult(CheckStatus.PASSED, truncate(report))
    added = ", ".join(f"{rule} in {path}" if path else rule for (path, rule) in sorted(new))
    return CheckResult(CheckStatus.FAILED, truncate(f"new findings: {added}\n{report}"))


def _check(command: list[str], python_files: list[str], box: Box) -> CheckResult:
    if not python_files:
        return NOT_CHECKED
    return _status_of(box.run(command, CHECK_TIMEOUT_S))


def _status_of(finished: Finished) -> CheckResult:
    passed = finished.returncode == 0 and not finished.timed_out
    return CheckResult(CheckStatus.PASSED if passed else CheckStatus.FAILED, truncate(finished.output))


def write_files(root: Path, files: dict[str, str]) -> None:
    for relative, content in files.items():
        check_relative_path(relative)
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


# "ModuleNotFoundError: No module named 'flask.json'" (Python 3), "ImportError: No module named flask" (2)
MISSING_MODULE = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '?(?P<module>[\w.]+)'?")


def environment_missing(log: str, patch: str, root: Path) -> str:
    """The module the tests failed to import because nothing installed it ("" when none):
    neither the repository's own (a file or package in the checkout, which a patch may break)
    nor one the patch itself brings in (a model that adds ``import numpy`` fails by its own
    answer). What is left is the task's environment: missing, or missing a dependency.
    So is an extension module of the repository's own whose source is there and was never
    compiled (an environment without a checkout build), unless the patch changed how the
    project is built."""
    added = "\n".join(line for line in patch.splitlines() if line.startswith("+"))
    paths = _paths_of(patch)
    touched = {part for path in paths for part in PurePosixPath(path).with_suffix("").parts}
    for found in MISSING_MODULE.finditer(log):
        top = found["module"].split(".")[0]
        if _unbuilt_extension(root, found["module"]) and not paths & BUILD_FILES:
            return found["module"]
        if _in_checkout(root, top) or top in touched or re.search(rf"\b{re.escape(top)}\b", added):
            continue  # the repository's own, or the patch's doing (it removed or imports it)
        return found["module"]
    return ""


# Compiled into an extension module of the same name (``_speedups.c`` -> ``_speedups.*.so``).
EXTENSION_SOURCES = (".c", ".cc", ".cpp", ".cxx", ".pyx")
BUILD_FILES = frozenset({"setup.py", "setup.cfg", "pyproject.toml"})


def _unbuilt_extension(root: Path, module: str) -> bool:
    """Whether ``module`` has an extension's source in the checkout (top two levels, as
    ``_in_checkout``) and neither a Python module nor a compiled one."""
    parts = module.split(".")
    for base in (root, *(path for path in root.iterdir() if path.is_dir())):
        directory, name = base.joinpath(*parts[:-1]), parts[-1]
        if not any((directory / f"{name}{suffix}").is_file() for suffix in EXTENSION_SOURCES):
            continue
        built = [*directory.glob(f"{name}.*.so"), *directory.glob(f"{name}.so"), *directory.glob(f"{name}.*.pyd")]
        return not built and not (directory / f"{name}.py").is_file() and not (directory / name).is_dir()
    return False


def _paths_of(patch: str) -> frozenset[str]:
    try:
        return patch_paths(patch)
    except Exception:  # a patch that never applied has no say here
        return frozenset()


def _in_checkout(root: Path, module: str) -> bool:
    """Whether ``module`` is the repository's own: a package or module anywhere in the
    checkout's top two levels (``src/`` layouts included)."""
    for base in (root, *(path for path in root.iterdir() if path.is_dir())):
        if (base / module).is_dir() or (base / f"{module}.py").is_file():
            return True
    return False
