import sys

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from tqdm import tqdm

from datasets.export import check_swebench_exportable, swebench_task_lines
from datasets.management.commands._helpers import dataset_by_name
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Write a dataset of PR tasks (imported or mined) to stdout as SWE-bench task JSONL: one instance "
        "a line, with repo, instance_id, base_commit, patch, test_patch, problem_statement, hints_text, "
        "version, FAIL_TO_PASS and PASS_TO_PASS (JSON strings, as SWE-bench publishes them), and "
        "created_at and environment_setup_commit where the task's source gave them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--dataset", required=True, help="the organisation's dataset, by name")
        parser.add_argument("--format", required=True, choices=["swebench"], help="the file's format")

    def handle(self, *args, org, dataset, format, **options):
        found = dataset_by_name(org_by_slug(org), dataset)
        try:
            check_swebench_exportable(found)
        except ValidationError as exc:
            raise CommandError("nothing exported: " + " ".join(exc.messages)) from None
        total = found.tasks.count()
        with tqdm(total=total, unit="task", file=sys.stderr, leave=False) as progress:
            for line in swebench_task_lines(found):  # written as read: a large dataset is never one string
                self.stdout.write(line, ending="")
                progress.update()
