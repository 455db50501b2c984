from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from experiments.actions import SEED_LIMIT, check_start_run, do_start_run, parse_budget_usd
from experiments.board_views import board_views
from experiments.estimate import estimate_run, format_estimate
from experiments.management.commands._helpers import wait_for_run
from experiments.models import Experiment, RunStatus
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = "Start a run of an experiment. Prints the run id alone on the first line."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--experiment", required=True, help="experiment name")
        parser.add_argument("--seed", type=int, help="defaults to the experiment's seed")
        parser.add_argument("--inference-only", action="store_true", help="skip patch validation")
        parser.add_argument("--wait", action="store_true", help="show progress, then the leaderboard")
        parser.add_argument("--budget-usd", help="hard limit on the run's spend, in USD (e.g. 25.50)")
        parser.add_argument(
            "--dry-run", action="store_true", help="print the cost estimate and the checks' verdict; start nothing"
        )

    def handle(self, *args, org, experiment, seed, inference_only, wait, budget_usd, dry_run, **options):
        organisation = org_by_slug(org)
        chosen = Experiment.objects.filter(org=organisation, name=experiment).select_related("dataset").first()
        if chosen is None:
            raise CommandError(f"no experiment named {experiment!r} in {organisation.slug}")
        if seed is not None and not -SEED_LIMIT <= seed <= SEED_LIMIT:
            raise CommandError(f"--seed must be between {-SEED_LIMIT} and {SEED_LIMIT}")
        budget, problem = parse_budget_usd(budget_usd)
        if problem:
            raise CommandError(f"--budget-usd {problem}")
        if dry_run:
            self.stdout.write(format_estimate(estimate_run(chosen, seed)))
        try:
            check_start_run(chosen, inference_only=inference_only, budget_usd=budget)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        if dry_run:
            self.stdout.write("Dry run: the checks pass; nothing was started.")
            return
        run = do_start_run(chosen, seed=seed, inference_only=inference_only, budget_usd=budget)
        self.stdout.write(str(run.code))
        self.stdout.flush()
        if not wait:
            return
        run = wait_for_run(run)
        self.stdout.write(f"Run {run.code} {run.status}\n")
        self.stdout.write(board_views().board_text(run))
        if run.status != RunStatus.COMPLETED:
            raise CommandError(f"run {run.code} ended {run.status}")
