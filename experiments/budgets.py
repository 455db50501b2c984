"""A run's hard budgets: what the gateway holds its calls to, and what the run page shows.

The limits are read with the run once per job, so a budget changed on the
experiment mid-run applies from the next job on.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q, Sum

from experiments.models import Experiment, Run, RunCounters
from providers.budget import Budget, experiment_budget_key, run_budget_key

ZERO = Decimal(0)


def recorded_spend(run: Run) -> tuple[Decimal, Decimal]:
    """What the run and its experiment's runs have spent, as recorded: one aggregate."""
    totals = _totals(run)
    return totals["run"], totals["experiment"]


def _totals(run: Run) -> dict:
    """From the counters of the experiment's runs (experiments/run_counters.py): a sum over
    a row per run, whatever the runs' sizes, for the run page's poll and each claiming job."""
    totals = RunCounters.objects.filter(run__experiment_id=run.experiment_id).aggregate(
        run=Sum("spent_usd", filter=Q(run_id=run.pk)),
        experiment=Sum("spent_usd"),
        not_made=Sum("budget_refused", filter=Q(run_id=run.pk)),
    )
    spent = {"run": totals["run"] or ZERO, "experiment": totals["experiment"] or ZERO}
    return {**spent, "not_made": totals["not_made"] or 0}


def run_budgets(run: Run) -> tuple[Budget, ...]:
    """The budgets a call of this run counts against, with the spend already recorded, for
    the gateway (its pool threads use them without the database). None: no query for spend."""
    if hasattr(run, "experiment_budget_usd"):  # read with the run (the pipeline's jobs do)
        experiment_limit = run.experiment_budget_usd
    else:
        experiment_limit = Experiment.objects.filter(pk=run.experiment_id).values_list("budget_usd", flat=True).first()
    if run.budget_usd is None and experiment_limit is None:
        return ()
    run_spent, experiment_spent = recorded_spend(run)
    budgets = []
    if run.budget_usd is not None:
        budgets.append(Budget(run_budget_key(run.pk), "run budget", run.budget_usd, run_spent))
    if experiment_limit is not None:
        budgets.append(
            Budget(experiment_budget_key(run.experiment_id), "experiment budget", experiment_limit, experiment_spent)
        )
    return tuple(budgets)


@dataclass(frozen=True)
class BudgetStatus:
    """What the run page says about budgets; limits None when not set."""

    run_limit: Decimal | None
    run_spent: Decimal
    experiment_limit: Decimal | None
    experiment_spent: Decimal
    not_made: int  # attempts refused by a budget, never sent to the provider

    @property
    def any(self) -> bool:
        return self.run_limit is not None or self.experiment_limit is not None or bool(self.not_made)


def budget_status(run: Run) -> BudgetStatus:
    """One query, and none for a run without budgets (only a budget refuses attempts)."""
    if run.budget_usd is None and run.experiment.budget_usd is None:
        return BudgetStatus(None, ZERO, None, ZERO, 0)
    totals = _totals(run)
    return BudgetStatus(
        run.budget_usd, totals["run"], run.experiment.budget_usd, totals["experiment"], totals["not_made"]
    )


def experiment_spend(experiment: Experiment) -> Decimal:
    """What every run of the experiment has spent, as recorded."""
    return RunCounters.objects.filter(run__experiment=experiment).aggregate(spent=Sum("spent_usd"))["spent"] or ZERO
