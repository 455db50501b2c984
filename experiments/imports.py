"""Importing task files into a dataset: all or nothing."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from evaluation.patches import HarnessRule, gold_patch_refusal
from evaluation.workloads import workload_for
from experiments.models import Dataset, DatasetKind, TaskInstance
from experiments.swebench import REPO, SwebenchTask
from experiments.task_formats import ParsedTask
from orgs.models import Organization
from prbench.inputs import NAME_MAX, check_text


@dataclass(frozen=True)
class ImportReport:
    dataset: Dataset
    created: bool
    imported: int
    repos: list[str]
    repos_without_source: list[str]
    # Tasks whose gold patch validation would refuse under the dataset's rule, and why: they
    # are imported quarantined, since nothing could resolve them.
    refused_gold: list[tuple[str, str]] = field(default_factory=list)


def check_repo_sources(pairs: list[str]) -> dict[str, str]:
    """``owner/name=SOURCE`` pairs, SOURCE a local path or a clone URL, as a mapping."""
    sources, errors = {}, []
    for pair in pairs:
        repo, _, source = pair.partition("=")
        if not REPO.match(repo) or len(repo) > NAME_MAX or not source.strip():
            errors.append(
                f"repository source {pair!r}: expected owner/name=PATH_OR_URL, owner/name at most {NAME_MAX} characters"
            )
        elif "://" in source and urlparse(source).scheme not in ("https", "http", "ssh", "git", "file"):
            errors.append(f"repository source {pair!r}: a clone URL must be https, http, ssh, git or file")
        else:
            sources[repo] = source.strip()
    if errors:
        raise ValidationError(errors)
    return sources


def check_commands(**commands: str | None) -> dict[str, list[str]]:
    """Shell-style command strings (as typed on a command line) as argument lists."""
    parsed, errors = {}, []
    for name, text in commands.items():
        if text is None:
            continue
        try:
            parsed[name] = shlex.split(text)
        except ValueError as exc:
            errors.append(f"--{name.replace('_', '-')}: {exc}")
            continue
        if not parsed[name]:
            errors.append(f"--{name.replace('_', '-')}: empty")
    if errors:
        raise ValidationError(errors)
    return parsed


def parse_field_map(text: str) -> dict[str, str]:
    """``question=prompt,answer=target`` as {kind's field: file's field}; empty for none."""
    mapping, errors = {}, []
    for pair in filter(None, (part.strip() for part in text.split(","))):
        ours, _, theirs = pair.partition("=")
        if not ours.strip() or not theirs.strip():
            errors.append(f"--map: {pair!r} is not FIELD=COLUMN")
        elif ours.strip() in mapping:
            errors.append(f"--map: {ours.strip()!r} is mapped twice")
        else:
            mapping[ours.strip()] = theirs.strip()
    if errors:
        raise ValidationError(errors)
    return mapping


def check_dataset_name(name: str) -> None:
    if not name.strip():
        raise ValidationError("the dataset name must not be blank")
    check_text(name, "the dataset name", NAME_MAX)


def check_import_tasks(org: Organization, dataset_name: str, tasks: list[SwebenchTask], file_name: str) -> None:
    """Refuse what the file alone cannot show: a name that is no dataset name, or tasks the
    dataset already holds (re-importing a task would silently change past results)."""
    check_dataset_name(dataset_name)
    existing = set(
        TaskInstance.objects.filter(
            dataset__org=org, dataset__name=dataset_name, external_id__in=[t.instance_id for t in tasks]
        ).values_list("external_id", flat=True)
    )
    clashes = [
        f"{file_name}:{task.line}: field instance_id: {task.instance_id!r} is already in dataset {dataset_name!r}"
        for task in tasks
        if task.instance_id in existing
    ]
    if clashes:
        raise ValidationError(clashes[:20])


@transaction.atomic
def do_import_tasks(
    org: Organization,
    dataset_name: str,
    tasks: list[SwebenchTask],
    repo_sources: dict[str, str],
    file_name: str,
    commands: dict[str, list[str]] | None = None,
) -> ImportReport:
    """``commands``: the dataset's ``test_command`` / ``build_command``, replaced if given."""
    dataset, created = locked_dataset(org, dataset_name)
    check_import_tasks(org, dataset_name, tasks, file_name)  # again, under the dataset's lock
    dataset.repo_sources = {**dataset.repo_sources, **repo_sources}
    for name, command in (commands or {}).items():
        setattr(dataset, name, command)
    if created:  # SWE-bench's tasks are judged by the harness's rule; a dataset made otherwise keeps its own
        dataset.harness_rule = HarnessRule.TASK
    dataset.save(update_fields=["repo_sources", "test_command", "build_command", "harness_rule"])
    start = next_position(dataset)
    rows = [_task_row(dataset, start + i, task) for i, task in enumerate(tasks)]
    refused = _quarantine_refused_gold(rows, dataset.harness_rule)
    TaskInstance.objects.bulk_create(rows)
    repos = sorted({task.repo for task in tasks})
    return ImportReport(
        dataset=dataset,
        created=created,
        imported=len(tasks),
        repos=repos,
        repos_without_source=[repo for repo in repos if repo not in dataset.repo_sources],
        refused_gold=refused,
    )


def _quarantine_refused_gold(rows: list[TaskInstance], rule: str) -> list[tuple[str, str]]:
    refused = []
    for row in rows:
        if reason := gold_patch_refusal(row.gold_patch, row.test_patch, rule):
            row.quarantined = True
            row.quarantine_reason = f"validation would refuse its gold patch: {reason}"
            refused.append((row.external_id, reason))
    return refused


def locked_dataset(org: Organization, name: str, kind: str = DatasetKind.PR_PATCH) -> tuple[Dataset, bool]:
    """The dataset (created if new), locked until the transaction ends: two imports into
    it cannot interleave their positions or their duplicate checks."""
    return Dataset.objects.select_for_update().get_or_create(org=org, name=name, defaults={"kind": kind})


def next_position(dataset: Dataset) -> int:
    """Where tasks added now go: after every task the dataset holds."""
    last = dataset.tasks.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1  # not "or -1": a last position of 0 is a task


def _task_row(dataset: Dataset, position: int, task: SwebenchTask) -> TaskInstance:
    return TaskInstance(
        dataset=dataset,
        external_id=task.instance_id,
        position=position,
        title=task.problem_statement.strip().splitlines()[0][:300],
        problem_statement=task.problem_statement,
        gold_patch=task.patch,
        repo=task.repo,
        base_commit=task.base_commit,
        test_patch=task.test_patch,
        hints_text=task.hints_text,
        version=task.version,
        fail_to_pass=task.fail_to_pass,
        pass_to_pass=task.pass_to_pass,
        metadata=task.metadata,
    )


@transaction.atomic
def do_import_questions(org: Organization, dataset_name: str, tasks: list[ParsedTask], file_name: str) -> ImportReport:
    """Question-answer tasks into a dataset of their kind (created if new), all or nothing:
    a dataset of another kind, an id it already holds, or a task its kind refuses changes
    nothing. Each task's ``payload`` is checked by its kind's module (the one rule for every
    way in: command line, upload, API)."""
    kinds = {task.kind for task in tasks}
    if len(kinds) != 1:
        raise ValidationError(f"{file_name}: tasks of several kinds in one file ({', '.join(sorted(kinds))})")
    kind = kinds.pop()
    dataset, created = locked_dataset(org, dataset_name, kind)
    if dataset.kind != kind:
        raise ValidationError(
            f"dataset {dataset_name!r} holds {dataset.get_kind_display()} tasks; this file's are {kind}: "
            "import it into a dataset of its own"
        )
    problems = [
        f"{file_name}:{task.line}: field {problem}"
        for task in tasks
        for problem in workload_for(kind).payload_errors(task.payload)
    ]
    if problems:
        raise ValidationError(problems[:20])
    check_import_tasks(org, dataset_name, [_as_identified(task) for task in tasks], file_name)
    start = next_position(dataset)
    TaskInstance.objects.bulk_create(
        TaskInstance(
            dataset=dataset,
            external_id=task.external_id,
            position=start + i,
            title=task.title[:300],
            problem_statement=task.question,
            payload=task.payload,
            category=task.category[:200],
            difficulty=task.difficulty[:50],
            metadata=task.metadata,
        )
        for i, task in enumerate(tasks)
    )
    return ImportReport(dataset=dataset, created=created, imported=len(tasks), repos=[], repos_without_source=[])


@dataclass(frozen=True)
class _Identified:
    """What ``check_import_tasks`` reads of a task: where it was and its id."""

    line: int
    instance_id: str


def _as_identified(task: ParsedTask) -> Any:
    return _Identified(task.line, task.external_id)
