"""The onboarding page: where a signed-in user with no organisation lands."""

from __future__ import annotations

import pytest
from allauth.account.models import EmailAddress
from django.test import Client
from django.urls import reverse

from orgs.access import SESSION_KEY
from orgs.actions import do_invite
from orgs.models import Invitation, Membership, Organization, Role
from tests.conftest import client_for, make_user

URL = "/orgs/welcome/"


@pytest.fixture
def dave(django_user_model, db):
    """Signed up and verified, but in no organisation yet."""
    return make_user(django_user_model, "dave@example.com")


def orgs_and_memberships() -> tuple[list, list]:
    return (
        list(Organization.objects.order_by("pk").values_list("slug", "name")),
        list(Membership.objects.order_by("pk").values_list("user__email", "org__slug", "role")),
    )


def test_url_is_stable():
    assert reverse("orgs:onboarding") == URL


@pytest.mark.parametrize("name", ["experiments:list", "experiments:create", "datasets:list"])
def test_current_org_pages_send_a_user_with_no_org_to_onboarding(dave, name):
    response = client_for(dave).get(reverse(name))

    assert response.status_code == 302
    assert response["Location"] == URL


def test_home_ends_on_onboarding(dave):
    response = client_for(dave).get("/", follow=True)

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == URL
    assert "<h1>Get started</h1>" in response.content.decode()


def test_it_works(dave):
    response = client_for(dave).get(URL)

    assert response.status_code == 200
    content = response.content.decode()
    assert "You do not belong to an organisation yet" in content
    assert "No invitations yet." in content
    assert "Create an organisation" in content


def test_a_specific_orgs_pages_are_still_404_for_outsiders(dave, org, experiment):
    client = client_for(dave)

    for url in (
        reverse("orgs:members", args=[org.code]),
        reverse("experiments:detail", args=[experiment.code]),
        reverse("providers:settings", args=[org.code]),
    ):
        assert client.get(url).status_code == 404, url


def test_it_needs_login(db):
    response = Client().get(URL)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={URL}"


def test_creating_an_org_from_onboarding(dave):
    client = client_for(dave)

    response = client.post(URL, {"name": " Dave's Lab ", "slug": "daves-lab"})

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:list")
    org = Organization.objects.get()
    assert (org.slug, org.name) == ("daves-lab", "Dave's Lab")
    assert list(Membership.objects.values_list("user", "org", "role")) == [(dave.pk, org.pk, Role.OWNER)]
    assert client.session[SESSION_KEY] == str(org.code)
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "You are now owner of Dave&#x27;s Lab" in page.content.decode()


def test_a_member_can_create_another_org(alice, org):
    response = client_for(alice).post(URL, {"name": "Side project", "slug": "side"})

    assert response.status_code == 302
    assert sorted(Membership.objects.filter(user=alice).values_list("org__slug", "role")) == [
        ("acme", "owner"),
        ("side", "owner"),
    ]


@pytest.mark.parametrize(
    ("slug", "name", "message"),
    [
        ("Bad Slug", "Lab", "slug &#x27;Bad Slug&#x27; must be lowercase letters, digits and hyphens"),
        ("", "Lab", "slug &#x27;&#x27; must be lowercase letters, digits and hyphens"),
        ("x--y", "Lab", "must be lowercase letters, digits and hyphens"),
        ("x" * 65, "Lab", "is longer than 64 characters"),
        ("lab", "   ", "name must not be empty"),
        ("lab", "n" * 201, "name: is 201 characters long; at most 200 are allowed"),
        ("acme", "Another Acme", "an organisation with slug &#x27;acme&#x27; already exists"),
    ],
)
def test_creating_an_org_validates_like_create_org(alice, dave, org, slug, name, message):
    before = orgs_and_memberships()

    response = client_for(dave).post(URL, {"name": name, "slug": slug})

    assert response.status_code == 200
    assert orgs_and_memberships() == before
    assert message in response.content.decode()


def test_it_lists_invitations_to_the_users_verified_addresses_only(alice, org, dave, django_user_model):
    EmailAddress.objects.create(user=dave, email="dave@work.example", verified=False)
    beta = Organization.objects.create(slug="beta", name="Beta")
    do_invite(org, "DAVE@example.com", Role.ADMIN, alice)
    do_invite(beta, "dave@work.example", Role.MEMBER, alice)
    do_invite(org, "erin@example.com", Role.MEMBER, alice)

    response = client_for(dave).get(URL)

    assert response.status_code == 200
    content = response.content.decode()
    assert "<td>Acme</td><td>Admin</td><td>DAVE@example.com</td>" in content
    assert "Beta" not in content and "erin@example.com" not in content
    assert "Invitations to dave@work.example show once the address is verified" in content
    assert f'href="{reverse("account_email")}"' in content


def test_accepting_from_onboarding(alice, org, dave, experiment):
    invitation, _ = do_invite(org, "dave@example.com", Role.VIEWER, alice)
    client = client_for(dave)

    response = client.post(reverse("orgs:accept_offered", args=[invitation.code]))

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:list")
    assert Membership.objects.get(user=dave).role == Role.VIEWER
    invitation.refresh_from_db()
    assert (invitation.accepted_by, invitation.status) == (dave, "accepted")
    assert "Mock duel" in client.get(response["Location"]).content.decode()
    again = client.post(reverse("orgs:accept_offered", args=[invitation.code]))
    assert again.status_code == 404
    assert "Acme" not in client.get(URL).content.decode().split("Invitations for you")[1]


def test_accepting_someone_elses_invitation_from_onboarding_is_404(alice, org, dave, charlie):
    invitation, _ = do_invite(org, "dave@example.com", Role.MEMBER, alice)

    response = client_for(charlie).post(reverse("orgs:accept_offered", args=[invitation.code]))

    assert response.status_code == 404
    assert not Membership.objects.filter(user=charlie, org=org).exists()
    assert Invitation.objects.get().status == "pending"


def test_accepting_from_onboarding_is_post_only(alice, org, dave):
    invitation, _ = do_invite(org, "dave@example.com", Role.MEMBER, alice)

    response = client_for(dave).get(reverse("orgs:accept_offered", args=[invitation.code]))

    assert response.status_code == 405
    assert not Membership.objects.filter(user=dave).exists()
