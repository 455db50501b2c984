from pathlib import Path

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from experiments.imports import check_repo_sources
from experiments.models import (
    ApiIdempotencyKey,
    Artifact,
    Attempt,
    CachedResponse,
    Dataset,
    Experiment,
    MinedCandidate,
    MiningJob,
    MiningSource,
    ModelArm,
    Prediction,
    PredictionSet,
    Run,
    RunArm,
    TaskInstance,
    TaskUpload,
    WorkerLease,
)


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "org", "kind", "harness_rule", "created_at"]
    list_filter = ["kind", "org"]
    search_fields = ["name", "code", "org__slug"]
    readonly_fields = ["code", "created_at"]


@admin.register(MinedCandidate)
class MinedCandidateAdmin(admin.ModelAdmin):
    list_display = ["commit", "subject", "dataset", "kept", "decided_at"]
    list_filter = ["kept", "dataset"]
    search_fields = ["commit", "subject", "reason", "repo"]
    readonly_fields = ["decided_at"]


@admin.register(TaskInstance)
class TaskInstanceAdmin(admin.ModelAdmin):
    list_display = ["external_id", "title", "dataset", "repo", "position", "quarantined"]
    list_filter = ["dataset__kind", "quarantined", "dataset"]
    search_fields = ["external_id", "title", "problem_statement", "code", "repo"]
    readonly_fields = ["code"]


class ModelArmInline(admin.TabularInline):
    model = ModelArm
    extra = 0


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["name", "org", "dataset", "sample_size", "repetitions", "updated_at"]
    list_filter = ["org", "sample_strategy"]
    search_fields = ["name", "code", "org__slug"]
    readonly_fields = ["code", "created_at", "updated_at"]
    inlines = [ModelArmInline]


@admin.register(ModelArm)
class ModelArmAdmin(admin.ModelAdmin):
    list_display = ["label", "experiment", "provider", "model_name", "position"]
    list_filter = ["provider"]
    search_fields = ["label", "model_name", "experiment__name"]


@admin.register(RunArm)
class RunArmAdmin(admin.ModelAdmin):
    list_display = ["label", "run", "provider", "model_name", "position"]
    list_filter = ["provider"]
    search_fields = ["label", "model_name", "run__code"]
    readonly_fields = ["run", "label", "provider", "model_name", "config", "position"]


class RunArmInline(admin.TabularInline):
    model = RunArm
    extra = 0
    readonly_fields = ["label", "provider", "model_name", "config", "position"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = [
        "code",
        "experiment",
        "org",
        "status",
        "seed",
        "total_attempts",
        "inference_only",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "inference_only", "org"]
    search_fields = ["code", "experiment__name", "org__slug"]
    readonly_fields = ["code", "created_at", "started_at", "finished_at", "config_snapshot"]
    inlines = [RunArmInline]


class ArtifactInline(admin.StackedInline):
    model = Artifact
    extra = 0
    readonly_fields = ["kind", "status", "content", "duration_ms", "created_at"]


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = [
        "code",
        "run",
        "task",
        "arm",
        "repetition",
        "status",
        "outcome",
        "resolved",
        "error_category",
        "latency_ms",
        "cost_usd",
        "retries",
        "claims",
        "response_cached",
    ]
    list_filter = ["status", "outcome", "resolved", "error_category", "arm__provider", "response_cached"]
    search_fields = ["code", "task__external_id", "arm__label", "run__code"]
    list_select_related = ["run__experiment", "task", "arm"]
    readonly_fields = [
        "code",
        "outcome",  # decided by the recorder; every board and report counts it
        "claim_token",
        "claimed_by",
        "queued_at",
        "started_at",
        "responded_at",
        "validated_at",
        "scored_at",
        "latency_ms",
        "first_token_ms",
        "output_tokens_per_s",
        "wall_ms",
    ]
    raw_id_fields = ["run", "task", "arm", "cached_from"]  # a select of every attempt would not load
    inlines = [ArtifactInline]


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["attempt", "kind", "status", "duration_ms", "created_at"]
    list_filter = ["kind", "status"]
    search_fields = ["attempt__code", "attempt__task__external_id", "attempt__arm__label"]
    raw_id_fields = ["attempt"]


@admin.register(CachedResponse)
class CachedResponseAdmin(admin.ModelAdmin):
    list_display = ["key", "org", "model_served", "cost_usd", "hits", "created_at"]
    list_filter = ["org"]
    search_fields = ["key", "org__slug", "model_served"]
    raw_id_fields = ["org", "source_attempt"]
    readonly_fields = ["key", "created_at", "hits"]


@admin.register(WorkerLease)
class WorkerLeaseAdmin(admin.ModelAdmin):
    """Which worker processes are alive: read-only, since the workers and the sweep own the rows."""

    list_display = ["name", "hostname", "pid", "started_at", "expires_at"]
    search_fields = ["name", "hostname"]
    readonly_fields = ["name", "hostname", "pid", "started_at", "expires_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ApiIdempotencyKey)
class ApiIdempotencyKeyAdmin(admin.ModelAdmin):
    """Which run each API Idempotency-Key started: read-only, since only a start writes them."""

    list_display = ["key", "org", "run", "created_at"]
    list_filter = ["org"]
    search_fields = ["key", "org__slug"]
    raw_id_fields = ["org", "run"]
    readonly_fields = ["org", "key", "fingerprint", "run", "created_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(PredictionSet)
class PredictionSetAdmin(admin.ModelAdmin):
    """Imported predictions (import_predictions): read-only, since a run that replayed a set
    must keep replaying what it did."""

    list_display = ["model_name", "source_name", "experiment", "label", "count", "ignored", "imported_at"]
    list_filter = ["org"]
    search_fields = ["model_name", "source_name", "label", "sha256"]
    readonly_fields = [field.name for field in PredictionSet._meta.fields]


@admin.register(Prediction)
class PredictionAdmin(admin.ModelAdmin):
    list_display = ["instance_id", "prediction_set", "line"]
    search_fields = ["instance_id", "prediction_set__model_name"]
    readonly_fields = [field.name for field in Prediction._meta.fields]


class MiningSourceForm(forms.ModelForm):
    class Meta:
        model = MiningSource
        fields = ["name", "path", "branch", "test_command", "org", "enabled"]

    def clean(self):
        cleaned = super().clean()
        name, path, command = cleaned.get("name", ""), cleaned.get("path", ""), cleaned.get("test_command")
        check_repo_sources([f"{name}={path}"])
        if path and not Path(path).is_absolute():
            raise ValidationError({"path": "an absolute path of a git clone on this server"})
        if command is not None and not (isinstance(command, list) and all(isinstance(a, str) and a for a in command)):
            raise ValidationError({"test_command": "a list of arguments (non-empty strings), or [] for the default"})
        if cleaned.get("branch", "").startswith("-"):  # git would read it as an option
            raise ValidationError({"branch": "a branch or commit cannot start with '-'"})
        return cleaned


@admin.register(MiningSource)
class MiningSourceAdmin(admin.ModelAdmin):
    """The repositories organisations may mine from the datasets page."""

    form = MiningSourceForm
    list_display = ["name", "path", "branch", "org", "enabled"]
    list_filter = ["enabled", "org"]
    search_fields = ["name", "path"]


@admin.register(MiningJob)
class MiningJobAdmin(admin.ModelAdmin):
    list_display = ["source", "dataset_name", "org", "status", "kept", "rejected", "created_at", "finished_at"]
    list_filter = ["status", "org"]
    search_fields = ["dataset_name", "source__name", "code"]
    readonly_fields = [field.name for field in MiningJob._meta.fields]


@admin.register(TaskUpload)
class TaskUploadAdmin(admin.ModelAdmin):
    """Uploaded task files: read-only, their jobs own the rows; the file's bytes are not shown."""

    list_display = ["file_name", "dataset_name", "org", "format", "status", "size", "imported", "created_at"]
    list_filter = ["status", "format", "org"]
    search_fields = ["file_name", "dataset_name", "code", "sha256"]
    exclude = ["data"]
    readonly_fields = [field.name for field in TaskUpload._meta.fields if field.name != "data"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("data")
