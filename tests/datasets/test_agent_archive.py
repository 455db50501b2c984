"""GET /agent-archive/<token>/: the tree a team's agent service works on (the http_agent
provider), behind a signed, short-lived token that names one task and nothing else."""

from __future__ import annotations

import io
import tarfile

import pytest
from django.core import signing
from django.test import Client

from datasets.agent_archive import INLINE_MAX_BYTES, archive_token, archive_url, inline_files
from datasets.models import Dataset
from evaluation.repositories import clone_path, read_files
from orgs.models import Organization
from tests.factories import ingest_textkit


def tree(response) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as tar:
        return {m.name: _read(tar, m) for m in tar.getmembers() if m.isfile()}


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    extracted = tar.extractfile(member)
    assert extracted is not None, member.name  # a regular file always has content to read
    return extracted.read().decode()


def fetch(token: str):
    return Client().get(f"/agent-archive/{token}/")  # no login: the agent has no account


@pytest.fixture
def textkit_tasks(org, plain_textkit):
    ingest_textkit(org, plain_textkit)
    return list(Dataset.objects.get(org=org, name="textkit").tasks.order_by("external_id"))


def test_it_serves_the_tasks_tree_at_its_base_commit(textkit_tasks):
    task = textkit_tasks[0]
    response = fetch(archive_token(task, 60))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/gzip"
    assert response["Cache-Control"] == "private, no-store"
    files = tree(response)
    clone = clone_path(task.repo, task.dataset.repo_sources[task.repo])
    [changed] = {line[6:] for line in task.gold_patch.splitlines() if line.startswith("+++ b/")}
    assert files[changed] == read_files(clone, task.base_commit, [changed])[changed]  # before the fix
    assert not any(name.startswith(".git/") for name in files)


def test_a_token_shows_its_own_task_and_no_other(textkit_tasks):
    first, second = textkit_tasks[:2]
    assert first.base_commit != second.base_commit
    first_tree, second_tree = tree(fetch(archive_token(first, 60))), tree(fetch(archive_token(second, 60)))
    assert first_tree != second_tree
    # The payload of one token under the signature of another: refused.
    forged = archive_token(second, 60).split(":")[0] + ":" + archive_token(first, 60).split(":", 1)[1]
    assert fetch(forged).status_code == 404


def test_an_expired_forged_or_foreign_token_gets_404(org, dataset, charlie):
    task = dataset.tasks.first()
    assert fetch(archive_token(task, 60)).status_code == 200
    assert fetch(archive_token(task, -2)).status_code == 404  # expired
    payload = {"task": task.pk, "org": org.pk, "until": 2**40}
    assert fetch(signing.dumps(payload)).status_code == 404  # signed for another use (no salt)
    assert fetch(signing.dumps(payload, key="not-the-secret-key", salt="prbench.agent-archive")).status_code == 404
    assert fetch("not-a-token").status_code == 404
    token = archive_token(task, 60)
    dataset.org = Organization.objects.get(slug="other")
    dataset.save()
    assert fetch(token).status_code == 404  # the task is no longer the signing org's


def test_a_self_contained_task_goes_inline_when_small_and_is_served_too(dataset, settings):
    settings.PRBENCH_BASE_URL = "https://prbench.example.com"
    task = dataset.tasks.first()
    assert inline_files(task) == task.repo_files
    assert tree(fetch(archive_token(task, 60))) == task.repo_files
    assert archive_url(task, 60).startswith("https://prbench.example.com/agent-archive/")
    task.repo_files = {"big.txt": "x" * (INLINE_MAX_BYTES + 1)}
    assert inline_files(task) is None
