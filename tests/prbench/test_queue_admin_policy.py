"""django-rq's admin pages run their own inline code under the Content-Security-Policy, and
no other page's policy changes.

Each page is rendered, its inline scripts, style sheets and style attributes are read out of
the HTML the browser would get, hashed, and looked for in the header, as a browser checks them.
"""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from django.test import Client
from django.urls import reverse

from prbench.queues import get_queue

pytestmark = pytest.mark.django_db

STRICT_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "font-src": "'self'",
    "connect-src": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'self'",
    "object-src": "'none'",
}


def directives(response) -> dict[str, str]:
    header = response.headers["Content-Security-Policy"]
    pairs = (part.strip().partition(" ") for part in header.split(";"))
    return {name: sources for name, _, sources in pairs}


def sha256_source(code: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"


def inline_scripts(html: str) -> list[str]:
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S)
    return [body for attributes, body in scripts if "src=" not in attributes]


def inline_styles(html: str) -> list[str]:
    sheets = re.findall(r"<style\b[^>]*>(.*?)</style>", html, re.S)
    return sheets + re.findall(r'\sstyle="([^"]*)"', html)


@pytest.fixture
def staff(alice):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def queued_job():
    # Never run: it only gives the queue page a row, and the bulk actions something to act on.
    return get_queue("default").enqueue("os.getpid")


def django_rq_pages() -> list[str]:
    pages = [reverse("admin:django_rq_home")]
    queue_pages = ("jobs", "queue_details", "finished_jobs", "failed_jobs", "scheduled_jobs", "started_jobs")
    for name in (*queue_pages, "deferred_jobs", "workers"):
        pages.append(reverse(f"admin:django_rq_{name}", args=[0]))
    return pages


def test_the_queue_page_runs_its_bulk_action_script(staff, queued_job):
    response = staff.get(reverse("admin:django_rq_jobs", args=[0]))

    assert response.status_code == 200
    html = response.content.decode()
    assert queued_job.id in html
    [script] = inline_scripts(html)
    assert ".actions()" in script  # the script that makes the action checkboxes work
    policy = directives(response)
    assert sha256_source(script) in policy["script-src"].split()
    assert "unsafe-inline" not in " ".join(policy.values())


def test_every_django_rq_page_allows_exactly_its_inline_code(staff, queued_job):
    pages = django_rq_pages()
    pages.append(reverse("admin:django_rq_job_detail", args=[0, queued_job.id]))
    for url in pages:
        response = staff.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        policy = directives(response)
        script_sources = policy["script-src"].split()
        style_sources = policy["style-src"].split()
        for script in inline_scripts(html):
            assert sha256_source(script) in script_sources, (url, script)
        for style in inline_styles(html):
            assert sha256_source(style) in style_sources, (url, style)
        assert script_sources[0] == "'self'" and "unsafe-inline" not in " ".join(policy.values()), url
        # Only hashes are added: no origin, no wildcard, no 'unsafe-eval'.
        assert {s for s in script_sources[1:] if not s.startswith("'sha256-")} == set(), url
        assert {s for s in style_sources[1:] if not s.startswith("'sha256-")} == {"'unsafe-hashes'"}, url


def test_the_bulk_action_confirmation_allows_its_inline_style(staff, queued_job):
    response = staff.post(
        reverse("admin:django_rq_confirm_action", args=[0]), {"action": "delete", "_selected_action": [queued_job.id]}
    )

    assert response.status_code == 200
    styles = inline_styles(response.content.decode())
    assert styles
    assert all(sha256_source(style) in directives(response)["style-src"].split() for style in styles)


def test_customer_pages_and_the_rest_of_the_admin_keep_the_strict_policy(staff, alice, org):
    for url in (reverse("experiments:list"), reverse("admin:index"), reverse("admin:orgs_organization_changelist")):
        response = staff.get(url)
        assert response.status_code == 200, url
        assert directives(response) == STRICT_POLICY, url


def test_outsiders_get_no_django_rq_page(bob):
    client = Client()
    client.force_login(bob)
    for url in django_rq_pages():
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.headers["Location"].startswith(reverse("admin:login")), url
