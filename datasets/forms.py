"""The datasets page's forms: uploading a task file, mining a repository."""

from __future__ import annotations

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
from datasets.models import DatasetKind, MiningSource
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
