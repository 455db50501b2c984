"""The datasets page's forms: uploading a task file, mining a repository, a repository's
environment recipe."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePath
from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.template.defaultfilters import filesizeformat

from datasets.formats import format_names
from datasets.imports import check_dataset_name, parse_field_map
from datasets.mining import MAX_CANDIDATES_LIMIT, MAX_TASKS_LIMIT, allowed_sources
from datasets.models import Dataset, DatasetKind, EnvironmentRecipe, MiningSource
from datasets.recipes import CheckedRecipe, check_recipe, dataset_repositories, recipe_fields
from datasets.uploads import UploadedFile
from orgs.models import Organization
from prbench.inputs import NAME_MAX, TextValidator, check_text

FORMAT_LABELS = {"swebench": "SWE-bench JSONL (PR tasks)"}
FILE_NAME_MAX = 300  # TaskUpload.file_name's column


class UploadSizeLimit(FileUploadHandler):
    """Stops storing an uploaded file once it passes the limit. Django still reads the rest
    of the request and drops it (``connection_reset=False``), so the browser gets the page
    that says why, rather than a reset connection; nothing past the limit reaches the disk."""

    def __init__(self, request: Any, limit: int):
        super().__init__(request)
        self.limit = limit
        self.refused = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.refused = True
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def too_large_message(limit: int) -> str:
    return (
        f"The file is larger than the upload limit of {filesizeformat(limit)} ({limit:,} bytes): "
        "split it, or ask an operator to import it with manage.py import_tasks."
    )


class TaskUploadForm(forms.Form):
    format = forms.ChoiceField(help_text="What the file is: each format's importer checks every line")
    dataset_name = forms.CharField(
        label="Dataset",
        max_length=NAME_MAX,
        validators=[TextValidator(NAME_MAX)],
        widget=forms.TextInput(attrs={"list": "dataset-names"}),
        help_text="One of the organisation's datasets (the file's tasks become its next version), or a new name",
    )
    field_map = forms.CharField(
        label="Field mapping",
        required=False,
        help_text="Generic JSONL/CSV: which of the file's fields holds each of the kind's, e.g. "
        "question=prompt,answer=target,category=topic",
    )
    kind = forms.ChoiceField(label="Kind", required=False, help_text="Generic JSONL/CSV: the kind of task it holds")
    # Last in the form: fields after a file refused for its size are not read.
    file = forms.FileField(label="Task file")

    def __init__(self, *args: Any, too_large: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.too_large = too_large
        formats = [(name, FORMAT_LABELS.get(name, name)) for name in format_names()]
        cast(forms.ChoiceField, self.fields["format"]).choices = formats
        kinds = [(value, label) for value, label in DatasetKind.choices if value != DatasetKind.PR_PATCH]
        cast(forms.ChoiceField, self.fields["kind"]).choices = [("", "as the format says"), *kinds]
        if too_large:  # the file was dropped as it came in: say why, not that it is missing
            self.fields["file"].required = False

    def clean_dataset_name(self) -> str:
        name = self.cleaned_data["dataset_name"].strip()
        check_dataset_name(name)
        return name

    def clean_field_map(self) -> dict[str, str]:
        try:
            return parse_field_map(self.cleaned_data["field_map"])
        except ValidationError as exc:
            raise ValidationError([message.removeprefix("--map: ") for message in exc.messages]) from None

    def clean_file(self) -> Any:
        limit = settings.PRBENCH_UPLOAD_MAX_BYTES
        uploaded = self.cleaned_data.get("file")
        if self.too_large or uploaded is None or uploaded.size > limit:
            raise ValidationError(too_large_message(limit) if self.too_large or uploaded else "Choose a file.")
        name = PurePath(uploaded.name or "").name
        check_text(name, "the file's name", FILE_NAME_MAX)
        if not name.strip():
            raise ValidationError("the file has no name")
        return uploaded

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("format") == "swebench" and (cleaned.get("field_map") or cleaned.get("kind")):
            raise ValidationError("A field mapping and a kind are for generic JSONL/CSV files, not SWE-bench's.")
        return cleaned

    def uploaded_file(self) -> UploadedFile:
        data = self.cleaned_data
        return UploadedFile(
            name=PurePath(data["file"].name).name,
            data=data["file"].read(),
            format=data["format"],
            dataset_name=data["dataset_name"],
            field_map=data["field_map"],
            kind=data["kind"],
        )


class MiningForm(forms.Form):
    source: forms.ModelChoiceField = forms.ModelChoiceField(
        label="Repository",
        queryset=MiningSource.objects.none(),
        empty_label=None,
        help_text="The repositories the platform allows mining",
    )
    dataset_name = forms.CharField(
        label="Dataset",
        max_length=NAME_MAX,
        validators=[TextValidator(NAME_MAX)],
        widget=forms.TextInput(attrs={"list": "dataset-names"}),
        help_text="One of the organisation's PR datasets, or a new name",
    )
    max_tasks = forms.IntegerField(
        label="Stop after keeping", min_value=1, max_value=MAX_TASKS_LIMIT, initial=10, help_text="tasks"
    )
    max_candidates = forms.IntegerField(
        label="Stop after judging",
        min_value=1,
        max_value=MAX_CANDIDATES_LIMIT,
        initial=50,
        help_text="candidate commits, kept or not (each is tested three times)",
    )

    def __init__(self, *args: Any, org: Organization, **kwargs: Any):
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["source"]).queryset = allowed_sources(org)

    def clean_dataset_name(self) -> str:
        name = self.cleaned_data["dataset_name"].strip()
        check_dataset_name(name)
        return name


def _shell_words(argv: list[str]) -> str:
    """``argv`` as typed in a shell, quoting only what needs it ({python} stays as it is)."""
    return " ".join(arg if re.fullmatch(r"[^\s'\"\\$`;&|<>()*?#~]+", arg) else shlex.quote(arg) for arg in argv)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class RecipeForm(forms.Form):
    """A repository's environment recipe, as text boxes; ``check_recipe`` judges it (the same
    check as the command's and the spec's), its findings shown at the field they name."""

    repo = forms.ChoiceField(label="Repository", help_text="As the dataset's tasks name it")
    version = forms.CharField(
        label="Version", required=False, max_length=50, help_text="The tasks' version; empty: every other version"
    )
    python = forms.CharField(label="Python", max_length=10, initial="3.11", help_text='The interpreter, e.g. "3.11"')
    packages = forms.CharField(
        label="Packages",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Requirement specifiers installed first, one a line (pytest==8.3.4)",
    )
    requirements = forms.CharField(
        label="Requirements files",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Files in the repository, one a line (requirements/test.txt)",
    )
    project = forms.CharField(
        label="Project",
        required=False,
        initial="-e .",
        help_text='How the project is installed: "-e .", "-e .[test]", or empty for not at all',
    )
    pre_install = forms.CharField(
        label="Before installing",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Shell commands run in the checkout first, one a line",
    )
    system_packages = forms.CharField(
        label="System packages", required=False, help_text="What the worker machine must have, separated by spaces"
    )
    test_command = forms.CharField(
        label="Test command",
        required=False,
        help_text="For tasks without their own, as typed in a shell; {python} is the environment's interpreter",
    )
    test_env = forms.CharField(
        label="Test variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="NAME=VALUE, one a line",
    )
    exclude_newer = forms.CharField(
        label="Packages as of",
        required=False,
        max_length=40,
        help_text="Install what the package index held on this date (2021-12-31), as the project's developers had; "
        "empty: today's releases",
    )
    checkout_build = forms.CharField(
        label="Checkout build",
        required=False,
        help_text="A shell command that builds the project in its checkout (python setup.py build_ext --inplace), "
        "for projects that compile extensions: run at each base commit, then again after each patch; "
        "empty: none",
    )
    source = forms.CharField(label="Source", required=False, max_length=300, help_text="Where the recipe came from")

    def __init__(self, *args: Any, dataset: Dataset, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.dataset = dataset
        cast(forms.ChoiceField, self.fields["repo"]).choices = [(r, r) for r in dataset_repositories(dataset)]
        self.checked: CheckedRecipe | None = None

    @classmethod
    def initial_for(cls, recipe: EnvironmentRecipe) -> dict[str, Any]:
        fields = recipe_fields(recipe)
        return {
            **fields,
            "packages": "\n".join(fields["packages"]),
            "requirements": "\n".join(fields["requirements"]),
            "pre_install": "\n".join(fields["pre_install"]),
            "system_packages": " ".join(fields["system_packages"]),
            "test_command": _shell_words(fields["test_command"]),
            "test_env": "\n".join(f"{name}={value}" for name, value in fields["test_env"].items()),
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        raw: dict[str, Any] = {
            "repo": cleaned["repo"],
            "version": cleaned["version"],
            "python": cleaned["python"].strip(),
            "packages": _lines(cleaned["packages"]),
            "requirements": _lines(cleaned["requirements"]),
            "project": cleaned["project"],
            "pre_install": _lines(cleaned["pre_install"]),
            "system_packages": cleaned["system_packages"].split(),
            "exclude_newer": cleaned["exclude_newer"].strip(),
            "checkout_build": cleaned["checkout_build"].strip(),
            "source": cleaned["source"] or "set on the dataset's page",
        }
        try:
            raw["test_command"] = shlex.split(cleaned["test_command"])
        except ValueError as exc:
            self.add_error("test_command", f"cannot be read as a command: {exc}")
            return cleaned
        variables = {}
        for line in _lines(cleaned["test_env"]):
            name, equals, value = line.partition("=")
            if not equals:
                self.add_error("test_env", f"{line[:60]!r} is not NAME=VALUE")
                return cleaned
            variables[name.strip()] = value
        raw["test_env"] = variables
        try:
            self.checked = check_recipe(self.dataset, raw)
        except ValidationError as exc:
            for message in exc.messages:
                field, _, problem = message.partition(": ")
                name = field.split(".")[0].split("[")[0]
                self.add_error(name if name in self.fields else None, problem if name in self.fields else message)
        return cleaned
