"""The demo's workers run under RQ's worker pool, which replaces one that dies; stopping the
demo leaves no process behind (not its workers, not its embedded Redis), whether it is stopped
by Ctrl-C or by SIGTERM (sent twice, as timeout(1) and a process group may)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The demo's set-up in a process of its own: SQLite and the embedded Redis under a temporary
# var dir, the demo command's own SIGTERM handling, its services, then a wait for a signal.
SCRIPT = """
import json, os, signal, sys, time
import django
django.setup()
from experiments.management.commands import demo
from prbench import queues
signal.signal(signal.SIGTERM, demo._exit_once)
try:
    with demo.demo_services(2) as pools:
        workers = [w.pid for w in demo.pool_workers(pools[0])]
        print(json.dumps({"redis": queues._embedded.pid, "workers": [pools[0].pid, *workers]}), flush=True)
        time.sleep(120)
except KeyboardInterrupt:
    print("stopped", flush=True)
"""


def _demo_environment(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "PYTEST_XDIST_WORKER")}
    return env | {
        "DJANGO_SETTINGS_MODULE": "prbench.settings",
        "PRBENCH_VAR_DIR": str(var_dir),
        "DEBUG": "True",
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a child that exited but was not reaped yet is gone too
        return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") < 0
    except FileNotFoundError:
        return False


def _start(tmp_path: Path) -> tuple[subprocess.Popen, dict]:
    demo = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=_demo_environment(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    assert demo.stdout is not None
    line = demo.stdout.readline()
    assert line, "the demo's services did not start"
    return demo, json.loads(line)


def _assert_nothing_survives(demo: subprocess.Popen, pids: dict, tmp_path: Path) -> None:
    demo.wait(timeout=60)
    everything = [pids["redis"], *pids["workers"]]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in everything) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in everything if _alive(pid)] == []
    assert not (tmp_path / "redis.sock").exists()


def test_ctrl_c_stops_workers_and_embedded_redis(tmp_path):
    demo, pids = _start(tmp_path)
    os.killpg(demo.pid, signal.SIGINT)  # what a terminal sends its foreground job on Ctrl-C
    _assert_nothing_survives(demo, pids, tmp_path)
    assert demo.stdout is not None and "stopped" in demo.stdout.read()


def test_sigterm_twice_stops_workers_and_embedded_redis(tmp_path):
    demo, pids = _start(tmp_path)
    demo.send_signal(signal.SIGTERM)
    demo.send_signal(signal.SIGTERM)
    _assert_nothing_survives(demo, pids, tmp_path)


def test_a_killed_worker_is_replaced_and_its_replacement_stopped(tmp_path):
    from redis import Redis
    from rq import Worker

    from experiments.management.commands.demo import _parent_pid

    demo, pids = _start(tmp_path)
    pool, first, second = pids["workers"]
    os.kill(first, signal.SIGKILL)
    redis = Redis(unix_socket_path=str(tmp_path / "redis.sock"))
    replacement = None
    deadline = time.monotonic() + 20
    while replacement is None and time.monotonic() < deadline:
        live = {w.pid for w in Worker.all(connection=redis) if _parent_pid(w.pid) == pool}
        replacement = next(iter(live - {first, second}), None)
        time.sleep(0.2)
    assert replacement is not None, "the pool did not replace the killed worker"
    demo.send_signal(signal.SIGTERM)
    _assert_nothing_survives(demo, pids | {"workers": [pool, second, replacement]}, tmp_path)
