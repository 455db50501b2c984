"""The confirm step before a run starts, and the budget fields of the experiment form and spec.

bob is a member, vera a viewer, charlie an outsider (tests/conftest.py). The ``experiment``
fixture samples 4 demo tasks for two mock arms priced by their config.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from experiments.actions import ArmSpec, SpecError, check_experiment_spec, do_replace_arms
from experiments.estimate import estimate_run
from experiments.models import Attempt, Experiment, Run
from tests.conftest import client_for
from tests.forms import ORACLE, form_data


def confirm_url(experiment, **query) -> str:
    url = reverse("experiments:run_confirm", args=[experiment.code])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def test_it_works(bob, experiment):
    response = client_for(bob).get(confirm_url(experiment))

    assert response.status_code == 200
    assert Run.objects.count() == 0
    content = response.content.decode()
    estimate = estimate_run(experiment)
    oracle, noisy = estimate.arms
    assert f"${oracle.max_cost:.4f}" in content and f"${noisy.max_cost:.4f}" in content
    assert f"${estimate.max_cost:.4f}" in content
    assert '<td>oracle</td><td><code>mock/mock-oracle</code></td><td class="num">4</td>' in content
    assert f'action="{reverse("experiments:run_start", args=[experiment.code])}"' in content
    assert "Seed 11 (the experiment's) · run budget none" in content
    assert "<dt>Experiment budget</dt><dd>none</dd>" in content


def test_it_checks_ownership(charlie, experiment):
    response = client_for(charlie).get(confirm_url(experiment))
    assert response.status_code == 404


def test_a_viewer_cannot_start_runs(vera, experiment):
    response = client_for(vera).get(confirm_url(experiment))
    assert response.status_code == 403


def test_the_choices_carry_over_to_the_start_button(bob, experiment):
    response = client_for(bob).get(confirm_url(experiment, seed=5, inference_only="on", budget_usd="3.5"))

    content = response.content.decode()
    assert '<input type="hidden" name="seed" value="5">' in content
    assert '<input type="hidden" name="inference_only" value="on">' in content
    assert '<input type="hidden" name="budget_usd" value="3.50">' in content


def test_it_warns_when_the_maximum_passes_a_budget(bob, experiment):
    max_cost = estimate_run(experiment).max_cost
    assert Decimal("0.01") < max_cost < Decimal("1")  # so a cent is below it and a dollar above
    Experiment.objects.filter(pk=experiment.pk).update(budget_usd=Decimal("1.00"))
    client = client_for(bob)

    fits = client.get(confirm_url(experiment, budget_usd="1")).content.decode()
    tight = client.get(confirm_url(experiment, budget_usd="0.01")).content.decode()

    assert "<dd>$1.00: $0.0000 spent by earlier runs, $1.0000 left</dd>" in fits
    assert "is more than" not in fits
    assert "is more than the run budget: calls that would pass it will not be made" in tight
    assert "Start run</button>" in tight  # a warning, not a refusal


def test_it_names_an_arm_no_budget_can_hold(bob, experiment):
    do_replace_arms(experiment, [ArmSpec("free-for-all", "mock", "mock-oracle", {"mode": "oracle"})])

    content = client_for(bob).get(confirm_url(experiment, budget_usd="5")).content.decode()

    assert '<span class="bad">unknown</span>' in content
    assert "Cannot start a run: arm &#x27;free-for-all&#x27;: mock/mock-oracle has no known price" in content
    assert "Start run</button>" not in content


@pytest.mark.parametrize("amount", ["abc", "0", "-1", "2.001", "99999999"])
def test_a_bad_run_budget_is_named_and_starts_nothing(bob, experiment, amount):
    client = client_for(bob)

    shown = client.get(confirm_url(experiment, budget_usd=amount))
    posted = client.post(reverse("experiments:run_start", args=[experiment.code]), {"budget_usd": amount})

    assert shown.status_code == 200
    assert "Run budget (USD): The budget must be an amount in USD from 0.01 to 1,000,000" in shown.content.decode()
    assert "Start run</button>" not in shown.content.decode()
    assert posted.status_code == 302
    assert Run.objects.count() == 0 and Attempt.objects.count() == 0
    page = client.get(posted["Location"]).content.decode()
    assert "Cannot start a run: Run budget (USD): The budget must be an amount in USD" in page


def test_starting_with_a_budget_keeps_it_on_the_run(bob, experiment):
    response = client_for(bob).post(
        reverse("experiments:run_start", args=[experiment.code]), {"budget_usd": "0.75", "inference_only": "on"}
    )

    assert response.status_code == 302
    run = Run.objects.get()
    assert (run.budget_usd, run.inference_only) == (Decimal("0.75"), True)


# --- the experiment's budget: form and spec, one rule --------------------------------------


def test_the_form_sets_the_experiment_budget(bob, dataset):
    client = client_for(bob)
    response = client.post(reverse("experiments:create"), form_data(dataset, [ORACLE], budget_usd="12.3"))

    assert response.status_code == 302
    experiment = Experiment.objects.get()
    assert experiment.budget_usd == Decimal("12.30")
    assert "$12.30 for all runs together, $0.0000 spent" in client.get(response["Location"]).content.decode()


def test_a_bad_experiment_budget_is_named_and_saves_nothing(bob, dataset):
    response = client_for(bob).post(reverse("experiments:create"), form_data(dataset, [ORACLE], budget_usd="12.345"))

    assert response.status_code == 200
    assert Experiment.objects.count() == 0
    content = response.content.decode()
    assert "The budget must be an amount in USD from 0.01 to 1,000,000, with at most 2 decimals" in content


def spec(dataset, **fields) -> dict:
    return {"name": "Budgeted", "dataset": dataset.name, "arms": [ORACLE], **fields}


@pytest.mark.parametrize("amount", ["lots", 0, -5, 1.005, True, [1], 2_000_000])
def test_a_bad_spec_budget_is_named(org, dataset, amount):
    with pytest.raises(SpecError) as refused:
        check_experiment_spec(org, spec(dataset, budget_usd=amount))
    assert refused.value.messages == [
        "budget_usd: must be an amount in USD from 0.01 to 1,000,000, with at most 2 decimals (e.g. 25.50)"
    ]


@pytest.mark.parametrize(("amount", "kept"), [(25, "25.00"), (12.3, "12.30"), ("0.5", "0.50"), (None, None)])
def test_a_spec_budget_is_kept_to_the_cent(org, dataset, amount, kept):
    checked = check_experiment_spec(org, spec(dataset, budget_usd=amount))
    assert checked.budget_usd == (None if kept is None else Decimal(kept))
