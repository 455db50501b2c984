from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from django import forms
from django.http import HttpRequest
from django.utils import timezone

from datasets.models import Dataset
from experiments.access import access_runs
from experiments.models import RUN_FINISHED, Run
from orgs.models import Organization

MAX_COMPARED_RUNS = 50  # a page's worth: the trend chart and its table stay readable


def short(run: Run) -> str:
    return str(run.code)[:8]


class RunCodesField(forms.MultipleChoiceField):
    """The runs' public ids. Which of them the user may see is the access layer's question
    (CrossRunForm.clean_runs), so an id outside the choices is not refused here with
    Django's anonymous "not one of the available choices"."""

    def valid_value(self, value: Any) -> bool:
        return True


class CrossRunForm(forms.Form):
    """Which runs an organisation board compares: runs picked one by one, or every finished
    run of one dataset in the last N days. Either way they are finished runs of one dataset
    of the user's current organisation, validated (not inference-only, at most
    MAX_COMPARED_RUNS); ``cleaned_data["selected"]`` holds them."""

    runs = RunCodesField(required=False, widget=forms.CheckboxSelectMultiple)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), to_field_name="code", required=False)
    days = forms.IntegerField(required=False, min_value=1, max_value=366, label="Last N days")

    def __init__(self, data: Any, *, request: HttpRequest, org: Organization):
        super().__init__(data)
        self.request, self.org = request, org
        self.fields["dataset"].queryset = Dataset.objects.filter(org=org)  # type: ignore[attr-defined]
        cast(RunCodesField, self.fields["runs"]).choices = [
            (str(run.code), run)
            for run in Run.objects.filter(org=org, status__in=RUN_FINISHED, inference_only=False)
            .select_related("experiment__dataset")
            .order_by("-created_at")[:200]
        ]

    @property
    def picked(self) -> list[str]:
        """The run ids ticked, to tick them again when the page comes back."""
        return self.request.GET.getlist("runs")

    def clean_runs(self) -> list[Run]:
        codes = self.cleaned_data["runs"]
        found = access_runs(self.request, codes)
        missing = [code for code in codes if code not in found]
        if missing:
            raise forms.ValidationError(f"Run {missing[0]}: not found.")
        return list(dict.fromkeys(found[code] for code in codes))

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        picked: list[Run] = data.get("runs") or []
        dataset: Dataset | None = data.get("dataset")
        days: int | None = data.get("days")
        if picked and (dataset or days):
            raise forms.ValidationError("Pick runs, or choose a dataset and a number of days: not both.")
        if picked:
            selected = picked
        elif dataset is not None and days is not None:
            selected = self._window(dataset, days)
        else:
            raise forms.ValidationError("Pick at least one run, or choose a dataset and a number of days.")
        self._check_comparable(selected)
        data["selected"] = selected
        return data

    def _window(self, dataset: Dataset, days: int) -> list[Run]:
        since = timezone.now() - timedelta(days=days)
        runs = list(
            Run.objects.filter(
                org=self.org,
                experiment__dataset=dataset,
                status__in=RUN_FINISHED,
                inference_only=False,
                finished_at__gte=since,
            ).select_related("experiment__dataset")
        )
        if not runs:
            raise forms.ValidationError(f"No run of {dataset.name} finished in the last {days} days.")
        return runs

    def _check_comparable(self, runs: list[Run]) -> None:
        if len(runs) > MAX_COMPARED_RUNS:
            raise forms.ValidationError(f"At most {MAX_COMPARED_RUNS} runs at once: {len(runs)} were chosen.")
        first = runs[0]
        for run in runs:
            if run.experiment.dataset_id != first.experiment.dataset_id:
                raise forms.ValidationError(
                    f"Run {short(run)} is on dataset {run.experiment.dataset.name}, not on "
                    f"{first.experiment.dataset.name} like run {short(first)}: only runs of one dataset compare."
                )
            if not run.is_finished:
                raise forms.ValidationError(f"Run {short(run)} is {run.status}: only finished runs are compared.")
            if run.inference_only:
                raise forms.ValidationError(f"Run {short(run)} was inference-only: it has no quality to compare.")
