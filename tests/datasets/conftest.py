"""A dataset whose tasks name a repository made in the test (two versions of "local/tiny"),
and a cache of environments of the test's own: a recipe with no packages and ``project=""``
builds a bare venv offline in about a second."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from datasets.models import Dataset, DatasetKind, TaskInstance
from evaluation.environments import prune

REPO = "local/tiny"


def _git(path, *args: str) -> str:
    identity = {"GIT_AUTHOR_NAME": "Tiny", "GIT_AUTHOR_EMAIL": "tiny@example.com", "GIT_COMMITTER_NAME": "Tiny",
                "GIT_COMMITTER_EMAIL": "tiny@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(path)}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True,
                          env={**os.environ, **identity})  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def environment_cache(tmp_path, settings):
    """Outside pytest's own temporary directory, which the build user (another uid, where the
    sandbox changes users) cannot reach."""
    shared = Path(tempfile.mkdtemp(prefix="prbench-environments-"))
    shared.chmod(0o755)
    settings.PRBENCH_ENV_CACHE_DIR = shared / "environments"
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "repositories"
    settings.PRBENCH_ENV_INDEX_URL = "none"  # nothing reaches the internet
    settings.PRBENCH_ENV_FIND_LINKS = ""
    yield settings.PRBENCH_ENV_CACHE_DIR
    prune(0)  # sealed read-only: removed as prune removes them
    shutil.rmtree(shared, ignore_errors=True)


@pytest.fixture
def tiny_repo(tmp_path):
    path = tmp_path / "tiny"
    path.mkdir()
    _git(path, "init", "--quiet", "--initial-branch=main")
    (path / "tiny.py").write_text("def one():\n    return 1\n")
    (path / "requirements.txt").write_text("")
    _git(path, "add", "--all")
    _git(path, "commit", "--quiet", "-m", "Start tiny")
    return path, _git(path, "rev-parse", "HEAD")


@pytest.fixture
def repo_dataset(org, tiny_repo):
    """Three tasks on local/tiny: two of version 1.0, one of 2.0; and one self-contained."""
    path, commit = tiny_repo
    dataset = Dataset.objects.create(org=org, name="tiny", kind=DatasetKind.PR_PATCH, repo_sources={REPO: str(path)})
    for position, version in enumerate(["1.0", "1.0", "2.0"]):
        TaskInstance.objects.create(
            dataset=dataset, external_id=f"tiny-{position}", position=position, problem_statement="x",
            repo=REPO, base_commit=commit, version=version,
        )  # fmt: skip
    TaskInstance.objects.create(dataset=dataset, external_id="alone", position=9, problem_statement="x")
    return dataset
