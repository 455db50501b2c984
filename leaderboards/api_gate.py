"""``POST /api/runs/{id}/gate``: the CI gate over the API, as ``manage.py ci_gate`` gives it.

One validation (``check_gate_request``, inside ``evaluate_gate``) serves both; a refused request
is a 422 naming its field, a run not finished yet a 409 (poll ``GET /api/runs/{id}`` and ask
again), and the answer carries the verdict per arm and check and the Markdown for a PR comment. An
"inconclusive" verdict is the caller's to treat as a pass or a failure (``ci_gate --inconclusive``).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from experiments.access import access_run
from leaderboards.gate import BOARD_CONFIDENCE, GateRequest, evaluate_gate, gate_markdown
from orgs.api_auth import READ
from prbench.api_support import WITH_CONFLICT, JsonBody, JsonDecimal, json_body, read_body

router = Router(tags=["gate"])


class GateIn(JsonBody):
    min_quality_lower_bound: float | None = Field(
        None, description="Each arm's quality Wilson lower bound must reach this share"
    )
    baseline: str | None = Field(
        None,
        description="A run of the organisation, by public id: no significant regression against it on shared tasks",
    )
    max_cost_per_task: JsonDecimal | None = Field(None, description="USD; an unknown cost fails")
    max_p95_latency: float | None = Field(None, description="Seconds")
    arms: list[str] = Field(default_factory=list, description="Arm labels to gate; empty: every arm")
    baseline_arms: dict[str, str] = Field(
        default_factory=dict, description="This run's label -> the baseline's label, where they differ"
    )
    confidence: float = BOARD_CONFIDENCE


class GateCheckOut(Schema):
    name: str
    verdict: str
    value: str
    threshold: str
    detail: str
    figures: dict[str, Any]


class GateArmOut(Schema):
    label: str
    baseline_label: str | None
    verdict: str = Field(description="pass, fail or inconclusive")
    passed: bool
    checks: list[GateCheckOut]


class GateOut(Schema):
    verdict: str = Field(
        description="pass, fail, or inconclusive: a baseline shares too few tasks to tell, and no check failed"
    )
    passed: bool
    run: str
    run_url: str
    baseline: str | None
    baseline_url: str
    metric: str
    confidence: float
    arms: list[GateArmOut]
    markdown: str


@router.post(
    "/runs/{run_id}/gate",
    response={200: GateOut, **WITH_CONFLICT},
    auth=READ,
    summary="Gate a finished run on thresholds and a baseline (the CI gate)",
    openapi_extra=json_body(GateIn),
)
def gate_run(request: HttpRequest, run_id: str) -> dict[str, Any]:
    run = access_run(request, run_id)
    payload = read_body(request, GateIn)
    gate_request = GateRequest(
        min_quality_lower_bound=payload.min_quality_lower_bound,
        baseline=payload.baseline,
        max_cost_per_task=payload.max_cost_per_task,
        max_p95_latency=payload.max_p95_latency,
        arms=tuple(payload.arms),
        baseline_arms=dict(payload.baseline_arms),
        confidence=payload.confidence,
    )
    result = evaluate_gate(run, gate_request)
    return result.as_dict() | {"markdown": gate_markdown(result)}
