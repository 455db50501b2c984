from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Count, Q, prefetch_related_objects
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header, urlencode
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling, push_url

from datasets.access import access_dataset
from datasets.models import TaskInstance
from evaluation.workloads import workload_for
from evaluation.workloads.wording import wording_for
from experiments.access import access_attempt, access_experiment, access_run, access_run_export
from experiments.actions import (
    check_run_transition,
    check_start_run,
    do_run_action,
    do_save_experiment,
    do_start_run,
    prompt_for_kind,
    prompt_template_errors,
)
from experiments.answer_matrix import answer_matrix
from experiments.arm_forms import (
    FRESH_ARM,
    BaseArmFormSet,
    RowsChange,
    arm_formset,
    arm_initial,
    fresh_arm_form,
    rows_change,
    rows_redrawn,
)
from experiments.attempt_list import AttemptQuery, ListedAttempt, attempt_page, describe_rows, page_links
from experiments.attempt_queue import queued_without_a_worker
from experiments.board_views import board_views
from experiments.budgets import budget_status, experiment_spend
from experiments.estimate import estimate_run
from experiments.exports import EXPORT_FORMATS, prepare_export
from experiments.forms import AttemptListForm, ExperimentForm, StartRunForm, spec_from_forms
from experiments.misconfigured import STOP_AFTER, misconfigured_of
from experiments.models import ArtifactKind, AttemptStatus, Experiment, Run
from experiments.progress import is_live, judging_progress, run_progress
from experiments.replay import arms_with_sources
from experiments.reporting import (
    cache_source,
    task_comparison,
    tests_with_roles,
    verdict_scores,
)
from experiments.run_exports import (
    check_request_export,
    check_streamable,
    do_request_export,
    export_file,
    export_options,
    recent_exports,
)
from experiments.stoppage import why_stopped
from experiments.swebench_export import ExportRefused, run_models
from experiments.trajectory_page import attempt_trajectory, tool_output
from experiments.transcript import attempt_transcript, patch_of
from orgs.access import access_current_org, membership_for
from prbench.htmx import HtmxHttpRequest
from providers.catalog import suggestions as model_suggestions
from providers.limits import Waiting, waiting_for


def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("experiments:list")
    return redirect("account_login")


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    membership = access_current_org(request)
    experiments = (
        Experiment.objects.filter(org=membership.org)
        .select_related("dataset")
        .annotate(arm_count=Count("arms", distinct=True), run_count=Count("runs", distinct=True))
    )
    runs = membership.org.runs.select_related("experiment")[:10]
    return render(
        request,
        "experiments/experiment_list.html",
        {"experiments": experiments, "runs": runs, "membership": membership},
    )


@login_required
def experiment_create(request: HtmxHttpRequest) -> HttpResponse:
    membership = access_current_org(request, write=True)
    # "New experiment" from a dataset's page starts on that dataset, with its kind's prompt.
    chosen = request.GET.get("dataset")
    initial = {"dataset": access_dataset(request, chosen, write=True).pk} if chosen else {}
    return _experiment_form(request, membership.org, None, initial)


@login_required
@require_POST
def experiment_prompt(request: HttpRequest) -> HttpResponse:
    """The prompt field for the dataset the experiment form now names (htmx asks when the
    dataset changes): that kind's default in place of a default left untouched, and what the
    kind cannot fill in the text the customer wrote, said at once."""
    membership = access_current_org(request, write=True)
    dataset = ExperimentForm(org=membership.org).chosen_dataset(request.POST.get("dataset"))
    template = prompt_for_kind(request.POST.get("prompt_template", ""), dataset.kind)
    form = ExperimentForm(org=membership.org, initial={"dataset": dataset.pk, "prompt_template": template})
    problems = prompt_template_errors(template) + workload_for(dataset.kind).template_errors(template)
    context = {"form": form, "prompt_problems": problems}
    return render(request, "experiments/experiment_form.html#prompt-field", context)


@login_required
def experiment_edit(request: HtmxHttpRequest, code: str) -> HttpResponse:
    experiment = access_experiment(request, code, write=True)
    return _experiment_form(request, experiment.org, experiment)


def _experiment_form(
    request: HtmxHttpRequest, org, experiment: Experiment | None, initial: dict | None = None
) -> HttpResponse:
    if request.method == "POST":
        form = ExperimentForm(request.POST, org=org, instance=experiment)
        arms = arm_formset(org, data=request.POST)
        change = rows_change(request.POST, arms)
        if change is not None:
            return _arm_rows_redrawn(request, org, experiment, form, arms, change)
        if form.is_valid() and arms.is_valid():
            saved = do_save_experiment(org, spec_from_forms(form, arms), request.user, experiment)
            messages.success(request, f"Saved {saved.name}.")
            return redirect("experiments:detail", code=saved.code)
    else:
        form = ExperimentForm(org=org, instance=experiment, initial=initial)
        rows = [arm_initial(arm) for arm in experiment.arms.all()] if experiment else [dict(FRESH_ARM)]
        arms = arm_formset(org, initial=rows)
    context = {"form": form, "arms": arms, "experiment": experiment, "model_suggestions": model_suggestions()}
    return render(request, "experiments/experiment_form.html", context)


def _arm_rows_redrawn(
    request: HtmxHttpRequest,
    org,
    experiment: Experiment | None,
    form: ExperimentForm,
    arms: BaseArmFormSet,
    change: RowsChange,
) -> HttpResponse:
    """A submit that adds, removes or redraws arm rows saves nothing: the page comes back as
    typed, unchecked, with the rows changed. htmx gets only what changed: the new row (and
    the formset's count), the row whose provider changed, or the rows."""
    if request.htmx and change.action == "add":
        row = fresh_arm_form(org, len(arms.forms))
        return render(request, "experiments/_arms.html#added-row", {"arm": row, "total": len(arms.forms) + 1})
    redrawn = rows_redrawn(org, arms, change)
    if request.htmx and change.action == "show" and change.row is not None:
        return render(request, "experiments/_arms.html#arm-row", {"arm": redrawn.forms[change.row]})
    if request.htmx:
        return render(request, "experiments/_arms.html#arms", {"arms": redrawn})
    typed = {
        name: field.widget.value_from_datadict(form.data, form.files, form.add_prefix(name))
        for name, field in form.fields.items()
    }
    shown = ExperimentForm(org=org, instance=experiment, initial=typed)
    context = {"form": shown, "arms": redrawn, "experiment": experiment, "model_suggestions": model_suggestions()}
    return render(request, "experiments/experiment_form.html", context)


@login_required
def experiment_detail(request: HttpRequest, code: str) -> HttpResponse:
    experiment = access_experiment(request, code)
    runs = experiment.runs.annotate(
        done=Count("attempts", filter=~Q(attempts__status__in=[AttemptStatus.QUEUED, AttemptStatus.RUNNING]))
    )
    context = {
        "experiment": experiment,
        "words": wording_for(experiment.dataset.kind),
        "grading_modes": workload_for(experiment.dataset.kind).grading_modes,
        "arms": arms_with_sources(experiment),
        "runs": runs,
        "can_write": membership_for(request, experiment.org).can_write,
        "quarantined": experiment.dataset.tasks.filter(quarantined=True).count(),
        "spent": experiment_spend(experiment) if experiment.budget_usd is not None else None,
    }
    return render(request, "experiments/experiment_detail.html", context)


@login_required
def run_confirm(request: HttpRequest, code: str) -> HttpResponse:
    """The step before a run starts: what it may cost, against the budgets, and the choices
    (seed, inference only, run budget) it would start with. Changing them is a GET."""
    experiment = access_experiment(request, code, write=True)
    form = StartRunForm(request.GET or None)
    choices: dict[str, Any] = {"seed": None, "inference_only": False, "budget_usd": None}
    if form.is_valid():
        choices = form.cleaned_data
    estimate = estimate_run(experiment, choices["seed"])
    spent = experiment_spend(experiment)
    left = None if experiment.budget_usd is None else experiment.budget_usd - spent
    try:
        check_start_run(experiment, inference_only=choices["inference_only"], budget_usd=choices["budget_usd"])
        problems: list[str] = []
    except ValidationError as exc:
        problems = exc.messages
    context = {
        "problems": problems,
        "experiment": experiment,
        "form": form,
        "choices": choices,
        "estimate": estimate,
        "spent": spent,
        "experiment_left": left,
        "over_experiment_budget": left is not None and estimate.max_cost > left,
        "over_run_budget": choices["budget_usd"] is not None and estimate.max_cost > choices["budget_usd"],
    }
    return render(request, "experiments/run_confirm.html", context)


@login_required
@require_POST
def run_start(request: HttpRequest, code: str) -> HttpResponse:
    experiment = access_experiment(request, code, write=True)
    form = StartRunForm(request.POST)
    if not form.is_valid():
        problems = [f"{form.fields[name].label or name}: {e}" for name, errors in form.errors.items() for e in errors]
        messages.error(request, "Cannot start a run: " + "; ".join(problems))
        return redirect("experiments:detail", code=experiment.code)
    choices = form.cleaned_data
    try:
        check_start_run(experiment, inference_only=choices["inference_only"], budget_usd=choices["budget_usd"])
    except ValidationError as exc:
        messages.error(request, "Cannot start a run: " + "; ".join(exc.messages))
        return redirect("experiments:detail", code=experiment.code)
    run = do_start_run(
        experiment,
        request.user,
        seed=choices["seed"],
        inference_only=choices["inference_only"],
        budget_usd=choices["budget_usd"],
    )
    return redirect("experiments:run", code=run.code)


@login_required
def run_detail(request: HtmxHttpRequest, code: str) -> HttpResponse:
    run = access_run(request, code)
    # Its arms once, for all the page shows of them: their limits, marks, filter and exports.
    prefetch_related_objects([run], "arms")
    progress = run_progress(run)
    judging = judging_progress(run, progress)
    live = is_live(run, progress, judging)
    words = wording_for(run.experiment.dataset.kind)
    budget = budget_status(run)
    context = {
        "run": run,
        "words": words,
        "can_write": membership_for(request, run.org).can_write,
        "progress": progress,
        "judging": judging,
        "live": live,
        "calls_made_again": progress.repeat_calls,
        "waiting": Waiting() if run.is_finished else waiting_for([f"run-arm:{arm.pk}" for arm in run.arms.all()]),
        **board_views().page_section(run, request.path, request.GET),
        "budget": budget,
        "stopped": why_stopped(run, progress, budget),
        "misconfigured": misconfigured_of(run),
        "stop_after": STOP_AFTER,
        "without_a_worker": [] if run.is_finished else queued_without_a_worker(run),
    }
    if request.htmx:
        response = render(request, "experiments/run_detail.html#live", context)
        # The last state is rendered once more, then htmx stops asking.
        return response if live else HttpResponseStopPolling(response.content)
    # SWE-bench's formats hold patches: only a PR run offers them.
    downloads = {
        "swebench_downloads": _swebench_downloads(run) if words.patches else [],
        **_exports_panel(run),
    }
    return render(request, "experiments/run_detail.html", {**context, **_attempt_list(run, request.GET), **downloads})


SWEBENCH_DOWNLOADS = {
    "swebench-preds": ("SWE-bench predictions", "every arm (zip, a JSONL file each)"),
    "swebench-report": ("SWE-bench report", "every arm (one JSON, keyed by model)"),
}


def _swebench_downloads(run: Run) -> list[dict[str, Any]]:
    """Each SWE-bench format's exports to start: the whole run, then each arm's (and
    repetition's) file, as (name, options)."""
    models = run_models(run)
    downloads = []
    for format, (title, whole_title) in SWEBENCH_DOWNLOADS.items():
        per_model = [(m.name, {"arm": m.label, "rep": m.repetition}) for m in models]
        downloads.append({"title": title, "format": format, "choices": [(whole_title, {}), *per_model]})
    return downloads


def _exports_panel(run: Run) -> dict[str, Any]:
    exports = recent_exports(run)
    return {"exports": exports, "exports_busy": any(export.is_busy for export in exports)}


@login_required
def run_attempts(request: HtmxHttpRequest, code: str) -> HttpResponse:
    """The run page's attempts list alone, for htmx: its rows when it refreshes itself, the
    whole list (filters included) when a link or the filter form asks for another page."""
    run = access_run(request, code)
    page_url = reverse("experiments:run", args=[run.code])
    if not request.htmx:  # the run page shows the same list, and is the address to keep
        return redirect(f"{page_url}{_query_string(request.GET)}#attempts")
    context = {"run": run, **_attempt_list(run, request.GET)}
    if request.htmx.target == "attempt-rows":
        return render(request, "experiments/run_detail.html#attempt-rows", context)
    response = render(request, "experiments/run_detail.html#attempts", context)
    # The address bar shows the run page with this list, so a reload, a shared link and the
    # back button all come back to it.
    shown = context["links"]["current"] if context["page"] is not None else _query_string(request.GET)
    return push_url(response, f"{page_url}{shown}#attempts")


def _attempt_list(run: Run, params: QueryDict) -> dict[str, Any]:
    form = AttemptListForm(params, run)
    words = wording_for(run.experiment.dataset.kind)
    if form.is_valid():
        query = form.query()
        page = attempt_page(run, query, form.scope())
        describe_rows(page.rows, words, run.inference_only)
        _link_rows(run, page.rows)
    else:
        query, page = AttemptQuery(), None
    return {
        "words": words,
        "attempt_form": form,
        "query": query,
        "page": page,
        "links": page_links(query, page),
        "questions_cut": form.questions_cut,
        # Attempts change until the run ends (its verdicts are not in the list).
        "refreshing": not run.is_finished,
    }


# A code no row has, reversed in its place: every row's address is the one reversed with it
# in, its code put in instead. A page of 50 attempts reversed its two links per row, 100 a page.
SOME_CODE = uuid.UUID(int=0)


def _link_rows(run: Run, rows: list[ListedAttempt]) -> None:
    """Each row's address and its task's on this run, for the template."""
    attempt = reverse("experiments:attempt", args=[SOME_CODE]).rsplit(str(SOME_CODE), 1)
    task = reverse("experiments:run_task", args=[run.code, SOME_CODE]).rsplit(str(SOME_CODE), 1)
    for row in rows:
        row.url = str(row.code).join(attempt)
        row.task_url = str(row.task.code).join(task)


def _query_string(params: QueryDict) -> str:
    return f"?{params.urlencode()}" if params else ""


@login_required
def run_export(request: HttpRequest, code: str, format: str) -> HttpResponseBase:
    """The whole run as a download, or one arm's SWE-bench file (``?arm=LABEL&rep=N``),
    streamed as it is read: any member may take it."""
    run = access_run(request, code)
    if format not in EXPORT_FORMATS:
        raise Http404("no such export")
    try:
        check_streamable(run, format)
        export = prepare_export(run, format, request.GET.get("arm"), _repetition(request.GET.get("rep")))
    except ExportRefused as exc:
        messages.error(request, str(exc))
        return redirect("experiments:run", code=run.code)
    response = StreamingHttpResponse(export.chunks, content_type=export.content_type)
    response["Content-Disposition"] = content_disposition_header(True, export.filename)
    return response


@login_required
def run_exports(request: HtmxHttpRequest, code: str) -> HttpResponse:
    """GET: the run's latest background exports (the run page's panel, which polls this while
    one is being written). POST: start one (``format``, and ``arm`` and ``rep`` for one arm's
    SWE-bench file), then back to the run page, where it shows. Any member may export."""
    run = access_run(request, code)
    if request.method == "POST":
        return _start_export(request, run)
    context = {"run": run, **_exports_panel(run)}
    if not request.htmx:
        return render(request, "experiments/run_exports.html", context)
    response = render(request, "experiments/run_exports.html#panel", context)
    return response if context["exports_busy"] else HttpResponseStopPolling(response.content)


def _start_export(request: HttpRequest, run: Run) -> HttpResponse:
    format = request.POST.get("format", "")
    try:
        options = export_options(request.POST.get("arm") or None, _repetition(request.POST.get("rep") or None))
        check_request_export(run, format, options)
    except ExportRefused as exc:
        messages.error(request, str(exc))
    else:
        do_request_export(run, format, options, request.user)
    return redirect(reverse("experiments:run", args=[run.code]) + "#exports")


@login_required
def run_export_download(request: HttpRequest, code: str) -> HttpResponseBase:
    """A background export's file, once written; an expired one says so, on the run page."""
    export = access_run_export(request, code)
    path = export_file(export)
    if path is None:
        messages.info(request, f"That {export.format} export is {export.get_status_display()}: see below.")
        return redirect(reverse("experiments:run", args=[export.run.code]) + "#exports")
    return FileResponse(
        path.open("rb"), as_attachment=True, filename=export.file_name, content_type=export.content_type
    )


def _repetition(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ExportRefused(f"a repetition is a whole number, not {value[:40]!r}") from None


@login_required
@require_POST
def run_action(request: HttpRequest, code: str, action: str) -> HttpResponse:
    run = access_run(request, code, write=True)
    try:
        check_run_transition(run, action)
    except ValidationError as exc:
        messages.error(request, "; ".join(exc.messages))
    else:
        do_run_action(run, action, by=request.user)
    return redirect("experiments:run", code=run.code)


@login_required
def attempt_detail(request: HttpRequest, code: str) -> HttpResponse:
    """One attempt's transcript: what it was asked, what came back, what its kind read in it,
    what was expected and how it was graded, in the kind's words."""
    attempt = access_attempt(request, code)
    artifacts = {a.kind: a for a in attempt.artifacts.all()}
    workload = workload_for(attempt.task.dataset.kind)
    context = {
        "attempt": attempt,
        "workload": workload,
        "transcript": attempt_transcript(attempt, artifacts),
        "patch": patch_of(attempt),
        "validation": artifacts.get("validation"),
        "checks": [artifacts[kind] for kind in ("build", "lint") if kind in artifacts],
        "tests": tests_with_roles(attempt, artifacts.get("tests")),
        # A kind never judged has no evaluator rows at all, not a row saying "none".
        "verdicts": verdict_scores(attempt) if workload.judged_by_evaluator else [],
        "cached_from": cache_source(attempt),
        "answer_status": artifacts["answer"].status if "answer" in artifacts else "",
        "trajectory": attempt_trajectory(artifacts.get(ArtifactKind.TRAJECTORY)),
    }
    return render(request, "experiments/attempt_detail.html", context)


@login_required
def attempt_tool_output(request: HtmxHttpRequest, code: str, turn: int, number: int) -> HttpResponse:
    """The whole output of one tool call of an agent's attempt, too long to come with its page:
    alone for htmx (it replaces the call's preview), else on a page of its own."""
    attempt = access_attempt(request, code)
    output = tool_output(attempt, turn, number)
    if output is None:
        raise Http404("no such tool call")
    context = {"attempt": attempt, "output": output, "turn": turn, "number": number}
    if request.htmx:
        return render(request, "experiments/tool_output.html#output", context)
    return render(request, "experiments/tool_output.html", context)


@login_required
def run_task(request: HttpRequest, code: str, task_code: str) -> HttpResponse:
    """One task of a run: what it asks, its right answer, and every arm's answers side by side."""
    run = access_run(request, code)
    comparison = task_comparison(run, task_code)
    if comparison is None:
        raise Http404("no such task in this run")
    attempts = f"{reverse('experiments:run', args=[run.code])}?{urlencode({'task': comparison.task.external_id})}"
    return render(
        request, "experiments/run_task.html", {"run": run, "comparison": comparison, "task_attempts": attempts}
    )


@login_required
def run_answers(request: HttpRequest, code: str) -> HttpResponse:
    """The run as a table of answers: a page of its tasks, each arm's answers to each."""
    run = access_run(request, code)
    after = _task_of(run, request.GET.get("after"))
    before = None if after is not None else _task_of(run, request.GET.get("before"))
    return render(request, "experiments/run_answers.html", {"run": run, "matrix": answer_matrix(run, after, before)})


def _task_of(run: Run, code: str | None) -> TaskInstance | None:
    """The run's dataset's task a cursor names; an unknown one starts from the first page."""
    if not code:
        return None
    try:
        return run.experiment.dataset.tasks.only("pk").filter(code=code).first()
    except ValidationError:  # not a UUID
        return None
