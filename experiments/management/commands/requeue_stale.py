from collections import defaultdict

from django.core.management.base import CommandError

from prbench.inputs import CheckedCommand
from prbench.recovery import run_recovery_sweep, sweep_forever


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
            self.report(run_recovery_sweep(stale_after))
            return
        sweep_forever(every, stale_after, self.report)

    def report(self, report: dict[str, int]) -> None:
        count = defaultdict(int, report)  # a step left out of PRBENCH_RECOVERY_STEPS did nothing
        self.stdout.write(
            f"reaped {count['dead_workers']} dead worker(s); freed {count['freed_slots']} arm slot(s) of dead ones; "
            f"reclaimed {count['reclaimed']} abandoned attempt(s); rebuilt jobs for {count['requeued_runs']} run(s); "
            f"enqueued {count['jobs']} job(s); queued {count['unjudged']} unjudged attempt(s) for the evaluator; "
            f"refreshed the boards of {count['summaries']} run(s); "
            f"queued {count['webhooks']} overdue webhook delivery(ies); "
            f"pruned {count['audit_pruned']} old API key use(s) from the audit log; "
            f"queued {count['exports_requeued']} abandoned export(s) again; "
            f"deleted {count['exports_expired']} expired export file(s)"
        )
        self.stdout.flush()
