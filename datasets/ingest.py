"""Mining PR tasks from a git repository's history (``manage.py ingest_prs``).

A candidate is a commit (a merge commit is taken against its first parent) that changes
both source and test files. Its source part becomes the gold ``patch``, its test part the
``test_patch``, its message the problem statement. The tests then decide:

- at the parent with only the test patch ("before"), and
- at the parent with the gold patch and the test patch ("after"), ``gold_runs`` times.

FAIL_TO_PASS are the tests that do not pass before and pass in every after run;
PASS_TO_PASS those that pass in both. A candidate with no FAIL_TO_PASS is rejected with the
reason. A candidate whose after runs disagree is kept but quarantined (flaky).

Each decision is saved as it is made (``MinedCandidate``, and the task when kept), so a
killed run loses at most the candidate in progress and a re-run skips what is decided.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from datasets.environments import environment_at
from datasets.imports import locked_dataset, next_position, open_version
from datasets.models import Dataset, EnvironmentRecipe, MinedCandidate, TaskInstance
from evaluation.environments import EnvironmentUnavailable, Recipe, Runtime, in_use
from evaluation.patches import PatchRejected, check_patch, touches_test_harness
from evaluation.repositories import RepositoryUnavailable, ensure_commit, git
from evaluation.validation import TestPlan, TestRun, run_tests_with
from orgs.models import Organization

# --continue-on-collection-errors: before the fix, a new test module may not even import;
# without it pytest runs nothing at all and every old test would look like FAIL_TO_PASS.
DEFAULT_TEST_COMMAND = [
    "{python}",
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--continue-on-collection-errors",
    "--junitxml={junit}",
]
LISTED_TESTS = 10  # how many test ids a reason names before "and N more"
LOG_TAIL_LINES = 20  # how much of a test log a rejection shows and keeps
LOG_TAIL_CHARS = 4000  # ... and at most this many characters of it (one line can be huge)
# A program name that means "some Python": inside the sandbox it is not this interpreter.
BARE_PYTHON = re.compile(r"^(python[0-9.]*|pytest|py\.test)$")


@dataclass(frozen=True)
class Candidate:
    commit: str
    parent: str
    message: str
    patch: str
    test_patch: str
    merged: tuple[str, ...] = ()  # for a merge commit: the merged branch's commits, oldest first

    @property
    def subject(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else self.commit[:12]


@dataclass
class Verdict:
    candidate: Candidate
    rejected: str = ""  # why the candidate is not a task; empty when kept
    log_tail: str = ""  # the end of the test log that decided it
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    quarantine_reason: str = ""

    @property
    def kept(self) -> bool:
        return not self.rejected


@dataclass(frozen=True)
class Skipped:
    """A commit that was not judged, and why."""

    commit: str
    why: str


@dataclass(frozen=True)
class IngestOptions:
    repo_name: str  # owner/name the tasks point at
    source: str  # where the repository is cloned from
    branch: str = "HEAD"
    max_tasks: int | None = None  # stop after this many kept tasks
    test_command: list[str] = field(default_factory=lambda: list(DEFAULT_TEST_COMMAND))
    gold_runs: int = 2
    timeout_s: float = 120
    max_candidates: int | None = None  # stop after judging this many candidates, kept or not
    since: datetime | None = None  # only commits committed at or after this
    retry_rejected: bool = False  # judge again the candidates a previous run rejected
    # How to make the environment the tests run in (evaluation/environments.py); None: the
    # worker's own Python, for repositories whose tests need nothing installed.
    recipe: Recipe | None = None


class TestCommandDoesNotStart(Exception):
    """The test command gave no per-test result on its first run: every candidate would be
    rejected for it, so mining stops before it walks the whole history."""

    __test__ = False


def parse_since(value: str) -> datetime:
    """``--since``: an ISO date (or date and time), UTC unless it says otherwise."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"--since {value!r}: not an ISO date such as 2024-01-31") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def check_repository(path: str, branch: str) -> str:
    """The full id of ``branch`` in the repository at ``path``; a clear error otherwise."""
    if not Path(path).exists():
        raise ValidationError(f"--repo {path}: no such directory")
    found = git("rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}", cwd=Path(path))
    if found.returncode != 0:
        raise ValidationError(f"--repo {path}: not a git repository, or it has no branch or commit {branch!r}")
    return found.stdout.decode().strip()


def find_candidates(path: str, branch: str, since: datetime | None = None) -> Iterator[Candidate | Skipped]:
    """Each first-parent commit on ``branch`` (committed at or after ``since``), newest
    first: a Candidate, or Skipped for a commit that cannot be one."""
    listed = git("rev-list", "--first-parent", "--parents", "--timestamp", branch, cwd=Path(path))
    for line in listed.stdout.decode().splitlines():
        timestamp, commit, *parents = line.split()
        if not parents:
            continue  # the root commit has nothing to compare against
        # Filtered here rather than by git's --since, which stops at the first older commit
        # (a skewed clock would end the walk early) and reads a bare date at today's time.
        if since and datetime.fromtimestamp(int(timestamp), UTC) < since:
            continue
        yield _candidate(path, commit, parents)


def _candidate(path: str, commit: str, parents: list[str]) -> Candidate | Skipped:
    parent = parents[0]
    names = git("diff", "--name-only", "-z", "--no-renames", parent, commit, cwd=Path(path))
    changed = [name for name in names.stdout.decode(errors="replace").split("\0") if name]
    tests = [name for name in changed if touches_test_harness(name)]
    sources = [name for name in changed if name not in tests]
    if not tests or not sources:
        return Skipped(commit, "changes " + ("no test files" if not tests else "only test files"))
    merged = _merged_commits(path, parent, parents[1]) if len(parents) > 1 else []
    message = "\n\n".join(text for _, text in merged) or _message(path, commit)
    return Candidate(
        commit,
        parent,
        message,
        _diff(path, parent, commit, sources),
        _diff(path, parent, commit, tests),
        tuple(sha for sha, _ in merged),
    )


def _message(path: str, commit: str) -> str:
    return git("log", "-1", "--format=%B", commit, cwd=Path(path)).stdout.decode(errors="replace").strip()


def _merged_commits(path: str, first_parent: str, merged_parent: str) -> list[tuple[str, str]]:
    """The commits a merge brought in, oldest first, with their messages: they say what the
    change is about, where the merge's own message says "Merge branch 'x'". Merges within
    the branch (main merged into it) are left out."""
    listed = git(
        "log", "--no-merges", "--reverse", "--format=%H%x00%B%x00", f"{first_parent}..{merged_parent}", cwd=Path(path)
    )
    fields = listed.stdout.decode(errors="replace").split("\0")
    pairs = zip(fields[0::2], fields[1::2], strict=False)
    return [(sha.strip(), text.strip()) for sha, text in pairs if sha.strip() and text.strip()]


def _diff(path: str, parent: str, commit: str, files: list[str]) -> str:
    shown = git("diff", "--no-color", "--no-ext-diff", "--no-renames", parent, commit, "--", *files, cwd=Path(path))
    return shown.stdout.decode(errors="replace")


@dataclass
class CommandCheck:
    """The test command's first run is its check: with no per-test result it does not work
    (a bare ``python`` inside the sandbox, pytest missing, a typo), and mining stops."""

    done: bool = False

    def first_run(self, run: TestRun, candidate: Candidate, command: list[str]) -> None:
        if self.done or run.apply_error or run.build_error:  # the tests did not run: check on the next candidate
            return
        self.done = True
        if not run.outcomes and not run.timed_out:
            raise TestCommandDoesNotStart(_does_not_start(candidate, command, "reported no per-test results", run.log))


def _does_not_start(candidate: Candidate, command: list[str], what: str, log: str) -> str:
    program = command[0]
    message = (
        f"the test command {what} at {candidate.parent[:12]} (the parent of "
        f"{candidate.commit[:12]} {candidate.subject[:60]!r}, with its test patch), so every candidate "
        "would be rejected; nothing was decided for it.\n"
    )
    if BARE_PYTHON.match(Path(program).name):
        message += (
            f"{program!r} is not this interpreter inside the sandbox (it may not be found there at all, or "
            "be a Python without pytest and the project's packages): write {python}, which stands for "
            "this interpreter, e.g. --test-command '{python} -m pytest -q --junitxml={junit}'.\n"
        )
    return message + "Last lines of its log:\n" + (log_tail(log) or "(no output)")


def log_tail(log: str) -> str:
    """The last LOG_TAIL_LINES lines of a test log, bounded in characters too."""
    tail = "\n".join(log.rstrip().splitlines()[-LOG_TAIL_LINES:])
    return tail if len(tail) <= LOG_TAIL_CHARS else "…" + tail[-LOG_TAIL_CHARS:]


def judge_candidate(candidate: Candidate, options: IngestOptions, check: CommandCheck | None = None) -> Verdict:
    """Run the candidate's tests before and after its gold patch; keep, quarantine or reject.
    Raises TestCommandDoesNotStart when ``check`` finds the command broken."""
    verdict = Verdict(candidate)
    try:
        check_patch(candidate.patch)
        check_patch(candidate.test_patch)
    except PatchRejected as exc:
        verdict.rejected = f"its diff cannot be a task: {exc}"
        return verdict
    try:
        clone = ensure_commit(options.repo_name, options.source, candidate.parent)
    except RepositoryUnavailable as exc:
        verdict.rejected = str(exc)
        return verdict

    try:
        key, environment = _environment(clone, candidate, options)
    except EnvironmentUnavailable as exc:
        verdict.rejected = f"its environment cannot be had: {exc}"
        return verdict
    plan = TestPlan(options.test_command, environment=environment)

    def run(patches: list[str]) -> TestRun:
        try:
            with in_use(key) if key else contextlib.nullcontext():
                return run_tests_with(clone, candidate.parent, patches, options.test_command, options.timeout_s, plan)
        except FileNotFoundError as exc:  # no such program on this machine
            found = _does_not_start(candidate, options.test_command, "could not start", str(exc))
            raise TestCommandDoesNotStart(found) from None

    before = run([candidate.test_patch])
    if before.environment_missing:
        # Every test would look broken before and after alike: not the candidate's doing.
        verdict.rejected = (
            f"environment missing: the tests cannot import {before.environment_missing!r}, which the repository "
            "needs (give the repository a recipe: manage.py environments set, or ingest_prs --python)"
        )
        verdict.log_tail = log_tail(before.log)
        return verdict
    if check:
        check.first_run(before, candidate, options.test_command)
    afters = [run([candidate.patch, candidate.test_patch]) for _ in range(options.gold_runs)]
    verdict.rejected, log = _rejection(before, afters)
    verdict.log_tail = log_tail(log)
    if verdict.rejected:
        return verdict
    always_passed = frozenset.intersection(*(after.passed for after in afters))
    verdict.fail_to_pass = sorted(always_passed - before.passed)
    verdict.pass_to_pass = sorted(always_passed & before.passed)
    flaky = frozenset.union(*(after.passed for after in afters)) - always_passed
    if flaky:
        verdict.quarantine_reason = (
            f"the gold patch gave different results in {options.gold_runs} runs: {_named(flaky)} passed only sometimes"
        )
    if not verdict.fail_to_pass:
        verdict.rejected = "the gold patch turns no test green (no FAIL_TO_PASS test)"
    return verdict


def _environment(clone: Path, candidate: Candidate, options: IngestOptions) -> tuple[str, Runtime | None]:
    if options.recipe is None:
        return "", None
    label = f"{options.repo_name} at {candidate.parent[:12]}, Python {options.recipe.python}"
    return environment_at(clone, candidate.parent, options.recipe, label)


def _rejection(before: TestRun, afters: list[TestRun]) -> tuple[str, str]:
    """Why the runs cannot decide the candidate (empty when they can), and the log that
    says so: a test run's, or ``git apply``'s for a patch that does not apply."""
    if before.apply_error:
        why = f"the test patch does not apply at the parent commit: {before.apply_error.strip()[:300]}"
        return why, before.apply_error
    if before.build_error:  # the environment's build of this very tree succeeded: not the candidate's doing
        return "environment: the checkout build fails at the parent commit in the sandbox", before.build_error
    # Without a trustworthy "before", every test would look newly fixed.
    if before.timed_out:
        return "the tests timed out before the gold patch", before.log
    if not before.outcomes:
        return "the test command reported no per-test results before the gold patch", before.log
    for after in afters:
        if after.apply_error:
            why = f"the gold patch does not apply at the parent commit: {after.apply_error.strip()[:300]}"
            return why, after.apply_error
        if after.build_error:
            return "the gold patch does not build (the recipe's checkout build fails)", after.build_error
        if after.timed_out:
            return "the tests timed out with the gold patch", after.log
        if not after.outcomes:
            return "the test command reported no per-test results with the gold patch", after.log
    return "", afters[-1].log


def _named(tests: frozenset[str]) -> str:
    listed = sorted(tests)
    shown = ", ".join(listed[:LISTED_TESTS])
    return shown + (f" and {len(listed) - LISTED_TESTS} more" if len(listed) > LISTED_TESTS else "")


def ingest(
    org: Organization, dataset_name: str, options: IngestOptions, progress: Callable[[str], None] = lambda _: None
) -> Generator[Verdict | Skipped]:
    """Judge candidates newest first, saving each decision as it is made, until
    ``max_tasks`` are kept or ``max_candidates`` judged. Yields each Verdict once saved, and
    Skipped for commits that are no candidate or are already decided. Raises
    TestCommandDoesNotStart (before deciding anything more) when the command is broken."""
    if options.recipe is None and (recipe := existing_recipe(org, dataset_name, options.repo_name)):
        options = replace(options, recipe=recipe)
    decided = decided_commits(org, dataset_name, options.repo_name)
    existing = existing_task_ids(org, dataset_name)
    check = CommandCheck()
    judged = kept = 0
    saved: list[TaskInstance] = []
    version = None  # one mining run's tasks make one dataset version
    try:
        for found in find_candidates(options.source, options.branch, options.since):
            if _enough(options, judged, kept):
                return
            if isinstance(found, Skipped):
                yield found
                continue
            if why := _already_decided(found.commit, options, decided, existing):
                yield Skipped(found.commit, why)
                continue
            progress(found.subject)
            verdict = judge_candidate(found, options, check)
            if task := do_save_verdict(org, options, dataset_name, verdict, version):
                saved.append(task)
                version = task.dataset_version
            judged += 1
            kept += verdict.kept
            yield verdict
    finally:
        # Also when stopped half-way: what was saved is in history order.
        if saved:
            do_order_oldest_first(saved)


def _enough(options: IngestOptions, judged: int, kept: int) -> bool:
    return (options.max_tasks is not None and kept >= options.max_tasks) or (
        options.max_candidates is not None and judged >= options.max_candidates
    )


def _already_decided(commit: str, options: IngestOptions, decided: dict[str, bool], existing: set[str]) -> str:
    if task_id(options.repo_name, commit) in existing:
        return "already in the dataset"
    if commit not in decided:
        return ""
    if decided[commit]:
        return "kept before (its task has since been deleted)"
    return "" if options.retry_rejected else "rejected before (--retry-rejected tests them again)"


def existing_recipe(org: Organization, dataset_name: str, repo_name: str) -> Recipe | None:
    """The dataset's recipe for the repository (every version), when it has one."""
    found = EnvironmentRecipe.objects.filter(
        dataset__org=org, dataset__name=dataset_name, repo=repo_name, version=""
    ).first()
    return found.recipe() if found else None


def task_id(repo_name: str, commit: str) -> str:
    return f"{repo_name.replace('/', '__')}-{commit[:12]}"


def existing_task_ids(org: Organization, dataset_name: str) -> set[str]:
    return set(
        TaskInstance.objects.filter(dataset__org=org, dataset__name=dataset_name).values_list("external_id", flat=True)
    )


def decided_commits(org: Organization, dataset_name: str, repo_name: str) -> dict[str, bool]:
    """Each commit of ``repo_name`` already judged for the dataset: whether it was kept."""
    found = MinedCandidate.objects.filter(dataset__org=org, dataset__name=dataset_name, repo=repo_name)
    return dict(found.values_list("commit", "kept"))


@transaction.atomic
def do_save_verdict(
    org: Organization, options: IngestOptions, dataset_name: str, verdict: Verdict, version: int | None = None
) -> TaskInstance | None:
    """Record one decision (and its task when kept) in its own transaction; the repository
    source and test command go on the dataset. Returns the task when one was added.

    ``version``: the dataset version this mining run's earlier tasks went into; its next
    task joins it unless an import has opened another since (a new version then)."""
    dataset, _ = locked_dataset(org, dataset_name)
    dataset.repo_sources = {**dataset.repo_sources, options.repo_name: options.source}
    dataset.test_command = dataset.test_command or options.test_command
    dataset.save(update_fields=["repo_sources", "test_command"])
    if options.recipe:  # the dataset's tasks are validated in the environment they were mined in
        EnvironmentRecipe.objects.get_or_create(
            dataset=dataset,
            repo=options.repo_name,
            version="",
            defaults={**options.recipe.as_fields(), "source": "ingest_prs"},
        )
    candidate = verdict.candidate
    task = None
    if verdict.kept and not dataset.tasks.filter(external_id=task_id(options.repo_name, candidate.commit)).exists():
        task = _task_row(dataset, options, next_position(dataset), verdict)
        task.dataset_version = version if version == dataset.version else open_version(dataset)
        task.save()
    MinedCandidate.objects.update_or_create(
        dataset=dataset,
        repo=options.repo_name,
        commit=candidate.commit,
        defaults={
            "subject": candidate.subject[:300],
            "kept": verdict.kept,
            "reason": verdict.rejected or verdict.quarantine_reason,
            "log_tail": verdict.log_tail,
            "task": task,
        },
    )
    return task


@transaction.atomic
def do_order_oldest_first(tasks: list[TaskInstance]) -> None:
    """Mining saves tasks newest first, as it finds them; the dataset lists one run's tasks
    oldest first, as the history happened: the same positions, handed out in reverse."""
    positions = sorted(task.position for task in tasks)
    ordered = list(reversed(tasks))
    for task, position in zip(ordered, positions, strict=True):
        task.position = position
    TaskInstance.objects.bulk_update(ordered, ["position"])


def _task_row(dataset: Dataset, options: IngestOptions, position: int, verdict: Verdict) -> TaskInstance:
    candidate = verdict.candidate
    metadata: dict[str, object] = {"source": "ingest_prs", "commit": candidate.commit}
    if candidate.merged:
        metadata["merged_commits"] = list(candidate.merged)
    return TaskInstance(
        dataset=dataset,
        external_id=task_id(options.repo_name, candidate.commit),
        position=position,
        title=candidate.subject[:300],
        problem_statement=candidate.message,
        gold_patch=candidate.patch,
        repo=options.repo_name,
        base_commit=candidate.parent,
        test_patch=candidate.test_patch,
        test_command=options.test_command,
        fail_to_pass=verdict.fail_to_pass,
        pass_to_pass=verdict.pass_to_pass,
        quarantined=bool(verdict.quarantine_reason),
        quarantine_reason=verdict.quarantine_reason,
        metadata=metadata,
    )
