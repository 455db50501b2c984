from django.core.management.base import CommandError

from experiments.exports import EXPORT_FORMATS, export_chunks
from experiments.management.commands._helpers import run_by_code
from experiments.swebench_export import ReportUnavailable
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Export a run to stdout: its leaderboard and attempts (json), its attempts (csv), SWE-bench "
        "predictions (swebench-preds, JSONL), a SWE-bench style report per arm (swebench-report) or a "
        "self-contained HTML report of the run's boards, pairwise verdicts and charts (html)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--format", choices=list(EXPORT_FORMATS), default="json")

    def handle(self, *args, run_id, format, **options):
        run = run_by_code(run_id)
        try:
            chunks = export_chunks(run, format)
        except ReportUnavailable as exc:
            raise CommandError(str(exc)) from None
        for chunk in chunks:  # written as they come: a large run is never one string
            self.stdout.write(chunk, ending="")
