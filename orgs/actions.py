"""Writes that change organisations and memberships."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from orgs.models import Membership, Organization, Role
from prbench.inputs import EMAIL_MAX, check_text

SLUG_MAX = int(Organization._meta.get_field("slug").max_length or 64)
NAME_MAX = int(Organization._meta.get_field("name").max_length or 200)


def check_create_org(slug: str, name: str, owner_email: str) -> None:
    check_text(name, "name", NAME_MAX)
    check_text(owner_email, "owner email", EMAIL_MAX)
    if not slug or slugify(slug) != slug:
        raise ValidationError(f"slug {slug!r} must be lowercase letters, digits and hyphens")
    if len(slug) > SLUG_MAX:
        raise ValidationError(f"slug {slug!r} is longer than {SLUG_MAX} characters")
    if not name.strip():
        raise ValidationError("name must not be empty")
    if len(name) > NAME_MAX:
        raise ValidationError(f"name is longer than {NAME_MAX} characters")
    if "@" not in owner_email:
        raise ValidationError(f"owner email {owner_email!r} is not an email address")
    if Organization.objects.filter(slug=slug).exists():
        raise ValidationError(f"an organisation with slug {slug!r} already exists")


@transaction.atomic
def do_create_org(slug: str, name: str, owner_email: str, password: str | None = None) -> tuple[Organization, Any]:
    """Create the org and its owner (creating the user and their allauth email if new)."""
    from allauth.account.models import EmailAddress

    User = get_user_model()
    user = User.objects.filter(email__iexact=owner_email).first()
    if user is None:
        user = User.objects.create_user(username=owner_email[:150], email=owner_email, password=password)
    elif password:
        user.set_password(password)
        user.save(update_fields=["password"])
    if not EmailAddress.objects.filter(user=user, email__iexact=owner_email).exists():
        EmailAddress.objects.create(
            user=user, email=owner_email, primary=not EmailAddress.objects.filter(user=user).exists(), verified=True
        )
    org = Organization.objects.create(slug=slug, name=name)
    Membership.objects.create(user=user, org=org, role=Role.OWNER)
    return org, user


def check_add_member(org: Organization, email: str, role: str, actor: Membership) -> Any:
    if role not in Role.values:
        raise ValidationError(f"unknown role {role!r}")
    user = get_user_model().objects.filter(email__iexact=email).first()
    if user is None:
        raise ValidationError(f"no user has signed up with {email!r}")
    current = org.memberships.filter(user=user).values_list("role", flat=True).first()
    if actor.role != Role.OWNER and Role.OWNER in (role, current):
        raise ValidationError("only an owner can make someone an owner or change an owner's role")
    owners = org.memberships.filter(role=Role.OWNER)
    if role != Role.OWNER and list(owners.values_list("user_id", flat=True)) == [user.pk]:
        raise ValidationError("an organisation needs an owner: make someone else owner first")
    return user


def do_set_membership(org: Organization, user: Any, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(org=org, user=user, defaults={"role": role})
    return membership


def do_create_personal_org(user: Any) -> Organization:
    """Every new sign-up gets an organisation of their own to start in."""
    import secrets

    base = slugify(user.email.split("@")[0])[:40] or "org"
    org = Organization.objects.create(slug=f"{base}-{secrets.token_hex(3)}", name=f"{user.email}'s organisation")
    Membership.objects.create(user=user, org=org, role=Role.OWNER)
    return org
