"""Signing up through allauth creates a personal organisation the new user owns."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from orgs.models import Membership, Organization, Role
from tests.conftest import PASSWORD

SIGNUP_URL = "/accounts/signup/"


def sign_up(client: Client, email: str, password2: str = PASSWORD):
    return client.post(SIGNUP_URL, {"email": email, "password1": PASSWORD, "password2": password2})


def test_signup_url_is_allauths(db):
    assert reverse("account_signup") == SIGNUP_URL


def test_it_works(db):
    client = Client()

    response = sign_up(client, "dana@example.com")

    assert response.status_code == 302
    assert response["Location"] == "/"
    user = get_user_model().objects.get()
    assert user.email == "dana@example.com"
    assert user.check_password(PASSWORD)
    membership = Membership.objects.get()
    assert (membership.user, membership.role) == (user, Role.OWNER)
    org = membership.org
    assert org.name == "dana@example.com's organisation"
    assert org.slug.startswith("dana-") and len(org.slug) == len("dana-") + 6
    assert Organization.objects.count() == 1


def test_the_new_user_can_use_the_experiments_page(db):
    client = Client()
    assert sign_up(client, "dana@example.com").status_code == 302

    response = client.get(reverse("experiments:list"))

    assert response.status_code == 200
    content = response.content.decode()
    assert "No experiments yet." in content
    assert f'href="{reverse("experiments:create")}"' in content
    assert "dana@example.com&#x27;s organisation <small>owner</small>" in content
    assert client.get(reverse("experiments:create")).status_code == 200
    assert client.get(reverse("experiments:datasets")).status_code == 200


def test_the_new_user_sees_nothing_of_other_orgs(experiment, alice):
    client = Client()
    assert sign_up(client, "dana@example.com").status_code == 302

    response = client.get(reverse("experiments:list"))

    assert response.status_code == 200
    assert Membership.objects.filter(user__email="dana@example.com").values_list("org__slug", flat=True).get() != "acme"
    assert "Mock duel" not in response.content.decode()
    assert client.get(reverse("experiments:detail", args=[experiment.code])).status_code == 404


def test_two_sign_ups_with_the_same_local_part_get_their_own_orgs(db):
    assert sign_up(Client(), "dana@example.com").status_code == 302
    assert sign_up(Client(), "dana@example.org").status_code == 302

    orgs = list(Membership.objects.order_by("user__email").values_list("user__email", "org__slug", "role"))
    assert [(email, role) for email, _, role in orgs] == [("dana@example.com", "owner"), ("dana@example.org", "owner")]
    assert orgs[0][1] != orgs[1][1]
    assert all(slug.startswith("dana-") for _, slug, _ in orgs)


@pytest.mark.parametrize(
    ("email", "password2"),
    [("dana@example.com", "a different passphrase"), ("not-an-email", PASSWORD), ("alice@example.com", PASSWORD)],
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
