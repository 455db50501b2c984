from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from experiments.actions import check_run_transition, do_run_action
from experiments.management.commands._helpers import run_by_code
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = "Pause, resume or cancel a run."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["pause", "resume", "cancel"])
        parser.add_argument("run_id")

    def handle(self, *args, action, run_id, **options):
        run = run_by_code(run_id)
        try:
            check_run_transition(run, action)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        if not do_run_action(run, action):
            raise CommandError(
                f"the run changed state meanwhile; it is now {run.__class__.objects.get(pk=run.pk).status}"
            )
        run.refresh_from_db()
        self.stdout.write(f"Run {run.code} is {run.status}")
