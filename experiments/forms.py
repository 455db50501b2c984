from __future__ import annotations

from decimal import Decimal
from typing import cast

from django import forms
from django.core.validators import MinValueValidator
from django.http import Http404
from django.urls import reverse

from datasets.models import Dataset
from evaluation.workloads import workload_for, workload_kinds
from evaluation.workloads.wording import wording_for
from experiments.actions import (
    SEED_LIMIT,
    ArmSpec,
    ExperimentSpec,
    builtin_prompt,
    check_experiment_name_free,
    check_prompt_choices,
    check_strata,
    grading_problem,
    parse_budget_usd,
    prompt_for_kind,
    prompt_template_errors,
)
from experiments.arm_forms import BaseArmFormSet
from experiments.attempt_list import QUESTION_TASKS, AttemptQuery, Scope
from experiments.list_widgets import ListSelect, ListTextInput
from experiments.models import Allocation, AttemptStatus, ContextMode, Experiment, Run
from orgs.models import Organization
from prbench.inputs import (
    DESCRIPTION_MAX,
    NAME_MAX,
    PROMPT_TEMPLATE_MAX,
    TextValidator,
    normalised_newlines,
)
from providers.errors import ErrorCategory
from providers.outcomes import OUTCOME_LABELS


def all_grading_modes() -> list[str]:
    return list(dict.fromkeys(mode for kind in workload_kinds() for mode in workload_for(kind).grading_modes))


class ExperimentForm(forms.ModelForm):
    class Meta:
        model = Experiment
        fields = [
            "name",
            "description",
            "dataset",
            "sample_size",
            "sample_strategy",
            "stratify_by",
            "allocation",
            "sample_seed",
            "repetitions",
            "prompt_template",
            "prompt_builtin",
            "few_shot_dataset",
            "few_shot_k",
            "context_mode",
            "include_quarantined",
            "budget_usd",
            "response_cache",
            "grading",
        ]
        labels = {
            "sample_seed": "Seed",
            "sample_size": "Sample size",
            "context_mode": "Files shown (repository tasks)",
            "include_quarantined": "Include quarantined (flaky) tasks",
            "response_cache": "Reuse cached answers (temperature 0 only)",
        }
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "prompt_template": forms.Textarea(attrs={"rows": 10}),
        }

    def __init__(self, *args, org: Organization, **kwargs):
        self.template_given = "prompt_template" in (kwargs.get("initial") or {})
        super().__init__(*args, **kwargs)
        self.org = org
        cast(forms.ModelChoiceField, self.fields["dataset"]).queryset = Dataset.objects.filter(org=org)
        cast(forms.ModelChoiceField, self.fields["few_shot_dataset"]).queryset = Dataset.objects.filter(org=org)
        self.fields[
            "prompt_builtin"
        ].help_text = (
            "A built-in prompt of the dataset's kind by name@version (e.g. cot@1): it replaces the template above"
        )
        self.fields["name"].validators.append(TextValidator(NAME_MAX))
        for field, limit in (("description", DESCRIPTION_MAX), ("prompt_template", PROMPT_TEMPLATE_MAX)):
            self.fields[field].validators.append(TextValidator(limit, multiline=True))
            self.fields[field].widget.attrs["maxlength"] = str(limit)
        self.fields["sample_size"].validators.append(MinValueValidator(1))
        # Only repository tasks use it: a form (or a script) that leaves it out means the default.
        self.fields["context_mode"].required = False
        self.fields["allocation"].required = False  # stratified samples only; proportional by default
        self.fields["few_shot_k"].required = False  # few-shot prompts only
        self._ask_with_the_datasets_prompt()

    def _ask_with_the_datasets_prompt(self) -> None:
        """The template field follows the dataset: a new experiment starts from the chosen (or
        first) dataset's kind's default, and choosing another dataset swaps in that kind's
        default (htmx; without JavaScript, saving does the same) unless the text was changed."""
        self.fields["prompt_template"].required = False  # empty: the dataset kind's default
        self.fields["prompt_template"].help_text = (
            "{{problem_statement}} is the task's question or problem; each kind fills its own placeholders "
            "({{choices}}, {{repository}}, {{examples}}). Empty: the dataset kind's default prompt."
        )
        self.fields["dataset"].widget.attrs.update(
            {
                "hx-post": reverse("experiments:prompt_for_dataset"),
                "hx-trigger": "change",
                "hx-target": "#prompt-template-field",
                "hx-swap": "outerHTML",
            }
        )
        if self.is_bound or self.instance.pk or self.template_given:
            return
        datasets = Dataset.objects.filter(org=self.org)
        chosen = self.initial.get("dataset")
        dataset = (datasets.filter(pk=chosen).first() if chosen else None) or datasets.first()
        if dataset is not None:
            self.initial["dataset"] = dataset.pk
            self.initial["prompt_template"] = workload_for(dataset.kind).default_prompt

    def chosen_dataset(self, value: str | None) -> Dataset:
        """The organisation's dataset ``value`` (the dataset field's value) names; ``Http404``
        for any other, an outsider's included."""
        try:
            return self.fields["dataset"].clean(value)
        except forms.ValidationError:
            raise Http404("no such dataset") from None

    # Text, checked by the one rule for budgets (parse_budget_usd) that specs and commands use.
    budget_usd = forms.CharField(required=False, max_length=40, label="Budget (USD, all runs together)")

    def clean_budget_usd(self) -> Decimal | None:
        return _budget_field(self.cleaned_data["budget_usd"])

    # Every kind's modes; which of them the chosen dataset's kind takes is checked in clean().
    grading = forms.ChoiceField(
        required=False,
        choices=[("", "the dataset kind's default"), *((mode, mode) for mode in all_grading_modes())],
        help_text="Jeopardy-style questions: jeopardy (the default), strict, lenient or adaptive",
    )

    def clean_context_mode(self) -> str:
        return self.cleaned_data["context_mode"] or ContextMode.ORACLE

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        check_experiment_name_free(self.org, name, self.instance if self.instance.pk else None)
        return name

    def clean_repetitions(self) -> int:
        value = self.cleaned_data["repetitions"]
        if not 1 <= value <= 100:
            raise forms.ValidationError("Repetitions must be between 1 and 100.")
        return value

    def clean_prompt_template(self) -> str:
        template = normalised_newlines(self.cleaned_data["prompt_template"] or "")
        if (dataset := self.cleaned_data.get("dataset")) is not None:
            template = prompt_for_kind(template, dataset.kind)
        errors = prompt_template_errors(template)
        if errors:
            raise forms.ValidationError(errors)
        return template

    def clean(self) -> dict:
        data = super().clean() or {}
        if "sample_strategy" in data:  # the rule specs follow, for the strata and their allocation
            raw = {
                "stratify_by": data.get("stratify_by") or "",
                "allocation": data.get("allocation") or Allocation.PROPORTIONAL,
            }
            stratify_by, allocation, errors = check_strata(raw, data["sample_strategy"])
            for error in errors:
                self.add_error("stratify_by" if error.startswith("stratify_by") else "allocation", error)
            data["stratify_by"], data["allocation"] = stratify_by, allocation
        dataset = data.get("dataset")
        if dataset is not None and (problem := grading_problem(dataset.kind, data.get("grading"))):
            self.add_error("grading", f"This dataset's grading {problem}.")
        if dataset is not None:
            self._clean_prompt_choices(data)
        return data

    def _clean_prompt_choices(self, data: dict) -> None:
        """The built-in prompt and the few-shot dev split, by the rule specs follow."""
        dev, k = data.get("few_shot_dataset"), data.get("few_shot_k") or 0
        raw = {
            "template": data.get("prompt_builtin") or None,
            "prompt_template": None if data.get("prompt_builtin") else data.get("prompt_template"),
            "few_shot": {"dataset": dev.name if dev else None, "k": k} if dev is not None or k else None,
        }
        builtin, _, errors = check_prompt_choices(self.org, raw, data["dataset"])
        for error in errors:
            field = "few_shot_dataset" if error.startswith("few_shot") else "prompt_builtin"
            self.add_error(field if error.split(":")[0] != "prompt_template" else "prompt_template", error)
        if builtin and not errors:
            data["prompt_template"] = builtin_prompt(data["dataset"].kind, builtin)


class StartRunForm(forms.Form):
    seed = forms.IntegerField(required=False, min_value=-SEED_LIMIT, max_value=SEED_LIMIT)
    inference_only = forms.BooleanField(required=False)
    budget_usd = forms.CharField(required=False, max_length=40, label="Run budget (USD)")

    def clean_budget_usd(self) -> Decimal | None:
        return _budget_field(self.cleaned_data["budget_usd"])


SORT_CHOICES = [
    ("sequence", "execution order"),
    ("-sequence", "execution order, last first"),
    ("latency", "latency, fastest first"),
    ("-latency", "latency, slowest first"),
    ("cost", "cost, cheapest first"),
    ("-cost", "cost, dearest first"),
    ("status", "status"),
    ("-status", "status, reversed"),
]
SEQUENCE_MAX = 2**31 - 1  # the column's range: a larger cursor names no attempt
SEARCH_MAX = 200  # characters of text to search for in questions or answers


class AttemptListForm(forms.Form):
    """The attempts list's filters, sort and page, from the URL; only the run's own arms and
    tasks and the known statuses, outcome classes, verdicts, error categories and sort keys
    pass. Labels in the run's kind's words (a PR run lists "resolved", a quiz "right answers")."""

    arm = forms.ChoiceField(required=False, widget=ListSelect)
    status = forms.ChoiceField(required=False, widget=ListSelect, choices=[("", "any status"), *AttemptStatus.choices])
    outcome = forms.ChoiceField(
        required=False, widget=ListSelect, choices=[("", "any outcome"), *OUTCOME_LABELS.items()]
    )
    result = forms.ChoiceField(required=False, label="Answers", widget=ListSelect)
    error = forms.ChoiceField(
        required=False,
        label="Error",
        widget=ListSelect,
        choices=[("", "any error"), *((c, c) for c in ErrorCategory.values)],
    )
    task = forms.CharField(required=False, max_length=200, label="Task id", widget=ListTextInput)
    question = forms.CharField(required=False, max_length=SEARCH_MAX, label="Question has", widget=ListTextInput)
    answer = forms.CharField(required=False, max_length=SEARCH_MAX, label="Answer has", widget=ListTextInput)
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES, widget=ListSelect)
    after = forms.IntegerField(required=False, min_value=0, max_value=SEQUENCE_MAX)
    before = forms.IntegerField(required=False, min_value=0, max_value=SEQUENCE_MAX)

    def __init__(self, data, run: Run) -> None:
        super().__init__(data)
        self.run = run
        self.arm_ids = {arm.label: arm.pk for arm in run.arms.all()}  # the run page prefetches them
        self.task_ids: list[int] | None = None
        self.questions_cut = False  # the question matched more tasks than a page lists the attempts of
        self.question_tasks = QUESTION_TASKS
        words = wording_for(run.experiment.dataset.kind)
        cast(forms.ChoiceField, self.fields["arm"]).choices = [("", "any arm"), *((a, a) for a in self.arm_ids)]
        cast(forms.ChoiceField, self.fields["result"]).choices = [
            ("", "any"),
            ("right", words.right_filter),
            ("wrong", words.wrong_filter),
        ]
        self.fields["question"].label = f"{words.question} has"
        self.fields["answer"].label = f"{words.answer.capitalize()} has"

    def clean_after(self) -> int | None:
        return self._cursor("after")

    def clean_before(self) -> int | None:
        return self._cursor("before")

    def clean_question(self) -> str:
        return " ".join(self.cleaned_data["question"].split())

    def clean_answer(self) -> str:
        return self.cleaned_data["answer"].strip()

    def _cursor(self, name: str) -> int | None:
        sequence = self.cleaned_data[name]
        if sequence is not None and not self.run.attempts.filter(sequence=sequence).exists():
            raise forms.ValidationError(f"This run has no attempt #{sequence} to start the page from.")
        return sequence

    def clean(self) -> None:
        data = self.cleaned_data
        if data.get("after") is not None and data.get("before") is not None:
            raise forms.ValidationError("A page starts after one attempt or ends before one, not both.")
        if data.get("error") and (data.get("result") or data.get("answer")):
            raise forms.ValidationError(
                "An attempt that ended in an error has no answer: filter by its error, or by its answer, not both."
            )
        if data.get("task") or data.get("question"):
            self.task_ids = self._tasks(data.get("task", ""), data.get("question", ""))

    def _tasks(self, external_id: str, question: str) -> list[int] | None:
        """The dataset's tasks the task id and the question's text leave, by their ids: at
        most QUESTION_TASKS, in dataset order (the form says when there were more)."""
        tasks = self.run.experiment.dataset.tasks.all()
        if external_id:
            tasks = tasks.filter(external_id=external_id)
            if not tasks.exists():
                self.add_error("task", f"This run's dataset has no task {external_id!r}.")
                return None
        if question:
            tasks = tasks.filter(problem_statement__icontains=question)
        ids = list(tasks.order_by("position", "pk").values_list("pk", flat=True)[: QUESTION_TASKS + 1])
        self.questions_cut = len(ids) > QUESTION_TASKS
        return ids[:QUESTION_TASKS]

    def query(self) -> AttemptQuery:
        """What the valid form asks for."""
        return AttemptQuery(**{name: value for name, value in self.cleaned_data.items() if value not in ("", None)})

    def scope(self) -> Scope:
        """The run's arm and tasks the valid form names, if any."""
        return Scope(self.arm_ids.get(self.cleaned_data["arm"]), self.task_ids)

    def arm_id(self) -> int | None:
        """The run's arm the valid form names, if any."""
        return self.arm_ids.get(self.cleaned_data["arm"])


def _budget_field(value: str) -> Decimal | None:
    amount, problem = parse_budget_usd(value)
    if problem:
        raise forms.ValidationError(f"The budget {problem}.")
    return amount


def spec_from_forms(form: ExperimentForm, arms: BaseArmFormSet) -> ExperimentSpec:
    data = form.cleaned_data
    return ExperimentSpec(
        name=data["name"],
        dataset=data["dataset"],
        description=data["description"],
        sample_size=data["sample_size"],
        sample_strategy=data["sample_strategy"],
        stratify_by=data["stratify_by"],
        allocation=data["allocation"],
        seed=data["sample_seed"],
        repetitions=data["repetitions"],
        prompt_template=data["prompt_template"],
        prompt_builtin=data.get("prompt_builtin") or "",
        few_shot_dataset=data.get("few_shot_dataset"),
        few_shot_k=data.get("few_shot_k") or 0,
        context_mode=data["context_mode"],
        include_quarantined=data["include_quarantined"],
        budget_usd=data["budget_usd"],
        response_cache=data["response_cache"],
        grading=data.get("grading") or "",
        arms=[
            ArmSpec(
                f.cleaned_data["label"],
                f.cleaned_data["provider"],
                f.cleaned_data["model_name"],
                f.cleaned_data["config"],
                f.cleaned_data["credential"],
            )
            for f in arms.kept_forms()
        ],
    )
