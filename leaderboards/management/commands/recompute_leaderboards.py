import sys

from tqdm import tqdm

from experiments.management.commands._helpers import run_by_code
from experiments.models import Run
from leaderboards.summaries import refresh_run_summaries
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = "Rebuild the per-run summaries the boards, charts and pairwise pages read, here and now."

    def add_arguments(self, parser):
        parser.add_argument("--run", help="only this run (its public id)")

    def handle(self, *args, run, **options):
        run_ids = (
            [run_by_code(run).pk] if run else list(Run.objects.order_by("created_at").values_list("pk", flat=True))
        )
        for run_id in tqdm(run_ids, unit="run", file=sys.stderr, dynamic_ncols=True):
            refresh_run_summaries(run_id)
        self.stdout.write(f"rebuilt the summaries of {len(run_ids)} run(s)")
