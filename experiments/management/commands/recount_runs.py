from experiments import run_counters
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Recount runs' counters (attempts by status, repeated calls, final verdicts) from their attempts and "
        "verdicts, and put right any that the triggers left wrong (they never should: a mismatch is a bug)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_ids", nargs="*", type=int, help="the runs to recount (default: every run)")

    def handle(self, *args, run_ids, **options):
        wrong = run_counters.recount(run_ids or None)
        for run_id in wrong:
            self.stdout.write(f"run {run_id}: counters were wrong, recounted")
        self.stdout.write(f"{len(wrong)} run(s) recounted" if wrong else "every run's counters were right")
