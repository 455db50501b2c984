"""Turning a task and an arm into the normalised request every provider receives.

A run records its template's version (a hash of its text) and its context mode, so two
runs' results are comparable only when both agree. For a task on a real repository,
``{{repository}}`` is the files context: the files the gold patch touches ("oracle") or the
files BM25 retrieves for the problem statement ("bm25"), read at the base commit.
"""

from __future__ import annotations

import hashlib

from django.conf import settings

from datasets.agent_archive import archive_url, inline_files
from datasets.models import TaskInstance
from evaluation.repositories import ensure_commit
from evaluation.workloads import workload_for
from evaluation.workloads.base import EXAMPLES
from experiments.context import bm25_context, oracle_context, render_files
from experiments.few_shot import examples_for, fill_examples
from experiments.models import Attempt, ContextMode
from experiments.replay import REPLAY, REPLAYED_MESSAGE, recorded_answer
from providers.adapters.http_agent.adapter import HttpAgentAdapter
from providers.types import AgentTask, CompletionRequest, Message

DEFAULT_MAX_OUTPUT_TOKENS = 4096


class PromptNotFillable(ValueError):
    """The run's template holds a placeholder its dataset's kind cannot fill: the prompt would
    reach the model as written ("Repository files: {{repository}}" in a quiz question), which
    no model can answer. The platform's failure, found before any call."""


def prompt_version(template: str) -> str:
    return "sha256:" + hashlib.sha256(template.encode()).hexdigest()[:12]


def render_repository(task: TaskInstance, context_mode: str = ContextMode.ORACLE) -> str:
    if not task.repo:
        return "\n\n".join(f"--- {path} ---\n{content}" for path, content in sorted(task.repo_files.items()))
    clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
    if context_mode == ContextMode.BM25:
        # The problem statement alone, as SWE-bench retrieves: hints are not in the prompt,
        # so they must not steer which files it shows either.
        return render_files(bm25_context(clone, task.base_commit, task.problem_statement))
    return render_files(oracle_context(clone, task.base_commit, task.gold_patch))


def render_prompt(template: str, task: TaskInstance, context_mode: str = ContextMode.ORACLE, examples: str = "") -> str:
    """The task's prompt, as its dataset's kind renders it, with ``examples`` (a few-shot
    prompt's solved examples) in place of ``{{examples}}``."""
    workload = workload_for(task.dataset.kind)

    def render(part: str) -> str:
        return workload.render_prompt(part, task, lambda: render_repository(task, context_mode))

    return fill_examples(template, examples, render)


def build_request(attempt: Attempt) -> CompletionRequest:
    run, arm, task = attempt.run, attempt.arm, attempt.task
    if arm.provider == REPLAY:
        return CompletionRequest(
            messages=(REPLAYED_MESSAGE,),
            seed_key=seed_key(attempt),
            recorded_answer=recorded_answer(arm, run.org_id, task.external_id),
        )
    if arm.provider == HttpAgentAdapter.name:
        return agent_request(attempt)
    snapshot = run.config_snapshot
    template = snapshot["prompt_template"]
    if problems := workload_for(task.dataset.kind).template_errors(template):
        # The task's own text may hold "{{" (a Jinja or Django template in a bug report):
        # only the template's placeholders are checked, before the task's text goes in.
        raise PromptNotFillable(f"the run's prompt template cannot be rendered: {'; '.join(problems)}")
    examples = examples_for(run, task) if EXAMPLES in template else ""
    prompt = render_prompt(template, task, snapshot.get("context_mode", ContextMode.ORACLE), examples)
    return prompt_request(prompt, arm.config, seed_key=seed_key(attempt))


def seed_key(attempt: Attempt) -> str:
    """Stable per (run seed, task, arm, repetition): what the mock and seeded providers draw from."""
    return f"{attempt.run.seed}:{attempt.task.external_id}:{attempt.arm.label}:{attempt.repetition}"


def agent_request(attempt: Attempt) -> CompletionRequest:
    """A team's agent service is handed the task whole (the http_agent provider): no prompt
    of ours, the problem statement and the repository at its base commit, inline when small,
    else as an archive URL that works for as long as the call may last."""
    arm, task = attempt.arm, attempt.task
    deadline_s = HttpAgentAdapter.call_seconds(arm.config)
    files = inline_files(task)
    # A call may wait for the arm's slot before it starts; that wait moves its deadline back.
    valid_s = deadline_s + settings.PRBENCH_CAPACITY_WAIT_SECONDS
    agent_task = AgentTask(
        task_id=task.external_id,
        problem_statement=task.problem_statement,
        repo=task.repo,
        base_commit=task.base_commit,
        archive_url="" if files is not None else archive_url(task, valid_s),
        files=files or {},
        test_command=tuple(str(part) for part in task.test_command),
        deadline_s=deadline_s,
    )
    return CompletionRequest(
        # What the attempt page shows as asked: the agent reads the same statement in its task.
        messages=(Message("user", task.problem_statement),),
        seed_key=f"{attempt.run.seed}:{task.external_id}:{arm.label}:{attempt.repetition}",
        agent_task=agent_task,
        idempotency_key=f"prbench-attempt-{attempt.code}",
    )


def prompt_request(prompt: str, config: dict, seed_key: str = "") -> CompletionRequest:
    """The request an arm with this config is sent for this prompt: an attempt's, or the
    one the pre-run estimate prices."""
    return CompletionRequest(
        messages=(Message("user", prompt),),
        max_output_tokens=config.get("max_tokens", DEFAULT_MAX_OUTPUT_TOKENS),
        temperature=config.get("temperature"),
        top_p=config.get("top_p"),
        seed_key=seed_key,
    )
