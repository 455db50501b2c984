from django.contrib import admin

from experiments.models import (
    ApiIdempotencyKey,
    Artifact,
    Attempt,
    CachedResponse,
    Experiment,
    ModelArm,
    Prediction,
    PredictionSet,
    Run,
    RunArm,
    RunCounters,
    RunExport,
    WorkerLease,
)


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

    list_display = ["name", "hostname", "pid", "capabilities", "started_at", "expires_at"]
    search_fields = ["name", "hostname"]
    readonly_fields = ["name", "hostname", "pid", "capabilities", "started_at", "expires_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(RunCounters)
class RunCountersAdmin(admin.ModelAdmin):
    """Each run's counters: read-only, since the database's triggers own them (a wrong one is put
    right by `manage.py recount_runs`, never by hand)."""

    list_display = ["run", "queued", "running", "completed", "failed", "cancelled", "repeat_calls", "judged"]
    search_fields = ["run__code"]
    raw_id_fields = ["run"]
    readonly_fields = ["run", "queued", "running", "completed", "failed", "cancelled", "repeat_calls", "judged"]

    def has_add_permission(self, request):
        return False

    # Delete stays allowed: the admin asks for it on every related model when a run is deleted.
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


@admin.register(RunExport)
class RunExportAdmin(admin.ModelAdmin):
    """Background exports (experiments/run_exports.py): written by their job, read-only here."""

    list_display = ["code", "run", "format", "status", "rows_written", "rows_total", "size", "created_at", "expires_at"]
    list_filter = ["status", "format"]
    search_fields = ["code", "run__code", "org__slug"]
    readonly_fields = [field.name for field in RunExport._meta.fields]
