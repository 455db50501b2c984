"""POST /api/runs/{id}/gate: the CI gate over the API, with the command's rules and figures."""

from __future__ import annotations

import pytest

from tests.conftest import api_client, make_api_key
from tests.factories import arm


def gate(client, run, **body):
    return client.post(f"/api/runs/{run.code}/gate", body, content_type="application/json")


def test_a_run_passes_or_fails_with_a_markdown_summary(org, finished_run):
    baseline = finished_run(arm("model"))
    candidate = finished_run(arm("model", "noisy", 0.3))
    client = api_client(make_api_key(org, ["read"]))
    passing = gate(client, baseline, min_quality_lower_bound=0.5)
    assert passing.status_code == 200, passing.content
    assert passing.json()["verdict"] == "pass" and passing.json()["passed"] is True
    failing = gate(client, candidate, baseline=str(baseline.code), min_quality_lower_bound=0.1)
    body = failing.json()
    assert failing.status_code == 200 and body["verdict"] == "fail"
    [model] = body["arms"]
    verdicts = {check["name"]: check["verdict"] for check in model["checks"]}
    assert verdicts == {"min_quality_lower_bound": "pass", "baseline": "fail"}
    assert body["markdown"].startswith("## ❌ PRBench gate: FAIL")


def test_bad_thresholds_name_their_field(org, finished_run):
    run = finished_run(arm("model"))
    client = api_client(make_api_key(org, ["read"]))
    for body, field in (
        ({"min_quality_lower_bound": 1.5}, "min_quality_lower_bound"),
        ({"max_p95_latency": -1}, "max_p95_latency"),
        ({"min_quality_lower_bound": 0.5, "arms": ["nope"]}, "arms"),
        ({"baseline": "00000000-0000-0000-0000-000000000000"}, "baseline"),
        ({"min_quality_lower_bound": "lots"}, "min_quality_lower_bound"),
    ):
        response = gate(client, run, **body)
        assert response.status_code == 422, (body, response.content)
        assert response.json()["error"]["field"] == field, (body, response.json())
    nothing = gate(client, run)
    assert nothing.status_code == 422 and "at least one check" in nothing.json()["error"]["message"]


def test_an_unfinished_run_is_a_409_and_an_outsider_gets_404(org, finished_run, charlie):
    from orgs.models import Organization

    running = finished_run(arm("model"), finish=False)
    response = gate(api_client(make_api_key(org, ["read"])), running, min_quality_lower_bound=0.5)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "not_finished"
    outsider = api_client(make_api_key(Organization.objects.get(slug="other"), ["read"]))
    assert gate(outsider, running, min_quality_lower_bound=0.5).status_code == 404


@pytest.mark.parametrize("scopes", [["run"]])
def test_gating_needs_the_read_scope(org, finished_run, scopes):
    run = finished_run(arm("model"))
    assert gate(api_client(make_api_key(org, scopes)), run, min_quality_lower_bound=0.5).status_code == 403


def test_a_gate_that_cannot_decide_says_inconclusive(org, finished_run):
    baseline = finished_run(arm("model", "noisy", 0.8), sample_size=20)
    candidate = finished_run(arm("model", "noisy", 0.7), sample_size=20)
    client = api_client(make_api_key(org, ["read"]))
    response = gate(client, candidate, baseline=str(baseline.code))
    body = response.json()
    assert response.status_code == 200, response.content
    assert (body["verdict"], body["passed"]) == ("inconclusive", False)
    [model] = body["arms"]
    assert model["verdict"] == "inconclusive" and model["checks"][0]["verdict"] == "inconclusive"
    assert 0 < model["checks"][0]["figures"]["minimum_detectable_difference"] < 1
    assert body["markdown"].startswith("## ❔ PRBench gate: INCONCLUSIVE")
