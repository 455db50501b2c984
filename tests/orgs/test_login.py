"""Logging in with email verification mandatory: the accounts operators create (create_org,
make demo) are verified and log in at once; the admin signs in through allauth's login."""

from __future__ import annotations

from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from experiments.management.commands.demo import DEMO_EMAIL, DEMO_PASSWORD, Command
from tests.conftest import PASSWORD, client_for


def log_in(client: Client, email: str, password: str, next_url: str = ""):
    url = reverse("account_login") + (f"?next={next_url}" if next_url else "")
    return client.post(url, {"login": email, "password": password})


def test_verification_is_mandatory(settings):
    assert settings.ACCOUNT_EMAIL_VERIFICATION == "mandatory"


def test_the_demo_user_logs_in(db):
    Command().demo_org()
    client = Client()

    response = log_in(client, DEMO_EMAIL, DEMO_PASSWORD, "/admin/")

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
    page = client.get(reverse("experiments:list"))
    assert page.status_code == 200
    assert "Demo Org <small>owner</small>" in page.content.decode()


def test_an_owner_made_by_create_org_logs_in(db):
    call_command("create_org", slug="newco", name="New Co", owner_email="nina@example.com", password=PASSWORD)
    client = Client()

    response = log_in(client, "nina@example.com", PASSWORD)

    assert response.status_code == 302
    assert client.get(reverse("experiments:list")).status_code == 200


def test_the_admin_login_page_sends_to_allauths(db):
    response = Client().get("/admin/login/?next=/admin/evaluation/")

    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=%2Fadmin%2Fevaluation%2F"


def test_a_customer_cannot_use_the_admin(bob):
    client = client_for(bob)

    assert client.get("/admin/login/").status_code == 403
    response = client.get("/admin/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/"
