"""Signing up through allauth's real form: the address is verified first, then the new user
lands on the onboarding page (no organisation is created for them, and never a 404)."""

from __future__ import annotations

import re

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client
from django.urls import reverse

from orgs.actions import do_invite
from orgs.models import Membership, Organization, Role
from tests.conftest import PASSWORD

SIGNUP_URL = "/accounts/signup/"
CONFIRM_LINK = re.compile(r"http://testserver(/accounts/confirm-email/[^\s/]+/)")


def sign_up(client: Client, email: str, password2: str = PASSWORD):
    return client.post(SIGNUP_URL, {"email": email, "password1": PASSWORD, "password2": password2})


def confirmation_path(email: str) -> str:
    [message] = [m for m in mail.outbox if m.to == [email]]
    match = CONFIRM_LINK.search(str(message.body))
    assert match, message.body
    return match.group(1)


def test_signup_url_is_allauths(db):
    assert reverse("account_signup") == SIGNUP_URL


def test_it_works(db):
    client = Client()

    response = sign_up(client, "dana@example.com")

    assert response.status_code == 302
    assert response["Location"] == reverse("account_email_verification_sent")
    user = get_user_model().objects.get()
    assert user.email == "dana@example.com"
    assert user.check_password(PASSWORD)
    assert list(EmailAddress.objects.values_list("email", "verified")) == [("dana@example.com", False)]
    assert not Membership.objects.exists() and not Organization.objects.exists()
    confirmation_path("dana@example.com")


def test_confirming_the_address_lands_on_onboarding(db):
    """Today's main: the weakly-held sign-up receiver is gone, so the new user gets a 404."""
    client = Client()
    assert sign_up(client, "dana@example.com").status_code == 302

    response = client.post(confirmation_path("dana@example.com"), follow=True)

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("orgs:onboarding")
    assert EmailAddress.objects.get().verified
    assert not Membership.objects.exists()
    content = response.content.decode()
    assert "<h1>Get started</h1>" in content
    assert "You do not belong to an organisation yet" in content
    assert client.get("/", follow=True).redirect_chain[-1][0] == reverse("orgs:onboarding")


def test_an_unverified_account_cannot_log_in(db):
    assert sign_up(Client(), "dana@example.com").status_code == 302
    client = Client()

    response = client.post(reverse("account_login"), {"login": "dana@example.com", "password": PASSWORD})

    assert response.status_code == 302
    assert response["Location"] == reverse("account_email_verification_sent")
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("orgs:onboarding")).status_code == 302  # to the login page


def test_the_new_user_sees_nothing_of_other_orgs(experiment, alice):
    client = Client()
    assert sign_up(client, "dana@example.com").status_code == 302
    client.post(confirmation_path("dana@example.com"))

    response = client.get(reverse("experiments:list"))

    assert response.status_code == 302
    assert response["Location"] == reverse("orgs:onboarding")
    assert not Membership.objects.filter(user__email="dana@example.com").exists()
    assert client.get(reverse("experiments:detail", args=[experiment.code])).status_code == 404
    assert client.get(reverse("orgs:members", args=[experiment.org.code])).status_code == 404


@pytest.mark.parametrize(
    ("email", "password2"),
    [("dana@example.com", "a different passphrase"), ("not-an-email", PASSWORD)],
)
def test_a_refused_sign_up_creates_nothing(alice, email, password2):
    users, orgs, memberships = (
        get_user_model().objects.count(),
        Organization.objects.count(),
        Membership.objects.count(),
    )

    response = sign_up(Client(), email, password2)

    assert response.status_code == 200
    assert (get_user_model().objects.count(), Organization.objects.count(), Membership.objects.count()) == (
        users,
        orgs,
        memberships,
    )
    assert response.context["form"].errors


def test_signing_up_with_a_taken_address_creates_nothing_and_reveals_nothing(alice):
    """With verification mandatory, allauth answers as for a new address (no account
    enumeration) and mails the address's owner instead."""
    users = get_user_model().objects.count()

    response = sign_up(Client(), "ALICE@example.com")

    assert response.status_code == 302
    assert response["Location"] == reverse("account_email_verification_sent")
    assert get_user_model().objects.count() == users
    assert list(EmailAddress.objects.filter(email__iexact="alice@example.com").values_list("user", flat=True)) == [
        alice.pk
    ]
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]


def test_a_newcomer_follows_an_invitation_link_through_sign_up(alice, org, experiment):
    """Signed out, the link asks for a login; its sign-up link keeps the invitation as the
    place to return to, through sign-up and verification."""
    _, token = do_invite(org, "dana@example.com", Role.MEMBER, alice)
    link = reverse("orgs:invitation", args=[token])
    client = Client()
    login_page = client.get(link, follow=True)
    assert login_page.redirect_chain[-1][0] == f"/accounts/login/?next={link}"
    signup_url = f"{SIGNUP_URL}?next={link.replace('/', '%2F')}"
    assert f'href="{signup_url}"' in login_page.content.decode()

    client.post(signup_url, {"email": "dana@example.com", "password1": PASSWORD, "password2": PASSWORD})
    landed = client.post(confirmation_path("dana@example.com"), follow=True)

    assert landed.status_code == 200
    assert landed.redirect_chain[-1][0] == link
    assert "Join Acme" in landed.content.decode()
    assert client.post(link).status_code == 302
    assert Membership.objects.get(user__email="dana@example.com").org == org
