"""Invitations: the only way into an existing organisation.

An owner or admin invites an address; the link (shown once, mailed, stored only as a hash)
works once, before it expires, for the signed-in owner of that address once verified.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.core.mail.backends.base import BaseEmailBackend
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from orgs.actions import do_invite
from orgs.models import INVITATION_LIFETIME, Invitation, Membership, Role
from tests.conftest import client_for, make_user

LINK = re.compile(r"http://testserver(/orgs/invitations/([A-Za-z0-9_-]{43})/)")


@pytest.fixture
def dave(django_user_model, db):
    """Signed up and verified, in no organisation yet."""
    return make_user(django_user_model, "dave@example.com")


@pytest.fixture
def adam(django_user_model, org):
    user = make_user(django_user_model, "adam@example.com")
    Membership.objects.create(user=user, org=org, role=Role.ADMIN)
    return user


@pytest.fixture
def invitation(alice, org):
    """(invitation, its link's path) for dave@example.com as an admin of Acme."""
    invitation, token = do_invite(org, "dave@example.com", Role.ADMIN, alice)
    return invitation, reverse("orgs:invitation", args=[token])


def invite(client: Client, org, email: str, role: str = "member"):
    return client.post(reverse("orgs:members", args=[org.code]), {"email": email, "role": role})


def memberships() -> list[tuple]:
    return list(Membership.objects.order_by("pk").values_list("user__email", "org__slug", "role"))


def database_dump() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(i)::text FROM orgs_invitation i")
        return "\n".join(row[0] for row in cursor.fetchall())


# --- inviting ------------------------------------------------------------------------------


def test_it_works(alice, org, dave):
    before = memberships()

    response = invite(client_for(alice), org, " dave@example.com ", "admin")

    assert response.status_code == 200
    assert memberships() == before  # nobody joins until the invitee accepts
    invitation = Invitation.objects.get()
    assert (invitation.org, invitation.email, invitation.role, invitation.invited_by) == (
        org,
        "dave@example.com",
        Role.ADMIN,
        alice,
    )
    assert invitation.status == "pending"
    assert timedelta(0) < invitation.expires_at - timezone.now() <= INVITATION_LIFETIME
    content = response.content.decode()
    path, token = LINK.search(content).groups()
    assert invitation.token_hash == Invitation.hash_token(token) != token
    assert token not in database_dump()
    assert "We emailed this link to dave@example.com" in content
    assert "<td>dave@example.com</td><td>Admin</td><td>alice@example.com</td>" in content
    [message] = mail.outbox
    assert message.to == ["dave@example.com"]
    assert message.subject == "Join Acme on PRBench"
    assert f"http://testserver{path}" in message.body
    assert "alice@example.com invited you to join Acme on PRBench as Admin" in message.body


def test_the_link_is_not_shown_again(alice, org, invitation):
    _, path = invitation

    response = client_for(alice).get(reverse("orgs:members", args=[org.code]))

    assert response.status_code == 200
    assert path not in response.content.decode()
    assert "<td>dave@example.com</td><td>Admin</td>" in response.content.decode()


class FailingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise ConnectionRefusedError("no mail server here")


def test_without_mail_the_link_is_there_to_copy(alice, org, settings):
    settings.EMAIL_BACKEND = f"{__name__}.FailingBackend"

    response = invite(client_for(alice), org, "dave@example.com")

    assert response.status_code == 200
    assert Invitation.objects.get().status == "pending"
    content = response.content.decode()
    assert "The email could not be sent: pass this link on yourself." in content
    assert LINK.search(content)


def test_an_admin_can_invite(adam, org, alice):
    response = invite(client_for(adam), org, "dave@example.com", "viewer")

    assert response.status_code == 200
    assert Invitation.objects.get().invited_by == adam


def test_only_an_owner_can_invite_an_owner(alice, adam, org):
    refused = invite(client_for(adam), org, "dave@example.com", "owner")

    assert refused.status_code == 200
    assert "only an owner can make someone an owner" in refused.content.decode()
    assert not Invitation.objects.exists()
    assert invite(client_for(alice), org, "dave@example.com", "owner").status_code == 200
    assert Invitation.objects.get().role == Role.OWNER


@pytest.mark.parametrize("email", ["bob@example.com", "BOB@EXAMPLE.COM", "bob.alias@example.com"])
def test_inviting_a_member_is_an_error(alice, bob, org, email):
    EmailAddress.objects.create(user=bob, email="bob.alias@example.com", verified=True)

    response = invite(client_for(alice), org, email)

    assert response.status_code == 200
    assert not Invitation.objects.exists()
    assert len(mail.outbox) == 0
    assert f"{email} is already a member of Acme" in response.content.decode()


@pytest.mark.parametrize(
    ("email", "role", "message"),
    [
        ("dave.example.com", "member", "&#x27;dave.example.com&#x27; is not an email address"),
        ("", "member", "&#x27;&#x27; is not an email address"),
        ("d" * 250 + "@example.com", "member", "an email address has at most 254 characters"),
        ("dave@example.com", "emperor", "unknown role &#x27;emperor&#x27;"),
    ],
)
def test_bad_input_is_an_error(alice, org, email, role, message):
    response = invite(client_for(alice), org, email, role)

    assert response.status_code == 200
    assert not Invitation.objects.exists()
    assert message in response.content.decode()


@pytest.mark.parametrize("user", ["bob", "vera"])
def test_member_and_viewer_cannot_invite(request, user, org):
    response = invite(client_for(request.getfixturevalue(user)), org, "dave@example.com", "viewer")

    assert response.status_code == 403
    assert not Invitation.objects.exists()


def test_an_outsider_cannot_invite(charlie, alice, org):
    response = invite(client_for(charlie), org, "charlie@example.com", "owner")

    assert response.status_code == 404
    assert not Invitation.objects.exists()


def test_inviting_again_replaces_the_pending_invitation(alice, org, dave, invitation):
    old, old_path = invitation

    response = invite(client_for(alice), org, "Dave@Example.com", "viewer")

    assert response.status_code == 200
    old.refresh_from_db()
    assert old.status == "revoked"
    assert list(Invitation.objects.pending().values_list("email", "role")) == [("Dave@Example.com", "viewer")]
    assert client_for(dave).post(old_path).status_code == 410
    new_path = LINK.search(response.content.decode()).group(1)
    assert client_for(dave).post(new_path).status_code == 302
    assert Membership.objects.get(user=dave).role == Role.VIEWER


# --- accepting -----------------------------------------------------------------------------


def test_the_invitee_accepts(dave, org, invitation, experiment):
    found, path = invitation
    client = client_for(dave)
    page = client.get(path)
    assert page.status_code == 200
    assert "alice@example.com invited dave@example.com to join <strong>Acme</strong> as Admin" in page.content.decode()
    assert not Membership.objects.filter(user=dave).exists()  # a GET changes nothing

    response = client.post(path)

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:list")
    assert Membership.objects.get(user=dave).role == Role.ADMIN
    found.refresh_from_db()
    assert (found.status, found.accepted_by) == ("accepted", dave)
    assert "Mock duel" in client.get(response["Location"]).content.decode()


def test_the_token_is_single_use(dave, org, invitation, django_user_model):
    _, path = invitation
    assert client_for(dave).post(path).status_code == 302
    Membership.objects.filter(user=dave).delete()  # even after leaving, the link stays spent

    for client in (client_for(dave), client_for(make_user(django_user_model, "eve@example.com"))):
        for method in ("get", "post"):
            response = getattr(client, method)(path)
            assert response.status_code == 410
            assert "This invitation has already been used." in response.content.decode()
            assert "Acme" not in response.content.decode()
    assert not Membership.objects.filter(user=dave).exists()


def test_an_unverified_address_cannot_accept(org, invitation, django_user_model):
    _, path = invitation
    squatter = django_user_model.objects.create_user(username="sq", email="dave@example.com", password="x" * 12)
    EmailAddress.objects.create(user=squatter, email="dave@example.com", primary=True, verified=False)
    client = client_for(squatter)

    for method in ("get", "post"):
        response = getattr(client, method)(path)

        assert response.status_code == 403
        content = response.content.decode()
        assert "not verified yet" in content
        assert f'href="{reverse("account_email")}"' in content
        assert "Acme" not in content
    assert not Membership.objects.filter(user=squatter).exists()
    assert Invitation.objects.get().status == "pending"


def test_another_account_cannot_accept(charlie, org, invitation):
    _, path = invitation
    client = client_for(charlie)

    for method in ("get", "post"):
        response = getattr(client, method)(path)

        assert response.status_code == 403
        content = response.content.decode()
        assert "sent to an email address that is not on your account" in content
        assert "You are signed in as charlie@example.com" in content
        assert "Acme" not in content
    assert not Membership.objects.filter(user=charlie, org=org).exists()
    assert Invitation.objects.get().status == "pending"


def test_the_user_field_alone_is_not_enough(org, invitation, django_user_model):
    """User.email matching is not proof: only a verified allauth EmailAddress is."""
    _, path = invitation
    lookalike = django_user_model.objects.create_user(username="lk", email="dave@example.com", password="x" * 12)

    response = client_for(lookalike).post(path)

    assert response.status_code == 403
    assert not Membership.objects.filter(user=lookalike).exists()


def test_an_expired_invitation(dave, invitation):
    found, path = invitation
    Invitation.objects.filter(pk=found.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = client_for(dave).post(path)

    assert response.status_code == 410
    assert "This invitation has expired. Ask for a new one." in response.content.decode()
    assert not Membership.objects.filter(user=dave).exists()


def test_a_revoked_invitation(dave, invitation):
    found, path = invitation
    Invitation.objects.filter(pk=found.pk).update(revoked_at=timezone.now())

    response = client_for(dave).post(path)

    assert response.status_code == 410
    assert "This invitation has been withdrawn." in response.content.decode()
    assert not Membership.objects.filter(user=dave).exists()


@pytest.mark.parametrize("token", ["x" * 43, "not-a-token", "%00", "a" * 5000])
def test_an_unknown_token_is_a_clear_404(dave, invitation, token):
    response = client_for(dave).post(f"/orgs/invitations/{token}/")

    assert response.status_code == 404
    assert "This invitation link is not valid." in response.content.decode()
    assert not Membership.objects.filter(user=dave).exists()


def test_accepting_needs_login(invitation):
    _, path = invitation

    response = Client().post(path)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"
    assert Invitation.objects.get().status == "pending"


def test_an_existing_member_keeps_their_role(alice, bob, org):
    """A link cannot change a member's role: roles change on the members page."""
    _, token = do_invite(org, "bob@example.com", Role.VIEWER, alice)  # made before bob joined, say

    response = client_for(bob).post(reverse("orgs:invitation", args=[token]))

    assert response.status_code == 302
    assert Membership.objects.get(user=bob).role == Role.MEMBER
    assert Invitation.objects.get().status == "accepted"


# --- revoking ------------------------------------------------------------------------------


def revoke_url(org, invitation) -> str:
    return reverse("orgs:revoke_invitation", args=[org.code, invitation.code])


@pytest.mark.parametrize("user", ["alice", "adam"])
def test_owner_and_admin_revoke(request, user, dave, org, invitation):
    found, path = invitation
    client = client_for(request.getfixturevalue(user))
    assert f'action="{revoke_url(org, found)}"' in client.get(reverse("orgs:members", args=[org.code])).content.decode()

    response = client.post(revoke_url(org, found))

    assert response.status_code == 302
    assert response["Location"] == reverse("orgs:members", args=[org.code])
    found.refresh_from_db()
    assert found.status == "revoked"
    page = client.get(response["Location"]).content.decode()
    assert "The invitation to dave@example.com is withdrawn" in page
    assert "No pending invitations." in page
    assert client_for(dave).post(path).status_code == 410


@pytest.mark.parametrize("user", ["bob", "vera"])
def test_member_and_viewer_cannot_revoke(request, user, org, invitation):
    found, _ = invitation
    client = client_for(request.getfixturevalue(user))
    page = client.get(reverse("orgs:members", args=[org.code])).content.decode()
    assert "<td>dave@example.com</td>" in page and "Revoke" not in page

    response = client.post(revoke_url(org, found))

    assert response.status_code == 403
    assert Invitation.objects.get().status == "pending"


def test_an_outsider_cannot_revoke(charlie, org, invitation):
    found, _ = invitation

    response = client_for(charlie).post(revoke_url(org, found))

    assert response.status_code == 404
    assert Invitation.objects.get().status == "pending"


def test_revoking_through_another_org_is_404(alice, charlie, org, invitation):
    """An invitation is reached only through its own organisation's URL."""
    found, _ = invitation
    other = charlie.memberships.get().org

    response = client_for(charlie).post(revoke_url(other, found))

    assert response.status_code == 404
    assert Invitation.objects.get().status == "pending"


def test_revoking_an_accepted_invitation_changes_nothing(alice, dave, org, invitation):
    found, path = invitation
    client_for(dave).post(path)
    client = client_for(alice)

    response = client.post(revoke_url(org, found))

    assert response.status_code == 302
    assert Invitation.objects.get().status == "accepted"
    assert Membership.objects.filter(user=dave, org=org).exists()
    assert "This invitation has already been used." in client.get(response["Location"]).content.decode()


def test_revoke_is_post_only(alice, org, invitation):
    found, _ = invitation

    assert client_for(alice).get(revoke_url(org, found)).status_code == 405
    assert Invitation.objects.get().status == "pending"


# --- admin ---------------------------------------------------------------------------------


def test_staff_see_invitations_in_the_admin_without_the_token(alice, invitation):
    found, path = invitation
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client = client_for(alice)

    pages = [
        client.get(reverse("admin:orgs_invitation_changelist")),
        client.get(reverse("admin:orgs_invitation_change", args=[found.pk])),
    ]

    for page in pages:
        assert page.status_code == 200
        content = page.content.decode()
        assert "dave@example.com" in content
        assert path.split("/")[-2] not in content
        assert found.token_hash not in content
    assert client.get(reverse("admin:orgs_invitation_add")).status_code == 403
