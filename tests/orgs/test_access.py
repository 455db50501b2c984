"""Unit tests of orgs/access.py, the only way customer-facing code reaches org data."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from datasets.access import access_dataset
from experiments.access import access_attempt, access_experiment, access_run
from experiments.actions import do_start_run
from orgs.access import SESSION_KEY, NeedsOnboarding, access_current_org, access_org, current_membership
from orgs.models import Membership, Organization, Role
from tests.conftest import client_for, make_user


def request_for(user, session: dict | None = None):
    request = RequestFactory().get("/")
    request.user = user
    request.session = session if session is not None else {}  # type: ignore[assignment]  # a dict is all access reads
    return request


@pytest.fixture
def run(experiment, alice):
    return do_start_run(experiment, alice)


@pytest.fixture
def objects(org, dataset, experiment, run) -> dict:
    """helper name -> (helper, the object it should return, its public code)."""
    attempt = run.attempts.order_by("sequence").first()
    return {
        "dataset": (access_dataset, dataset, dataset.code),
        "experiment": (access_experiment, experiment, experiment.code),
        "run": (access_run, run, run.code),
        "attempt": (access_attempt, attempt, attempt.code),
        "org": (lambda request, code: access_org(request, code).org, org, org.code),
    }


HELPERS = ["dataset", "experiment", "run", "attempt", "org"]
MALFORMED = [
    "not-a-uuid",
    "",
    "1234",
    "00000000-0000-0000-0000-00000000000g",
    12345678901234567890123456789012345678901,
    -1,
    None,
    ["x"],
]


@pytest.mark.parametrize("name", HELPERS)
@pytest.mark.parametrize("user", ["alice", "bob", "vera"])
def test_it_works(request, objects, name, user):
    helper, obj, code = objects[name]

    assert helper(request_for(request.getfixturevalue(user)), code) == obj
    assert helper(request_for(request.getfixturevalue(user)), str(code)) == obj


@pytest.mark.parametrize("name", HELPERS)
@pytest.mark.parametrize("code", MALFORMED, ids=repr)
def test_malformed_code_is_404_not_500(alice, objects, name, code):
    helper = objects[name][0]

    with pytest.raises(Http404):
        helper(request_for(alice), code)


@pytest.mark.parametrize("name", HELPERS)
def test_unknown_code_is_404(alice, objects, name):
    helper = objects[name][0]

    with pytest.raises(Http404):
        helper(request_for(alice), uuid.uuid4())


@pytest.mark.parametrize("name", HELPERS)
def test_it_checks_ownership(charlie, objects, name):
    """An outsider's 404 for a real id says what an unknown id's says, word for word: the
    answer must not tell another organisation's id from a made-up one."""
    helper, _, code = objects[name]

    with pytest.raises(Http404) as foreign:
        helper(request_for(charlie), code)
    with pytest.raises(Http404) as unknown:
        helper(request_for(charlie), uuid.uuid4())
    assert str(foreign.value) == str(unknown.value)


@pytest.mark.parametrize("name", HELPERS)
def test_anonymous_gets_404(objects, name):
    helper, _, code = objects[name]

    with pytest.raises(Http404):
        helper(request_for(AnonymousUser()), code)


@pytest.mark.parametrize("name", ["dataset", "experiment", "run"])
def test_viewer_cannot_write(vera, objects, name):
    helper, _, code = objects[name]

    with pytest.raises(PermissionDenied, match="Viewers have read-only access"):
        helper(request_for(vera), code, write=True)


@pytest.mark.parametrize("name", ["dataset", "experiment", "run"])
@pytest.mark.parametrize("user", ["alice", "bob"])
def test_members_can_write(request, objects, name, user):
    helper, obj, code = objects[name]

    assert helper(request_for(request.getfixturevalue(user)), code, write=True) == obj


@pytest.mark.parametrize("name", ["dataset", "experiment", "run"])
def test_outsider_with_write_gets_404_not_403(charlie, objects, name):
    helper, _, code = objects[name]

    with pytest.raises(Http404):
        helper(request_for(charlie), code, write=True)


def test_manage_needs_an_admin_or_owner(alice, bob, vera, org, django_user_model):
    admin = make_user(django_user_model, "adam@example.com")
    Membership.objects.create(user=admin, org=org, role=Role.ADMIN)

    assert access_org(request_for(alice), org.code, manage=True).role == Role.OWNER
    assert access_org(request_for(admin), org.code, manage=True).role == Role.ADMIN
    for user in (bob, vera):
        with pytest.raises(PermissionDenied, match="Only admins and owners"):
            access_org(request_for(user), org.code, manage=True)


def test_outsider_with_manage_gets_404(charlie, org):
    with pytest.raises(Http404):
        access_org(request_for(charlie), org.code, manage=True)


# --- the current organisation ------------------------------------------------------------


@pytest.fixture
def zeta(alice):
    """A second org of alice's, sorting after Acme, where she is only a viewer."""
    zeta = Organization.objects.create(slug="zeta", name="Zeta")
    Membership.objects.create(user=alice, org=zeta, role=Role.VIEWER)
    return zeta


def test_current_org_defaults_to_the_first_by_name(alice, org, zeta):
    membership = access_current_org(request_for(alice))

    assert (membership.org, membership.role) == (org, Role.OWNER)


def test_current_org_follows_the_session(alice, zeta):
    request = request_for(alice, {SESSION_KEY: str(zeta.code)})

    assert current_membership(request).org == zeta
    assert access_current_org(request).org == zeta
    with pytest.raises(PermissionDenied):
        access_current_org(request, write=True)


def test_current_org_ignores_an_org_the_user_left(alice, org, zeta):
    Membership.objects.filter(user=alice, org=zeta).delete()

    assert access_current_org(request_for(alice, {SESSION_KEY: str(zeta.code)})).org == org


def test_current_org_ignores_another_users_org_in_the_session(alice, charlie, org):
    other = Organization.objects.get(slug="other")

    assert access_current_org(request_for(alice, {SESSION_KEY: str(other.code)})).org == org


def test_viewer_cannot_write_in_the_current_org(vera, org):
    assert access_current_org(request_for(vera)).org == org
    with pytest.raises(PermissionDenied, match="Viewers have read-only access"):
        access_current_org(request_for(vera), write=True)


def test_no_membership_sends_a_signed_in_user_to_onboarding(django_user_model, db):
    loner = make_user(django_user_model, "loner@example.com")

    with pytest.raises(NeedsOnboarding) as excinfo:
        access_current_org(request_for(loner))

    assert excinfo.value.response.status_code == 302
    assert excinfo.value.response["Location"] == reverse("orgs:onboarding")
    with pytest.raises(Http404):
        access_current_org(request_for(AnonymousUser()))


def test_a_page_reads_the_users_memberships_once(alice, zeta, run):
    """The access check, the current organisation and the page's organisation menu each need
    the user's memberships: one query serves all three, and the menu still shows each of them,
    the one the session chose as current."""
    client = client_for(alice)
    client.post(reverse("orgs:switch", args=[zeta.code]))
    with CaptureQueriesContext(connection) as captured:
        response = client.get(reverse("experiments:run", args=[run.code]))

    assert response.status_code == 200
    reads = [q["sql"] for q in captured.captured_queries if 'FROM "orgs_membership"' in q["sql"]]
    assert len(reads) == 1, reads
    menu = response.content.decode().split('<details class="switcher">')[1].split("</details>")[0]
    assert "<summary>Zeta</summary>" in menu
    assert 'class="link current">Zeta <small>viewer</small>' in menu
    assert f'class="link">{run.org.name} <small>owner</small>' in menu


def test_a_request_that_signs_someone_in_reads_their_memberships(alice, org):
    request = request_for(AnonymousUser())
    assert current_membership(request) is None

    request.user = alice  # as a login view does, before it renders
    assert current_membership(request).org == org
