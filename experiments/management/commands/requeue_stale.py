from django.core.management.base import CommandError

from experiments.actions import RequeueReport, do_requeue_stale
from experiments.management.commands._helpers import sweep_forever
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = "Re-queue attempts abandoned by crashed workers and rebuild jobs lost with Redis."

    def add_arguments(self, parser):
        parser.add_argument(
            "--stale-after",
            type=int,
            help="seconds, for attempts claimed before worker leases existed (others are reclaimed when their "
            "worker's lease runs out); default PRBENCH_STALE_AFTER_SECONDS",
        )
        parser.add_argument("--every", type=int, help="keep sweeping every N seconds")

    def handle(self, *args, stale_after, every, **options):
        # A limit of 0 or less would take every running attempt from its live worker.
        for option, value in (("--stale-after", stale_after), ("--every", every)):
            if value is not None and value < 1:
                raise CommandError(f"{option} must be a number of seconds of at least 1, not {value}")
        if every is None:
            self.report(do_requeue_stale(stale_after))
            return
        sweep_forever(every, stale_after, self.report)

    def report(self, report: RequeueReport) -> None:
        self.stdout.write(
            f"reclaimed {report.reclaimed} abandoned attempt(s); rebuilt jobs for {report.requeued_runs} run(s); "
            f"enqueued {report.jobs} job(s); queued {report.unjudged} unjudged attempt(s) for the evaluator; "
            f"refreshed the boards of {report.summaries} run(s); "
            f"queued {report.webhooks} overdue webhook delivery(ies); "
            f"pruned {report.audit_pruned} old API key use(s) from the audit log"
        )
        self.stdout.flush()
