from decimal import Decimal

from tqdm import tqdm

from experiments.management.commands._helpers import run_by_code
from experiments.models import Attempt, AttemptStatus, RunArm
from experiments.response_cache import CACHE_COST_SOURCE
from experiments.signals import announce_run_changed
from prbench.inputs import CheckedCommand
from providers.policy import served_model
from providers.pricing import catalog_price, forget_catalog, price_cost
from providers.types import Usage


class Command(CheckedCommand):
    help = "Re-price answered attempts from the price catalog in force when each one ran."

    def add_arguments(self, parser):
        parser.add_argument("--run", help="only this run's attempts")

    def handle(self, *args, run, **options):
        forget_catalog()
        # Costs the provider reported itself (OpenRouter, the mock) are facts, not estimates;
        # an answer reused from the response cache cost nothing, whatever its tokens.
        attempts = Attempt.objects.filter(status=AttemptStatus.COMPLETED).exclude(
            cost_source__in=("provider", CACHE_COST_SOURCE)
        )
        if run:
            attempts = attempts.filter(run=run_by_code(run))
        changed = []
        served: dict[int, str] = {}  # per arm: its credential is read once, not per attempt
        for attempt in tqdm(attempts.select_related("arm__run").iterator(), total=attempts.count(), unit="attempt"):
            if attempt.arm_id not in served:
                served[attempt.arm_id] = _served_model(attempt.arm)
            cost, breakdown = _catalog_cost(attempt, served[attempt.arm_id])
            if cost != attempt.cost_usd or breakdown != attempt.cost_breakdown:
                attempt.cost_usd, attempt.cost_breakdown = cost, breakdown
                attempt.cost_source = "catalog" if cost is not None else ""
                changed.append(attempt)
        Attempt.objects.bulk_update(changed, ["cost_usd", "cost_source", "cost_breakdown"], batch_size=500)
        for run_id in sorted({attempt.run_id for attempt in changed}):
            announce_run_changed(run_id)  # the cost board reads the run's summaries
        self.stdout.write(f"re-priced {len(changed)} attempt(s)")


def _served_model(arm: RunArm) -> str:
    """What the arm's calls are priced as: an Azure deployment as the model it serves."""
    return served_model(arm.run.org_id, arm.provider, arm.model_name, arm.credential_name)


def _catalog_cost(attempt: Attempt, model: str) -> tuple[Decimal | None, dict[str, str]]:
    usage = Usage(
        input_tokens=attempt.input_tokens or 0,
        output_tokens=attempt.output_tokens or 0,
        cached_tokens=attempt.cached_tokens or 0,
        cache_write_tokens=attempt.cache_write_tokens or 0,
        cache_write_1h_tokens=attempt.cache_write_1h_tokens or 0,
        reasoning_tokens=attempt.reasoning_tokens or 0,
    )
    answered = attempt.responded_at or attempt.queued_at  # completed attempts have both
    price = catalog_price(attempt.arm.provider, model, answered.date())
    return (None, {}) if price is None else price_cost(usage, price)
