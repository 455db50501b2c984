"""The data migration that brought the configuration class: attempts recorded before it are
re-classified from their error category (and a timeout the provider's side reported, from the
message the adapters wrote), as the recorder now classes them; and back."""

from __future__ import annotations

import importlib

from django.apps import apps

from experiments.actions import do_start_run
from experiments.models import Attempt
from providers.outcomes import outcome_class

migration = importlib.import_module("experiments.migrations.0041_configuration_failure_outcome")

# (error_category, error_message, outcome) as the old split recorded them.
RECORDED = [
    ("bad_request", "HTTP 400: Invalid value for 'temperature'", "model_failure"),
    ("model_not_found", "HTTP 404: The model `gpt-nope` does not exist", "infrastructure_failure"),
    ("timeout", "HTTP 504: Gateway timeout", "model_failure"),
    ("timeout", "HTTP 408: Request timed out.", "model_failure"),
    ("timeout", "error mid-stream (timeout_error): Request timed out", "model_failure"),
    ("timeout", "the provider did not answer in time", "model_failure"),
    ("rate_limited", "HTTP 429: Rate limit reached", "infrastructure_failure"),
    ("content_filtered", "HTTP 400: content_filter", "model_failure"),
]


def recorded_run(experiment) -> list[int]:
    run = do_start_run(experiment)
    ids = list(run.attempts.order_by("pk").values_list("pk", flat=True))
    assert len(ids) == len(RECORDED)
    for pk, (category, message, outcome) in zip(ids, RECORDED, strict=True):
        Attempt.objects.filter(pk=pk).update(
            status="failed", error_category=category, error_message=message, outcome=outcome
        )
    return ids


def classes(ids: list[int]) -> list[tuple[str, str]]:
    rows = {pk: (c, o) for pk, c, o in Attempt.objects.values_list("pk", "error_category", "outcome")}
    return [rows[pk] for pk in ids]


def test_recorded_attempts_are_classed_as_the_recorder_now_classes_them(experiment):
    ids = recorded_run(experiment)
    migration.reclassify_recorded_attempts(apps, None)
    assert classes(ids) == [
        ("bad_request", "configuration_failure"),
        ("model_not_found", "configuration_failure"),
        ("provider_timeout", "infrastructure_failure"),
        ("provider_timeout", "infrastructure_failure"),
        ("provider_timeout", "infrastructure_failure"),
        ("timeout", "model_failure"),  # nothing says the provider gave up: the model's, as before
        ("rate_limited", "infrastructure_failure"),
        ("content_filtered", "model_failure"),
    ]
    # The same class the recorder gives a failure of that category today.
    assert all(outcome == outcome_class("failed", category) for category, outcome in classes(ids))
    migration.reclassify_recorded_attempts(apps, None)  # running it again changes nothing
    assert all(outcome == outcome_class("failed", category) for category, outcome in classes(ids))


def test_the_migration_goes_back(experiment):
    ids = recorded_run(experiment)
    migration.reclassify_recorded_attempts(apps, None)
    migration.restore_recorded_classes(apps, None)
    assert classes(ids) == [(category, outcome) for category, _, outcome in RECORDED]
