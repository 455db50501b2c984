"""A pull request's patch is kept once, as the attempt's answer (migration 0054, issue 31).

Attempts recorded before keep their patch: the migration copies a patch artifact into an
empty ``extracted_answer``, deletes the artifacts that only repeated it, and the empty
"skipped" validations of inference-only runs. Run here against the models of today, which
hold the same columns as the migration's."""

import importlib

import pytest
from django.apps import apps

from experiments.models import Artifact, ArtifactKind, AttemptStatus, Run
from tests.conftest import work_queue

pytestmark = pytest.mark.django_db

keep_patches_once = importlib.import_module("experiments.migrations.0054_patch_kept_once").keep_patches_once


def test_patches_recorded_before_are_kept_once_as_the_attempts_answer(experiment, start):
    validated = start(experiment)
    work_queue()
    inference_only = start(experiment, inference_only=True)
    work_queue()
    old, same, differs = validated.attempts.order_by("sequence")[:3]
    # As the pipeline recorded them before: a patch artifact for every answer, with the
    # answer itself empty on the oldest rows, and an empty "skipped" validation when not validated.
    old_patch = old.extracted_answer
    type(old).objects.filter(pk=old.pk).update(extracted_answer="")
    for attempt, content in ((old, old_patch), (same, same.extracted_answer), (differs, "diff --git a/other")):
        Artifact.objects.create(attempt=attempt, kind=ArtifactKind.PATCH, content=content)
    skipped, kept_log = inference_only.attempts.order_by("sequence")[:2]
    Artifact.objects.create(attempt=skipped, kind=ArtifactKind.VALIDATION, status="skipped", content="")
    # A skipped validation that says why (the environment went missing) is not the run's to say.
    Artifact.objects.create(attempt=kept_log, kind=ArtifactKind.VALIDATION, status="skipped", content="no env")
    validations_before = Artifact.objects.filter(attempt__run=validated, kind=ArtifactKind.VALIDATION).count()

    keep_patches_once(apps, None)

    old.refresh_from_db()
    assert old.extracted_answer == old_patch and old_patch.startswith("diff --git")
    patches = Artifact.objects.filter(kind=ArtifactKind.PATCH)
    assert list(patches.values_list("attempt_id", "content")) == [(differs.pk, "diff --git a/other")]
    assert not Artifact.objects.filter(attempt=skipped).exists()
    assert Artifact.objects.get(attempt=kept_log).content == "no env"
    assert Artifact.objects.filter(attempt__run=validated, kind=ArtifactKind.VALIDATION).count() == validations_before
    assert Run.objects.get(pk=validated.pk).attempts.filter(status=AttemptStatus.COMPLETED).count() == 8
