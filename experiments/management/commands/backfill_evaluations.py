import sys
from datetime import datetime

from django.core.management.base import CommandError
from django.utils import timezone
from tqdm import tqdm

from evaluation.evaluator import profile_by_reference
from experiments.judging import estimated_cost, judge_attempts, unjudged_attempts
from experiments.management.commands._helpers import run_by_code
from prbench.inputs import CheckedCommand

CHUNK = 20  # attempts claimed and judged at a time: an interruption loses at most this many claims


class Command(CheckedCommand):
    help = (
        "Judge historic attempts that have no verdict of a profile yet. Safe to interrupt and run again: "
        "an attempt is never judged twice by one profile."
    )

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, metavar="NAME[:VERSION]")
        parser.add_argument("--run", help="only this run's attempts (its id)")
        parser.add_argument("--since", help="only attempts scored on or after this date (YYYY-MM-DD)")
        parser.add_argument("--dry-run", action="store_true", help="say how many and what it would cost; judge none")
        parser.add_argument("--limit", type=int, help="at most this many attempts")

    def handle(self, *args, profile, run, since, dry_run, limit, **options):
        try:
            chosen = profile_by_reference(profile)
            since_at = _date(since) if since else None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if limit is not None and limit < 1:
            raise CommandError("--limit must be at least 1")
        if run:
            run_by_code(run)  # an unknown id is named, not a traceback
        attempts = unjudged_attempts(chosen, run, since_at)
        ids = list(attempts.values_list("pk", flat=True)[:limit])
        if dry_run:
            cost = estimated_cost(chosen, attempts.filter(pk__in=ids))
            price = "unknown (no catalog price for this model)" if cost is None else f"about ${cost:.4f}"
            self.stdout.write(f"{len(ids)} attempt(s) to judge with {chosen}; estimated cost {price}")
            return
        recorded = 0
        with tqdm(total=len(ids), unit="attempt", desc="judging", file=sys.stderr) as bar:
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                recorded += judge_attempts(chosen.pk, chunk)
                bar.update(len(chunk))
        skipped = len(ids) - recorded
        self.stdout.write(
            f"Judged {recorded} attempt(s) with {chosen}"
            + (
                f"; {skipped} were being judged by another job (run again later to pick up any it dropped)"
                if skipped
                else ""
            )
        )


def _date(text: str) -> datetime:
    try:
        day = datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise ValueError(f"--since {text}: expected a date as YYYY-MM-DD") from None
    return timezone.make_aware(day)
