"""Mining PR tasks from a git repository's history (``manage.py ingest_prs``).

A candidate is a commit (a merge commit is taken against its first parent) that changes
both source and test files. Its source part becomes the gold ``patch``, its test part the
``test_patch``, its message the problem statement. The tests then decide:

- at the parent with only the test patch ("before"), and
- at the parent with the gold patch and the test patch ("after"), ``gold_runs`` times.

FAIL_TO_PASS are the tests that do not pass before and pass in every after run;
PASS_TO_PASS those that pass in both. A candidate with no FAIL_TO_PASS is rejected with the
reason. A candidate whose after runs disagree is kept but quarantined (flaky).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from evaluation.patches import PatchRejected, check_patch, touches_test_harness
from evaluation.repositories import RepositoryUnavailable, ensure_commit, git
from evaluation.validation import TestRun, run_tests_with
from experiments.imports import locked_dataset, next_position
from experiments.models import Dataset, TaskInstance
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


@dataclass(frozen=True)
class Candidate:
    commit: str
    parent: str
    message: str
    patch: str
    test_patch: str

    @property
    def subject(self) -> str:
        return self.message.strip().splitlines()[0] if self.message.strip() else self.commit[:12]


@dataclass
class Verdict:
    candidate: Candidate
    rejected: str = ""  # why the candidate is not a task; empty when kept
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    quarantine_reason: str = ""

    @property
    def kept(self) -> bool:
        return not self.rejected


@dataclass(frozen=True)
class IngestOptions:
    repo_name: str  # owner/name the tasks point at
    source: str  # where the repository is cloned from
    branch: str = "HEAD"
    max_tasks: int | None = None
    test_command: list[str] = field(default_factory=lambda: list(DEFAULT_TEST_COMMAND))
    gold_runs: int = 2
    timeout_s: float = 120


def check_repository(path: str, branch: str) -> str:
    """The full id of ``branch`` in the repository at ``path``; a clear error otherwise."""
    if not Path(path).exists():
        raise ValidationError(f"--repo {path}: no such directory")
    found = git("rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}", cwd=Path(path))
    if found.returncode != 0:
        raise ValidationError(f"--repo {path}: not a git repository, or it has no branch or commit {branch!r}")
    return found.stdout.decode().strip()


def find_candidates(path: str, branch: str) -> Iterator[Candidate | tuple[str, str]]:
    """Each first-parent commit on ``branch``, newest first: a Candidate, or (commit, why
    not) for a commit that cannot be one."""
    listed = git("rev-list", "--first-parent", "--parents", branch, cwd=Path(path))
    for line in listed.stdout.decode().splitlines():
        commit, *parents = line.split()
        if not parents:
            continue  # the root commit has nothing to compare against
        yield _candidate(path, commit, parents[0])


def _candidate(path: str, commit: str, parent: str) -> Candidate | tuple[str, str]:
    names = git("diff", "--name-only", "-z", "--no-renames", parent, commit, cwd=Path(path))
    changed = [name for name in names.stdout.decode(errors="replace").split("\0") if name]
    tests = [name for name in changed if touches_test_harness(name)]
    sources = [name for name in changed if name not in tests]
    if not tests or not sources:
        return commit, "changes " + ("no test files" if not tests else "only test files")
    message = git("log", "-1", "--format=%B", commit, cwd=Path(path)).stdout.decode(errors="replace").strip()
    return Candidate(commit, parent, message, _diff(path, parent, commit, sources), _diff(path, parent, commit, tests))


def _diff(path: str, parent: str, commit: str, files: list[str]) -> str:
    shown = git("diff", "--no-color", "--no-ext-diff", "--no-renames", parent, commit, "--", *files, cwd=Path(path))
    return shown.stdout.decode(errors="replace")


def judge_candidate(candidate: Candidate, options: IngestOptions) -> Verdict:
    """Run the candidate's tests before and after its gold patch; keep, quarantine or reject."""
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

    def run(patches: list[str]) -> TestRun:
        return run_tests_with(clone, candidate.parent, patches, options.test_command, options.timeout_s)

    before = run([candidate.test_patch])
    afters = [run([candidate.patch, candidate.test_patch]) for _ in range(options.gold_runs)]
    verdict.rejected = _rejection(before, afters)
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


def _rejection(before: TestRun, afters: list[TestRun]) -> str:
    if before.apply_error:
        return f"the test patch does not apply at the parent commit: {before.apply_error.strip()[:300]}"
    # Without a trustworthy "before", every test would look newly fixed.
    if before.timed_out:
        return "the tests timed out before the gold patch"
    if not before.outcomes:
        return "the test command reported no per-test results before the gold patch"
    for after in afters:
        if after.apply_error:
            return f"the gold patch does not apply at the parent commit: {after.apply_error.strip()[:300]}"
        if after.timed_out:
            return "the tests timed out with the gold patch"
        if not after.outcomes:
            return "the test command reported no per-test results with the gold patch"
    return ""


def _named(tests: frozenset[str]) -> str:
    listed = sorted(tests)
    shown = ", ".join(listed[:LISTED_TESTS])
    return shown + (f" and {len(listed) - LISTED_TESTS} more" if len(listed) > LISTED_TESTS else "")


def ingest(
    options: IngestOptions, existing: set[str], progress: Callable[[str], None] = lambda _: None
) -> Iterator[Verdict | tuple[str, str]]:
    """Judge candidates newest first until ``max_tasks`` are kept. Yields each Verdict, and
    (commit, why) for commits that are no candidate or are already in the dataset."""
    kept = 0
    for found in find_candidates(options.source, options.branch):
        if options.max_tasks is not None and kept >= options.max_tasks:
            return
        if isinstance(found, tuple):
            yield found
            continue
        if task_id(options.repo_name, found.commit) in existing:
            yield found.commit, "already in the dataset"
            continue
        progress(found.subject)
        verdict = judge_candidate(found, options)
        kept += verdict.kept
        yield verdict


def task_id(repo_name: str, commit: str) -> str:
    return f"{repo_name.replace('/', '__')}-{commit[:12]}"


def existing_task_ids(org: Organization, dataset_name: str) -> set[str]:
    return set(
        TaskInstance.objects.filter(dataset__org=org, dataset__name=dataset_name).values_list("external_id", flat=True)
    )


@transaction.atomic
def do_save_ingested(org: Organization, options: IngestOptions, dataset_name: str, verdicts: list[Verdict]) -> Dataset:
    """Write the kept tasks, and the repository source and test command on the dataset."""
    dataset, _ = locked_dataset(org, dataset_name)
    dataset.repo_sources = {**dataset.repo_sources, options.repo_name: options.source}
    dataset.test_command = dataset.test_command or options.test_command
    dataset.save(update_fields=["repo_sources", "test_command"])
    start = next_position(dataset)
    # Oldest first in the dataset, as the history happened.
    kept = [verdict for verdict in reversed(verdicts) if verdict.kept]
    existing = set(dataset.tasks.values_list("external_id", flat=True))
    TaskInstance.objects.bulk_create(
        _task_row(dataset, options, start + i, verdict)
        for i, verdict in enumerate(kept)
        if task_id(options.repo_name, verdict.candidate.commit) not in existing
    )
    return dataset


def _task_row(dataset: Dataset, options: IngestOptions, position: int, verdict: Verdict) -> TaskInstance:
    candidate = verdict.candidate
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
        metadata={"source": "ingest_prs", "commit": candidate.commit},
    )
