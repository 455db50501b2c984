"""Task repositories: one bare clone per repository, a fresh checkout per validation.

The cache lives under ``PRBENCH_REPO_CACHE_DIR`` and is shared by every worker on the
machine (a lock file serialises cloning and fetching). A validation never works in the
cache: it gets a temporary directory holding ``git archive`` of the base commit, removed
afterwards. That is deliberately not a ``git worktree``: a worktree's ``.git`` points back
into the shared clone, which the code under test could then rewrite for every later task.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

GIT_TIMEOUT_S = 600
# Only transports that fetch: "ext::" would run a command, and a dataset's source is data.
GIT_ENV = {
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "HOME": "/nonexistent",
    "LANG": "C.UTF-8",
    # The cache is data, never code: no hook runs, no replace ref rewrites what is read.
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.hooksPath",
    "GIT_CONFIG_VALUE_0": "/dev/null",
}
SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
_present: set[tuple[str, str]] = set()  # (clone, commit) already checked in this process


class RepositoryUnavailable(Exception):
    """The repository cannot be cloned, or lacks the task's base commit."""


def git(*args: str | Path, cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *map(str, args)],
        cwd=cwd,
        env=GIT_ENV,
        input=stdin,
        capture_output=True,
        timeout=GIT_TIMEOUT_S,
    )


def clone_path(repo: str, source: str) -> Path:
    """Keyed by source as well as name: two datasets may call different repositories (or
    forks) by one owner/name, and neither may be served the other's clone."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return Path(settings.PRBENCH_REPO_CACHE_DIR) / f"{SAFE_NAME.sub('_', repo.replace('/', '__'))}-{digest}.git"


def ensure_commit(repo: str, source: str, commit: str) -> Path:
    """The cached clone of ``repo`` holding ``commit``: cloned from ``source`` the first time,
    fetched again when the commit is new to it."""
    if not source:
        raise RepositoryUnavailable(f"no source is configured for repository {repo!r} (the dataset's repo sources)")
    path = clone_path(repo, source)
    if (str(path), commit) in _present:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path.with_suffix(".lock")):
        if not path.exists():
            _clone(repo, source, path)
        if not _has_commit(path, commit):
            git("--git-dir", path, "fetch", "--quiet", source, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
        if not _has_commit(path, commit):
            raise RepositoryUnavailable(f"commit {commit} is not in repository {repo} (source {source})")
    _present.add((str(path), commit))
    return path


def _clone(repo: str, source: str, path: Path) -> None:
    partial = path.with_name(f"{path.name}.partial-{uuid.uuid4().hex[:8]}")
    cloned = git("clone", "--bare", "--quiet", source, partial)
    if cloned.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        reason = cloned.stderr.decode(errors="replace").strip().splitlines()
        raise RepositoryUnavailable(f"cannot clone {repo} from {source}: {reason[-1] if reason else 'git failed'}")
    partial.rename(path)  # whole or not at all: a killed clone leaves no half cache


def _has_commit(path: Path, commit: str) -> bool:
    return git("--git-dir", path, "cat-file", "-e", f"{commit}^{{commit}}").returncode == 0


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    with open(lock_file, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def checkout(clone: Path, commit: str) -> Iterator[Path]:
    """A temporary directory holding the files of ``commit``, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="prbench-checkout-") as workdir:
        export_tree(clone, commit, Path(workdir))
        yield Path(workdir)


# A release in PEP 440's words, with an optional "v": 5.4.0, v2.3.1, 6.3.0.dev0 (pytest tags the
# start of each development cycle), 1.0rc1.
RELEASE_TAG = re.compile(r"v?(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)")


def release_before(clone: Path, commit: str) -> str:
    """The last release tag ``commit`` descends from ("5.4.0" for pytest's 5.4 tasks), "" when
    none: what setuptools-scm would call the version, less its distance. A ``git archive``
    export has no history for it to read, and a project using it refuses to build without."""
    said = subprocess.run(
        ["git", "--git-dir", str(clone), "describe", "--tags", "--abbrev=0", commit],
        env=GIT_ENV, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    found = RELEASE_TAG.fullmatch(said.stdout.strip()) if said.returncode == 0 else None
    return found.group(1) if found else ""


def export_tree(clone: Path, commit: str, target: Path) -> None:
    archive = subprocess.Popen(
        ["git", "--git-dir", str(clone), "archive", "--format=tar", commit],
        env=GIT_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert archive.stdout is not None
    try:
        with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
            # The "data" filter refuses absolute paths, links leaving the tree and devices:
            # a repository's own content must not write outside its checkout either.
            tar.extractall(target, filter="data")
        while archive.stdout.read(65536):  # tar stops at its end marker; git pads beyond it
            pass
    finally:
        archive.stdout.close()
        error = archive.stderr.read().decode(errors="replace") if archive.stderr else ""
        if archive.wait() != 0:
            raise RepositoryUnavailable(f"git archive {commit} failed: {error.strip()}")


def archive_bytes(clone: Path, commit: str) -> bytes:
    """The tree of ``commit`` as a tar.gz, as ``git archive`` writes it (no history, no .git)."""
    archived = git("--git-dir", clone, "archive", "--format=tar.gz", commit)
    if archived.returncode != 0:
        raise RepositoryUnavailable(f"git archive {commit} failed: {archived.stderr.decode(errors='replace').strip()}")
    return archived.stdout


def read_files(clone: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """The text of these files at ``commit`` (missing or binary ones are left out), read by
    one ``git cat-file --batch``: retrieval reads every file of a repository."""
    wanted = [path for path in paths if "\n" not in path]
    if not wanted:
        return {}
    request = "".join(f"{commit}:{path}\n" for path in wanted).encode()
    shown = git("--git-dir", clone, "cat-file", "--batch", stdin=request)
    found: dict[str, str] = {}
    output, offset = shown.stdout, 0
    for path in wanted:
        end = output.find(b"\n", offset)
        if end < 0:
            break
        header = output[offset:end].split()
        offset = end + 1
        if len(header) != 3:  # "<name> missing" or "ambiguous"
            continue
        size = int(header[2])
        content = output[offset : offset + size]
        offset += size + 1  # the content, then a newline
        if header[1] == b"blob" and b"\0" not in content[:8000]:
            found[path] = content.decode(errors="replace")
    return found


def list_files(clone: Path, commit: str) -> list[str]:
    listed = git("--git-dir", clone, "ls-tree", "-r", "--name-only", "-z", commit)
    if listed.returncode != 0:
        raise RepositoryUnavailable(f"cannot list the files of {commit}")
    return [name for name in listed.stdout.decode(errors="replace").split("\0") if name]
