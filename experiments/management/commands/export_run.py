import json

from django.core.management.base import BaseCommand

from experiments.management.commands._helpers import run_by_code
from experiments.reporting import run_export, run_export_csv


class Command(BaseCommand):
    help = "Export a run's leaderboard and attempts to stdout (JSON), or its attempts (CSV)."

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--format", choices=["json", "csv"], default="json")

    def handle(self, *args, run_id, format, **options):
        run = run_by_code(run_id)
        if format == "csv":
            self.stdout.write(run_export_csv(run), ending="")
        else:
            self.stdout.write(json.dumps(run_export(run), indent=2))
