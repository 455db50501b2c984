"""What the pages that show boards, charts and verdicts hand their templates: the run page's
boards section (experiments' run view includes it), a board on its own, the pairwise page."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max
from django.http import QueryDict
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.safestring import mark_safe

from evaluation.workloads import workload_for
from evaluation.workloads.wording import wording_for
from experiments.models import Run
from leaderboards.boards import BoardRows, board_rows, board_rows_digest, run_boards, run_page_links, run_page_sorts
from leaderboards.breakdowns import breakdowns
from leaderboards.charts import cost_quality, latency_distribution, win_rate_heatmap
from leaderboards.crossrun import arm_trends, cross_run_board, run_versus
from leaderboards.jobs import refresh_if_out_of_date
from leaderboards.models import ArmSummary
from leaderboards.pairwise import run_pairwise
from leaderboards.passk import RunPassAtK, run_pass_at_k
from leaderboards.trend_chart import trend_chart

# The run page's boards section as rendered, kept in the shared cache under everything it is
# drawn from, less long than what per_refresh keeps: its breakdowns and pass@k are read there.
# A minute: a recording run's figures move with every chunk, so each poll of it may key a new
# copy of the section, and a longer life only kept more of those no poll reads again.
BOARDS_SECTION_KEPT_S = 60
# And under the process that rendered it: another release's templates and code never serve
# this one's pages from the shared cache.
RENDERED_BY = secrets.token_hex(8)


def run_page_boards(run: Run, path: str, query: QueryDict) -> dict[str, Any]:
    """The boards and charts of the run page at ``path``, sorted as its ``query`` asks, as
    HTML. Rendering them is most of a live poll's work, and a run's figures move only when
    its summaries do: the HTML is kept under the summaries' rows (every column of them), so
    a poll after a fold, a rebuild or a verdict renders it anew and one before reuses it.
    On Postgres the rows are named by a digest Postgres computes, and read only to draw them."""
    refresh_if_out_of_date(run.pk)
    rows, digest = _rows_and_digest(run)
    key = boards_section_key(run, path, query, digest)
    html = cache.get(key)
    if html is None:
        html = rendered_board_section(run, path, query, rows or board_rows(run))
        # Kept only when the rows drawn are the ones the digest named: a fold between the
        # two reads would otherwise keep newer figures under the older rows' key.
        if rows is not None or board_rows_digest(run) == digest:
            cache.set(key, html, BOARDS_SECTION_KEPT_S)
    return {"boards_section": mark_safe(html)}  # the template escaped it as it rendered it


def _rows_and_digest(run: Run) -> tuple[BoardRows | None, str]:
    """The digest of the run's board rows, from Postgres (the rows not read: None), or from
    the rows themselves where the database cannot compute it."""
    digest = board_rows_digest(run)
    if digest is not None:
        return None, digest
    rows = board_rows(run)
    return rows, rows.fingerprint()


def boards_section_key(run: Run, path: str, query: QueryDict, rows_digest: str) -> str:
    """Everything the section is drawn from: the run (its kind, repetitions, whether it was
    graded), the page's address (its links keep every parameter), the language and time zone
    its figures and time print in, the low-sample threshold, and the digest of the summaries'
    rows (``board_rows_digest``, or the rows' ``fingerprint``)."""
    drawn_from = (
        run.pk,
        str(run.code),
        run.inference_only,
        run.experiment.dataset.kind,
        run.config_snapshot.get("repetitions"),
        path,
        query.urlencode(),
        translation.get_language(),
        timezone.get_current_timezone_name(),
        settings.PRBENCH_LOW_SAMPLE_MIN,
    )
    digest = hashlib.blake2b(repr(drawn_from).encode(), digest_size=16).hexdigest()
    return f"prbench:run-boards:{run.pk}:{RENDERED_BY}:{digest}:{rows_digest}"


def rendered_board_section(run: Run, path: str, query: QueryDict, rows: BoardRows | None = None) -> str:
    return render_to_string("leaderboards/_run_boards.html", {"run": run, **board_section(run, path, query, rows)})


def board_section(run: Run, path: str, query: QueryDict, rows: BoardRows | None = None) -> dict[str, Any]:
    """What the run page's boards section (leaderboards/_run_boards.html) draws."""
    git_apply_only = query.get("apply") == GIT_APPLY_ONLY
    boards = run_boards(run, run_page_sorts(query), run_page_links(path, query), git_apply_only, rows)
    return {
        "boards": boards,
        "cost_quality": cost_quality(boards),
        "latency": latency_distribution(boards),
        "apply_toggle": _apply_toggle(path, query, git_apply_only),
        "breakdowns": per_refresh(run, boards.refreshed_at, "breakdowns", breakdowns),
        "pass_at_k": per_refresh(run, boards.refreshed_at, "pass-at-k", pass_at_k_table),
    }


def per_refresh(run: Run, refreshed: Any, name: str, count: Callable[[Run], Any]) -> Any:
    """What ``count`` reads from the run's attempts (breakdowns, pass@k), once per refresh of
    its summaries and kept in the cache under it: a page polled during a long run does not
    count its attempts again on every poll."""
    key = f"prbench:{name}:{run.pk}:{refreshed.isoformat() if refreshed else 'never'}"
    found = cache.get(key)
    if found is None:
        found = count(run)
        cache.set(key, found, PAIRWISE_KEPT_S)
    return found


def pass_at_k_table(run: Run) -> RunPassAtK | None:
    """pass@k of each arm, for a kind that reports it (code: of k answers, one passes); None
    for other kinds and for an inference-only run, which judged nothing. Read from the
    attempts (one GROUP BY per arm and task), not the summaries: it needs each task's counts."""
    if run.inference_only or not workload_for(run.experiment.dataset.kind).shows_pass_at_k:
        return None
    arms = list(run.arms.order_by("position", "pk").values_list("pk", "label"))
    return run_pass_at_k(run.attempts.all(), arms, run.config_snapshot.get("repetitions", 1))


GIT_APPLY_ONLY = "git"


def _apply_toggle(path: str, query: QueryDict, git_apply_only: bool) -> str:
    """The run page with the quality board's other way of counting fuzzed patches."""
    changed = query.copy()
    if git_apply_only:
        changed.pop("apply", None)
    else:
        changed["apply"] = GIT_APPLY_ONLY
    return f"{path}?{changed.urlencode()}" if changed else path


def one_board(run: Run, name: str, sort: str) -> dict[str, Any]:
    """The run's boards with the one named sorted as asked, its links sorting it alone."""
    refresh_if_out_of_date(run.pk)
    boards = run_boards(run, {name: sort}, lambda _, value: "?" + QueryDict.fromkeys(["sort"], value).urlencode())
    return {"boards": boards, "board": next((b for b in boards.boards if b.name == name), None)}


PAIRWISE_KEPT_S = 3600


def pairwise_page(run: Run) -> dict[str, Any]:
    """The run's paired verdicts and ratings, computed once per refresh of its summaries (the
    bootstraps take up to a second on a large run) and kept in the cache under that refresh."""
    words = wording_for(run.experiment.dataset.kind)
    if run.inference_only:
        return {"pairwise": None, "heatmap": None, "words": words}
    refresh_if_out_of_date(run.pk)
    refreshed = ArmSummary.objects.filter(run=run).aggregate(at=Max("refreshed_at"))["at"]
    key = f"prbench:pairwise:{run.pk}:{refreshed.isoformat() if refreshed else 'never'}"
    pairwise = cache.get(key)
    if pairwise is None:
        pairwise = run_pairwise(run)
        cache.set(key, pairwise, PAIRWISE_KEPT_S)
    return {"pairwise": pairwise, "heatmap": win_rate_heatmap(pairwise), "words": words}


def cross_run_page(runs: list[Run]) -> dict[str, Any]:
    """The organisation board over ``runs`` (validated: one dataset, finished) and the trends.
    The trends' paired verdicts take seconds over 20 large runs (a bootstrap per arm and
    run), so they are kept in the cache under the runs' latest refresh, as the pairwise
    page's are; the board is read fresh each time."""
    refreshed = ArmSummary.objects.filter(run__in=runs).aggregate(at=Max("refreshed_at"))["at"]
    ids = ",".join(str(pk) for pk in sorted(run.pk for run in runs))
    key = f"prbench:trends:{ids}:{refreshed.isoformat() if refreshed else 'never'}"
    trends = cache.get(key)
    if trends is None:
        trends = arm_trends(runs)
        cache.set(key, trends, PAIRWISE_KEPT_S)
    return {"board": cross_run_board(runs), "trends": trends, "trend_chart": trend_chart(trends, runs)}


def versus_page(a: Run, b: Run) -> dict[str, Any]:
    """Run A against run B, or why they do not compare."""
    words = wording_for(a.experiment.dataset.kind)
    if a.experiment.dataset_id != b.experiment.dataset_id:
        return {"versus": None, "refusal": "These runs are on different datasets: their tasks do not compare."}
    if a.inference_only or b.inference_only:
        refusal = f"An inference-only run graded nothing ({words.not_graded}): there is nothing to compare."
        return {"versus": None, "refusal": refusal, "words": words}
    return {"versus": run_versus(a, b), "refusal": "", "words": words}
