"""The leaderboards app's pages: one board, the pairwise verdicts, and the boards and charts
the run page includes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection, models
from django.db.models import F, Value
from django.db.models.functions import Coalesce, Concat
from django.urls import reverse

from evaluation.models import EvaluatorProfile, Verdict
from experiments.models import RunArm
from leaderboards.boards import board_rows_digest
from leaderboards.models import ArmEvaluatorSummary, ArmSummary
from leaderboards.pairwise import run_pairwise
from leaderboards.stats import paired_verdict
from leaderboards.summaries import refresh_run_summaries
from tests.conftest import client_for
from tests.factories import ArmPlan, make_tasks, record

PLANS = [
    ArmPlan("strong", quality=0.9, latency_ms=3000, price="0.004"),
    ArmPlan("weak", quality=0.2, latency_ms=400, price="0.001", infrastructure_failure_rate=0.1),
]
BOARDS = ["quality", "speed", "cost", "evaluator"]


@pytest.fixture
def judged_run(built_run):
    run, _ = built_run(PLANS, repetitions=3, verdicts=True)
    refresh_run_summaries(run.pk)
    return run


def page_urls(run) -> list[str]:
    return [
        reverse("experiments:run", args=[run.code]),
        reverse("leaderboards:pairwise", args=[run.code]),
        *(reverse("leaderboards:board", args=[run.code, name]) for name in BOARDS),
    ]


@pytest.mark.parametrize("board", BOARDS)
def test_a_board_page_works(bob, judged_run, board):
    response = client_for(bob).get(reverse("leaderboards:board", args=[judged_run.code, board]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<html" in content and f'id="board-{board}"' in content
    assert f'class="board {board}"' in content
    assert [e.arm.label for e in response.context["board"].entries]  # every arm has a line


def test_a_board_page_sorts_and_answers_htmx_with_the_board_alone(bob, judged_run):
    url = reverse("leaderboards:board", args=[judged_run.code, "quality"])
    client = client_for(bob)

    ascending = client.get(url, {"sort": "rate"})
    partial = client.get(url, {"sort": "-rate"}, HTTP_HX_REQUEST="true")

    assert [e.arm.label for e in ascending.context["board"].entries] == ["weak", "strong"]
    assert partial.status_code == 200
    content = partial.content.decode()
    assert "<html" not in content and content.lstrip().startswith('<div class="board-wrap" id="board-quality">')
    assert [e.arm.label for e in partial.context["board"].entries] == ["strong", "weak"]
    # The heading it is sorted on links to the other direction, with an href and an hx-get.
    assert 'href="?sort=rate#board-quality" hx-get="?sort=rate" hx-target="#board-quality"' in content


def test_an_unknown_board_is_404(bob, judged_run):
    response = client_for(bob).get(reverse("leaderboards:board", args=[judged_run.code, "vibes"]))
    assert response.status_code == 404


def test_the_run_page_sorts_a_board_and_keeps_polling_with_that_sort(bob, built_run):
    run, _ = built_run(PLANS, repetitions=3)
    run.status = "running"
    run.save(update_fields=["status"])
    refresh_run_summaries(run.pk)
    url = reverse("experiments:run", args=[run.code])

    response = client_for(bob).get(url, {"quality_sort": "rate"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    content = response.content.decode()
    assert content.lstrip().startswith('<section id="live"')
    assert f'hx-get="{url}?quality_sort=rate"' in content  # the poll keeps the sort
    assert [e.arm.label for e in response.context["boards"].quality.entries] == ["weak", "strong"]
    assert f'hx-get="{url}?quality_sort=-rate" hx-target="#live"' in content


# The run page keeps its boards' HTML while the summaries stay as they are (leaderboards/pages.py).
LIVE = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "live"}


def boards_section(response) -> str:
    content = response.content.decode()
    return content[content.index('<section class="boards"') : content.index("</section>", content.index('id="boards"'))]


def drawn(response) -> set[str]:
    return {template.name for template in response.templates}


def test_the_run_page_draws_its_boards_once_while_the_summaries_stay(bob, judged_run):
    url = reverse("experiments:run", args=[judged_run.code])
    client = client_for(bob)

    first, second = client.get(url, **LIVE), client.get(url, **LIVE)

    assert first.status_code == second.status_code == 286  # finished: the last poll
    assert "leaderboards/_quality.html" in drawn(first)
    assert "leaderboards/_quality.html" not in drawn(second)  # kept, not drawn again
    assert second.content == first.content


def test_a_renamed_evaluator_profile_shows_on_the_next_poll(bob, judged_run):
    """Whatever changes a row the boards read moves the kept HTML's key, not only a fold."""
    url = reverse("experiments:run", args=[judged_run.code])
    client = client_for(bob)
    assert "<td>judge" in boards_section(client.get(url, **LIVE))
    EvaluatorProfile.objects.filter(name="judge").update(name="referee")

    section = boards_section(client.get(url, **LIVE))

    assert "<td>referee" in section and "<td>judge" not in section


def test_a_summary_or_arm_changed_by_any_code_shows_on_the_next_poll(bob, judged_run):
    """The kept HTML is keyed by a digest of the rows Postgres computes (board_rows_digest):
    a figure or a label written behind the fold's back moves it too."""
    url = reverse("experiments:run", args=[judged_run.code])
    client = client_for(bob)
    sections = [boards_section(client.get(url, **LIVE))]

    ArmSummary.objects.filter(run=judged_run, arm__label="strong").update(resolved=F("resolved") - 1)
    sections.append(boards_section(client.get(url, **LIVE)))
    ArmEvaluatorSummary.objects.filter(run=judged_run).update(ci_low=0.0125, ci_high=0.9875)
    sections.append(boards_section(client.get(url, **LIVE)))
    RunArm.objects.filter(run=judged_run, label="strong").update(label="mighty")
    sections.append(boards_section(client.get(url, **LIVE)))

    assert len(set(sections)) == 4
    assert "<td>mighty" in sections[-1]


def different(field: models.Field) -> Any:
    """An update that gives ``field`` another value whatever its value (None where the
    column's type has no such obvious change: ids, keys, dates, flags)."""
    if field.primary_key or field.is_relation:
        return None
    if isinstance(field, (models.IntegerField, models.FloatField, models.DecimalField)):
        return Coalesce(F(field.attname), Value(0), output_field=field) + 1
    if isinstance(field, (models.CharField, models.TextField)):
        return Concat(F(field.attname), Value("x"), output_field=field)
    if isinstance(field, models.JSONField):
        return Value({"changed": True}, output_field=field)
    return None


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite keys by the rows' own fingerprint")
def test_every_column_of_every_row_the_boards_read_moves_their_digest(judged_run):
    """A guard of the kept HTML's key: no column of the arms, their summaries, their
    evaluator summaries or those summaries' profiles is left out of it."""
    tables = {
        RunArm: RunArm.objects.filter(run=judged_run),
        ArmSummary: ArmSummary.objects.filter(run=judged_run),
        ArmEvaluatorSummary: ArmEvaluatorSummary.objects.filter(run=judged_run),
        EvaluatorProfile: EvaluatorProfile.objects.filter(
            pk__in=list(ArmEvaluatorSummary.objects.filter(run=judged_run).values_list("profile_id", flat=True))
        ),
    }
    changed = 0
    for model, rows in tables.items():
        for field in model._meta.concrete_fields:
            update = different(field)
            if update is None:
                continue
            digest = board_rows_digest(judged_run)
            assert board_rows_digest(judged_run) == digest  # the same rows: the same digest
            rows.filter(pk=rows.order_by("pk").values("pk")[:1]).update(**{field.attname: update})
            assert board_rows_digest(judged_run) != digest, f"{model.__name__}.{field.name}"
            changed += 1
    assert changed > 60  # nearly every column: the summaries' figures, texts and sketches
    digest = board_rows_digest(judged_run)
    ArmEvaluatorSummary.objects.filter(run=judged_run).order_by("pk")[:1].get().delete()
    assert board_rows_digest(judged_run) != digest


def test_each_sort_of_the_run_page_keeps_its_own_boards(bob, judged_run):
    url = reverse("experiments:run", args=[judged_run.code])
    client = client_for(bob)

    pages = {sort: boards_section(client.get(url, {"quality_sort": sort}, **LIVE)) for sort in ("rate", "-rate")}

    def first_arm(section: str) -> str:
        quality = section[section.index('id="board-quality"') :]
        found = re.search(r'<td class="num">[^<]*</td>\s*<td>(\w+)', quality)
        assert found is not None
        return found.group(1)

    assert (first_arm(pages["rate"]), first_arm(pages["-rate"])) == ("weak", "strong")


def test_it_checks_ownership(charlie, judged_run):
    client = client_for(charlie)
    for url in page_urls(judged_run):
        assert client.get(url).status_code == 404, url
        assert client.get(url, HTTP_HX_REQUEST="true").status_code == 404, url


def test_anonymous_is_sent_to_log_in(client, judged_run):
    for url in page_urls(judged_run):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_a_viewer_can_read_every_page(vera, judged_run):
    client = client_for(vera)
    for url in page_urls(judged_run):
        assert client.get(url).status_code == 200, url


def test_no_evaluator_rationale_on_any_page(bob, judged_run):
    assert Verdict.objects.filter(attempt__run=judged_run, rationale__startswith="SECRET-RATIONALE").exists()
    client = client_for(bob)
    for url in page_urls(judged_run):
        for extra in ({}, {"HTTP_HX_REQUEST": "true"}):
            content = client.get(url, **extra).content.decode()
            assert "SECRET-RATIONALE" not in content and "rationale" not in content.lower(), url


def test_charts_render_with_their_tables(bob, judged_run):
    content = client_for(bob).get(reverse("experiments:run", args=[judged_run.code])).content.decode()

    scatter = re.search(r'<figure class="chart scatter">.*?</figure>', content, re.S)
    assert scatter and "<svg" in scatter.group() and '<polyline class="front"' in scatter.group()
    assert scatter.group().count("<circle") == 2
    assert "<caption>The chart's figures</caption>" in content
    distribution = re.search(r'<figure class="chart distribution">.*?</figure>', content, re.S)
    assert distribution and distribution.group().count('<g class="row">') == 2
    assert "<caption>Calls per latency bucket</caption>" in content
    assert "style=" not in content.split("<main>")[1]  # the CSP allows no inline style


def test_the_pairwise_page_says_which_arm_is_better_in_words(bob, built_run, dataset):
    """40 shared tasks: A resolves the first 30, B the first 20. A wins 10, ties 30, loses
    none: 25 points more, McNemar p = 2 / 2**10."""
    run, _ = built_run([])
    tasks = make_tasks(dataset, 40)
    a = RunArm.objects.create(run=run, label="A", provider="mock", model_name="a", position=0)
    b = RunArm.objects.create(run=run, label="B", provider="mock", model_name="b", position=1)
    record(run, a, tasks, set(range(30)))
    record(run, b, tasks, set(range(20)))
    refresh_run_summaries(run.pk)

    response = client_for(bob).get(reverse("leaderboards:pairwise", args=[run.code]))

    assert response.status_code == 200
    (pair,) = response.context["pairwise"].pairs
    assert (pair.verdict.shared_tasks, pair.verdict.wins, pair.verdict.ties, pair.verdict.losses) == (40, 10, 30, 0)
    assert pair.verdict.p_value == pytest.approx(2 / 2**10)
    expected = paired_verdict(
        {t.pk: float(i < 30) for i, t in enumerate(tasks)},
        {t.pk: float(i < 20) for i, t in enumerate(tasks)},
        seed=run.seed,
    )
    assert pair.sentence == expected.sentence("A", "B") and pair.sentence.startswith(
        "A resolves 25.0 points more than B"
    )
    assert "p = 0.002, on 40 shared tasks" in pair.sentence
    content = response.content.decode()
    assert pair.sentence in content
    ratings = response.context["pairwise"].ratings
    assert [r.label for r in ratings] == ["A", "B"] and ratings[0].rating.rating > ratings[1].rating.rating
    heatmap = re.search(r'<figure class="chart heatmap">.*?</figure>', content, re.S)
    assert heatmap and heatmap.group().count('<rect class="cell') == 4
    assert "<caption>Win rate of the row arm against the column arm</caption>" in content
    assert "62.5%" in content  # A's win rate on the shared tasks: (10 + 30 / 2) / 40


def test_an_inference_only_run_has_no_pairwise_verdicts(bob, built_run):
    run, _ = built_run(PLANS, inference_only=True)
    refresh_run_summaries(run.pk)
    response = client_for(bob).get(reverse("leaderboards:pairwise", args=[run.code]))
    assert response.status_code == 200
    assert response.context["pairwise"] is None and "was inference-only" in response.content.decode()


def test_the_pairwise_verdicts_are_computed_once_per_refresh(bob, judged_run, monkeypatch):
    from leaderboards import pages

    computed = []

    def counted(run):
        computed.append(run.pk)
        return run_pairwise(run)

    monkeypatch.setattr(pages, "run_pairwise", counted)
    client, url = client_for(bob), reverse("leaderboards:pairwise", args=[judged_run.code])

    first, second = client.get(url), client.get(url)
    refresh_run_summaries(judged_run.pk)
    third = client.get(url)

    assert first.status_code == second.status_code == third.status_code == 200
    assert computed == [judged_run.pk, judged_run.pk]  # the first view, then the first after the refresh
    assert [p.sentence for p in second.context["pairwise"].pairs] == [
        p.sentence for p in first.context["pairwise"].pairs
    ]
