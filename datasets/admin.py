from pathlib import Path

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from datasets.imports import check_repo_sources
from datasets.models import (
    Dataset,
    EnvironmentRecipe,
    MinedCandidate,
    MiningJob,
    MiningSource,
    TaskInstance,
    TaskUpload,
)
from datasets.recipes import RECIPE_INPUT_FIELDS, check_recipe


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


class EnvironmentRecipeForm(forms.ModelForm):
    """The same check as the dataset page's, the command's and the spec's (datasets/recipes.py)."""

    class Meta:
        model = EnvironmentRecipe
        fields = ["dataset", *RECIPE_INPUT_FIELDS]

    def clean(self):
        cleaned = super().clean()
        if self.errors or cleaned.get("dataset") is None:
            return cleaned
        raw = {name: cleaned.get(name) for name in RECIPE_INPUT_FIELDS}
        raw = {
            name: "" if value is None and name in ("version", "project", "checkout_build", "source") else value
            for name, value in raw.items()
        }
        try:
            checked = check_recipe(cleaned["dataset"], raw)
        except ValidationError as exc:
            errors: dict[str, list[str]] = {}
            for message in exc.messages:
                field, _, problem = message.partition(": ")
                name = field.split(".")[0].split("[")[0]
                errors.setdefault(name if name in self.fields else "__all__", []).append(problem or message)
            raise ValidationError(errors) from None
        return {**cleaned, **checked.fields()}


@admin.register(EnvironmentRecipe)
class EnvironmentRecipeAdmin(admin.ModelAdmin):
    form = EnvironmentRecipeForm
    list_display = ["repo", "version", "python", "dataset", "source", "updated_at"]
    list_filter = ["python"]
    search_fields = ["repo", "dataset__name", "source"]
    readonly_fields = ["updated_at"]
