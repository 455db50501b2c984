import sys
from collections import Counter

from django.core.management.base import CommandError
from tqdm import tqdm

from datasets.gold import QUARANTINING, check_gold, tasks_to_check
from datasets.management.commands._helpers import dataset_by_name
from datasets.models import GoldStatus
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand

MAX_RUNS = 10


class Command(CheckedCommand):
    help = (
        "Validate each task's gold patch (and, with --empty, the empty patch) in the environment its runs "
        "use, --runs times, and quarantine the tasks it does not resolve, resolves only sometimes, or that "
        "the empty patch resolves too. Each finding is saved as it is made: run it again to go on."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--dataset", required=True, help="the organisation's dataset, by name")
        parser.add_argument("--runs", type=int, default=2, help=f"times each gold patch is validated (1-{MAX_RUNS})")
        parser.add_argument("--empty", action="store_true", help="also run each task's tests with no fix")
        parser.add_argument("--recheck", action="store_true", help="check tasks already checked again")

    def handle(self, *args, org, dataset, runs, empty, recheck, **options):
        if not 1 <= runs <= MAX_RUNS:
            raise CommandError(f"--runs must be between 1 and {MAX_RUNS}, not {runs}")
        found = dataset_by_name(org_by_slug(org), dataset)
        tasks = tasks_to_check(found, recheck)
        total, counts = tasks.count(), Counter[str]()
        skipped = found.tasks.exclude(gold_patch="").count() - total
        if skipped:
            self.stdout.write(f"{skipped} task(s) already checked: skipped (--recheck checks them again)")
        with tqdm(total=total, unit="task", file=sys.stderr) as progress:
            for finding in check_gold(tasks, runs, empty):
                counts[finding.status] += 1
                progress.set_postfix({status: counts[status] for status in GoldStatus.values if counts[status]})
                progress.update()
                if finding.status != GoldStatus.RESOLVED:
                    quarantined = " (quarantined)" if finding.status in QUARANTINING else ""
                    label = GoldStatus(finding.status).label
                    self.stdout.write(f"{finding.task.external_id}: {label}{quarantined}")
                    for line in finding.detail.splitlines():
                        self.stdout.write(f"    {line}")
        summary = ", ".join(f"{counts[s]} {GoldStatus(s).label}" for s in GoldStatus.values if counts[s])
        self.stdout.write(f"Checked {total} task(s) of {found.name!r}: {summary or 'nothing to check'}")
