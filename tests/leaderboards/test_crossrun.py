"""Runs compared with each other: arms matched by provider + model + answer settings, the
organisation board over the tasks every arm shares, the trend per arm with its regression
flag, run A against run B, and the form and access rules of those pages."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from datasets.models import Dataset, TaskInstance
from evaluation.models import EvaluatorProfile, Verdict
from experiments.models import Attempt, AttemptStatus, Experiment, Run, RunArm, RunStatus
from leaderboards.crossrun import arm_key, arm_trends, cross_run_board, match_arms, pooled_task_scores, run_versus
from leaderboards.summaries import refresh_run_summaries
from providers.errors import ErrorCategory
from providers.outcomes import outcome_class
from tests.conftest import client_for

TASKS = 40
EVERY = frozenset(range(TASKS))


@pytest.fixture
def forty(org):
    dataset = Dataset.objects.create(org=org, name="Forty bugs")
    TaskInstance.objects.bulk_create(
        TaskInstance(dataset=dataset, external_id=f"bug-{i:02}", position=i, problem_statement="fix it")
        for i in range(TASKS)
    )
    return Experiment.objects.create(org=org, name="Forty", dataset=dataset)


def make_run(experiment, arms, *, days_ago=0, status=RunStatus.COMPLETED, seed=1):
    """``arms``: label -> (model, config, resolved task positions, scored task positions).
    Tasks outside ``scored`` failed through the infrastructure: no score."""
    when = timezone.now() - timedelta(days=days_ago)
    run = Run.objects.create(org=experiment.org, experiment=experiment, seed=seed, status=status, finished_at=when)
    Run.objects.filter(pk=run.pk).update(created_at=when)
    run.refresh_from_db()
    tasks = list(experiment.dataset.tasks.order_by("position"))
    attempts = []
    for position, (label, (model, config, resolved, scored)) in enumerate(arms.items()):
        arm = RunArm.objects.create(
            run=run, label=label, provider="openai", model_name=model, config=config, position=position
        )
        for task in tasks:
            attempts.append(_attempt(run, arm, task, task.position in resolved, task.position in scored))
    for sequence, attempt in enumerate(attempts):
        attempt.sequence = sequence
    Attempt.objects.bulk_create(attempts)
    refresh_run_summaries(run.pk)
    return run


def _attempt(run, arm, task, resolved, scored):
    fields = dict(run=run, arm=arm, task=task, queued_at=timezone.now())
    if not scored:
        category = ErrorCategory.SERVER_ERROR
        outcome = outcome_class(AttemptStatus.FAILED, category)
        return Attempt(status=AttemptStatus.FAILED, error_category=category, outcome=outcome, **fields)
    return Attempt(
        status=AttemptStatus.COMPLETED,
        outcome=outcome_class("completed"),
        resolved=resolved,
        patch_present=True,
        patch_well_formed=True,
        patch_applied=resolved,
        validated_at=timezone.now(),
        **fields,
    )


def first(count):
    return frozenset(range(count))


def board_url(*runs):
    return reverse("leaderboards:org_board") + "?" + "&".join(f"runs={run.code}" for run in runs)


def test_an_arm_is_its_provider_model_and_answer_settings():
    base = arm_key("openai", "gpt-4o", {"temperature": 0})

    assert arm_key("openai", "gpt-4o", {"temperature": 0.0, "max_retries": 7, "timeout_total_s": 30}) == base
    assert arm_key("openai", "gpt-4o", {"temperature": 1}) != base
    assert arm_key("openai", "gpt-4o-mini", {"temperature": 0}) != base
    assert arm_key("anthropic", "gpt-4o", {"temperature": 0}) != base


def test_arms_are_matched_across_runs_by_key_and_a_config_change_makes_another_arm(forty):
    old = make_run(forty, {"gpt": ("gpt-4o", {"temperature": 0}, first(20), EVERY)}, days_ago=2)
    new = make_run(
        forty,
        {
            "gpt renamed": ("gpt-4o", {"temperature": 0, "max_retries": 2}, first(30), EVERY),
            "gpt hot": ("gpt-4o", {"temperature": 1}, first(10), EVERY),
        },
    )

    board = cross_run_board([new, old])

    by_label = {entry.arm.label: entry for entry in board.entries}
    assert set(by_label) == {"gpt renamed", "gpt hot"}
    assert by_label["gpt renamed"].arm.run_ids == (old.pk, new.pk)
    assert (by_label["gpt renamed"].successes, by_label["gpt renamed"].scored) == (50, 80)
    assert (by_label["gpt hot"].successes, by_label["gpt hot"].scored) == (10, 40)
    assert [entry.rank for entry in board.entries] == [1, 2]  # 62.5% (52-72) against 25% (14-40)
    assert board.runs == [old, new]


def test_each_pair_of_arms_is_compared_on_the_tasks_both_were_scored_on(forty):
    run = make_run(
        forty,
        {
            "steady": ("gpt-4o", {}, first(30), EVERY),
            "flaky endpoint": ("o3", {}, first(5), first(30)),  # tasks 30-39: infrastructure failures
        },
    )

    board = cross_run_board([run])

    steady, flaky = board.entries
    assert (steady.arm.label, steady.tasks, steady.successes, steady.scored) == ("steady", 40, 30, 40)
    assert (flaky.arm.label, flaky.tasks, flaky.successes, flaky.scored) == ("flaky endpoint", 30, 5, 30)
    [pair] = board.pairs
    assert (pair.a.label, pair.b.label, pair.verdict.shared_tasks) == ("steady", "flaky endpoint", 30)
    assert (pair.verdict.wins, pair.verdict.ties, pair.verdict.losses) == (25, 5, 0)
    assert (steady.rank, flaky.rank) == (1, 2)  # 25 of the 30 shared tasks won: significant
    assert not steady.low_sample


def test_an_arm_with_no_scored_task_is_listed_as_such_and_the_others_are_still_compared(alice, forty):
    """Its provider was down for the whole run: it used to leave 0 shared tasks for every arm."""
    run = make_run(
        forty,
        {
            "strong": ("gpt-4o", {}, first(35), EVERY),
            "weak": ("o3", {}, first(5), EVERY),
            "down": ("claude", {}, frozenset(), frozenset()),  # every attempt an outage
        },
    )

    board = cross_run_board([run])

    assert [(e.arm.label, e.tasks, e.rank) for e in board.entries] == [
        ("strong", 40, 1),
        ("weak", 40, 2),
        ("down", 0, None),
    ]
    assert [entry.arm.label for entry in board.unscored] == ["down"]
    assert [(p.a.label, p.b.label, p.verdict.shared_tasks) for p in board.pairs] == [("strong", "weak", 40)]
    content = client_for(alice).get(board_url(run)).content.decode()
    assert "no scored task" in content and "40 shared tasks" in content


def test_runs_that_sampled_different_tasks_still_make_a_board(forty):
    """A dataset's runs over many days, each on its own sample: no task is in all of them,
    yet every two arms that share tasks are compared on those."""
    runs = [
        make_run(forty, {"a": ("gpt-4o", {}, first(40), frozenset(range(start, start + 20)))}, days_ago=day)
        for day, start in ((3, 0), (2, 10), (1, 20))
    ]
    runs.append(make_run(forty, {"b": ("o3", {}, frozenset(), frozenset(range(15, 25)))}))
    runs.append(make_run(forty, {"c": ("claude", {}, frozenset(), frozenset(range(30, 40)))}))  # none of b's

    board = cross_run_board(runs)

    by_label = {entry.arm.label: entry for entry in board.entries}
    assert (by_label["a"].tasks, by_label["a"].scored, by_label["a"].successes) == (40, 60, 60)
    assert (by_label["b"].tasks, by_label["b"].scored, by_label["c"].tasks) == (10, 10, 10)
    shared = {frozenset((p.a.label, p.b.label)): p.verdict for p in board.pairs}
    assert shared[frozenset("ab")].shared_tasks == shared[frozenset("ac")].shared_tasks == 10
    assert shared[frozenset("ab")].mean_difference == 1.0  # a first: ranked above on its rate
    assert shared[frozenset("bc")].shared_tasks == 0
    assert [point.scored for point in arm_trends(runs)[0].points] == [20, 20, 20]


def test_an_arms_scores_per_task_are_pooled_over_its_runs_and_its_twins_in_one_run(forty):
    """A guard of unchanged behaviour (the pooled query was rewritten for speed, issue 31):
    each task's successes and scored attempts summed over every RunArm that is the arm."""
    old = make_run(forty, {"a": ("gpt-4o", {}, first(10), EVERY), "b": ("o3", {}, first(5), first(8))}, days_ago=1)
    new = make_run(
        forty, {"a": ("gpt-4o", {}, first(20), first(30)), "a again": ("gpt-4o", {"max_retries": 3}, first(4), EVERY)}
    )

    arms = match_arms([old, new])
    pooled = dict(zip([arm.label for arm in arms], pooled_task_scores(arms), strict=True))

    task = list(forty.dataset.tasks.order_by("position").values_list("pk", flat=True))
    assert set(pooled) == {"a again", "b"}
    a, b = pooled["a again"], pooled["b"]
    assert (a[task[0]], a[task[7]], a[task[15]], a[task[35]]) == ((3, 3), (2, 3), (1, 3), (0, 2))
    assert len(a) == TASKS and sum(n for _, n in a.values()) == 40 + 30 + 40
    assert b == {task[position]: (int(position < 5), 1) for position in range(8)}


def test_the_board_page_says_how_many_tasks_each_pair_shares(alice, forty):
    runs = [
        make_run(forty, {"a": ("gpt-4o", {}, first(12), first(20)), "b": ("o3", {}, first(3), EVERY)}, days_ago=d)
        for d in (1, 0)
    ]

    response = client_for(alice).get(board_url(*runs))

    assert response.status_code == 200
    [pair] = response.context["board"].pairs
    assert pair.verdict.shared_tasks == 20
    content = response.content.decode()
    assert "20 shared tasks" in content
    assert 'class="flag"' in content and "low n" in content  # a scored on fewer than 30 tasks


def test_a_board_reads_a_fixed_number_of_queries_however_many_runs(forty, django_assert_max_num_queries):
    for days_ago in range(6):
        make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)}, days_ago=days_ago, seed=days_ago)
    runs = list(Run.objects.select_related("experiment__dataset"))  # as the form hands them over

    with django_assert_max_num_queries(3):  # the arms, the pooled totals, the shared tasks' count
        board = cross_run_board(runs)

    assert (board.entries[0].successes, board.entries[0].scored) == (54, 240)


@pytest.fixture
def foreign_run(charlie):
    other_org = charlie.memberships.get().org
    dataset = Dataset.objects.create(org=other_org, name="Theirs")
    TaskInstance.objects.create(dataset=dataset, external_id="t", problem_statement="x")
    experiment = Experiment.objects.create(org=other_org, name="Theirs", dataset=dataset)
    return make_run(experiment, {"a": ("gpt-4o", {}, first(1), EVERY)})


def form_errors(response) -> str:
    errors = response.context["form"].errors
    return " ".join(errors.get("__all__", []) + errors.get("runs", []))


def test_runs_of_two_datasets_are_refused_naming_the_run(alice, forty, org):
    mine = make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)})
    dataset = Dataset.objects.create(org=org, name="Another set")
    TaskInstance.objects.create(dataset=dataset, external_id="t", problem_statement="x")
    elsewhere = make_run(Experiment.objects.create(org=org, name="E", dataset=dataset), {"a": ("gpt-4o", {}, {0}, {0})})

    response = client_for(alice).get(board_url(mine, elsewhere))

    assert response.status_code == 200
    assert "board" not in response.context
    assert f"Run {str(elsewhere.code)[:8]} is on dataset Another set, not on Forty bugs" in form_errors(response)


def test_another_organisations_run_is_not_found_like_a_run_that_does_not_exist(alice, forty, foreign_run):
    mine = make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)})
    nowhere = uuid.uuid4()
    client = client_for(alice)

    foreign = client.get(board_url(mine, foreign_run))
    missing = client.get(reverse("leaderboards:org_board") + f"?runs={mine.code}&runs={nowhere}")

    assert form_errors(foreign) == f"Run {foreign_run.code}: not found."
    assert form_errors(missing) == f"Run {nowhere}: not found."
    assert "Theirs" not in foreign.content.decode()


def test_an_empty_selection_and_an_unfinished_run_are_refused(alice, forty):
    running = make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)}, status=RunStatus.RUNNING)
    client = client_for(alice)

    empty = client.get(reverse("leaderboards:org_board"), {"days": ""})
    unfinished = client.get(board_url(running))

    assert "Pick at least one run, or choose a dataset and a number of days." in form_errors(empty)
    assert f"Run {str(running.code)[:8]} is running: only finished runs are compared." in form_errors(unfinished)


def test_the_page_without_a_selection_shows_the_form_alone(alice, forty):
    run = make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)})

    response = client_for(alice).get(reverse("leaderboards:org_board"))

    assert response.status_code == 200
    assert not response.context["form"].errors
    assert f'value="{run.code}"' in response.content.decode()


def test_a_time_window_takes_the_datasets_runs_finished_in_it(alice, forty):
    old = make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)}, days_ago=40)
    recent = [make_run(forty, {"a": ("gpt-4o", {}, first(9), EVERY)}, days_ago=d) for d in (3, 1)]

    response = client_for(alice).get(
        reverse("leaderboards:org_board"), {"dataset": str(forty.dataset.code), "days": 30}
    )

    assert response.status_code == 200
    assert response.context["board"].runs == recent
    assert old not in response.context["board"].runs


def test_trend_points_come_in_time_order_and_a_significant_drop_is_flagged(forty):
    # Created out of order: the trend follows the runs' dates, not their ids.
    third = make_run(forty, {"gpt": ("gpt-4o", {}, first(4), EVERY)}, days_ago=0, seed=3)
    first_run = make_run(forty, {"gpt": ("gpt-4o", {}, first(35), EVERY)}, days_ago=20, seed=1)
    second = make_run(forty, {"gpt": ("gpt-4o", {}, first(36), EVERY)}, days_ago=10, seed=2)

    (trend,) = arm_trends([third, first_run, second])

    assert [point.run for point in trend.points] == [first_run, second, third]
    assert [round(point.rate, 3) for point in trend.points] == [0.875, 0.9, 0.1]
    assert [point.regressed for point in trend.points] == [False, False, True]
    assert trend.points[0].against_previous is None
    assert trend.points[2].previous_run == second
    assert "80.0 points less than gpt in run" in trend.points[2].sentence


def test_the_trend_is_an_svg_chart_with_a_table_and_no_inline_style(alice, forty):
    runs = [
        make_run(forty, {"gpt": ("gpt-4o", {}, first(n), EVERY), "o3": ("o3", {}, first(20), EVERY)}, days_ago=d)
        for n, d in ((35, 2), (5, 1))
    ]

    response = client_for(alice).get(board_url(*runs))

    content = response.content.decode()
    svg = content[content.index('<figure class="chart trend">') : content.index("</figure>")]
    assert "<svg" in svg and 'class="series series-0"' in svg and 'class="series series-1"' in svg
    assert "<polyline" in svg and 'class="mark regressed"' in svg
    assert "style=" not in svg
    assert 'class="board chart-table trend-table"' in content
    assert content.count('<tr class="regressed">') == 1
    versus = reverse("leaderboards:versus", args=[runs[0].code, runs[1].code])
    assert f'href="{versus}"' in content


def test_run_a_against_run_b_lists_the_tasks_that_flipped(forty):
    a = make_run(forty, {"gpt": ("gpt-4o", {}, {0, 1, 2}, EVERY), "old": ("o1", {}, {0}, EVERY)}, days_ago=1)
    b = make_run(forty, {"gpt": ("gpt-4o", {}, {1, 2, 3, 4}, EVERY), "new": ("o3", {}, {0}, EVERY)})

    versus = run_versus(a, b)

    (gpt,) = versus.arms
    assert [flip.task.external_id for flip in gpt.better_in_a] == ["bug-00"]
    assert [flip.task.external_id for flip in gpt.better_in_b] == ["bug-03", "bug-04"]
    assert (gpt.verdict.wins, gpt.verdict.losses, gpt.verdict.shared_tasks) == (1, 2, 40)
    assert gpt.sentence == gpt.verdict.sentence(f"gpt in run {str(a.code)[:8]}", f"gpt in run {str(b.code)[:8]}")
    assert [arm.label for arm in versus.only_in_a] == ["old"]
    assert [arm.label for arm in versus.only_in_b] == ["new"]


def test_the_versus_page_links_each_flipped_task_to_its_comparison_in_both_runs(bob, forty):
    a = make_run(forty, {"gpt": ("gpt-4o", {}, {0, 1}, EVERY)}, days_ago=1)
    b = make_run(forty, {"gpt": ("gpt-4o", {}, {1, 2}, EVERY)})
    task = TaskInstance.objects.get(dataset=forty.dataset, external_id="bug-02")

    response = client_for(bob).get(reverse("leaderboards:versus", args=[a.code, b.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "1 task resolved in A and not in B" in content and "1 task resolved in B and not in A" in content
    assert reverse("experiments:run_task", args=[a.code, task.code]) in content
    assert reverse("experiments:run_task", args=[b.code, task.code]) in content
    assert "on 40 shared tasks" in content


def test_runs_of_two_datasets_are_not_compared_task_by_task(bob, forty, org):
    a = make_run(forty, {"gpt": ("gpt-4o", {}, {0}, EVERY)})
    dataset = Dataset.objects.create(org=org, name="Other")
    TaskInstance.objects.create(dataset=dataset, external_id="t", problem_statement="x")
    b = make_run(Experiment.objects.create(org=org, name="E", dataset=dataset), {"gpt": ("gpt-4o", {}, {0}, {0})})

    response = client_for(bob).get(reverse("leaderboards:versus", args=[a.code, b.code]))

    assert response.status_code == 200
    assert response.context["versus"] is None
    assert "different datasets" in response.content.decode()


def test_an_outsider_gets_404_on_run_against_run(charlie, forty, foreign_run):
    a = make_run(forty, {"gpt": ("gpt-4o", {}, {0}, EVERY)}, days_ago=1)
    b = make_run(forty, {"gpt": ("gpt-4o", {}, {1}, EVERY)})
    client = client_for(charlie)

    assert client.get(reverse("leaderboards:versus", args=[a.code, b.code])).status_code == 404
    assert client.get(reverse("leaderboards:versus", args=[foreign_run.code, b.code])).status_code == 404
    assert client.get(reverse("leaderboards:versus", args=[a.code, foreign_run.code])).status_code == 404


def test_an_outsider_cannot_put_the_organisations_runs_on_a_board(charlie, forty, foreign_run):
    mine = make_run(forty, {"gpt": ("gpt-4o", {}, {0}, EVERY)})

    response = client_for(charlie).get(board_url(foreign_run, mine))

    assert response.status_code == 200
    assert form_errors(response) == f"Run {mine.code}: not found."
    assert "Forty" not in response.content.decode()


def test_no_evaluator_rationale_on_the_cross_run_pages(alice, forty):
    a = make_run(forty, {"gpt": ("gpt-4o", {}, {0, 1}, EVERY)}, days_ago=1)
    b = make_run(forty, {"gpt": ("gpt-4o", {}, {1, 2}, EVERY)})
    profile = EvaluatorProfile.objects.create(name="judge", version=1, provider="mock", model_name="m")
    Verdict.objects.bulk_create(
        Verdict(
            attempt=attempt,
            run_id=attempt.run_id,  # bulk_create skips the save() that fills it in
            profile=profile,
            status="judged",
            overall=70,
            rationale="SECRET-RATIONALE",
        )
        for attempt in Attempt.objects.filter(run__in=[a, b], status=AttemptStatus.COMPLETED)
    )
    for run in (a, b):
        refresh_run_summaries(run.pk)
    client = client_for(alice)

    pages = [client.get(board_url(a, b)), client.get(reverse("leaderboards:versus", args=[a.code, b.code]))]

    for page in pages:
        assert page.status_code == 200
        assert "SECRET-RATIONALE" not in page.content.decode()


def test_the_experiments_list_and_the_nav_link_to_the_organisation_board(alice, forty):
    content = client_for(alice).get(reverse("experiments:list")).content.decode()

    assert len(re.findall(re.escape(reverse("leaderboards:org_board")), content)) == 2
