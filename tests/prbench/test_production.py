"""Safe in production by default: settings, the Content-Security-Policy, spreadsheet-safe
exports, and no server paths on customer pages."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from datasets.models import Dataset
from evaluation.sandbox import CHECKOUT_MARK, Box
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment
from experiments.exports import csv_chunks, spreadsheet_safe
from tests.conftest import client_for, work_queue

PRODUCTION_ENV = {
    "DEBUG": "False",
    "SECRET_KEY": "k3y-" + "Zq8vN2xR7pL4mW9tB6yH1cF5dG0jK3sA" * 2,
    "PRBENCH_ENCRYPTION_KEYS": "akQXInqjqleliVcdPKfFGClb6jb4hvvgif22nzrya5k=",
    "ALLOWED_HOSTS": "prbench.example.com",
    "REDIS_URL": "redis://127.0.0.1:6379/15",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/prbench",
    "DJANGO_SETTINGS_MODULE": "prbench.settings",
}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_reports_nothing_with_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_debug_is_off_unless_set():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "DEBUG"}
    result = manage("shell", "-c", "from django.conf import settings; print(settings.DEBUG)", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_production_without_a_secret_key_refuses_to_start():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k not in ("DEBUG", "SECRET_KEY")}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is False" in result.stderr


def inline_code(html: str) -> list[str]:
    """Inline scripts, inline styles and event-handler attributes: what the CSP refuses."""
    scripts = [m for m in re.findall(r"<script\b([^>]*)>", html) if "src=" not in m]
    return scripts + re.findall(r"<style\b", html) + re.findall(r"\sstyle=", html) + re.findall(r"\son\w+=", html)


def test_pages_send_a_strict_csp_and_carry_no_inline_code(alice, experiment, start):
    run = start(experiment)
    work_queue()
    attempt = run.attempts.first()
    client = client_for(alice)
    pages = [
        reverse("experiments:list"),
        reverse("experiments:detail", args=[experiment.code]),
        reverse("experiments:edit", args=[experiment.code]),
        reverse("experiments:create"),
        reverse("experiments:run_task", args=[run.code, attempt.task.code]),
        reverse("experiments:run", args=[run.code]),
        reverse("experiments:attempt", args=[attempt.code]),
        reverse("datasets:list"),
        reverse("datasets:detail", args=[experiment.dataset.code]),
        reverse("providers:settings", args=[experiment.org.code]),
        reverse("orgs:members", args=[experiment.org.code]),
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy
        assert inline_code(response.content.decode()) == [], url


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'),
        ("+1+1", "'+1+1"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("oracle", "oracle"),
        (-5, -5),
        (None, None),
    ],
)
def test_spreadsheet_safe(cell, expected):
    assert spreadsheet_safe(cell) == expected


def test_csv_export_neutralises_formulas(org, dataset, alice, start):
    arms = [ArmSpec("=1+1", "mock", "mock-oracle", {"mode": "oracle"}), ArmSpec("@evil", "mock", "m", {})]
    experiment = do_save_experiment(org, ExperimentSpec(name="Formulas", dataset=dataset, arms=arms, sample_size=1))
    run = start(experiment)
    work_queue()
    rows = list(csv.DictReader(io.StringIO("".join(csv_chunks(run)))))
    assert {row["arm_label"] for row in rows} == {"'=1+1", "'@evil"}


def test_dataset_page_shows_no_server_path_or_url_credentials(alice, org):
    dataset = Dataset.objects.create(
        org=org,
        name="Repos",
        repo_sources={
            "acme/local": "/srv/prbench/secret-mirrors/local",
            "acme/remote": "https://deploy:ghp_token123@git.example.com/acme/remote.git",
            "acme/scp": "git@git.example.org:acme/scp.git",
        },
    )
    response = client_for(alice).get(reverse("datasets:detail", args=[dataset.code]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "/srv/prbench" not in page and "ghp_token123" not in page and "deploy" not in page
    assert "git.example.com" in page and "git.example.org" in page and "a copy on the server" in page


def test_validation_logs_name_the_checkout_not_its_server_path(tmp_path: Path):
    (tmp_path / "file.txt").write_text("x")
    finished = Box(str(tmp_path)).run(["/bin/sh", "-c", "pwd; ls $PWD/file.txt"], timeout_s=20)
    assert str(tmp_path) not in finished.output
    assert f"{CHECKOUT_MARK}\n{CHECKOUT_MARK}/file.txt" in finished.output
