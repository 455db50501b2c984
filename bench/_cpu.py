"""CPU time the platform spends, read from /proc: the worker pool's processes, the database's
backends serving them and the Redis server, so a bench can divide it by the work done.

CPU seconds move much less with other load on the machine than wall time does: a busy core
makes a run slower, not costlier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int, children: bool = False) -> float:
    """User + system seconds of a live process (and, with ``children``, of its children it has
    already waited for: a worker that the pool replaced still counts). 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # After "pid (comm)": state is fields[0], so utime, stime, cutime, cstime are 11..14.
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / TICKS


def descendants(pid: int) -> list[int]:
    """Every live process under ``pid``, by walking /proc's parent links."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


@dataclass(frozen=True)
class CpuReading:
    workers: float
    redis: float
    database_by_pid: dict[int, float] = field(default_factory=dict)

    def since(self, start: CpuReading) -> CpuUsed:
        """What was spent between ``start`` and this reading. A database backend that appeared
        in between counts from zero; one that left counts as last seen (``seen_backends``)."""
        database = sum(cpu - start.database_by_pid.get(pid, 0.0) for pid, cpu in self.database_by_pid.items())
        return CpuUsed(self.workers - start.workers, database, self.redis - start.redis)


@dataclass(frozen=True)
class CpuUsed:
    workers: float
    database: float
    redis: float

    @property
    def total(self) -> float:
        return self.workers + self.database + self.redis

    def per_unit_ms(self, units: int) -> str:
        """ "1.23 ms (workers 0.90 + database 0.25 + Redis 0.08)" per unit of work."""
        ms = 1000 / max(1, units)
        return (
            f"{self.total * ms:.2f} ms (workers {self.workers * ms:.2f} + database {self.database * ms:.2f}"
            f" + Redis {self.redis * ms:.2f})"
        )


def read_platform_cpu(pool_pid: int, seen_backends: dict[int, float] | None = None) -> CpuReading:
    """The pool's processes (with the workers it already replaced), the database backends of
    this database other than this process's own (Postgres; SQLite runs inside the workers), and
    the Redis server's own count (INFO cpu, which covers the embedded server too).

    ``seen_backends``: backends' CPU as ``watch_backends`` last saw it during the run. A backend
    gone by now (a worker's connection is closed after CONN_MAX_AGE, so a run longer than a
    minute outlives its first ones) counts as last seen, not as nothing."""
    from prbench.queues import get_connection

    workers = process_cpu_s(pool_pid, children=True) + sum(process_cpu_s(pid) for pid in descendants(pool_pid))
    by_pid = {**(seen_backends or {}), **_live_backends()}
    info = get_connection().info("cpu")
    redis = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return CpuReading(workers, redis, by_pid)


def watch_backends(seen: dict[int, float]) -> None:
    """Note the CPU of this database's backends now (call it now and then during a run)."""
    seen.update(_live_backends())


def _live_backends() -> dict[int, float]:
    from django.db import connection

    if connection.vendor != "postgresql":
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        # 0: gone between the query and the read, so never a reading that erases a last one.
        return {pid: cpu for (pid,) in cursor.fetchall() if (cpu := process_cpu_s(pid))}
