"""Per-run summaries: a run's attempts and verdicts aggregated once (leaderboards/summaries.py),
so a board, a chart or a pairwise page reads a few rows per arm instead of every attempt.

They are derived data: recording folds each chunk of attempts into them (summaries.fold_recorded),
``refresh_run_summaries`` rebuilds a run's rows from scratch, and ``manage.py
recompute_leaderboards`` rebuilds every run's.
"""

from __future__ import annotations

from functools import cached_property

from django.db import models

from leaderboards import sketches

PERCENTS = [step / 100 for step in range(101)]


class ArmSummary(models.Model):
    """One arm of one run. Counts follow each attempt's outcome class: "scored" attempts are
    the model's successes and failures; infrastructure and configuration failures are counted
    apart."""

    run = models.ForeignKey("experiments.Run", models.CASCADE, related_name="arm_summaries")
    arm = models.OneToOneField("experiments.RunArm", models.CASCADE, related_name="summary")
    refreshed_at = models.DateTimeField()
    # What the summary was built from: the arm's recorded attempt rows, how many and the sum of
    # their versions (leaderboards/sql.py RowVersion). A reader that must count every attempt
    # recorded compares them with the rows as they are now (summaries.stale_arms).
    attempts_seen = models.PositiveIntegerField(default=0, help_text="The arm's recorded attempts")
    attempts_version = models.BigIntegerField(default=0, help_text="Sum of those attempts' row versions")

    scored = models.PositiveIntegerField(default=0, help_text="Model successes and model failures")
    scored_tasks = models.PositiveIntegerField(default=0, help_text="Distinct tasks with a scored attempt")
    model_successes = models.PositiveIntegerField(default=0)
    model_failures = models.PositiveIntegerField(default=0)
    infrastructure_failures = models.PositiveIntegerField(default=0)
    infrastructure_causes = models.JSONField(default=dict, help_text="error category (or 'harness') -> count")
    configuration_failures = models.PositiveIntegerField(
        default=0, help_text="Refused for the arm's own settings: neither scored nor the infrastructure's"
    )
    configuration_causes = models.JSONField(default=dict, help_text="error category -> count")
    resolved = models.PositiveIntegerField(default=0)
    cached = models.PositiveIntegerField(default=0, help_text="Answered from the response cache: no call made")

    fail_to_pass_sum = models.FloatField(default=0, help_text="Sum of the FAIL_TO_PASS share fixed")
    fail_to_pass_counted = models.PositiveIntegerField(default=0, help_text="Answers with a FAIL_TO_PASS share")
    regressions = models.PositiveIntegerField(default=0, help_text="PASS_TO_PASS tests broken, in all")
    regressions_counted = models.PositiveIntegerField(default=0, help_text="Answers whose PASS_TO_PASS were run")
    patch_present = models.PositiveIntegerField(default=0)
    well_formed = models.PositiveIntegerField(default=0)
    validated = models.PositiveIntegerField(default=0)
    applied = models.PositiveIntegerField(default=0, help_text="Of the validated answers")
    applied_fuzzed = models.PositiveIntegerField(default=0, help_text="Applied only by patch --fuzz=5, not git apply")
    resolved_fuzzed = models.PositiveIntegerField(default=0, help_text="Resolved, applied only by patch --fuzz=5")
    build_checked = models.PositiveIntegerField(default=0)
    built = models.PositiveIntegerField(default=0)
    lint_checked = models.PositiveIntegerField(default=0)
    lint_clean = models.PositiveIntegerField(default=0)
    lines_changed_sum = models.PositiveBigIntegerField(default=0)
    lines_counted = models.PositiveIntegerField(default=0, help_text="Well-formed patches")

    # Timings of the answers that made a call (a reused answer took no time of its own).
    latency_measured = models.PositiveIntegerField(default=0)
    latency_histogram = models.JSONField(default=list, help_text="Answers per LATENCY_BUCKETS_MS bucket")
    # Mergeable sketches (leaderboards/sketches.py, within 1%): recording adds a chunk's counts.
    latency_sketch = sketches.SketchField(default=dict, help_text="Latency in ms: answers per log bucket")
    first_token_sketch = sketches.SketchField(default=dict, help_text="First token in ms: answers per log bucket")
    tokens_per_s_sketch = sketches.SketchField(default=dict, help_text="Output tokens/s: answers per log bucket")

    # Costs of the answers that made a call; unknown while any of them has no price.
    answered_called = models.PositiveIntegerField(default=0)
    unpriced = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, null=True)
    cost_squares = models.FloatField(null=True, help_text="Sum of squared costs, for the interval of the mean")
    resolved_called = models.PositiveIntegerField(default=0)

    # An agent arm's work (aggregation.AGENT_TURNED): its attempts with turns that the model had
    # its turn at, their turns and tool calls in all. Zero attempts: a single-turn arm.
    agent_attempts = models.PositiveIntegerField(default=0, help_text="Attempts with turns, the model's doing")
    agent_turns = models.PositiveBigIntegerField(default=0, help_text="Their model turns, in all")
    agent_tool_calls = models.PositiveBigIntegerField(default=0, help_text="Their tool calls, in all")
    # Input and output tokens of the attempts that made a call and know them.
    tokens_counted = models.PositiveIntegerField(default=0, help_text="Attempts that made a call with known tokens")
    tokens_called = models.PositiveBigIntegerField(default=0, help_text="Their input and output tokens, in all")

    class Meta:
        ordering = ["run", "arm__position", "arm_id"]

    def __str__(self) -> str:
        return f"summary of {self.arm_id}"

    # The percentiles boards show, read off the sketches (None without a measured answer).
    @cached_property
    def latency_quantiles(self) -> list[float] | None:
        """Latency percentiles 0..100 in ms."""
        return sketches.quantiles(self.latency_sketch, PERCENTS, whole=True)

    @cached_property
    def first_token_p50_ms(self) -> float | None:
        return sketches.quantile(self.first_token_sketch, 0.5, whole=True)

    @cached_property
    def tokens_per_s_median(self) -> float | None:
        return sketches.quantile(self.tokens_per_s_sketch, 0.5)


class ArmEvaluatorSummary(models.Model):
    """One arm of one run under one evaluator profile: counts, the mean's inputs, how many
    verdicts gave each overall score (0-100), which is all a bootstrap of the mean resamples,
    and that bootstrap's interval."""

    run = models.ForeignKey("experiments.Run", models.CASCADE, related_name="evaluator_summaries")
    arm = models.ForeignKey("experiments.RunArm", models.CASCADE, related_name="evaluator_summaries")
    profile = models.ForeignKey("evaluation.EvaluatorProfile", models.CASCADE, related_name="+")
    judged = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    overall_sum = models.PositiveBigIntegerField(default=0)
    overall_counts = models.JSONField(default=list, help_text="Judged verdicts per overall score 0..100")
    ci_low = models.FloatField(null=True, help_text="Bootstrap interval of the mean, from overall_counts")
    ci_high = models.FloatField(null=True)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8, null=True)
    unpriced = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["arm", "profile"], name="one_evaluator_summary_per_arm")]

    def __str__(self) -> str:
        return f"evaluator summary of {self.arm_id} under {self.profile_id}"


class TaskSummary(models.Model):
    """One arm's scored attempts at one task of a run: the input of every paired comparison."""

    run = models.ForeignKey("experiments.Run", models.CASCADE, related_name="task_summaries")
    arm = models.ForeignKey("experiments.RunArm", models.CASCADE, related_name="task_summaries")
    task = models.ForeignKey("datasets.TaskInstance", models.CASCADE, related_name="+")
    scored = models.PositiveIntegerField()
    successes = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["arm", "task"], name="one_task_summary_per_arm")]
        indexes = [models.Index(fields=["run", "arm"])]

    def __str__(self) -> str:
        return f"{self.successes}/{self.scored} of {self.arm_id} on {self.task_id}"
