"""A request the provider refuses for the arm's own settings is a configuration failure: never
in a quality figure, and in a column of its own on the board, the API, the JSON export, the
command line's board and the CI gate. Runs made by the real pipeline with the mock provider
(MMLU's 56 sample questions)."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command
from django.urls import reverse

from leaderboards.boards import run_boards
from leaderboards.exports import run_summary
from leaderboards.reporting import run_board_text
from providers.outcomes import OutcomeClass
from tests.conftest import api_client, client_for, make_api_key
from tests.factories import arm


def test_a_refused_setting_is_its_own_column_everywhere(org, alice, finished_run, tmp_path):
    misconfigured = arm("oracle", failure_rate=0.3, failure_category="unsupported_parameter")
    run = finished_run(misconfigured, arm("outage", failure_rate=0.3, failure_category="server_error"))
    refused = run.attempts.filter(arm__label="oracle", status="failed")
    count = refused.count()
    assert 0 < count < 56
    assert set(refused.values_list("outcome", flat=True)) == {OutcomeClass.CONFIGURATION_FAILURE}

    boards = run_boards(run, {}, lambda *_: "")
    assert boards.quality is not None
    row = next(e.arm for e in boards.quality.entries if e.arm.label == "oracle")
    # Not scored: every answer the model gave was right, and no failure is the model's.
    assert (row.n, row.resolved_rate, row.error_rate) == (56 - count, 1.0, 0.0)
    assert (row.configuration_failed, row.infrastructure_failed) == (count, 0)
    reliability = {r["label"]: r for r in boards.reliability}
    assert reliability["oracle"]["misconfigured"] == count and reliability["oracle"]["failed"] == 0
    assert reliability["oracle"]["configuration_causes"] == [("unsupported_parameter", count)]
    assert reliability["outage"]["misconfigured"] == 0 and reliability["outage"]["failed"] > 0

    api = api_client(make_api_key(org, ["read"])).get(f"/api/runs/{run.code}/leaderboards")
    assert api.status_code == 200
    quality = {e["arm"]["label"]: e for e in api.json()["quality"]["entries"]}
    assert quality["oracle"]["configuration_failed"] == count and quality["oracle"]["scored"] == 56 - count
    api_reliability = {r["arm"]: r for r in api.json()["reliability"]}
    assert api_reliability["oracle"]["configuration_failures"] == count
    assert api_reliability["oracle"]["configuration_causes"] == {"unsupported_parameter": count}

    exported = {a["label"]: a for a in run_summary(run)["arms"]}
    assert exported["oracle"]["configuration_failed"] == count and exported["outage"]["configuration_failed"] == 0

    header, *lines = run_board_text(run).splitlines()
    assert header.split()[-2:] == ["infra", "config"]
    oracle_line = next(line for line in lines if line.split()[1:2] == ["oracle"])
    assert oracle_line.split()[-2:] == ["0", str(count)]

    page = client_for(alice).get(reverse("experiments:run", args=[run.code]))
    assert page.status_code == 200
    assert "Configuration failures" in page.content.decode()

    out = StringIO()
    json_path = tmp_path / "gate.json"
    options = ["--org", org.slug, "--run", str(run.code), "--min-quality", "0.5", "--json", str(json_path)]
    call_command("ci_gate", *options, stdout=out)
    assert "| Infrastructure failures | Configuration failures |" in out.getvalue()
    assert f"| 0 | {count} |" in out.getvalue()
    gated = {a["label"]: a for a in json.loads(json_path.read_text())["arms"]}
    assert gated["oracle"]["configuration_failed"] == count and gated["oracle"]["infrastructure_failed"] == 0
