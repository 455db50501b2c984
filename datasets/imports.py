"""Importing task files into a dataset: all or nothing.

One chokepoint for every way a file comes in (``import_tasks`` on the command line, an
upload on the datasets page): ``parse_task_file`` reads and checks each line, ``check_task_file``
adds what the dataset has to say and makes the preview an upload shows before anything is
saved, ``do_import_task_file`` saves it, checking again under the dataset's lock.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from typing import Any, BinaryIO
from urllib.parse import urlparse

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max

from datasets.formats import FORMATS, FormatOptions, ParsedTask, parser_for
from datasets.models import Dataset, DatasetKind, EnvironmentRecipe, TaskInstance
from datasets.swebench import REPO, SwebenchTask, TaskFileRejected, parse_swebench
from datasets.swebench_specs import recipe_for as harness_recipe
from datasets.swebench_specs import task_test_command
from evaluation.environments import missing_need
from evaluation.patches import HarnessRule, gold_patch_refusal
from evaluation.workloads import workload_for, workload_kinds
from orgs.models import Organization
from prbench.file_rows import MAX_REPORTED
from prbench.inputs import JSONL_LINE_MAX_BYTES, NAME_MAX, check_text


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
    version: int = 1  # the dataset version the imported tasks belong to
    # Environment recipes the import made from SWE-bench's harness (repo and version), and
    # those among them this worker cannot build, with what it lacks ("needs Python 3.9").
    recipes_made: list[str] = field(default_factory=list)
    recipes_unbuildable: dict[str, str] = field(default_factory=dict)


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
    clashes = duplicate_problems(org, dataset_name, tasks, file_name)
    if clashes:
        raise ValidationError(clashes[:MAX_REPORTED])


def duplicate_problems(org: Organization, dataset_name: str, tasks: list[Any], file_name: str) -> list[str]:
    """The file's tasks the dataset already holds (``tasks`` have ``line`` and ``instance_id``)."""
    existing = set(
        TaskInstance.objects.filter(
            dataset__org=org, dataset__name=dataset_name, external_id__in=[t.instance_id for t in tasks]
        ).values_list("external_id", flat=True)
    )
    return [
        f"{file_name}:{task.line}: field instance_id: {task.instance_id!r} is already in dataset {dataset_name!r}"
        for task in tasks
        if task.instance_id in existing
    ]


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
    if problem := kind_problem(dataset, DatasetKind.PR_PATCH):
        raise ValidationError(problem)
    check_import_tasks(org, dataset_name, tasks, file_name)  # again, under the dataset's lock
    dataset.repo_sources = {**dataset.repo_sources, **repo_sources}
    for name, command in (commands or {}).items():
        setattr(dataset, name, command)
    if created:  # SWE-bench's tasks are judged by the harness's rule; a dataset made otherwise keeps its own
        dataset.harness_rule = HarnessRule.TASK
    dataset.save(update_fields=["repo_sources", "test_command", "build_command", "harness_rule"])
    version = open_version(dataset)
    start = next_position(dataset)
    rows = [_task_row(dataset, start + i, task, version) for i, task in enumerate(tasks)]
    refused = _quarantine_refused_gold(rows, dataset.harness_rule)
    TaskInstance.objects.bulk_create(rows)
    made = do_make_harness_recipes(dataset, _latest_dates(tasks))
    repos = sorted({task.repo for task in tasks})
    return ImportReport(
        recipes_made=[str(recipe) for recipe in made],
        recipes_unbuildable={str(recipe): need for recipe in made if (need := missing_need(recipe.recipe()))},
        dataset=dataset,
        created=created,
        imported=len(tasks),
        repos=repos,
        repos_without_source=[repo for repo in repos if repo not in dataset.repo_sources],
        refused_gold=refused,
        version=version,
    )


DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _latest_dates(tasks: list[SwebenchTask]) -> dict[tuple[str, str], str]:
    """Each repository version's newest task date ("" when the file gives none)."""
    latest: dict[tuple[str, str], str] = {}
    for task in tasks:
        created = str(task.metadata.get("created_at") or "")[:10]
        key = (task.repo, task.version)
        latest[key] = max(latest.get(key, ""), created if DATE.match(created) else "")
    return latest


def do_make_harness_recipes(dataset: Dataset, versions: dict[tuple[str, str], str]) -> list[EnvironmentRecipe]:
    """A recipe for each repository version SWE-bench's harness specifies and the dataset has
    none for yet (one a user set is kept), resolved as the package index stood a month after
    its newest task (what its developers had); returns those made."""
    made = []
    for (repo, version), newest in sorted(versions.items()):
        recipe = harness_recipe(repo, version)
        if recipe is None or EnvironmentRecipe.objects.filter(dataset=dataset, repo=repo, version=version).exists():
            continue
        # The harness installs the first of its requirements files that exists: one entry of
        # alternatives (evaluation/environments.py reads "a|b" so).
        recipe["requirements"] = ["|".join(recipe["requirements"])] if recipe["requirements"] else []
        if newest:
            recipe["exclude_newer"] = (date.fromisoformat(newest) + timedelta(days=30)).isoformat()
        made.append(EnvironmentRecipe.objects.create(dataset=dataset, repo=repo, version=version, **recipe))
    return made


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


def open_version(dataset: Dataset) -> int:
    """The version tasks added now belong to, with the dataset locked: the next one when the
    dataset already holds tasks; a dataset's first tasks are its version 1."""
    if dataset.tasks.exists():
        dataset.version += 1
        dataset.save(update_fields=["version"])
    return dataset.version


def version_to_come(dataset: Dataset | None) -> int:
    """The version an import into ``dataset`` (None: a new one) would make now."""
    if dataset is None:
        return 1
    return dataset.version + 1 if dataset.tasks.exists() else dataset.version


def kind_problem(dataset: Dataset, kind: str) -> str:
    """Why tasks of ``kind`` cannot go into ``dataset`` (empty when they can)."""
    if dataset.kind == kind:
        return ""
    return (
        f"dataset {dataset.name!r} holds {dataset.get_kind_display()} tasks; this file's are {kind}: "
        "import it into a dataset of its own"
    )


def next_position(dataset: Dataset) -> int:
    """Where tasks added now go: after every task the dataset holds."""
    last = dataset.tasks.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1  # not "or -1": a last position of 0 is a task


def _task_row(dataset: Dataset, position: int, task: SwebenchTask, version: int) -> TaskInstance:
    return TaskInstance(
        dataset=dataset,
        dataset_version=version,
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
        # The test files its test patch names, run as the harness runs its version's tests.
        test_command=task_test_command(task.repo, task.version, task.test_patch),
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
    kind = single_kind(tasks, file_name)
    dataset, created = locked_dataset(org, dataset_name, kind)
    if problem := kind_problem(dataset, kind):
        raise ValidationError(problem)
    problems = payload_problems(kind, tasks, file_name)
    if problems:
        raise ValidationError(problems[:MAX_REPORTED])
    check_import_tasks(org, dataset_name, [_as_identified(task) for task in tasks], file_name)
    version = open_version(dataset)
    start = next_position(dataset)
    TaskInstance.objects.bulk_create(
        TaskInstance(
            dataset=dataset,
            dataset_version=version,
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
    return ImportReport(
        dataset=dataset, created=created, imported=len(tasks), repos=[], repos_without_source=[], version=version
    )


def single_kind(tasks: list[ParsedTask], file_name: str) -> str:
    kinds = {task.kind for task in tasks}
    if len(kinds) != 1:
        raise ValidationError(f"{file_name}: tasks of several kinds in one file ({', '.join(sorted(kinds))})")
    return kinds.pop()


def payload_problems(kind: str, tasks: list[ParsedTask], file_name: str) -> list[str]:
    if kind not in workload_kinds():
        return [f"{file_name}: its tasks are of kind {kind!r}, which no workload module runs"]
    workload = workload_for(kind)
    return [
        f"{file_name}:{task.line}: field {error}" for task in tasks for error in workload.payload_errors(task.payload)
    ]


@dataclass(frozen=True)
class _Identified:
    """What ``check_import_tasks`` reads of a task: where it was and its id."""

    line: int
    instance_id: str


def _as_identified(task: ParsedTask) -> Any:
    return _Identified(task.line, task.external_id)


# --- one chokepoint for the command line and the upload ------------------------------------

Tasks = list[SwebenchTask] | list[ParsedTask]
Progress = Callable[[int, int], None]  # (lines read, bytes read)
PREVIEW_ROWS = 10  # how many of a file's tasks its preview shows
CELL_MAX = 160  # characters of one value a preview shows


def _no_progress(lines: int, read: int) -> None:
    pass


@dataclass(frozen=True)
class TaskFile:
    """A task file as the command line or the upload form describes it: its format, its
    name (as problems cite it), the dataset it goes into and the format's options."""

    format: str
    name: str
    dataset_name: str
    options: FormatOptions = field(default_factory=FormatOptions)
    repo_sources: dict[str, str] = field(default_factory=dict)  # SWE-bench only
    commands: dict[str, list[str]] = field(default_factory=dict)  # SWE-bench only: test/build command


def parse_task_file(spec: TaskFile, source: BinaryIO, progress: Progress = _no_progress) -> Tasks:
    """Every task in the file, each line checked; TaskFileRejected (file, line and field
    for each problem) otherwise. SWE-bench files are read a line at a time, so ``progress``
    follows them; a question format's parser takes the whole file and reports at its end."""
    if spec.format == "swebench":
        return parse_swebench(spec.name, file_lines(source, progress))
    if spec.format not in FORMATS:
        raise TaskFileRejected([f"{spec.name}: unknown format {spec.format!r}"])
    data = source.read()
    tasks = parser_for(spec.format)(spec.name, data, spec.options)
    progress(count_lines(data), len(data))
    return tasks


GZIP_MAGIC = b"\x1f\x8b"


def count_lines(data: bytes) -> int:
    """The file's lines; 0 (not known) for a compressed file, whose bytes are no lines."""
    if data.startswith(GZIP_MAGIC):
        return 0
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def file_lines(handle: BinaryIO, progress: Progress = _no_progress) -> Iterator[bytes]:
    """The file's lines as bytes (parse_swebench decodes each, naming a line that is not
    UTF-8). A line over the limit is cut one byte past it (so it is refused); the rest of it
    is read in chunks and dropped, so one line never takes more memory than the limit."""
    lines = read = 0
    while line := handle.readline(JSONL_LINE_MAX_BYTES + 1):
        read += len(line)
        rest = line
        while not rest.endswith(b"\n") and (rest := handle.readline(1 << 20)):
            read += len(rest)
        lines += 1
        progress(lines, read)
        yield line


def import_problems(org: Organization, spec: TaskFile, tasks: Tasks, dataset: Dataset | None) -> list[str]:
    """What the dataset (None: there is none by that name yet) says about a parsed file,
    before anything is saved: its name, its kind, each task's payload by the kind's rules,
    the tasks it already holds. ``do_import_task_file`` makes the same checks again under
    the dataset's lock."""
    try:
        check_dataset_name(spec.dataset_name)
        kind = DatasetKind.PR_PATCH.value if spec.format == "swebench" else single_kind(tasks, spec.name)  # type: ignore[arg-type]
    except ValidationError as exc:
        return exc.messages
    if dataset is not None and (problem := kind_problem(dataset, kind)):
        return [problem]
    if spec.format == "swebench":
        identified: list[Any] = tasks
    else:
        if problems := payload_problems(kind, tasks, spec.name):  # type: ignore[arg-type]
            return problems[:MAX_REPORTED]
        identified = [_as_identified(task) for task in tasks]  # type: ignore[arg-type]
    return duplicate_problems(org, spec.dataset_name, identified, spec.name)[:MAX_REPORTED]


@dataclass(frozen=True)
class Preview:
    """What importing a file would do, shown before anything is saved."""

    kind: str  # "" when the file could not be read far enough to say
    tasks: int
    columns: list[str]
    rows: list[list[str]]  # the first PREVIEW_ROWS tasks
    field_map: dict[str, str]
    problems: list[str]  # each "file:line N: field F: ..." where the parser can say
    dataset_exists: bool
    version: int  # the dataset version the import would make

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def check_task_file(
    org: Organization, spec: TaskFile, source: BinaryIO, progress: Progress = _no_progress
) -> tuple[Preview, Tasks]:
    """The preview of importing the file (its problems included) and its tasks; saves nothing."""
    dataset = Dataset.objects.filter(org=org, name=spec.dataset_name).first()
    try:
        tasks = parse_task_file(spec, source, progress)
    except TaskFileRejected as exc:
        tasks, problems = [], exc.problems
    else:
        problems = import_problems(org, spec, tasks, dataset)
    columns, rows = preview_rows(tasks[:PREVIEW_ROWS])
    preview = Preview(
        kind=_detected_kind(spec, tasks),
        tasks=len(tasks),
        columns=columns,
        rows=rows,
        field_map=dict(spec.options.field_map),
        problems=problems,
        dataset_exists=dataset is not None,
        version=version_to_come(dataset),
    )
    return preview, tasks


def _detected_kind(spec: TaskFile, tasks: Tasks) -> str:
    if spec.format == "swebench":
        return DatasetKind.PR_PATCH.value
    kinds = sorted({task.kind for task in tasks if isinstance(task, ParsedTask)})
    return ", ".join(kinds) if kinds else spec.options.kind


def preview_rows(tasks: Tasks) -> tuple[list[str], list[list[str]]]:
    """A table of tasks as their importer read them: the fields each column of the file became."""
    if swebench := [task for task in tasks if isinstance(task, SwebenchTask)]:
        columns = ["line", "instance_id", "repo", "base_commit", "problem_statement", "FAIL_TO_PASS", "PASS_TO_PASS"]
        return columns, [_swebench_row(task) for task in swebench]
    questions = [task for task in tasks if isinstance(task, ParsedTask)]
    if not questions:
        return [], []
    payload_keys = list(dict.fromkeys(key for task in questions for key in task.payload))
    columns = ["line", "id", "question", "category", "difficulty", *payload_keys]
    return columns, [_question_row(task, payload_keys) for task in questions]


def _swebench_row(task: SwebenchTask) -> list[str]:
    statement = task.problem_statement.strip().splitlines()
    return [
        str(task.line),
        task.instance_id,
        task.repo,
        task.base_commit[:12],
        _cell(statement[0] if statement else ""),
        _tests(task.fail_to_pass),
        _tests(task.pass_to_pass),
    ]


def _tests(ids: list[str]) -> str:
    return f"{len(ids)} test{'' if len(ids) == 1 else 's'}"


def _question_row(task: ParsedTask, payload_keys: list[str]) -> list[str]:
    payload = [_cell(task.payload.get(key, "")) for key in payload_keys]
    return [str(task.line), task.external_id, _cell(task.question), task.category, task.difficulty, *payload]


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CELL_MAX else text[: CELL_MAX - 1] + "…"


def do_import_task_file(org: Organization, spec: TaskFile, tasks: Tasks) -> ImportReport:
    """Save a parsed file's tasks, all or nothing; every check is made again under the
    dataset's lock (ValidationError), since the dataset may have changed since the preview."""
    if spec.format == "swebench":
        return do_import_tasks(
            org,
            spec.dataset_name,
            tasks,  # type: ignore[arg-type]
            spec.repo_sources,
            spec.name,
            spec.commands,
        )
    return do_import_questions(org, spec.dataset_name, tasks, spec.name)  # type: ignore[arg-type]
