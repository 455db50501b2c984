from django.core.management.base import CommandError

from evaluation.agreement import agreement, describe
from evaluation.evaluator import profile_by_reference
from experiments.management.commands._helpers import run_by_code
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Agreement of two evaluator profiles on the attempts both judged (Spearman of overall scores, "
        "Cohen's kappa of change risk) and each one's AUC of correctness confidence for the test outcome."
    )

    def add_arguments(self, parser):
        parser.add_argument("--profile", action="append", required=True, metavar="NAME[:VERSION]")
        parser.add_argument("--run", help="only this run's attempts (its id)")

    def handle(self, *args, profile, run, **options):
        if len(profile) != 2:
            raise CommandError("give exactly two --profile options")
        try:
            first, second = (profile_by_reference(reference) for reference in profile)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if run:
            run_by_code(run)  # an unknown id is named, not a traceback
        self.stdout.write("\n".join(describe(agreement(first, second, run))))
