"""The create_org management command."""

from __future__ import annotations

import io

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from orgs.models import Membership, Organization, Role
from tests.cli import assert_clean_refusal, run_manage
from tests.conftest import PASSWORD


def create_org(**options) -> str:
    out = io.StringIO()
    call_command("create_org", stdout=out, **options)
    return out.getvalue()


def db_state() -> dict:
    return {
        "orgs": list(Organization.objects.order_by("pk").values_list("slug", "name")),
        "users": list(get_user_model().objects.order_by("pk").values_list("email", "password")),
        "emails": list(EmailAddress.objects.order_by("pk").values_list("email", "primary", "verified")),
        "memberships": list(Membership.objects.order_by("pk").values_list("user__email", "org__slug", "role")),
    }


def test_it_works(db):
    output = create_org(slug="newco", name="New Co", owner_email="nina@example.com", password=PASSWORD)

    org = Organization.objects.get()
    user = get_user_model().objects.get()
    assert (org.slug, org.name) == ("newco", "New Co")
    assert (user.email, user.username) == ("nina@example.com", "nina@example.com")
    assert user.check_password(PASSWORD)
    assert list(Membership.objects.values_list("user", "org", "role")) == [(user.pk, org.pk, Role.OWNER)]
    assert list(EmailAddress.objects.values_list("user", "email", "primary", "verified")) == [
        (user.pk, "nina@example.com", True, True)
    ]
    assert output == (
        f"Created organisation newco ({org.code}) owned by nina@example.com\n"
        "New user nina@example.com created with the given password\n"
    )


def test_it_works_without_a_password(db):
    create_org(slug="newco", name="New Co", owner_email="nina@example.com")

    user = get_user_model().objects.get()
    assert not user.has_usable_password()
    assert Membership.objects.get().role == Role.OWNER


def test_it_reuses_an_existing_user(alice, org):
    users_before = get_user_model().objects.count()

    create_org(slug="newco", name="New Co", owner_email="alice@example.com")

    assert get_user_model().objects.count() == users_before
    assert sorted(Membership.objects.filter(user=alice).values_list("org__slug", "role")) == [
        ("acme", "owner"),
        ("newco", "owner"),
    ]
    assert EmailAddress.objects.filter(user=alice).count() == 1
    assert alice.password == get_user_model().objects.get(pk=alice.pk).password


def test_it_resets_an_existing_users_password_only_when_asked(alice, org):
    output = create_org(
        slug="newco",
        name="New Co",
        owner_email="alice@example.com",
        password="a brand new passphrase",
        reset_password=True,
    )

    alice.refresh_from_db()
    assert alice.check_password("a brand new passphrase")
    assert output.endswith("Existing user alice@example.com: password reset\n")


def test_it_leaves_an_existing_users_password_alone_without_reset_password(alice, org):
    before = db_state()

    with pytest.raises(CommandError) as excinfo:
        create_org(slug="newco", name="New Co", owner_email="alice@example.com", password="a brand new passphrase")

    assert str(excinfo.value) == (
        "--password: alice@example.com already has an account and its password is left alone; "
        "add --reset-password to replace it, or leave --password out"
    )
    assert db_state() == before
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_it_says_an_existing_users_password_is_unchanged(alice, org):
    output = create_org(slug="newco", name="New Co", owner_email="alice@example.com")

    assert output.endswith("Existing user alice@example.com: password unchanged\n")


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("123", "--password: This password is too short. It must contain at least 8 characters."),
        ("password123", "--password: This password is too common."),
    ],
)
def test_it_checks_a_new_owners_password_as_signup_does(alice, org, password, message):
    before = db_state()

    with pytest.raises(CommandError) as excinfo:
        create_org(slug="newco", name="New Co", owner_email="nina@example.com", password=password)

    assert message in str(excinfo.value)
    assert db_state() == before


def test_it_checks_a_reset_password_as_signup_does(alice, org):
    before = db_state()

    with pytest.raises(CommandError, match="--password: This password is too short"):
        create_org(slug="newco", name="New Co", owner_email="alice@example.com", password="123", reset_password=True)

    assert db_state() == before


def test_reset_password_needs_a_password(alice, org):
    before = db_state()

    with pytest.raises(CommandError, match="--reset-password needs --password"):
        create_org(slug="newco", name="New Co", owner_email="alice@example.com", reset_password=True)

    assert db_state() == before


def test_a_weak_password_is_a_clean_error_on_the_command_line(transactional_db):
    result = run_manage(
        "create_org", "--slug", "newco", "--name", "New Co", "--owner-email", "nina@example.com", "--password", "123"
    )

    assert_clean_refusal(result, "--password: This password is too short")
    assert not Organization.objects.exists()


def test_it_refuses_a_duplicate_slug(alice, org):
    before = db_state()

    with pytest.raises(CommandError, match="an organisation with slug 'acme' already exists"):
        create_org(slug="acme", name="Another Acme", owner_email="nina@example.com", password=PASSWORD)

    assert db_state() == before


@pytest.mark.parametrize("slug", ["Bad Slug", "UPPER", "émile", "x--y", "trailing-", "a.b", ""])
def test_it_refuses_a_bad_slug(alice, org, slug):
    before = db_state()

    with pytest.raises(CommandError) as excinfo:
        create_org(slug=slug, name="New Co", owner_email="nina@example.com", password=PASSWORD)

    assert str(excinfo.value) == f"slug {slug!r} must be lowercase letters, digits and hyphens"
    assert db_state() == before


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "   "}, "name must not be empty"),
        ({"owner_email": "nina.example.com"}, "owner email 'nina.example.com' is not an email address"),
    ],
)
def test_it_refuses_bad_names_and_emails(alice, org, options, message):
    before = db_state()

    with pytest.raises(CommandError, match=message):
        create_org(**({"slug": "newco", "name": "New Co", "owner_email": "nina@example.com"} | options))

    assert db_state() == before


def test_it_refuses_a_slug_that_is_too_long(alice, org):
    slug = "x" * 65
    before = db_state()

    with pytest.raises(CommandError, match=slug):
        create_org(slug=slug, name="New Co", owner_email="nina@example.com")

    assert db_state() == before


def test_it_reuses_an_existing_user_whatever_the_case_of_the_email(alice, org):
    create_org(slug="newco", name="New Co", owner_email="ALICE@example.com")

    assert Membership.objects.get(org__slug="newco").user == alice
    assert EmailAddress.objects.filter(user=alice).count() == 1
