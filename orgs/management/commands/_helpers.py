"""Shared bits of every app's commands that name an organisation."""

from __future__ import annotations

from django.core.management.base import CommandError

from orgs.models import Organization


def org_by_slug(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise CommandError(f"no organisation with slug {slug!r}")
    return org
