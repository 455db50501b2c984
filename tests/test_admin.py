"""Staff can open the admin list and change page of every model."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from experiments.actions import do_start_run

APPS = ("orgs", "experiments", "providers")


@pytest.fixture
def staff(alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client = Client()
    client.force_login(alice)
    return client


def test_every_model_is_registered():
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            assert admin.site.is_registered(model), model


def test_every_changelist_and_change_page_opens(staff, experiment, alice, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        do_start_run(experiment, alice)
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            opts = model._meta
            changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
            assert staff.get(changelist + "?q=a").status_code == 200, changelist
            obj = model.objects.first()
            if obj is not None:
                change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
                assert staff.get(change).status_code == 200, change


def test_customers_cannot_open_the_admin(bob):
    client = Client()
    client.force_login(bob)
    assert client.get(reverse("admin:experiments_attempt_changelist")).status_code == 302
