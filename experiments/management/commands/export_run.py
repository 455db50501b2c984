import json

from django.core.management.base import CommandError

from experiments.management.commands._helpers import run_by_code
from experiments.reporting import run_export, run_export_csv
from experiments.swebench_export import ReportUnavailable, swebench_predictions, swebench_report
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Export a run to stdout: its leaderboard and attempts (json), its attempts (csv), SWE-bench "
        "predictions (swebench-preds, JSONL) or a SWE-bench style report per arm (swebench-report)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--format", choices=["json", "csv", "swebench-preds", "swebench-report"], default="json")

    def handle(self, *args, run_id, format, **options):
        run = run_by_code(run_id)
        if format == "csv":
            self.stdout.write(run_export_csv(run), ending="")
        elif format == "swebench-preds":
            for prediction in swebench_predictions(run):
                self.stdout.write(json.dumps(prediction))
        elif format == "swebench-report":
            try:
                self.stdout.write(json.dumps(swebench_report(run), indent=2))
            except ReportUnavailable as exc:
                raise CommandError(str(exc)) from None
        else:
            self.stdout.write(json.dumps(run_export(run), indent=2))
