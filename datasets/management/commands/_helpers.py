"""Shared bits of the dataset commands."""

from __future__ import annotations

from django.core.management.base import CommandError

from datasets.models import Dataset
from orgs.models import Organization


def dataset_by_name(org: Organization, name: str) -> Dataset:
    """The organisation's dataset of that name; another organisation's is as good as absent."""
    dataset = Dataset.objects.filter(org=org, name=name).first()
    if dataset is None:
        raise CommandError(f"organisation {org.slug!r} has no dataset {name!r}")
    return dataset
