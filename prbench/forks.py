"""A process forked from a worker keeps none of the worker's sockets.

RQ starts its scheduler as a fork of a worker (``rq.scheduler.RQScheduler.start``): the child
inherits every descriptor the worker has open, its database sessions and Redis connections
among them, and lives on when the worker is SIGKILLed. A killed worker's socket then stays open
in the orphaned scheduler, so Postgres never sees the client go: the transaction the worker was
in holds its row locks for as long as the scheduler runs. Those rows were the attempts it was
recording; the recovery sweep skips locked rows (a worker recording them is not abandoning
them), so they stayed ``running`` for good (found with ``bench/drills.py``: 1 to 3 attempts in
about one single-kill drill in ten). A Redis connection left blocked in BLPOP would, likewise,
take the next job off its queue for a reader that is gone.

``os.register_at_fork`` runs ``drop_inherited_sockets`` in every such child: each inherited
socket is replaced by /dev/null, which drops the child's reference to it without closing the
session (a close would end the parent's session too) and keeps the descriptor's number taken, so
nothing in the child writes to a socket that number might name later. The scheduler opens its
own Redis connection after the fork. Forks that exec at once (``subprocess``) do not run the
hook: ``close_fds`` already closes what they inherit.
"""

from __future__ import annotations

import contextlib
import os
import stat

_installed = False


def keep_sockets_from_forked_children() -> None:
    """Install ``drop_inherited_sockets`` for every later fork of this process; once."""
    global _installed
    if not _installed:
        os.register_at_fork(after_in_child=drop_inherited_sockets)
        _installed = True


def drop_inherited_sockets() -> None:
    """In a forked child: every socket inherited from the parent (all but the standard streams,
    which may be a socket to the journal) becomes /dev/null."""
    null = os.open(os.devnull, os.O_RDWR)
    try:
        for fd in inherited_sockets():
            if fd != null:
                os.dup2(null, fd)
    finally:
        os.close(null)


def inherited_sockets() -> list[int]:
    """This process's open socket descriptors above the standard streams."""
    found = []
    for name in os.listdir("/dev/fd"):  # /proc/self/fd on Linux
        fd = int(name)
        if fd <= 2:
            continue
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                found.append(fd)
    return found
