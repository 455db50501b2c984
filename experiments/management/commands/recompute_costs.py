from tqdm import tqdm

from experiments.management.commands._helpers import run_by_code
from experiments.models import Attempt, AttemptStatus
from prbench.inputs import CheckedCommand
from providers.pricing import catalog_cost, forget_catalog
from providers.types import Usage


class Command(CheckedCommand):
    help = "Re-price answered attempts from the price catalog in force when each one ran."

    def add_arguments(self, parser):
        parser.add_argument("--run", help="only this run's attempts")

    def handle(self, *args, run, **options):
        forget_catalog()
        # Costs the provider reported itself (OpenRouter, the mock) are facts, not estimates.
        attempts = Attempt.objects.filter(status=AttemptStatus.COMPLETED).exclude(cost_source="provider")
        if run:
            attempts = attempts.filter(run=run_by_code(run))
        changed = []
        for attempt in tqdm(attempts.select_related("arm").iterator(), total=attempts.count(), unit="attempt"):
            usage = Usage(attempt.input_tokens or 0, attempt.output_tokens or 0, attempt.cached_tokens or 0)
            cost = catalog_cost(attempt.arm.provider, attempt.arm.model_name, usage, attempt.responded_at.date())
            if cost != attempt.cost_usd:
                attempt.cost_usd, attempt.cost_source = cost, "catalog" if cost is not None else ""
                changed.append(attempt)
        Attempt.objects.bulk_update(changed, ["cost_usd", "cost_source"], batch_size=500)
        self.stdout.write(f"re-priced {len(changed)} attempt(s)")
