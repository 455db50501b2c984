"""Another system's recorded answers as an arm: a SWE-bench predictions file, replayed.

A replay arm calls no model. Its answers were produced elsewhere (an agent's published
predictions, a run of another tool) and imported with ``import_predictions``; the pipeline
puts the task's recorded answer on the request (``recorded_answer``) and this adapter hands
it back, so the patch is validated, scored and judged exactly like a live arm's. A task the
file has no line for gets no answer, a failure of the replayed system (``NO_ANSWER``), as the
harness counts an instance left out of a predictions file as not resolved.

It sends nothing anywhere, so it needs no credential and the allowlist does not govern it;
what it cost and how long it took are unknown (not zero), and it stores no timings.
"""

from __future__ import annotations

from decimal import Decimal

from providers.adapters.base import Adapter
from providers.adapters.config import integer
from providers.errors import ErrorCategory, ProviderError
from providers.models import Price
from providers.types import Completion, CompletionRequest, Usage

# Which imported predictions the arm replays: the id of their set, written by import_predictions.
PREDICTIONS_KEY = "predictions"
NO_ANSWER_MESSAGE = "the replayed predictions have no answer for this task"


class ReplayAdapter(Adapter):
    name = "replay"
    uses_credential = False
    sends_requests = False
    can_be_agent = False
    test_model = "replay"
    # Nothing else: a temperature or token limit would pretend to shape answers already given.
    config_keys = {
        PREDICTIONS_KEY: integer(
            1, 2**63 - 1, label="Predictions", help="The id of the imported predictions (import_predictions sets it)"
        )
    }

    @classmethod
    def configured_price(cls, config: dict) -> Price | None:
        # Replaying costs this organisation nothing: estimates and budgets count it as free.
        # The answers' own cost (the replayed system's) stays unknown on each attempt.
        return Price(provider=cls.name, input_per_mtok=Decimal(0), output_per_mtok=Decimal(0))

    @classmethod
    def config_errors(cls, model_name: str, config: dict) -> list[str]:
        errors = super().config_errors(model_name, config)
        if not errors and PREDICTIONS_KEY not in config:
            errors.append(f"config.{PREDICTIONS_KEY} is required (import_predictions sets it)")
        return errors

    def generate(self, request: CompletionRequest) -> Completion:
        if request.recorded_answer is None:
            raise ProviderError(ErrorCategory.NO_ANSWER, NO_ANSWER_MESSAGE)
        return Completion(
            text=request.recorded_answer,
            finish_reason="replayed",
            usage=Usage(),
            latency_ms=0,
            cost_usd=None,
            model_served=self.arm.model_name,
            cost_source="",
            usage_reported=False,  # no token counts were sent: nothing is priced from the zeros
            replayed=True,
        )
