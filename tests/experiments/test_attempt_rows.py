"""A guard: the attempts list's rows, drawn in Python (experiments/templatetags/attempt_tags.py)
to keep the run page fast (issue 31), are the HTML the template's loop drew, byte for byte,
for rows of every status, outcome and kind: a PR run and a question run, answered right,
wrong and not graded, failed, queued, running and cancelled, cached answers, retries, costs
that round half up, an agent arm, and names that need escaping."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.http import QueryDict
from django.template import engines

from datasets.models import Dataset
from experiments.models import AttemptStatus, Run
from experiments.templatetags.attempt_tags import attempt_rows, cost_cell
from experiments.views import _attempt_list
from providers.outcomes import outcome_class
from tests.factories import import_file, run_in_every_state
from tests.samples import MMLU

# The loop run_detail.html drew each row with, before the rows were drawn in Python.
TEMPLATE_ROWS = """{% for a in page.rows %}
      <tr><td class="num"><a href="{{ a.url }}">{{ a.sequence }}</a></td><td class="task"><a href="{{ a.task_url }}">{{ a.task_label }}</a></td><td>{{ a.arm.shown_label }}</td><td class="num">{{ a.repetition }}</td>
        <td><span class="status {{ a.status }}">{{ a.status }}</span>{% if a.response_cached %} <span class="flag" title="Reused a cached answer: no provider call">cached</span>{% endif %}</td>
        <td class="result">{% if a.result.text %}<span{% if a.result.tone %} class="{{ a.result.tone }}"{% endif %}>{{ a.result.text }}</span>{% endif %}</td>
        <td class="num">{{ a.latency_ms|default_if_none:"" }}</td><td class="num">{% if a.cost_usd is not None %}${{ a.cost_usd|floatformat:5 }}{% endif %}</td><td class="num">{{ a.retries }}</td></tr>
    {% endfor %}"""  # noqa: E501

# Costs that round half up, or down, at the fifth place, and large and zero ones.
COSTS = [Decimal(c) for c in ("0.000005", "0.00001499", "0.000015", "0.00000049", "1234.56789", "0", "0.1")]
ANSWERS = ["B", 'print("<b>&\'")', "a long answer " * 8, ""]


def varied(run: Run) -> Run:
    """The run's attempts in every state a row shows, its arms an agent and a name to escape."""
    first, second = run.arms.order_by("position")
    first.config = {**first.config, "solver": "agent"}
    first.save(update_fields=["config"])
    second.label = "b<&>\"'rm"
    second.save(update_fields=["label"])
    task = run.attempts.order_by("sequence").first().task  # type: ignore[union-attr]
    task.title = 'Fix <tag> & "quotes"'
    task.save(update_fields=["title"])
    attempts = list(run.attempts.order_by("sequence"))
    for n, attempt in enumerate(attempts):
        if attempt.status == AttemptStatus.QUEUED:
            attempt.status = [AttemptStatus.QUEUED, AttemptStatus.RUNNING, AttemptStatus.CANCELLED][n % 3]
        attempt.response_cached = n % 3 == 0
        attempt.retries = n % 4
        if attempt.status == AttemptStatus.COMPLETED:
            attempt.resolved = [True, False, None][n % 3]
            attempt.patch_present, attempt.patch_applied = n % 2 == 0, n % 4 == 0
            attempt.extracted_answer = ANSWERS[n % len(ANSWERS)]
            attempt.cost_usd = COSTS[n % len(COSTS)]
            attempt.latency_ms = 0 if n % 5 == 0 else attempt.latency_ms
        attempt.outcome = outcome_class(attempt.status, attempt.error_category, harness_failed=n % 10 == 3)
    fields = ["status", "response_cached", "retries", "resolved", "patch_present", "patch_applied"]
    run.attempts.bulk_update(attempts, [*fields, "extracted_answer", "cost_usd", "latency_ms", "outcome"])
    return run


@pytest.fixture
def pr_run(org, dataset, alice):
    return varied(run_in_every_state(org, dataset, alice, repetitions=2))


@pytest.fixture
def question_run(org, alice):
    import_file(org, "mmlu", MMLU, dataset="mmlu")
    return varied(run_in_every_state(org, Dataset.objects.get(org=org, name="mmlu"), alice, repetitions=2))


def drawn_both_ways(run: Run) -> tuple[str, str]:
    page = _attempt_list(run, QueryDict())["page"]
    assert len(page.rows) > 20
    return engines["django"].from_string(TEMPLATE_ROWS).render({"page": page}), attempt_rows(page.rows)


@pytest.mark.parametrize("inference_only", [False, True])
def test_a_pr_runs_rows_are_the_templates(pr_run, inference_only):
    pr_run.inference_only = inference_only
    by_template, by_tag = drawn_both_ways(pr_run)

    assert by_tag == by_template
    # What the rows hold, so the comparison covers each branch of the row.
    for shown in ("(agent)", "b&lt;&amp;&gt;&quot;&#x27;rm", "Fix &lt;tag&gt; &amp; &quot;quotes&quot;", "cached"):
        assert shown in by_tag
    for status in ("completed", "failed", "queued", "running", "cancelled"):
        assert f'<span class="status {status}">{status}</span>' in by_tag
    said = ("patch, not validated", "no patch") if inference_only else ("tests fail", "did not apply")
    assert all(words in by_tag for words in ("resolved", "tests gave no verdict", "timeout", *said))


def test_a_question_runs_rows_are_the_templates(question_run):
    by_template, by_tag = drawn_both_ways(question_run)

    assert by_tag == by_template
    assert ", expected " in by_tag and "right: " in by_tag and "&lt;b&gt;&amp;" in by_tag and "…" in by_tag


def test_a_cost_prints_as_floatformat_prints_it():
    floatformat = engines["django"].from_string("{{ cost|floatformat:5 }}")
    costs = [*COSTS, Decimal("-0.000001"), Decimal("99999999.99999999"), Decimal("0.00000500")]

    assert [cost_cell(cost) for cost in costs] == [floatformat.render({"cost": cost}) for cost in costs]
