"""The task supply: datasets, their tasks, and the uploads and mining jobs that fill them.

The tables keep the names they had when these models lived in ``experiments``
(``db_table``): moving them here changed no data (datasets/migrations/0001_initial.py)."""

import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.db import models

from evaluation.environments import Recipe
from evaluation.patches import HarnessRule
from evaluation.workloads import kind_choices

HARNESS_RULES = [
    (HarnessRule.STRICT, "Strict: no test file, test directory or test configuration"),
    (HarnessRule.TASK, "The task's own tests: its test files and their directories, and runner hooks"),
]


# What a dataset's tasks ask, derived from the workload registry (evaluation/workloads/): a kind
# is declared once, in its module, and is ``DatasetKind.<KIND>`` here. django-stubs types only
# the class form of TextChoices, not this functional one.
DatasetKind = models.TextChoices(  # type: ignore[call-overload]
    "DatasetKind", [(kind.upper(), (kind, label)) for kind, label in kind_choices()]
)


class Dataset(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, choices=kind_choices, default=DatasetKind.PR_PATCH)
    description = models.TextField(blank=True)
    repo_sources = models.JSONField(
        default=dict,
        blank=True,
        help_text='Where each task repository is cloned from: {"owner/name": "/srv/repos/name" or a clone URL}',
    )
    test_command = models.JSONField(
        default=list,
        blank=True,
        help_text="Test command (argument list) for repository tasks that name none; "
        "{python} is the worker's interpreter, {junit} where the JUnit report goes",
    )
    build_command = models.JSONField(
        default=list,
        blank=True,
        help_text="Build command (argument list); empty: byte-compile the changed Python files",
    )
    harness_rule = models.CharField(
        max_length=16,
        choices=HARNESS_RULES,
        default=HarnessRule.STRICT,
        help_text="What counts as a patch changing the tests: any test or test configuration file (mined "
        "tasks), or the task's own test files and directories (imported SWE-bench tasks, as the harness has it)",
    )
    # A version is the dataset as of one import: the tasks that import added and every earlier
    # version's. Importing into a dataset that holds tasks opens the next one (datasets/imports.py).
    version = models.PositiveIntegerField(
        default=1, help_text="The latest version: each import into a dataset that holds tasks makes a new one"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "experiments_dataset"
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="dataset_name_per_org")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def repository_origins(self) -> list[tuple[str, str]]:
        """Each repository and where it comes from, as a customer may see it: a clone URL's
        host only (a URL can carry a token), and never a path on the server."""
        return [(repo, _origin(source)) for repo, source in sorted(self.repo_sources.items())]


def _origin(source: str) -> str:
    parts = urlsplit(source)
    if parts.scheme in ("http", "https", "ssh", "git") and parts.hostname:
        return parts.hostname
    if parts.scheme == "" and ":" in source and "/" not in source.split(":", 1)[0]:  # scp-like git@host:repo
        return source.split(":", 1)[0].rpartition("@")[2]
    return "a copy on the server"


class GoldStatus(models.TextChoices):
    RESOLVED = "resolved", "gold resolves it"
    UNRESOLVED = "unresolved", "gold does not resolve it"
    FLAKY = "flaky", "gold flips between runs"
    TRIVIAL = "trivial", "the empty patch resolves it too"
    # Its tests cannot run here: no environment holds what they import, its build failed, or
    # this worker lacks the interpreter it needs. Nobody's failure but the platform's.
    NO_ENVIRONMENT = "no_environment", "environment missing"
    ERROR = "error", "could not be checked"


class TaskInstance(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    dataset = models.ForeignKey(Dataset, models.CASCADE, related_name="tasks")
    external_id = models.CharField(
        max_length=200, help_text="The task's id in its source, e.g. a SWE-bench instance_id"
    )
    position = models.PositiveIntegerField(default=0, help_text="Order in the dataset")
    title = models.CharField(max_length=300, blank=True)
    problem_statement = models.TextField()
    repo_files = models.JSONField(default=dict, help_text="path -> content at the base commit")
    gold_patch = models.TextField(blank=True)
    test_command = models.JSONField(default=list)
    # Tasks on a real repository (SWE-bench format): its files come from a checkout of
    # ``repo`` at ``base_commit`` (see Dataset.repo_sources), not from ``repo_files``.
    repo = models.CharField(max_length=200, blank=True, help_text="owner/name, empty for self-contained tasks")
    base_commit = models.CharField(max_length=64, blank=True)
    test_patch = models.TextField(blank=True, help_text="Tests added or changed by the fix, applied before testing")
    hints_text = models.TextField(blank=True)
    version = models.CharField(max_length=50, blank=True)
    fail_to_pass = models.JSONField(default=list, blank=True, help_text="Tests the fix must turn green")
    pass_to_pass = models.JSONField(default=list, blank=True, help_text="Tests that must stay green")
    metadata = models.JSONField(default=dict, blank=True)
    # Question-answer kinds: what the kind's module needs of a task beyond its question (the
    # problem statement): choices, the answer and its aliases, an entry point and tests, ...
    payload = models.JSONField(default=dict, blank=True, help_text="The fields the dataset's kind reads")
    category = models.CharField(max_length=200, blank=True, help_text="e.g. a Jeopardy category or MMLU subject")
    difficulty = models.CharField(max_length=50, blank=True, help_text="e.g. a Jeopardy clue's value")
    # A task whose gold patch gave different results on repeated runs: kept, but left out of
    # runs unless an experiment asks for it, since it would score arms at random.
    quarantined = models.BooleanField(default=False)
    quarantine_reason = models.TextField(blank=True)
    gold_status = models.CharField(
        max_length=16, choices=GoldStatus.choices, blank=True, help_text="What validate_gold found; empty: not checked"
    )
    gold_detail = models.TextField(blank=True, help_text="How each gold run went, and the empty patch's run if asked")
    gold_checked_at = models.DateTimeField(null=True, blank=True)
    dataset_version = models.PositiveIntegerField(default=1, help_text="The dataset version that added it")
    # The environment its tests last ran in (evaluation.Environment.key), "" for the worker's
    # own Python: which tasks a failed build quarantines, and which builds a page shows.
    environment_key = models.CharField(max_length=64, blank=True, db_index=True)

    class Meta:
        db_table = "experiments_taskinstance"
        constraints = [models.UniqueConstraint(fields=["dataset", "external_id"], name="task_id_per_dataset")]
        ordering = ["dataset", "position", "external_id"]

    def __str__(self) -> str:
        return self.external_id


class MinedCandidate(models.Model):
    """A commit ``ingest_prs`` has judged for a dataset, kept or rejected, saved as soon as it
    is decided: a killed run loses at most the candidate in progress, and a re-run does not
    test a decided commit again (unless asked to retry the rejected ones)."""

    dataset = models.ForeignKey(Dataset, models.CASCADE, related_name="mined_candidates")
    repo = models.CharField(max_length=200, help_text="owner/name the commit was mined from")
    commit = models.CharField(max_length=64)
    subject = models.CharField(max_length=300, blank=True)
    kept = models.BooleanField()
    reason = models.TextField(blank=True, help_text="Why it was rejected, or why its task is quarantined")
    log_tail = models.TextField(blank=True, help_text="The last lines of the test log that decided it")
    task = models.ForeignKey(TaskInstance, models.SET_NULL, null=True, blank=True, related_name="+")
    decided_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "experiments_minedcandidate"
        constraints = [
            models.UniqueConstraint(fields=["dataset", "repo", "commit"], name="mined_candidate_per_dataset")
        ]
        ordering = ["dataset", "-decided_at"]

    def __str__(self) -> str:
        return f"{self.commit[:12]} ({'kept' if self.kept else 'rejected'})"


class UploadStatus(models.TextChoices):
    CHECKING = "checking", "checking"  # the file is being read and checked (queued or under way)
    READY = "ready", "ready to import"  # checked, no problem: waiting for the owner's confirmation
    REJECTED = "rejected", "rejected"  # checked, with problems: nothing can be imported from it
    IMPORTING = "importing", "importing"  # confirmed: being imported (queued or under way)
    IMPORTED = "imported", "imported"
    FAILED = "failed", "failed"  # the import itself found a problem (or stopped): nothing saved


UPLOAD_BUSY = (UploadStatus.CHECKING, UploadStatus.IMPORTING)


class TaskUpload(models.Model):
    """A task file uploaded in the browser, through its check (the preview) and its import.

    The bytes are kept in this row until the import ends: a worker on another machine reads
    them from the database it already uses, no shared disk is needed, and the upload goes
    with its row. They are cleared once nothing more can be done with them."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="task_uploads")
    dataset_name = models.CharField(max_length=200, help_text="The dataset it goes into (created if new)")
    dataset = models.ForeignKey(Dataset, models.SET_NULL, null=True, blank=True, related_name="uploads")
    format = models.CharField(max_length=32)
    field_map = models.JSONField(default=dict, blank=True, help_text="jsonl/csv: the kind's field -> the file's")
    kind = models.CharField(max_length=32, blank=True, help_text="jsonl/csv: the kind the mapped fields make")
    file_name = models.CharField(max_length=300)
    data = models.BinaryField(blank=True, help_text="The file's bytes, until the import ends")
    size = models.PositiveBigIntegerField(help_text="Bytes uploaded")
    sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=UploadStatus.choices, default=UploadStatus.CHECKING)
    preview = models.JSONField(default=dict, blank=True, help_text="The check's findings: kind, first rows, problems")
    lines_total = models.PositiveIntegerField(default=0)
    lines_read = models.PositiveIntegerField(default=0, help_text="How far the job has read the file")
    saving = models.BooleanField(default=False, help_text="Read and checked: its tasks are being saved")
    imported = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(null=True, blank=True, help_text="The dataset version the import made")
    problems = models.JSONField(default=list, blank=True, help_text="Why the import failed")
    # The RQ job last queued for it (empty: run in the request); a worker claims the row by
    # setting claim_token, and only the holder of the token may record the outcome.
    job_id = models.CharField(max_length=100, blank=True)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "experiments_taskupload"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.file_name} -> {self.dataset_name} ({self.status})"

    @property
    def is_busy(self) -> bool:
        return self.status in UPLOAD_BUSY


class MiningSource(models.Model):
    """A repository the platform allows organisations to mine from the datasets page: staff
    add one in the admin (a git clone on this server), and only these are offered."""

    name = models.CharField(max_length=200, help_text="owner/name the mined tasks point at")
    path = models.CharField(max_length=500, help_text="Absolute path of a git clone on the server")
    branch = models.CharField(max_length=200, default="HEAD", help_text="Branch or commit whose history is mined")
    test_command = models.JSONField(
        default=list, blank=True, help_text="Argument list ({python}, {junit}); empty: ingest_prs's default pytest"
    )
    org = models.ForeignKey(
        "orgs.Organization",
        models.CASCADE,
        null=True,
        blank=True,
        related_name="mining_sources",
        help_text="Only this organisation may mine it; empty: every organisation",
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        db_table = "experiments_miningsource"
        constraints = [models.UniqueConstraint(fields=["name", "path"], name="one_mining_source_per_path")]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MiningStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


MINING_BUSY = (MiningStatus.QUEUED, MiningStatus.RUNNING)


class MiningJob(models.Model):
    """One ``ingest_prs`` run started from the page, with its progress."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="mining_jobs")
    source = models.ForeignKey(MiningSource, models.PROTECT, related_name="jobs")
    dataset_name = models.CharField(max_length=200)
    dataset = models.ForeignKey(Dataset, models.SET_NULL, null=True, blank=True, related_name="mining_jobs")
    max_tasks = models.PositiveIntegerField()
    max_candidates = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=MiningStatus.choices, default=MiningStatus.QUEUED)
    kept = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0, help_text="Commits that are no candidate, or decided before")
    judging = models.CharField(max_length=300, blank=True, help_text="The candidate being judged")
    message = models.TextField(blank=True, help_text="How it ended, or why it stopped")
    job_id = models.CharField(max_length=100, blank=True)
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "experiments_miningjob"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source} -> {self.dataset_name} ({self.status})"

    @property
    def is_busy(self) -> bool:
        return self.status in MINING_BUSY


RECIPE_FIELDS = (
    "python",
    "packages",
    "requirements",
    "project",
    "pre_install",
    "system_packages",
    "test_env",
    "exclude_newer",
    "checkout_build",
)


class EnvironmentRecipe(models.Model):
    """How to make the environment a repository's tests run in (evaluation/environments.py):
    for one version of the repository as its tasks name it, or for every version without a
    recipe of its own (``version`` empty)."""

    dataset = models.ForeignKey(Dataset, models.CASCADE, related_name="environment_recipes")
    repo = models.CharField(max_length=200, help_text="owner/name, as the dataset's tasks name it")
    version = models.CharField(max_length=50, blank=True, help_text="The tasks' version; empty: every other version")
    python = models.CharField(max_length=10, help_text='The interpreter, e.g. "3.11"')
    packages = models.JSONField(default=list, blank=True, help_text="Requirement specifiers installed first")
    requirements = models.JSONField(default=list, blank=True, help_text="Requirements files in the repository")
    project = models.CharField(
        max_length=200, blank=True, default="-e .", help_text='How the project is installed: "-e .", "-e .[test]", ""'
    )
    pre_install = models.JSONField(default=list, blank=True, help_text="Shell commands run in the checkout first")
    system_packages = models.JSONField(default=list, blank=True, help_text="What the worker machine must have")
    test_command = models.JSONField(
        default=list, blank=True, help_text="The tests' argv for tasks without their own; {python} is the environment's"
    )
    test_env = models.JSONField(default=dict, blank=True, help_text="Variables the tests run with")
    exclude_newer = models.CharField(
        max_length=40, blank=True, help_text="Install what the package index held then (ISO date), e.g. the tasks' date"
    )
    checkout_build = models.TextField(
        blank=True,
        help_text="A shell command building the project in its checkout (compiled extensions), run again after "
        "each patch; empty: none",
    )
    source = models.CharField(max_length=300, blank=True, help_text="Where the recipe came from")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "repo", "version"], name="one_recipe_per_repo_version")
        ]
        ordering = ["repo", "version"]

    def __str__(self) -> str:
        return f"{self.repo} {self.version or '(every version)'}"

    def recipe(self) -> Recipe:
        return Recipe.from_fields({name: getattr(self, name) for name in RECIPE_FIELDS})
