import os
import sys
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from tqdm import tqdm

from datasets.formats import FormatOptions, ParsedTask, format_names, parser_for
from datasets.imports import (
    TaskFile,
    Tasks,
    check_commands,
    check_dataset_name,
    check_repo_sources,
    do_import_task_file,
    parse_field_map,
    parse_task_file,
)
from datasets.swebench import TaskFileRejected
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand, open_input_file, read_input_file


class Command(CheckedCommand):
    help = "Import a task file into a dataset (created if new). All or nothing: a bad line changes nothing."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--dataset", required=True, help="dataset name (created if it does not exist)")
        parser.add_argument("--format", required=True, choices=format_names(), help="the file's format")
        parser.add_argument(
            "--map",
            default="",
            metavar="FIELD=COLUMN,...",
            help="jsonl/csv: which of the file's fields holds each of the kind's (e.g. question=prompt,answer=target)",
        )
        parser.add_argument("--kind", default="", help="jsonl/csv: the kind of task the mapped fields make")
        parser.add_argument(
            "--repo-source",
            action="append",
            default=[],
            metavar="OWNER/NAME=PATH_OR_URL",
            help="where a task repository is cloned from (repeatable; kept on the dataset)",
        )
        parser.add_argument(
            "--test-command",
            help="the dataset's test command for validating these tasks; {python} is the worker's interpreter, "
            "{junit} where the JUnit report goes (e.g. '{python} -m pytest --junitxml={junit}')",
        )
        parser.add_argument("--build-command", help="the dataset's build command (default: byte-compile)")
        parser.add_argument(
            "file",
            help="the task file (SWE-bench JSONL: one task instance per line), or for question formats a "
            "directory of them; each a regular file of at most PRBENCH_UPLOAD_MAX_BYTES (the upload limit)",
        )

    def handle(self, *args, org, dataset, format, repo_source, test_command, build_command, file, **options):
        organisation = org_by_slug(org)
        path = Path(file)
        try:
            check_dataset_name(dataset)
            spec = TaskFile(
                format=format,
                name=path.name,
                dataset_name=dataset,
                options=FormatOptions(parse_field_map(options["map"]), options["kind"]),
                repo_sources=check_repo_sources(repo_source),
                commands=check_commands(test_command=test_command, build_command=build_command),
            )
            tasks = self._parse(spec, path)
            report = do_import_task_file(organisation, spec, tasks)
        except TaskFileRejected as exc:
            raise CommandError(f"nothing imported: {path} has problems:\n  " + "\n  ".join(exc.problems)) from None
        except ValidationError as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.messages)) from None
        verb = "Created dataset" if report.created else "Added to dataset"
        version = f"as version {report.version}"
        if format != "swebench":
            kind = report.dataset.get_kind_display()
            self.stdout.write(f"{verb} {report.dataset.name!r} ({kind}): {report.imported} task(s) {version}")
            return
        repos = f"from {len(report.repos)} repositories"
        self.stdout.write(f"{verb} {report.dataset.name!r}: {report.imported} task(s) {repos} {version}")
        if report.repos_without_source:
            self.stdout.write(
                "No source configured yet for: " + ", ".join(report.repos_without_source) + ". Set one with "
                "--repo-source OWNER/NAME=PATH_OR_URL (or in the admin) before validating these tasks."
            )
        if report.refused_gold:
            self.stdout.write(
                f"Warning: {len(report.refused_gold)} task(s) imported quarantined: validation would refuse their "
                f"gold patch under the dataset's {report.dataset.harness_rule!r} rule, so nothing could resolve them:"
            )
            for instance_id, reason in report.refused_gold:
                self.stdout.write(f"  {instance_id}: {reason}")
        if report.recipes_made:
            self.stdout.write(
                f"Environment recipes from SWE-bench's harness: {len(report.recipes_made)} "
                f"({', '.join(report.recipes_made)}); build them with manage.py environments build."
            )
        for recipe, need in report.recipes_unbuildable.items():
            self.stdout.write(f"  {recipe}: this worker {need}; its tasks need a worker that has it")

    def _parse(self, spec: TaskFile, path: Path) -> Tasks:
        """The file's tasks, with a progress bar: SWE-bench files run to tens of megabytes. A
        directory (MMLU ships one CSV per subject and split) is read whole for question formats."""
        if path.is_dir():
            if spec.format == "swebench":
                raise CommandError(f"nothing imported: {path} is a directory; give a SWE-bench file")
            return _directory_tasks(spec.format, path, spec.options)
        handle = open_input_file(path, settings.PRBENCH_UPLOAD_MAX_BYTES, UPLOAD_LIMIT)
        size = os.fstat(handle.fileno()).st_size
        with handle, tqdm(total=size, unit="B", unit_scale=True, desc="reading", file=sys.stderr, leave=False) as bar:
            try:
                return parse_task_file(spec, handle, lambda lines, read: bar.update(read - bar.n))
            except OSError as exc:  # a file of /proc whose reads the kernel refuses (/proc/self/mem)
                raise CommandError(f"nothing imported: {path}: cannot read: {exc.strerror}") from None


# The web upload's limit: a larger file is refused on the command line too, naming it. The
# import reads the whole file into memory and saves it in one transaction, as the upload does.
UPLOAD_LIMIT = "PRBENCH_UPLOAD_MAX_BYTES, as for uploads"

# What a directory's task files are named (MMLU ships one CSV per subject and split).
TASK_FILE_SUFFIXES = (".csv", ".tsv", ".jsonl")
MAX_DIRECTORY_PROBLEMS = 60  # a few files' worth: each file stops at its own 20


def _directory_tasks(format: str, path: Path, options: FormatOptions) -> list[ParsedTask]:
    """The tasks of the directory's task files in name order, all or nothing: every file's
    problems are reported, and an id two files share is one of them."""
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in TASK_FILE_SUFFIXES)
    if not files:
        raise CommandError(f"nothing imported: {path} holds no {', '.join(TASK_FILE_SUFFIXES)} files")
    tasks: list[ParsedTask] = []
    problems: list[str] = []
    seen: dict[str, str] = {}  # id -> where it first was
    for file in files:
        data = read_input_file(file, settings.PRBENCH_UPLOAD_MAX_BYTES, UPLOAD_LIMIT)
        try:
            parsed = parser_for(format)(file.name, data, options)
        except TaskFileRejected as exc:
            problems += exc.problems
            continue
        for task in parsed:
            if task.external_id in seen:
                problems.append(f"{file.name}:{task.line}: id {task.external_id!r} is also on {seen[task.external_id]}")
            seen.setdefault(task.external_id, f"{file.name}:{task.line}")
        tasks += parsed
    if len(problems) > MAX_DIRECTORY_PROBLEMS:
        problems = [*problems[:MAX_DIRECTORY_PROBLEMS], f"{path}: and {len(problems) - MAX_DIRECTORY_PROBLEMS} more"]
    if problems:
        raise TaskFileRejected(problems)
    return tasks
