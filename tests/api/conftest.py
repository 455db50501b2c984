"""The API tests' fixtures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from datasets.uploads import UploadedFile, do_upload
from experiments.models import Artifact, Attempt
from experiments.run_exports import do_request_export, write_export_job
from leaderboards.summaries import refresh_run_summaries
from tests.factories import STRONG_AND_WEAK, build_run

# One multiple-choice question in the generic JSONL layout: an upload to check and preview.
MMLU_LINE = b'{"question": "2 + 2?", "choices": ["3", "4"], "answer": "B"}\n'


@pytest.fixture
def real_ids(org, dataset, experiment, settings, tmp_path) -> dict[str, Any]:
    """The public ids of an organisation's objects, by the path parameter naming each: a
    finished run with judged attempts, one of which was validated as the pipeline records it,
    and its CSV export, written. Built row by row: running the pipeline would take half a
    minute of sandboxed tests."""
    judged, _ = build_run(experiment, dataset, STRONG_AND_WEAK, verdicts=True)
    refresh_run_summaries(judged.pk)
    attempt = judged.attempts.filter(status="completed", verdicts__isnull=False).order_by("sequence").first()
    validated(attempt)
    upload = do_upload(org, None, UploadedFile("tasks.jsonl", MMLU_LINE, "jsonl", "fuzzed", {}, "multiple_choice"))
    settings.PRBENCH_EXPORT_DIR = tmp_path / "exports"
    export = do_request_export(judged, "csv", {}, None)
    write_export_job(export.pk)  # as its worker would, once the row commits
    return {
        "export_id": str(export.code),
        "upload_id": str(upload.code),
        "run_id": str(judged.code),
        "attempt_id": str(attempt.code),
        "experiment_id": str(experiment.code),
        "dataset_id": str(dataset.code),
        "runs": [str(judged.code)],  # the cross-run board's query
    }


def validated(attempt: Attempt) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(extracted_answer="--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")
    task = attempt.task
    tests = [{"id": test, "outcome": "passed", "seconds": 0.01, "message": ""} for test in task.fail_to_pass]
    tests.append({"id": "tests/test_other.py::test_it", "outcome": "failed", "seconds": None, "message": "assert 1"})
    Artifact.objects.bulk_create(
        [
            Artifact(attempt=attempt, kind="validation", status="resolved", content="ok", duration_ms=1200),
            Artifact(attempt=attempt, kind="tests", content=json.dumps(tests)),
            Artifact(attempt=attempt, kind="lint", status="passed", content=""),
        ]
    )
