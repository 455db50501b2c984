"""The repository a team's agent service works on (the ``http_agent`` provider): the task's
tree at its base commit as a tar.gz behind a short-lived signed URL, or its files inline.

The agent has no account, so the URL is the permission: ``django.core.signing`` over the
task, its organisation and an expiry, salted for this use alone. A forged, altered or expired
token gets a 404, and so does a task whose dataset is no longer that organisation's: a token
shows one task's tree, for as long as the arm's deadline, and nothing else.
"""

from __future__ import annotations

import io
import re
import tarfile
import time

from django.conf import settings
from django.core import signing
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from datasets.models import TaskInstance
from evaluation.repositories import RepositoryUnavailable, archive_bytes, ensure_commit

SALT = "prbench.agent-archive"
# A self-contained task's files travel inline in the request up to this many bytes in all;
# past it (and for every task on a repository) the agent fetches the archive.
INLINE_MAX_BYTES = 256 * 1024
SAFE_FILE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def archive_token(task: TaskInstance, valid_s: float) -> str:
    expires = int(time.time() + valid_s) + 1  # whole seconds, never shorter than asked
    return signing.dumps({"task": task.pk, "org": task.dataset.org_id, "until": expires}, salt=SALT)


def archive_url(task: TaskInstance, valid_s: float) -> str:
    """Where the agent downloads the task's tree, for ``valid_s`` seconds (``PRBENCH_BASE_URL``
    is where the agent reaches PRBench)."""
    path = reverse("datasets:agent_archive", args=[archive_token(task, valid_s)])
    return settings.PRBENCH_BASE_URL + path


def task_for_token(token: str) -> TaskInstance:
    """The task a token was signed for, or ``Http404`` (forged, altered, expired, or moved)."""
    try:
        signed = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        raise Http404("no such archive") from None
    if (
        not isinstance(signed, dict)
        or not isinstance(signed.get("task"), int)
        or not signed.get("until", 0) > time.time()
    ):
        raise Http404("no such archive")
    task = TaskInstance.objects.select_related("dataset").filter(pk=signed["task"]).first()
    if task is None or task.dataset.org_id != signed.get("org"):
        raise Http404("no such archive")
    return task


def inline_files(task: TaskInstance) -> dict[str, str] | None:
    """A self-contained task's files when they are small enough to send inline; None when the
    agent should fetch the archive instead."""
    if task.repo:
        return None
    size = sum(len(path.encode()) + len(str(content).encode()) for path, content in task.repo_files.items())
    return dict(task.repo_files) if size <= INLINE_MAX_BYTES else None


def task_tree(task: TaskInstance) -> bytes:
    """The task's files at its base commit as a tar.gz."""
    if task.repo:
        clone = ensure_commit(task.repo, task.dataset.repo_sources.get(task.repo, ""), task.base_commit)
        return archive_bytes(clone, task.base_commit)
    return files_tar_gz(task.repo_files)


def files_tar_gz(files: dict[str, str]) -> bytes:
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for path, content in sorted(files.items()):
            data = str(content).encode()
            member = tarfile.TarInfo(path)
            member.size, member.mode = len(data), 0o644
            tar.addfile(member, io.BytesIO(data))
    return packed.getvalue()


@require_GET
def agent_archive(request: HttpRequest, token: str) -> HttpResponse:
    """No login: the agent has no account, and the token names the one tree it may read."""
    task = task_for_token(token)
    try:
        tree = task_tree(task)
    except RepositoryUnavailable:
        return HttpResponse("the repository is not available right now", status=503, content_type="text/plain")
    response = HttpResponse(tree, content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{SAFE_FILE_NAME.sub("_", task.external_id)}.tar.gz"'
    response["Cache-Control"] = "private, no-store"  # the token is the permission: no cache may keep the tree
    return response
