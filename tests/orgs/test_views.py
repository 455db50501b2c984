"""Browser views of organisations (orgs/urls.py): the org switcher and the members page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from datasets.demo import load_demo_dataset
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from orgs.access import SESSION_KEY
from orgs.models import Membership, Organization, Role
from tests.conftest import client_for, make_user


def memberships() -> list[tuple]:
    return list(Membership.objects.order_by("pk").values_list("user__email", "org__slug", "role"))


@pytest.fixture
def beta(alice):
    """A second org where alice is a member, with an experiment of its own."""
    beta = Organization.objects.create(slug="beta", name="Beta")
    Membership.objects.create(user=alice, org=beta, role=Role.MEMBER)
    dataset = load_demo_dataset(beta)
    do_save_experiment(
        beta, ExperimentSpec(name="Beta trial", dataset=dataset, arms=[ArmSpec("m", "mock", "mock-m", {})]), alice
    )
    return beta


@pytest.fixture
def dave(django_user_model, db):
    """Signed up, but in no organisation yet."""
    return make_user(django_user_model, "dave@example.com")


# --- switch ------------------------------------------------------------------------------


def test_switch_works(alice, experiment, beta):
    client = client_for(alice)
    before = client.get(reverse("experiments:list"))
    assert before.status_code == 200
    assert "Mock duel" in before.content.decode() and "Beta trial" not in before.content.decode()

    response = client.post(reverse("orgs:switch", args=[beta.code]))

    assert response.status_code == 302
    assert response["Location"] == reverse("experiments:list")
    assert client.session[SESSION_KEY] == str(beta.code)
    page = client.get(reverse("experiments:list"))
    assert page.status_code == 200
    content = page.content.decode()
    assert "Beta trial" in content
    assert "Mock duel" not in content
    assert "<summary>Beta</summary>" in content
    assert f'href="{reverse("orgs:members", args=[beta.code])}">Members</a>' in content


def test_switch_back_works(alice, experiment, beta, org):
    client = client_for(alice)
    assert client.post(reverse("orgs:switch", args=[beta.code])).status_code == 302

    response = client.post(reverse("orgs:switch", args=[org.code]))

    assert response.status_code == 302
    assert client.session[SESSION_KEY] == str(org.code)
    content = client.get(reverse("experiments:list")).content.decode()
    assert "Mock duel" in content and "Beta trial" not in content


def test_switch_lets_a_viewer_write_in_an_org_where_she_is_a_member(vera, experiment, beta):
    Membership.objects.create(user=vera, org=beta, role=Role.MEMBER)
    client = client_for(vera)
    assert client.get(reverse("experiments:create")).status_code == 403

    response = client.post(reverse("orgs:switch", args=[beta.code]))

    assert response.status_code == 302
    assert client.get(reverse("experiments:create")).status_code == 200


def test_switch_checks_ownership(alice, charlie, org, experiment):
    other = Organization.objects.get(slug="other")
    client = client_for(alice)

    response = client.post(reverse("orgs:switch", args=[other.code]))

    assert response.status_code == 404
    assert SESSION_KEY not in client.session
    assert "Mock duel" in client.get(reverse("experiments:list")).content.decode()


def test_it_checks_ownership(charlie, org, experiment):
    client = client_for(charlie)

    response = client.post(reverse("orgs:switch", args=[org.code]))

    assert response.status_code == 404
    assert SESSION_KEY not in client.session
    assert "Mock duel" not in client.get(reverse("experiments:list")).content.decode()


def test_switch_to_an_unknown_org_is_404(alice):
    response = client_for(alice).post(reverse("orgs:switch", args=["00000000-0000-0000-0000-000000000000"]))

    assert response.status_code == 404


def test_switch_is_post_only(alice, beta):
    client = client_for(alice)

    response = client.get(reverse("orgs:switch", args=[beta.code]))

    assert response.status_code == 405
    assert SESSION_KEY not in client.session


def test_switch_needs_login(org):
    url = reverse("orgs:switch", args=[org.code])

    response = Client().post(url)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"


# --- members -----------------------------------------------------------------------------


def test_members_works(bob, alice, vera, org):
    response = client_for(bob).get(reverse("orgs:members", args=[org.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "<h1>Members of Acme</h1>" in content
    assert "<td>alice@example.com</td><td>Owner</td>" in content
    assert "<td>bob@example.com</td><td>Member</td>" in content
    assert "<td>vera@example.com</td><td>Viewer</td>" in content
    assert "Invite someone" not in content  # members cannot manage
    assert reverse("orgs:change_role", args=[org.code]) not in content


def test_members_shows_the_forms_to_an_owner(alice, bob, org):
    response = client_for(alice).get(reverse("orgs:members", args=[org.code]))

    assert response.status_code == 200
    content = response.content.decode()
    assert "Invite someone" in content
    assert '<option value="member" selected>Member</option>' in content
    assert f'action="{reverse("orgs:change_role", args=[org.code])}"' in content
    assert '<input type="hidden" name="email" value="bob@example.com">' in content


def test_viewer_can_read_members(vera, alice, org):
    response = client_for(vera).get(reverse("orgs:members", args=[org.code]))

    assert response.status_code == 200
    assert "<td>alice@example.com</td><td>Owner</td>" in response.content.decode()
    assert 'name="email"' not in response.content.decode()


def test_admin_can_change_a_role(alice, bob, dave, org):
    Membership.objects.create(user=dave, org=org, role=Role.ADMIN)
    client = client_for(dave)

    response = client.post(reverse("orgs:change_role", args=[org.code]), {"email": "BOB@example.com", "role": "viewer"})

    assert response.status_code == 302
    assert response["Location"] == reverse("orgs:members", args=[org.code])
    assert Membership.objects.get(user=bob, org=org).role == Role.VIEWER
    assert Membership.objects.filter(user=bob).count() == 1
    assert "bob@example.com is now viewer of Acme" in client.get(response["Location"]).content.decode()


def test_adding_a_signed_up_user_by_email_is_gone(alice, dave, org):
    """The old way in: typing the address of anyone who had signed up made them a member."""
    for url in (reverse("orgs:members", args=[org.code]), reverse("orgs:change_role", args=[org.code])):
        client_for(alice).post(url, {"email": "dave@example.com", "role": "admin"})

    assert not Membership.objects.filter(user=dave).exists()


def test_a_role_change_for_a_non_member_is_an_error(alice, dave, org):
    before = memberships()

    response = client_for(alice).post(
        reverse("orgs:change_role", args=[org.code]), {"email": "dave@example.com", "role": "member"}
    )

    assert response.status_code == 200
    assert memberships() == before
    assert "&#x27;dave@example.com&#x27; is not a member of Acme: invite them instead" in response.content.decode()


@pytest.mark.parametrize("user", ["bob", "vera"])
@pytest.mark.parametrize("name", ["members", "change_role"])
def test_member_and_viewer_cannot_manage(request, user, name, alice, org):
    client = client_for(request.getfixturevalue(user))
    before = memberships()

    response = client.post(reverse(f"orgs:{name}", args=[org.code]), {"email": "bob@example.com", "role": "owner"})

    assert response.status_code == 403
    assert memberships() == before


def test_unknown_role_shows_an_error(alice, bob, org):
    before = memberships()

    response = client_for(alice).post(
        reverse("orgs:change_role", args=[org.code]), {"email": "bob@example.com", "role": "emperor"}
    )

    assert response.status_code == 200
    assert memberships() == before
    assert "unknown role &#x27;emperor&#x27;" in response.content.decode()


@pytest.mark.parametrize("method", ["get", "post"])
def test_members_checks_ownership(charlie, alice, org, method):
    before = memberships()

    response = getattr(client_for(charlie), method)(
        reverse("orgs:members", args=[org.code]), {"email": "charlie@example.com", "role": "owner"}
    )

    assert response.status_code == 404
    assert memberships() == before
    assert "alice@example.com" not in response.content.decode()


def test_change_role_checks_ownership(charlie, alice, org):
    before = memberships()

    response = client_for(charlie).post(
        reverse("orgs:change_role", args=[org.code]), {"email": "alice@example.com", "role": "viewer"}
    )

    assert response.status_code == 404
    assert memberships() == before


@pytest.mark.parametrize("method", ["get", "post"])
def test_members_needs_login(alice, org, method):
    before = memberships()
    url = reverse("orgs:members", args=[org.code])

    response = getattr(Client(), method)(url, {"email": "x@example.com", "role": "owner"} if method == "post" else None)

    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"
    assert memberships() == before


def test_change_role_is_post_only(alice, bob, org):
    response = client_for(alice).get(reverse("orgs:change_role", args=[org.code]), {"email": "bob@example.com"})

    assert response.status_code == 405


def test_the_last_owner_cannot_demote_themselves(alice, bob, org):
    response = client_for(alice).post(
        reverse("orgs:change_role", args=[org.code]), {"email": "alice@example.com", "role": "viewer"}
    )

    assert response.status_code == 200
    assert Membership.objects.get(user=alice, org=org).role == Role.OWNER
    assert "an organisation needs an owner" in response.content.decode()


def test_an_admin_cannot_take_the_org_over(alice, bob, org):
    Membership.objects.filter(user=bob, org=org).update(role=Role.ADMIN)
    client = client_for(bob)
    url = reverse("orgs:change_role", args=[org.code])
    promote = client.post(url, {"email": "bob@example.com", "role": "owner"})
    demote = client.post(url, {"email": "alice@example.com", "role": "viewer"})
    assert (promote.status_code, demote.status_code) == (200, 200)
    assert Membership.objects.get(user=bob, org=org).role == Role.ADMIN
    assert Membership.objects.get(user=alice, org=org).role == Role.OWNER
    assert "only an owner can" in promote.content.decode()
