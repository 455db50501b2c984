"""The task supply moved from experiments to datasets without moving data: the same tables,
and, on a database of the previous release, the same content types (so staff keep the
permissions they were given on datasets, tasks, uploads and mining)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType

from datasets.models import Dataset, MinedCandidate, MiningJob, MiningSource, TaskInstance, TaskUpload

move = importlib.import_module("experiments.migrations.0043_task_supply_moves_to_datasets")
MOVED = [Dataset, TaskInstance, MinedCandidate, TaskUpload, MiningSource, MiningJob]


def test_the_moved_models_keep_their_tables():
    assert {model._meta.db_table for model in MOVED} == {f"experiments_{model.__name__.lower()}" for model in MOVED}
    assert all(model._meta.app_label == "datasets" for model in MOVED)


@pytest.mark.django_db
def test_the_content_types_follow_the_models_with_their_permissions():
    # As the previous release left it: the models' content types under experiments, a group
    # given a permission on datasets.
    ContentType.objects.filter(app_label="datasets").delete()
    old = ContentType.objects.create(app_label="experiments", model="dataset")
    permission = Permission.objects.create(content_type=old, codename="change_dataset", name="Can change dataset")
    group = Group.objects.create(name="dataset curators")
    group.permissions.add(permission)
    ContentType.objects.clear_cache()

    move.content_types_follow(apps, None)

    ContentType.objects.clear_cache()
    assert ContentType.objects.get(pk=old.pk).app_label == "datasets"
    assert ContentType.objects.get_for_model(Dataset).pk == old.pk
    assert group.permissions.get().content_type_id == old.pk
    assert not ContentType.objects.filter(app_label="experiments", model__in=move.MOVED).exists()

    move.content_types_return(apps, None)

    assert ContentType.objects.get(pk=old.pk).app_label == "experiments"
