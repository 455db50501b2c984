"""Staff only: evaluator profiles (platform configuration) and verdicts with their
rationale, prompts and raw answers, none of which customers ever see."""

from typing import Any

from django.contrib import admin

from evaluation.agreement import agreements_with, describe
from evaluation.models import JUDGING_FIELDS, Environment, EvaluatorProfile, Verdict


@admin.register(EvaluatorProfile)
class EvaluatorProfileAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "version",
        "workload",
        "provider",
        "model_name",
        "prompt_version",
        "rubric_version",
        "active_from",
    ]
    list_filter = ["name", "workload", "provider"]
    actions = ["make_next_version"]
    change_form_template = "admin/evaluation/evaluatorprofile/change_form.html"

    def change_view(self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        profile = self.get_object(request, object_id)
        extra = {"agreements": [describe(result) for result in agreements_with(profile)] if profile else []}
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    @admin.action(description="Copy as the next version (to change a frozen profile)")
    def make_next_version(self, request: Any, queryset: Any) -> None:
        for profile in queryset:
            copy = profile.next_version()
            self.message_user(request, f"Created {copy}: edit it, then set its active window.")

    def get_readonly_fields(self, request: Any, obj: EvaluatorProfile | None = None) -> Any:
        if obj is not None and obj.is_frozen:
            return [*JUDGING_FIELDS, "created_at"]
        return ["created_at"]


@admin.register(Verdict)
class VerdictAdmin(admin.ModelAdmin):
    list_display = [
        "attempt",
        "profile",
        "status",
        "overall",
        "change_risk",
        "truthful",
        "informative",
        "was_repaired",
        "cost_usd",
        "created_at",
    ]
    list_filter = ["status", "profile", "change_risk", "truthful", "informative"]
    search_fields = ["attempt__code", "attempt__task__external_id", "rationale"]
    raw_id_fields = ["attempt"]
    readonly_fields = [field.name for field in Verdict._meta.fields]

    @admin.display(boolean=True, description="repaired")
    def was_repaired(self, verdict: Verdict) -> bool:
        return verdict.repaired

    def has_add_permission(self, request: Any) -> bool:
        return False  # verdicts come from the evaluator, never from a form

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # deleting a profile's verdicts would unfreeze it: history stays


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    """Build records of task environments: written by the builds, read here (log included)."""

    list_display = [
        "short_key",
        "label",
        "status",
        "steps_done",
        "steps_total",
        "build_seconds",
        "size_bytes",
        "builder",
        "finished_at",
    ]
    list_filter = ["status"]
    search_fields = ["key", "label"]
    readonly_fields = [field.name for field in Environment._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False
