"""Writes that change organisations, memberships and invitations.

``check_*`` validates and checks the actor's rights; ``do_*`` assumes valid input and writes.
Nobody becomes a member by having an email address typed in: a membership is created only
when the owner of a *verified* address accepts an invitation (or by ``create_org`` / the
onboarding page, for an organisation's first owner).
"""

from __future__ import annotations

import logging
import secrets
import smtplib
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.text import slugify

from orgs.models import INVITATION_LIFETIME, Invitation, InvitationStatus, Membership, Organization, Role
from prbench.inputs import check_text

logger = logging.getLogger(__name__)

SLUG_MAX = int(Organization._meta.get_field("slug").max_length or 64)
NAME_MAX = int(Organization._meta.get_field("name").max_length or 200)
EMAIL_MAX = int(Invitation._meta.get_field("email").max_length or 254)


# --- organisations -------------------------------------------------------------------------


def check_org_fields(slug: str, name: str) -> None:
    check_text(name, "name", NAME_MAX)
    if not slug or slugify(slug) != slug:
        raise ValidationError(f"slug {slug!r} must be lowercase letters, digits and hyphens")
    if len(slug) > SLUG_MAX:
        raise ValidationError(f"slug {slug!r} is longer than {SLUG_MAX} characters")
    if not name.strip():
        raise ValidationError("name must not be empty")
    if len(name) > NAME_MAX:
        raise ValidationError(f"name is longer than {NAME_MAX} characters")
    if Organization.objects.filter(slug=slug).exists():
        raise ValidationError(f"an organisation with slug {slug!r} already exists")


def check_create_org(
    slug: str, name: str, owner_email: str, password: str | None = None, reset_password: bool = False
) -> None:
    """``password`` goes through the validators signup applies; an existing owner's password
    is replaced only when ``reset_password`` says so, never as a side effect of a new org."""
    check_text(owner_email, "owner email", EMAIL_MAX)
    check_org_fields(slug, name)
    if "@" not in owner_email:
        raise ValidationError(f"owner email {owner_email!r} is not an email address")
    if reset_password and not password:
        raise ValidationError("--reset-password needs --password (the new password)")
    if password is None:
        return
    User = get_user_model()
    existing = User.objects.filter(email__iexact=owner_email).first()
    if existing is not None and not reset_password:
        raise ValidationError(
            f"--password: {owner_email} already has an account and its password is left alone; "
            "add --reset-password to replace it, or leave --password out"
        )
    try:
        validate_password(password, existing or User(username=owner_email[:150], email=owner_email))
    except ValidationError as exc:
        raise ValidationError([f"--password: {message}" for message in exc.messages]) from None


@transaction.atomic
def do_create_org(
    slug: str, name: str, owner_email: str, password: str | None = None, reset_password: bool = False
) -> tuple[Organization, Any]:
    """Create the org and its owner (creating the user and their allauth email if new). An
    existing owner's password is set to ``password`` only with ``reset_password``.

    The operator typing the address vouches for it, so the address is stored verified: the
    owner can log in at once even with ``ACCOUNT_EMAIL_VERIFICATION=mandatory``.
    """
    from allauth.account.models import EmailAddress

    User = get_user_model()
    user = User.objects.filter(email__iexact=owner_email).first()
    if user is None:
        user = User.objects.create_user(username=owner_email[:150], email=owner_email, password=password)
    elif password and reset_password:
        user.set_password(password)
        user.save(update_fields=["password"])
    if not EmailAddress.objects.filter(user=user, email__iexact=owner_email).exists():
        EmailAddress.objects.create(
            user=user, email=owner_email, primary=not EmailAddress.objects.filter(user=user).exists(), verified=True
        )
    return do_create_owned_org(user, slug, name), user


def do_create_owned_org(user: Any, slug: str, name: str) -> Organization:
    """An organisation owned by ``user`` (the onboarding page's "create an organisation")."""
    try:
        with transaction.atomic():
            org = Organization.objects.create(slug=slug, name=name.strip())
            Membership.objects.create(user=user, org=org, role=Role.OWNER)
    except IntegrityError:
        # Two sign-ups raced for one slug after both passed check_org_fields.
        raise ValidationError(f"an organisation with slug {slug!r} already exists") from None
    return org


# --- roles of existing members -------------------------------------------------------------


def _check_owner_rules(
    org: Organization, actor: Membership, user_id: int | None, role: str, current: str | None
) -> None:
    if role not in Role.values:
        raise ValidationError(f"unknown role {role!r}")
    if actor.role != Role.OWNER and Role.OWNER in (role, current):
        raise ValidationError("only an owner can make someone an owner or change an owner's role")
    owners = list(org.memberships.filter(role=Role.OWNER).values_list("user_id", flat=True))
    if role != Role.OWNER and user_id is not None and owners == [user_id]:
        raise ValidationError("an organisation needs an owner: make someone else owner first")


def check_change_role(org: Organization, email: str, role: str, actor: Membership) -> Membership:
    """The membership whose role ``actor`` may set to ``role`` (members only: others are invited)."""
    membership = org.memberships.filter(user__email__iexact=email).select_related("user").first()
    if membership is None:
        raise ValidationError(f"{email!r} is not a member of {org.name}: invite them instead")
    _check_owner_rules(org, actor, membership.user_id, role, membership.role)
    return membership


def do_set_role(membership: Membership, role: str) -> Membership:
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


# --- invitations ---------------------------------------------------------------------------


class InvitationRefused(Exception):
    """Why an invitation cannot be accepted (or revoked); ``status`` is the HTTP answer."""

    MESSAGES = {
        InvitationStatus.ACCEPTED: "This invitation has already been used.",
        InvitationStatus.REVOKED: "This invitation has been withdrawn.",
        InvitationStatus.EXPIRED: "This invitation has expired. Ask for a new one.",
        "wrong_account": "This invitation was sent to an email address that is not on your account.",
        "unverified": "This invitation was sent to an address on your account that is not verified yet.",
    }

    def __init__(self, reason: str) -> None:
        super().__init__(self.MESSAGES[reason])
        self.reason = reason
        self.status = 403 if reason in ("wrong_account", "unverified") else 410


def members_with_email(org: Organization, email: str) -> QuerySet[Membership]:
    return org.memberships.filter(Q(user__email__iexact=email) | Q(user__emailaddress__email__iexact=email))


def check_invite(org: Organization, email: str, role: str, actor: Membership) -> str:
    """The address to invite, once it is well formed and ``actor`` may offer ``role``."""
    email = email.strip()
    if len(email) > EMAIL_MAX:
        raise ValidationError(f"an email address has at most {EMAIL_MAX} characters")
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError(f"{email!r} is not an email address") from None
    _check_owner_rules(org, actor, None, role, None)
    if members_with_email(org, email).exists():
        raise ValidationError(f"{email} is already a member of {org.name}: change their role in the table instead")
    return email


@transaction.atomic
def do_invite(org: Organization, email: str, role: str, inviter: Any) -> tuple[Invitation, str]:
    """A new invitation and its token (returned once, stored only as a hash).

    Inviting an address again replaces its pending invitation, so at most one link per
    address works at a time.
    """
    now = timezone.now()
    org.invitations.pending().filter(email__iexact=email).update(revoked_at=now)
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        org=org,
        email=email,
        role=role,
        token_hash=Invitation.hash_token(token),
        invited_by=inviter,
        expires_at=now + INVITATION_LIFETIME,
    )
    return invitation, token


def do_send_invitation(invitation: Invitation, accept_url: str) -> bool:
    """Mail the link through Django's email backend; False when the mail could not be sent
    (the inviter has the link on screen and can pass it on)."""
    inviter = invitation.invited_by.email if invitation.invited_by else "Someone"
    body = (
        f"{inviter} invited you to join {invitation.org.name} on PRBench as {invitation.get_role_display()}.\n\n"
        f"Accept the invitation (sign in, or sign up with this address, first):\n{accept_url}\n\n"
        f"The link works once and expires on {invitation.expires_at:%Y-%m-%d %H:%M} UTC."
    )
    try:
        send_mail(f"Join {invitation.org.name} on PRBench", body, None, [invitation.email])
    except (OSError, smtplib.SMTPException):
        logger.warning("could not mail invitation %s", invitation.code, exc_info=True)
        return False
    return True


def check_revoke(invitation: Invitation) -> None:
    if invitation.status != InvitationStatus.PENDING:
        raise InvitationRefused(invitation.status)


def do_revoke(invitation: Invitation) -> None:
    Invitation.objects.filter(pk=invitation.pk, revoked_at=None, accepted_at=None).update(revoked_at=timezone.now())


def check_accept_invitation(invitation: Invitation, user: Any) -> None:
    """Only a signed-in user holding the invited address, verified, may accept."""
    from allauth.account.models import EmailAddress

    if invitation.status != InvitationStatus.PENDING:
        raise InvitationRefused(invitation.status)
    verified = EmailAddress.objects.filter(user=user, email__iexact=invitation.email).values_list("verified", flat=True)
    if not verified:
        raise InvitationRefused("wrong_account")
    if not any(verified):
        raise InvitationRefused("unverified")


@transaction.atomic
def do_accept_invitation(invitation: Invitation, user: Any) -> Membership:
    """Use the invitation up and make ``user`` a member (an existing membership keeps its role:
    roles of members change on the members page, not through old links)."""
    claimed = Invitation.objects.pending().filter(pk=invitation.pk).update(accepted_at=timezone.now(), accepted_by=user)
    if not claimed:  # a second click, or a revoke, got there first
        invitation.refresh_from_db()
        raise InvitationRefused(invitation.status)
    membership, _ = Membership.objects.get_or_create(org=invitation.org, user=user, defaults={"role": invitation.role})
    return membership


def invitations_for(user: Any) -> QuerySet[Invitation]:
    """Pending invitations addressed to one of ``user``'s verified addresses."""
    from allauth.account.models import EmailAddress

    if not user.is_authenticated:
        return Invitation.objects.none()
    emails = list(EmailAddress.objects.filter(user=user, verified=True).values_list("email", flat=True))
    if not emails:
        return Invitation.objects.none()
    addressed = Q()
    for email in emails:
        addressed |= Q(email__iexact=email)
    return Invitation.objects.pending().filter(addressed).exclude(org__memberships__user=user).select_related("org")
