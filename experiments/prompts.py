"""Turning a task and an arm into the normalised request every provider receives."""

from __future__ import annotations

from experiments.models import Attempt, TaskInstance
from providers.types import CompletionRequest, Message

PLACEHOLDERS = ("{{problem_statement}}", "{{repository}}")


def render_repository(task: TaskInstance) -> str:
    return "\n\n".join(f"--- {path} ---\n{content}" for path, content in sorted(task.repo_files.items()))


def render_prompt(template: str, task: TaskInstance) -> str:
    return template.replace("{{problem_statement}}", task.problem_statement).replace(
        "{{repository}}", render_repository(task)
    )


def build_request(attempt: Attempt) -> CompletionRequest:
    run, arm, task = attempt.run, attempt.arm, attempt.task
    config = arm.config
    return CompletionRequest(
        messages=(Message("user", render_prompt(run.config_snapshot["prompt_template"], task)),),
        max_output_tokens=config.get("max_tokens", 4096),
        temperature=config.get("temperature"),
        top_p=config.get("top_p"),
        seed_key=f"{run.seed}:{task.external_id}:{arm.label}:{attempt.repetition}",
        reference_output=task.gold_patch,
    )
