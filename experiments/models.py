import json
import uuid

from django.conf import settings
from django.db import models

from evaluation.validation import ApplyMethod, ValidationStatus
from evaluation.workloads.pr_patch import DEFAULT_PROMPT
from providers.adapters.config import solver_label, solver_of
from providers.errors import ErrorCategory
from providers.outcomes import OutcomeClass


class ContextMode(models.TextChoices):
    """Which repository files a prompt shows, for tasks on a real repository."""

    ORACLE = "oracle", "Oracle: the files the gold patch touches"
    BM25 = "bm25", "Retrieved: BM25 over the repository"


class SampleStrategy(models.TextChoices):
    RANDOM = "random", "Random (seeded)"
    FIRST = "first", "First N in dataset order"
    STRATIFIED = "stratified", "Stratified (seeded, by category and/or difficulty)"


class Strata(models.TextChoices):
    """What a stratified sample is stratified by: the tasks' own fields."""

    CATEGORY = "category", "Category"
    DIFFICULTY = "difficulty", "Difficulty"
    BOTH = "category,difficulty", "Category and difficulty"


class Allocation(models.TextChoices):
    PROPORTIONAL = "proportional", "Proportional (each stratum's share of the dataset)"
    EQUAL = "equal", "Equal (as many from each stratum as it has)"


class Experiment(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="experiments")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    dataset = models.ForeignKey("datasets.Dataset", models.PROTECT, related_name="experiments")
    sample_size = models.PositiveIntegerField(null=True, blank=True, help_text="Empty means every task")
    sample_strategy = models.CharField(max_length=16, choices=SampleStrategy.choices, default=SampleStrategy.RANDOM)
    sample_seed = models.BigIntegerField(default=0)
    stratify_by = models.CharField(
        max_length=32, choices=Strata.choices, blank=True, help_text="Stratified samples only: the strata"
    )
    allocation = models.CharField(max_length=16, choices=Allocation.choices, default=Allocation.PROPORTIONAL)
    prompt_template = models.TextField(default=DEFAULT_PROMPT)
    prompt_builtin = models.CharField(
        max_length=60, blank=True, help_text="The built-in prompt (name@version) the template is, if it is one"
    )
    few_shot_dataset = models.ForeignKey(
        "datasets.Dataset",
        models.PROTECT,
        null=True,
        blank=True,
        related_name="few_shot_for",
        help_text="Where a few-shot prompt's {{examples}} are drawn from: a dev split, never the evaluated tasks",
    )
    few_shot_k = models.PositiveSmallIntegerField(default=0, help_text="How many solved examples a prompt shows")
    repetitions = models.PositiveIntegerField(default=1)
    context_mode = models.CharField(max_length=16, choices=ContextMode.choices, default=ContextMode.ORACLE)
    include_quarantined = models.BooleanField(
        default=False, help_text="Also run tasks quarantined as flaky (their results are noise)"
    )
    budget_usd = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Hard limit on what all of its runs together may spend (USD); empty: none",
    )
    response_cache = models.BooleanField(
        default=False,
        help_text="Reuse the organisation's stored answer to an identical temperature-0 request "
        "instead of calling the provider again (marked cached; left out of latency and cost)",
    )
    # One of the dataset kind's grading modes (evaluation/workloads/), empty for a kind graded
    # one way; a run keeps the mode it was graded in (config_snapshot["grading"]).
    grading = models.CharField(
        max_length=16, blank=True, help_text="How answers are graded (Jeopardy-style questions: jeopardy, strict, ...)"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="experiment_name_per_org")]
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.name


class ModelArm(models.Model):
    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="arms")
    label = models.CharField(max_length=100)
    provider = models.CharField(max_length=32)
    model_name = models.CharField(max_length=200)
    # The organisation's credential for the provider, by name ("": its only one). Where the
    # requests go is that credential's, so an arm never carries a URL.
    credential_name = models.CharField(max_length=100, blank=True)
    config = models.JSONField(default=dict, blank=True)
    position = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "label"], name="arm_label_per_experiment")]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return f"{self.label} ({self.provider}/{self.model_name})"

    @property
    def config_json(self) -> str:
        """The settings as JSON, as the experiment form's advanced field and a spec's
        ``arms[i].config`` take them back."""
        return json.dumps(self.config, ensure_ascii=False)


class PredictionSet(models.Model):
    """Another system's answers to an experiment's tasks, imported from a SWE-bench
    predictions file (``import_predictions``) for a replay arm to give. Never changed once
    imported: importing again makes a new set, so a run keeps what it replayed."""

    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="prediction_sets")
    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="prediction_sets")
    label = models.CharField(max_length=100, help_text="The arm it was imported for")
    model_name = models.CharField(max_length=200, help_text="The file's model_name_or_path")
    source_name = models.CharField(max_length=300, help_text="The file it was read from")
    sha256 = models.CharField(max_length=64, help_text="Of the file's bytes")
    count = models.PositiveIntegerField(help_text="Predictions kept: one per task of the experiment's dataset")
    ignored = models.PositiveIntegerField(default=0, help_text="Lines for instances not in the dataset")
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-imported_at"]

    def __str__(self) -> str:
        return f"{self.model_name} ({self.source_name})"


class Prediction(models.Model):
    prediction_set = models.ForeignKey(PredictionSet, models.CASCADE, related_name="predictions")
    instance_id = models.CharField(max_length=200)
    answer = models.TextField(blank=True, help_text="The file's model_patch, as it was")
    line = models.PositiveIntegerField(help_text="Where it was in the file")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["prediction_set", "instance_id"], name="one_prediction_per_instance")
        ]

    def __str__(self) -> str:
        return self.instance_id


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


RUN_FINISHED = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class Run(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="runs")
    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="runs")
    seed = models.BigIntegerField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    inference_only = models.BooleanField(default=False, help_text="Skip patch validation (SWE-bench style inference)")
    config_snapshot = models.JSONField(default=dict, help_text="The experiment as it was when the run started")
    evaluator_profile = models.ForeignKey(
        "evaluation.EvaluatorProfile",
        models.PROTECT,
        null=True,
        blank=True,
        related_name="runs",
        help_text="The profile the run's attempts are judged with (the one active when it started)",
    )
    total_attempts = models.PositiveIntegerField(default=0)
    dataset_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The dataset version it ran on (empty: started before datasets had versions)"
    )
    budget_usd = models.DecimalField(
        max_digits=12, decimal_places=2, null=True, blank=True, help_text="Hard limit on its spend (USD); empty: none"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who cancelled it, for its page to say (empty: not cancelled, cancelled by a command or
    # the API, or by someone since removed).
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.experiment} run {str(self.code)[:8]}"

    @property
    def is_finished(self) -> bool:
        return self.status in RUN_FINISHED


class ApiIdempotencyKey(models.Model):
    """A run started through the API with an ``Idempotency-Key``: a retry with the same key
    and the same request gets this run back instead of starting another.

    The row is inserted before the run is started, in the same transaction: a concurrent
    request with the same key waits on the unique index until this one commits, then finds
    the row. ``run`` is set before the commit, so a committed row always has one. A key older
    than IDEMPOTENCY_KEY_TTL may be used again (its row is replaced)."""

    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64, help_text="sha256 of the experiment and the start's choices")
    run = models.ForeignKey(Run, models.CASCADE, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "key"], name="idempotency_key_per_org")]

    def __str__(self) -> str:
        return f"{self.key} -> run {self.run_id}"


class RunArm(models.Model):
    """An arm as it was when the run started: editing the experiment never rewrites a run."""

    run = models.ForeignKey(Run, models.CASCADE, related_name="arms")
    label = models.CharField(max_length=100)
    provider = models.CharField(max_length=32)
    model_name = models.CharField(max_length=200)
    credential_name = models.CharField(max_length=100, blank=True)
    config = models.JSONField(default=dict)
    position = models.PositiveIntegerField(default=0)
    # Set once (a conditional UPDATE, experiments/misconfigured.py) when the arm's first calls
    # in the run all failed with the same configuration failure: its other attempts are not
    # called. Resuming the run clears them.
    misconfigured_at = models.DateTimeField(null=True, blank=True)
    misconfigured_error = models.CharField(max_length=32, blank=True)  # the failures' category
    misconfigured_message = models.TextField(blank=True)  # the provider's words, as recorded

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "label"], name="arm_label_per_run")]
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.label

    @property
    def solver(self) -> str:
        return solver_of(self.config)

    @property
    def shown_label(self) -> str:
        return solver_label(self.label, self.solver)


class AttemptStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"  # the model answered and the answer was scored (even if it scored 0)
    FAILED = "failed"  # no answer: provider error after retries, see error_category
    CANCELLED = "cancelled"


ATTEMPT_TERMINAL = (AttemptStatus.COMPLETED, AttemptStatus.FAILED, AttemptStatus.CANCELLED)
# The orders the run page's attempts list is read in, each ending in the sequence that breaks ties.
LIST_ORDERS = (("sequence", ["sequence"]), ("latency", ["latency_ms", "sequence"]), ("cost", ["cost_usd", "sequence"]))


class Attempt(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # No index of its own: (run, ...) leads several below, and every index is one more entry
    # to write each time an attempt is claimed and recorded.
    run = models.ForeignKey(Run, models.CASCADE, related_name="attempts", db_index=False)
    task = models.ForeignKey("datasets.TaskInstance", models.PROTECT, related_name="attempts")
    arm = models.ForeignKey(RunArm, models.CASCADE, related_name="attempts")
    repetition = models.PositiveIntegerField(default=0)
    sequence = models.PositiveIntegerField(help_text="Execution order within the run (seeded)")
    status = models.CharField(max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.QUEUED)
    # Set when a worker claims the attempt; only the holder of the token may record a result,
    # so an attempt re-queued after a crash is never counted twice.
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    claims = models.PositiveIntegerField(default=0, help_text="How many times a worker claimed it")
    # The claiming process's WorkerLease name: while that lease is renewed the attempt is never
    # taken from it, however long it waits. Empty for rows claimed before leases existed.
    claimed_by = models.CharField(max_length=64, blank=True, editable=False)

    request = models.JSONField(default=dict, blank=True)
    raw_response = models.JSONField(default=dict, blank=True)
    output = models.TextField(blank=True)
    # What the task's kind read in the output (a letter, a response, a function, a patch):
    # what the attempts list searches and the transcript and exports show beside the output.
    extracted_answer = models.TextField(blank=True)
    model_served = models.CharField(max_length=200, blank=True)
    provider_request_id = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    cache_write_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Part of input_tokens")
    cache_write_1h_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Part of cache_write_tokens: Anthropic's 1-hour cache, dearer"
    )
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="Part of output_tokens")
    latency_ms = models.PositiveIntegerField(null=True, blank=True, help_text="The successful try alone")
    first_token_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="From the successful try's request to its first streamed token"
    )
    output_tokens_per_s = models.FloatField(null=True, blank=True, help_text="Output tokens after the first one")
    wall_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="The whole provider call: failed tries, back-off and waits included"
    )
    cost_usd = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    cost_source = models.CharField(max_length=16, blank=True, help_text="provider, catalog, or empty when unknown")
    cost_breakdown = models.JSONField(
        default=dict, blank=True, help_text="USD per part: input, cache read, cache write, output, reasoning"
    )
    error_category = models.CharField(max_length=32, choices=ErrorCategory.choices, blank=True)
    # Decided once, when the attempt is recorded (providers/outcomes.py): every board and
    # export counts the same attempts as the model's. Empty until it ends, and if cancelled.
    outcome = models.CharField(max_length=24, choices=OutcomeClass.choices, blank=True)
    error_message = models.TextField(blank=True)
    retries = models.PositiveIntegerField(default=0)
    repeat_calls = models.PositiveIntegerField(
        default=0,
        help_text="Provider calls made again because an earlier claim's worker died (or froze past its lease) "
        "mid-call, before the answer reached the journal: each was paid for twice",
    )
    retry_log = models.JSONField(default=list, blank=True, help_text="Each retried try: category, message, wait")
    warnings = models.JSONField(
        default=list, blank=True, help_text="What the gateway corrected in the answer (e.g. a negative token count)"
    )
    # Both: the flag is what boards filter on, and it stays true when the attempt whose
    # answer was reused is deleted with its run (the link then goes, the fact does not).
    response_cached = models.BooleanField(
        default=False, help_text="The answer came from the response cache: no provider call was made"
    )
    cached_from = models.ForeignKey(
        "self",
        models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The attempt whose answer was reused",
        db_index=False,  # a partial index of the few set (Meta.indexes): most attempts have none
    )

    patch_present = models.BooleanField(null=True)
    patch_applied = models.BooleanField(null=True)
    apply_method = models.CharField(
        max_length=16,
        choices=ApplyMethod.choices,
        blank=True,
        help_text="How the patch applied, trying what SWE-bench's harness tries in turn; empty if it did not",
    )
    resolved = models.BooleanField(null=True)
    patch_well_formed = models.BooleanField(null=True, help_text="The patch parses, with safe paths, no binary parts")
    lines_changed = models.PositiveIntegerField(null=True, blank=True)
    files_changed = models.PositiveIntegerField(null=True, blank=True)
    lint_clean = models.BooleanField(null=True, help_text="ruff finds nothing in the changed Python files")
    build_ok = models.BooleanField(null=True, help_text="the changed Python files byte-compile")
    fail_to_pass_fraction = models.FloatField(null=True, blank=True, help_text="Share of FAIL_TO_PASS tests that pass")
    score = models.FloatField(
        null=True, blank=True, help_text="The workload's score of the answer, 0 to 1 (a PR patch: 1 when resolved)"
    )
    confidence = models.FloatField(
        null=True, blank=True, help_text="The confidence the answer stated, 0 to 1, when its prompt asked for one"
    )
    pass_to_pass_regressions = models.PositiveIntegerField(
        null=True, blank=True, help_text="PASS_TO_PASS tests the patch broke"
    )
    # An agent arm's attempt (experiments/agent.py): how many model turns it took and how many
    # tool calls it made; null for a single-turn answer. Its steps are the TRAJECTORY artifact.
    turns = models.PositiveIntegerField(null=True, blank=True, help_text="Agent: model turns taken")
    tool_calls = models.PositiveIntegerField(null=True, blank=True, help_text="Agent: tool calls made")

    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    responded_at = models.DateTimeField(null=True, blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "task", "arm", "repetition"], name="one_attempt_per_cell")
        ]
        indexes = [
            # A run's attempts of one status in execution order: a job takes the run's next
            # queued ones (pipeline.BatchRunner._steal) as a range of it, where (run, status)
            # alone made every look sort all the run's queued attempts; counts by status read
            # its prefix.
            models.Index(fields=["run", "status", "sequence"], name="attempt_run_status_sequence"),
            # The recovery sweep's running attempts (experiments/recovery.py). Partial: a row is
            # in it only while running, so recording an attempt adds no entry to it, as it did
            # to the (status, started_at) index before (issue 31: index upkeep is most of an
            # attempt's database CPU).
            models.Index(fields=["started_at"], name="attempt_running_since", condition=models.Q(status="running")),
            # The attempts list and every export read a run in execution order: without this
            # a page of 500 rows sorts all of a large run's attempts first.
            models.Index(fields=["run", "sequence"]),
            # Deleting an attempt clears the links to it (SET_NULL): only rows that have one are
            # indexed, so the many without one never write an entry.
            models.Index(
                fields=["cached_from"], name="attempt_cached_from", condition=models.Q(cached_from__isnull=False)
            ),
            # The run page's attempts list reads a page from one range per status and outcome
            # class, in the order it is sorted by (experiments/attempt_list.py); an answered
            # attempt's range is also its verdict's, so a run's wrong answers are one range
            # too. Each row is in one of the first two (its status decides which): no more
            # index entries than one index per order over every attempt.
            *(
                models.Index(
                    fields=["run", "status", "outcome", *order],
                    name=f"attempt_unanswered_by_{name}",
                    condition=~models.Q(status="completed"),
                )
                for name, order in LIST_ORDERS
            ),
            *(
                models.Index(
                    fields=["run", "outcome", "resolved", *order],
                    name=f"attempt_answered_by_{name}",
                    condition=models.Q(status="completed"),
                )
                for name, order in LIST_ORDERS
            ),
            # ... and an error category's from these, of the failures alone (small).
            *(
                models.Index(
                    fields=["run", "error_category", "status", "outcome", *order],
                    name=f"attempt_errors_by_{name}",
                    condition=~models.Q(error_category=""),
                )
                for name, order in LIST_ORDERS
            ),
        ]
        ordering = ["run", "sequence"]

    def __str__(self) -> str:
        return f"{self.arm} on {self.task} #{self.repetition}"


class RunCounters(models.Model):
    """A run's attempts by status, its repeated calls, its final verdicts and its spend, kept exact by
    database triggers (experiments/run_counters.py) in the same statement as every change to
    an attempt or a verdict, whichever code path makes it: the run page, its live poll and
    the run API read one row instead of counting a million. One row per run also gives every
    transaction that moves a run's attempts one lock order, so two workers never deadlock on it.
    A run without a row has no attempts yet."""

    run = models.OneToOneField(Run, models.CASCADE, primary_key=True, related_name="counters")
    queued = models.BigIntegerField(default=0)
    running = models.BigIntegerField(default=0)
    completed = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    cancelled = models.BigIntegerField(default=0)
    repeat_calls = models.BigIntegerField(default=0, help_text="The sum of its attempts' repeat_calls")
    judged = models.BigIntegerField(default=0, help_text="Final verdicts (judged or evaluator error) of its profile")
    spent_usd = models.DecimalField(
        max_digits=20, decimal_places=8, default=0, help_text="The sum of its attempts' cost_usd (its budget's spend)"
    )
    budget_refused = models.BigIntegerField(default=0, help_text="Attempts not made: a budget refused them")

    class Meta:
        verbose_name_plural = "run counters"

    def __str__(self) -> str:
        return f"counters of run {self.run_id}"


class ArtifactKind(models.TextChoices):
    PATCH = "patch"
    VALIDATION = "validation"
    TESTS = "tests"  # per-test outcomes, JSON: [{id, outcome, seconds, message}]
    LINT = "lint"  # ruff on the Python files the patch changed
    BUILD = "build"  # byte-compiling them
    ANSWER = "answer"  # question-answer kinds: the extracted answer and how it was graded, JSON
    TRAJECTORY = "trajectory"  # an agent's steps, JSON (experiments/trajectory.py)


class Artifact(models.Model):
    attempt = models.ForeignKey(Attempt, models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=16, choices=ArtifactKind.choices)
    status = models.CharField(max_length=16, choices=ValidationStatus.choices, blank=True)
    content = models.TextField(blank=True, help_text="The patch, or the (truncated) validation log")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attempt", "kind"], name="one_artifact_per_kind")]
        ordering = ["attempt", "kind"]

    def __str__(self) -> str:
        return f"{self.kind} of {self.attempt_id}"


class CachedResponse(models.Model):
    """One organisation's stored answer to one normalised temperature-0 request (see
    providers/response_cache.py for what makes two requests identical).

    Kept here rather than in providers: it is written from attempts and read by the
    pipeline that runs them, and its source is an attempt; providers stays unaware of
    experiments. Only successful answers are stored, never failures."""

    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="cached_responses")
    key = models.CharField(max_length=64, help_text="sha256 of the normalised request")
    text = models.TextField(blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    usage = models.JSONField(default=dict, help_text="Token counts of the original call")
    model_served = models.CharField(max_length=200, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    raw_response = models.JSONField(default=dict, blank=True)
    cost_usd = models.DecimalField(
        max_digits=14, decimal_places=8, null=True, blank=True, help_text="What the original call cost"
    )
    cost_source = models.CharField(max_length=16, blank=True)
    cost_breakdown = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    source_attempt = models.ForeignKey(
        Attempt, models.SET_NULL, null=True, blank=True, related_name="+", help_text="The attempt that paid for it"
    )
    created_at = models.DateTimeField()
    hits = models.PositiveIntegerField(default=0, help_text="How many attempts reused it")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "key"], name="one_cached_response_per_key")]

    def __str__(self) -> str:
        return f"{self.key[:12]} ({self.hits} hits)"


class WorkerLease(models.Model):
    """A process that claims attempts, alive while ``expires_at`` is in the future.

    The process renews it from a thread of its own (experiments/liveness.py); the recovery
    sweep takes back the attempts of a process whose lease has run out. In Postgres, not
    Redis: a Redis restart must not make every live worker look dead."""

    name = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    # Which process ``pid`` is, so a process on the same machine can tell at once that this one
    # died (experiments/liveness.py): the kernel's boot id and pid namespace, in which the pid
    # means something (containers sharing a hostname need not share pids), and the process's
    # start time in clock ticks after boot, which a later process given the same pid does not
    # have. Empty where /proc is not there to read: such a lease is only ever left to expire.
    process_scope = models.CharField(max_length=100, blank=True, default="")
    process_start_ticks = models.BigIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)
    capabilities = models.JSONField(
        default=list,
        blank=True,
        help_text='What the worker can run: its interpreters ("python3.9") and the system packages recipes name '
        '("sys:ffmpeg"); empty for a process that serves no queue of such work',
    )

    def __str__(self) -> str:
        return f"{self.name} ({self.hostname}:{self.pid})"


class ExportStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "being written"
    DONE = "done", "ready"
    FAILED = "failed", "failed"
    EXPIRED = "expired", "expired"  # its file was deleted a day after it was written


EXPORT_BUSY = (ExportStatus.QUEUED, ExportStatus.RUNNING)


class RunExport(models.Model):
    """A run's export written to a file by a background job (experiments/run_exports.py), so
    no export of any size depends on a web worker's timeout: the page and the API follow its
    progress, then hand out the file until it expires.

    The file lives under PRBENCH_EXPORT_DIR, which every worker and web process must share;
    ``path`` is relative to it. A worker claims the row by setting ``claim_token``, and only
    the holder of the token may record progress or the outcome."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, models.CASCADE, related_name="exports")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")
    format = models.CharField(max_length=32)
    options = models.JSONField(default=dict, blank=True, help_text='One arm\'s file: {"arm": LABEL, "rep": N}')
    status = models.CharField(max_length=16, choices=ExportStatus.choices, default=ExportStatus.QUEUED)
    rows_written = models.PositiveBigIntegerField(default=0)
    rows_total = models.PositiveBigIntegerField(null=True, blank=True, help_text="Unknown for SWE-bench files")
    file_name = models.CharField(max_length=300, blank=True, help_text="The download's name")
    content_type = models.CharField(max_length=100, blank=True)
    path = models.CharField(max_length=300, blank=True, help_text="The file, under PRBENCH_EXPORT_DIR")
    size = models.PositiveBigIntegerField(default=0)
    error = models.TextField(blank=True)
    job_id = models.CharField(max_length=100, blank=True)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Moved by every progress write: a busy row that stops moving was abandoned by its worker.
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "expires_at"], name="run_export_status_expiry")]

    def __str__(self) -> str:
        return f"{self.format} of run {self.run_id} ({self.status})"

    @property
    def is_busy(self) -> bool:
        return self.status in EXPORT_BUSY

    @property
    def percent(self) -> int | None:
        if not self.rows_total:
            return None
        return min(100, round(100 * self.rows_written / self.rows_total))
