"""Few-shot prompts: ``{{examples}}`` becomes k solved examples drawn from a dev split.

The examples come from another dataset of the same kind (the experiment's ``few_shot_dataset``,
as the run's snapshot recorded it), never from the evaluated tasks: the spec refuses the
experiment's own dataset, and an example with the task's own id or question is left out. They
are drawn from the task's category when it has enough (MMLU's five-shot prompts use the
subject's own dev questions), else from the whole split, seeded by the run's seed and the
category: the same seed gives every task of a category the same examples, in dataset order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from datasets.models import TaskInstance
from evaluation.workloads import workload_for
from evaluation.workloads.base import EXAMPLES
from experiments.models import Run

POOL_ATTRIBUTE = "few_shot_pool"


def load_pools(runs: Iterable[Run]) -> None:
    """Read each few-shot run's dev split once, onto the run: a job's own thread does this,
    since prompts are built on pool threads, which must not query the database."""
    for run in runs:
        if run.config_snapshot.get("few_shot") and POOL_ATTRIBUTE not in run.__dict__:
            setattr(run, POOL_ATTRIBUTE, _pool(run))


def examples_for(run: Run, task: Any) -> str:
    """The solved examples the run's prompt shows for ``task``; "" for a run without them."""
    few_shot = run.config_snapshot.get("few_shot")
    if not few_shot:
        return ""
    pool = run.__dict__.get(POOL_ATTRIBUTE)
    if pool is None:  # not loaded by a job (the estimate, a direct call): read it now
        pool = _pool(run)
        setattr(run, POOL_ATTRIBUTE, pool)
    return render_examples(pool, few_shot["k"], run.seed, task)


def _pool(run: Run) -> list[TaskInstance]:
    # Scoped to the run's organisation, whatever the snapshot names.
    rows = TaskInstance.objects.filter(
        dataset_id=run.config_snapshot["few_shot"]["dataset_id"], dataset__org=run.org_id
    )
    return list(rows.select_related("dataset").order_by("position", "pk"))


def render_examples(pool: list[TaskInstance], k: int, seed: int, task: Any) -> str:
    candidates = [
        example
        for example in pool
        if example.external_id != task.external_id and example.problem_statement != task.problem_statement
    ]
    same_category = [example for example in candidates if task.category and example.category == task.category]
    drawn_from = same_category if len(same_category) >= k else candidates
    picked = random.Random(f"few-shot:{seed}:{task.category}").sample(drawn_from, min(k, len(drawn_from)))
    picked.sort(key=lambda example: (example.position, example.pk))
    return "\n\n".join(workload_for(example.dataset.kind).render_example(example) for example in picked)


def fill_examples(template: str, examples: str, render: Any) -> str:
    """``render`` (the task's kind rendering a template) applied around ``{{examples}}``, and
    the examples put in its place: one pass, so neither the examples nor the task's own text
    is read as a placeholder of the other."""
    return examples.join(render(part) for part in template.split(EXAMPLES))
