"""The fault drills of issue 12, as a script: does every single fault recover by itself?

Each drill starts a run (12 tasks x 3 arms x N repetitions, inference only) on two workers
under RQ's worker pool and the recovery sweep (`requeue_stale --every 10`), injects one fault,
clears it, and waits (at most 180 s after the fault clears) for every attempt to end:

    kill-10      SIGKILL a busy worker 10 times, 2 s apart (the pool replaces it)
    kill-1       SIGKILL a busy worker once; the sweep runs with --stale-after 60
    redis        SIGKILL Redis, start it again empty 5.6 s later
    postgres     stop Postgres (fast shutdown), start it again 22 s later
    capacity     no fault: a healthy 3 s provider, max_concurrency 1, timeout_total_s 10, 12 attempts
    hang         one arm's provider answers nothing for 60 s (then answers)

    .venv/bin/python bench/drills.py [--only NAME[,NAME]] [--attempts 504] [--logs DIR]

(--attempts is rounded down to a multiple of 36; --logs keeps the workers', sweeps' and
Postgres's logs, which are otherwise deleted with everything else.)

Everything runs on servers the script starts and stops itself: a Postgres cluster (initdb into
a temporary directory, on a spare port) and a redis-server (on a spare port, no persistence).
The shared Postgres and Redis are never touched. The provider is a fake OpenAI-compatible
server on a thread of this process, reached through an `openai_compatible` credential.

One row per drill, from the database and the fake provider's own counts:
  planned     attempts in the run
  finished    attempts completed or failed when the wait ended
  lost        attempts still queued or running then (or cancelled: nobody cancelled the run)
  duplicated  cells (task, arm, repetition) with more than one attempt row
  paid twice  attempts whose request the provider answered to a live caller more than once
              (a call cut off because its worker was killed, or its client gave up, is
              counted apart: "cut off" in the details)
  mis-scored  attempts recorded as failed although their arm's provider never failed
              (for the hanging arm: failed with anything but `timeout`)
  recovery    seconds from the fault clearing until every attempt had ended (hang: until the
              healthy arms' last attempt ended, from the run's start; capacity: the run's length)
  manual      what a person would have had to do (the script does none of it): restart a
              worker pool or sweep that died, requeue what was lost

Targets: no manual step; 0 lost, duplicated, paid twice, mis-scored; recovery within 60 s.
The exit code is 0 whatever the result: this measures, it does not gate.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import glob
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench._settings import use_production_environment  # noqa: E402

TASKS = 12  # the demo dataset's
WORKERS = 2
DEFAULT_LATENCY_S = 0.1
# How long after the fault clears a drill waits for its run before counting what is left as lost.
RECOVERY_WAIT_S = 180
RECOVERY_TARGET_S = 60
HANG_S = 60
FINISHED = ("completed", "failed")  # an attempt in any other state at the end was lost
PR_SET_PDEATHSIG = 1


# --- the fake provider ---------------------------------------------------------------------


@dataclass
class ArmBehaviour:
    latency_s: float = DEFAULT_LATENCY_S
    # When given, calls to this arm's model are held (the provider hangs) until it is set.
    released: threading.Event | None = None


@dataclass
class CallLog:
    """What the provider saw, per attempt: (model, seed) is stable per (run, task, arm,
    repetition) because the gateway sends a seed derived from exactly that."""

    answered: Counter = field(default_factory=Counter)  # the answer went out to a live caller
    cut_off: Counter = field(default_factory=Counter)  # the caller hung up first
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: tuple[str, int], delivered: bool) -> None:
        with self.lock:
            (self.answered if delivered else self.cut_off)[key] += 1


class QuietServer(ThreadingHTTPServer):
    """A drill kills the callers on purpose: their connections going away is expected, not a
    traceback for the terminal."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeProvider:
    """An OpenAI Chat Completions server on loopback that answers every request after its
    arm's latency, and counts each call as answered or cut off (the caller had gone)."""

    def __init__(self) -> None:
        self.arms: dict[str, ArmBehaviour] = {}
        self.calls = CallLog()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                fake.answer(self, body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        model = str(body.get("model", ""))
        # The log of the drill this request arrived in: a call the previous drill's stopped
        # workers left in flight is not counted against the next one.
        calls = self.calls
        behaviour = self.arms.get(model, ArmBehaviour())
        if behaviour.released is not None:
            behaviour.released.wait()
        time.sleep(behaviour.latency_s)
        key = (model, int(body.get("seed") or 0))
        if _caller_gone(handler.connection):
            calls.add(key, delivered=False)
            handler.close_connection = True
            return
        streamed = bool(body.get("stream"))
        data = _event_stream(model) if streamed else json.dumps(_completion(model)).encode()
        try:
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream" if streamed else "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            handler.wfile.flush()
        except OSError:
            calls.add(key, delivered=False)
            return
        calls.add(key, delivered=True)

    def close(self) -> None:
        for behaviour in self.arms.values():
            if behaviour.released is not None:
                behaviour.released.set()  # let held handler threads end
        self.server.shutdown()
        self.server.server_close()


def _caller_gone(connection: socket.socket) -> bool:
    """The client closed its end (its process was killed, or it timed out): nothing is
    pipelined on these connections, so a readable socket mid-request means end of stream."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _completion(model: str) -> dict:
    return {
        "id": f"chatcmpl-drill-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "No change needed."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105},
    }


def _event_stream(model: str) -> bytes:
    """What OpenAI streams for ``stream: true`` with ``include_usage``: content deltas, the
    finish reason, a last chunk with the usage and no choices, then [DONE]."""
    head = {"id": f"chatcmpl-drill-{time.time_ns()}", "object": "chat.completion.chunk", "created": 1, "model": model}
    chunks = [
        head
        | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "No change."}, "finish_reason": None}]},
        head | {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        head | {"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}},
    ]
    return b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks) + b"data: [DONE]\n\n"


# --- the servers the drills own ------------------------------------------------------------


def spare_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if this script dies, even by SIGKILL."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class OwnRedis:
    """A redis-server of the script's own, in the foreground as its child, without persistence:
    killing it and starting it again is a restart that lost everything."""

    def __init__(self, directory: Path) -> None:
        self.directory, self.port = directory, spare_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)),
                *("--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"),
            ],
            stdout=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        _wait_until(self._answers, 10, "redis-server did not start")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class OwnPostgres:
    """A Postgres cluster of the script's own: initdb into a temporary directory as the
    postgres user (the server refuses to run as root), trust auth on loopback, no fsync."""

    DATABASE = "prbench_drills"

    def __init__(self, directory: Path) -> None:
        self.directory, self.port = directory, spare_port()
        self.data = directory / "pgdata"
        self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))[-1]).parent
        self.running = False

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.DATABASE}"

    def init(self) -> None:
        shutil.chown(self.directory, "postgres")
        self._as_postgres("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")
        self.start()
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.DATABASE}")

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.directory} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        log = str(self.directory / "postgres.log")
        self._as_postgres("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")
        self.running = False

    def _as_postgres(self, program: str, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", str(self.bin / program), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )


class Services:
    """Everything the script starts, stopped however the script ends (normal exit, an error,
    Ctrl-C, SIGTERM): a drill must leave no process behind."""

    def __init__(self, keep_logs: Path | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="prbench-drills-"))
        self.keep_logs = keep_logs
        self.postgres = OwnPostgres(self.directory)
        self.redis = OwnRedis(self.directory)
        self.children: list[subprocess.Popen] = []  # worker pools and sweeps
        self.stopped = False

    def start(self) -> None:
        atexit.register(self.stop)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, _exit_on_signal)
        self.redis.start()
        self.postgres.init()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        for child in self.children:
            stop_process_group(child)
        self.redis.kill()
        with contextlib.suppress(subprocess.CalledProcessError, OSError):
            if self.postgres.running or (self.postgres.data / "postmaster.pid").exists():
                self.postgres.stop("immediate")
        if self.keep_logs is not None:
            self.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in self.directory.glob("*.log"):
                shutil.copy(log, self.keep_logs)
        shutil.rmtree(self.directory, ignore_errors=True)


def _exit_on_signal(signum: int, frame: object) -> None:
    signal.signal(signum, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    raise SystemExit(128 + signum)


def stop_process_group(process: subprocess.Popen, timeout_s: float = 10) -> None:
    """SIGTERM to a child started in a session of its own, then SIGKILL to its whole group."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _wait_until(condition: Callable[[], bool], timeout_s: float, failure: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.1)


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Children started inside inherit ``path`` as their stderr: workers and the sweep log every
    outage loudly, which would bury the progress bar."""
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# --- one drill -----------------------------------------------------------------------------


@dataclass
class Arm:
    label: str
    latency_s: float = DEFAULT_LATENCY_S
    config: dict = field(default_factory=dict)
    hangs: bool = False


@dataclass
class Drill:
    name: str
    what: str
    fault: Callable[[Stage], float | None]  # injects and clears the fault; returns when it cleared
    arms: tuple[Arm, ...] = (Arm("arm-a"), Arm("arm-b"), Arm("arm-c"))
    repetitions: int | None = None  # None: from --attempts
    sweep_args: tuple[str, ...] = ()


@dataclass
class Row:
    drill: str
    planned: int = 0
    finished: int = 0
    lost: int = 0
    duplicated: int = 0
    paid_twice: int = 0
    mis_scored: int = 0
    recovery_s: float | None = None
    manual: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def met(self) -> bool:
        counts = (self.lost, self.duplicated, self.paid_twice, self.mis_scored)
        recovered = self.recovery_s is not None and self.recovery_s <= RECOVERY_TARGET_S
        return not any(counts) and not self.manual and recovered


class Progress:
    """Counts the run's ended attempts from a thread of its own, through outages (a failed
    query is retried on a fresh connection), and remembers when each count was first seen."""

    def __init__(self, run_id: int, total: int, healthy_models: list[str]) -> None:
        from tqdm import tqdm

        self.run_id, self.total, self.healthy_models = run_id, total, healthy_models
        self.ended, self.samples = 0, [(time.monotonic(), 0)]
        self.healthy_done: float | None = None  # when the healthy arms' last attempt had ended
        self.stop = threading.Event()
        self.bar = tqdm(total=total, unit="attempt", file=sys.stderr, dynamic_ncols=True, leave=False)
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        from django.db import DatabaseError, connection

        while not self.stop.is_set():
            try:
                self._look()
            except DatabaseError:
                connection.close()
            time.sleep(0.2)
        connection.close()

    def _look(self) -> None:
        ended = ended_attempts(self.run_id)
        if ended != self.ended:
            self.ended = ended
            self.samples.append((time.monotonic(), ended))
            self.bar.update(ended - self.bar.n)
        if self.healthy_done is None and not pending_attempts(self.run_id, self.healthy_models):
            self.healthy_done = time.monotonic()

    def note(self, phase: str) -> None:
        self.bar.set_postfix_str(phase)

    def wait_for_fraction(self, fraction: float, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while self.ended < fraction * self.total and time.monotonic() < deadline:
            time.sleep(0.05)

    def wait_for_all(self, deadline: float) -> None:
        while self.ended < self.total and time.monotonic() < deadline:
            time.sleep(0.2)

    def first_change_after(self, moment: float) -> float | None:
        return next((t for t, _ in self.samples if t > moment), None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.bar.close()


@dataclass
class Stage:
    """A drill under way: its run, its processes, and the servers it may disturb."""

    services: Services
    fake: FakeProvider
    run_id: int
    pool: subprocess.Popen
    sweep: subprocess.Popen
    progress: Progress
    started: float
    notes: list[str] = field(default_factory=list)  # what the fault did, for the details


def ended_attempts(run_id: int) -> int:
    from experiments.models import Attempt, AttemptStatus

    ended = (AttemptStatus.COMPLETED, AttemptStatus.FAILED, AttemptStatus.CANCELLED)
    return Attempt.objects.filter(run_id=run_id, status__in=ended).count()


def pending_attempts(run_id: int, models: list[str]) -> bool:
    from experiments.models import Attempt, AttemptStatus

    pending = (AttemptStatus.QUEUED, AttemptStatus.RUNNING)
    return Attempt.objects.filter(run_id=run_id, arm__model_name__in=models, status__in=pending).exists()


def run_drill(drill: Drill, services: Services, fake: FakeProvider, org: Any, repetitions: int) -> Row:
    from django.db import connection

    from experiments.actions import do_start_run

    reset_between_drills(fake, drill)
    experiment = save_experiment(org, drill, drill.repetitions or repetitions)
    log = services.directory / f"{drill.name}.log"
    with stderr_to(log):
        pool = start_pool(services)
        sweep = start_sweep(services, drill.sweep_args)
    run = do_start_run(experiment, inference_only=True)
    progress = Progress(run.pk, run.total_attempts, [arm_model(a) for a in drill.arms if not a.hangs])
    stage = Stage(services, fake, run.pk, pool, sweep, progress, started=time.monotonic())
    try:
        progress.note(drill.what)
        cleared = drill.fault(stage)
        progress.note("waiting for the run")
        progress.wait_for_all(time.monotonic() + RECOVERY_WAIT_S if cleared is not None else stage.started + 600)
        connection.close()  # this thread's connection may predate a database restart
        return measure(drill, stage, cleared)
    finally:
        progress.close()
        for child in (sweep, pool):
            stop_process_group(child)
            services.children.remove(child)
        cancel_unfinished(run.pk)


def reset_between_drills(fake: FakeProvider, drill: Drill) -> None:
    """Each drill starts on an empty Redis and a provider that has seen nothing."""
    from prbench.queues import get_connection

    get_connection().flushall()  # (the client reconnects after the Redis drill's restart)
    fake.calls = CallLog()
    fake.arms = {
        arm_model(arm): ArmBehaviour(arm.latency_s, threading.Event() if arm.hangs else None) for arm in drill.arms
    }


def arm_model(arm: Arm) -> str:
    return f"drill-{arm.label}"


def save_experiment(org: Any, drill: Drill, repetitions: int) -> Any:
    from datasets.demo import load_demo_dataset
    from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment

    spec = ExperimentSpec(
        name=f"drill {drill.name} {time.time_ns()}",
        dataset=load_demo_dataset(org),
        # A seed of its own per drill, so the provider's (model, seed) keys never repeat across runs.
        seed=time.time_ns() % 2**31,
        repetitions=repetitions,
        arms=[ArmSpec(a.label, "openai_compatible", arm_model(a), a.config, credential="drill") for a in drill.arms],
    )
    return do_save_experiment(org, spec)


def start_pool(services: Services) -> subprocess.Popen:
    from experiments.management.commands.demo import start_workers

    pool = start_workers(WORKERS)[0]
    services.children.append(pool)
    return pool


def start_sweep(services: Services, extra: tuple[str, ...]) -> subprocess.Popen:
    sweep = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "requeue_stale", "--every", "10", *extra],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    services.children.append(sweep)
    return sweep


def cancel_unfinished(run_id: int) -> None:
    """What a drill left running must not be worked on by the next drill's workers."""
    from experiments.actions import do_cancel_run
    from experiments.models import Run

    with contextlib.suppress(Exception):
        do_cancel_run(Run.objects.get(pk=run_id))


# --- the faults ----------------------------------------------------------------------------


def kill_workers(times: int, interval_s: float) -> Callable[[Stage], float | None]:
    def fault(stage: Stage) -> float | None:
        stage.progress.wait_for_fraction(0.1)
        kills, last = 0, None
        for _ in range(times):
            if stage.progress.ended >= stage.progress.total:
                break
            if kill_a_busy_worker(stage.pool):
                kills, last = kills + 1, time.monotonic()
                stage.progress.note(f"killed {kills}/{times}")
            time.sleep(interval_s)
        stage.notes.append(f"{kills} of {times} kill(s) done (a kill needs a busy worker and an unfinished run)")
        return last

    return fault


def kill_a_busy_worker(pool: subprocess.Popen, timeout_s: float = 10) -> bool:
    from experiments.management.commands.demo import pool_workers

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = [w.pid for w in pool_workers(pool) if w.get_state() == "busy" and w.pid]
        if busy:
            with contextlib.suppress(ProcessLookupError):
                os.kill(busy[0], signal.SIGKILL)
                return True
        time.sleep(0.1)
    return False


def restart_redis(down_s: float) -> Callable[[Stage], float | None]:
    def fault(stage: Stage) -> float | None:
        stage.progress.wait_for_fraction(0.3)
        stage.services.redis.kill()
        stage.progress.note(f"Redis down for {down_s} s")
        time.sleep(down_s)
        stage.services.redis.start()
        return time.monotonic()

    return fault


def restart_postgres(down_s: float) -> Callable[[Stage], float | None]:
    def fault(stage: Stage) -> float | None:
        stage.progress.wait_for_fraction(0.3)
        stage.services.postgres.stop("fast")
        stage.progress.note(f"Postgres down for {down_s} s")
        time.sleep(down_s)
        stage.services.postgres.start()
        return time.monotonic()

    return fault


def no_fault(stage: Stage) -> float | None:
    return stage.started


def hang_one_arm(stage: Stage) -> float | None:
    """The hanging arm's calls are held for HANG_S, then answered; meanwhile the healthy arms
    should run as if nothing were wrong (Progress notes when their last attempt ends)."""
    time.sleep(max(0.0, stage.started + HANG_S - time.monotonic()))
    for behaviour in stage.fake.arms.values():
        if behaviour.released is not None:
            behaviour.released.set()
    return time.monotonic()


DRILLS = [
    Drill(
        "kill-10",
        "SIGKILL a busy worker 10 times, 2 s apart",
        kill_workers(10, 2.0),
        arms=(Arm("arm-a", 0.5), Arm("arm-b", 0.5), Arm("arm-c", 0.5)),
    ),
    Drill(
        "kill-1",
        "SIGKILL a busy worker once, sweep --stale-after 60",
        kill_workers(1, 0),
        sweep_args=("--stale-after", "60"),
    ),
    Drill("redis", "SIGKILL Redis, restart it empty after 5.6 s", restart_redis(5.6)),
    Drill("postgres", "stop Postgres for 22 s", restart_postgres(22)),
    Drill(
        "capacity",
        "healthy 3 s provider, max_concurrency 1, timeout_total_s 10",
        no_fault,
        arms=(Arm("slow", 3.0, {"max_concurrency": 1, "timeout_total_s": 10}),),
        repetitions=1,
    ),
    Drill(
        "hang",
        f"one arm's provider hangs for {HANG_S} s",
        hang_one_arm,
        arms=(Arm("hanging", hangs=True), Arm("arm-b"), Arm("arm-c")),
    ),
]


# --- measuring -----------------------------------------------------------------------------


def measure(drill: Drill, stage: Stage, cleared: float | None) -> Row:
    from django.db.models import Count

    from experiments.models import Attempt, AttemptStatus

    attempts = Attempt.objects.filter(run_id=stage.run_id).order_by()
    statuses = Counter(dict(attempts.values_list("status").annotate(n=Count("id")).values_list("status", "n")))
    row = Row(drill.name, planned=stage.progress.total, details=list(stage.notes))
    row.finished = sum(statuses[status] for status in FINISHED)
    row.lost = row.planned - row.finished
    row.duplicated = attempts.values("task_id", "arm_id", "repetition").annotate(n=Count("id")).filter(n__gt=1).count()
    count_calls(drill, stage, row)
    row.mis_scored = mis_scored(drill, stage.run_id)
    row.recovery_s = recovery_seconds(drill, stage, cleared, row)
    row.manual = manual_steps(stage, row)
    failures = Counter(attempts.filter(status=AttemptStatus.FAILED).values_list("error_category", flat=True))
    if failures:
        row.details.append("failed: " + ", ".join(f"{n} {c or 'uncategorised'}" for c, n in failures.most_common()))
    if row.lost:
        left = ", ".join(f"{n} {status}" for status, n in statuses.items() if status not in FINISHED)
        row.details.append(f"lost: {left}")
    claimed_again = attempts.filter(claims__gt=1).count()
    if claimed_again:
        row.details.append(f"{claimed_again} attempt(s) claimed more than once")
    return row


def count_calls(drill: Drill, stage: Stage, row: Row) -> None:
    """Paid twice: an attempt whose request the provider answered, to a caller still there,
    more than once. The seed the gateway sends identifies the attempt."""
    answered, cut_off = Counter(stage.fake.calls.answered), Counter(stage.fake.calls.cut_off)
    seeds = attempt_seeds(stage.run_id)
    row.paid_twice = sum(1 for key in seeds if answered[key] > 1)
    stray = sum(n for key, n in (answered + cut_off).items() if key not in seeds)
    resent = sum(1 for key in seeds if cut_off[key] and answered[key])
    row.details.append(
        f"provider calls: {sum(answered.values())} answered, {sum(cut_off.values())} cut off "
        f"({resent} attempt(s) sent again after a cut-off call){f', {stray} not from this run' if stray else ''}"
    )


def attempt_seeds(run_id: int) -> set[tuple[str, int]]:
    """Each attempt's (model, seed), computed by the adapter the workers use."""
    from experiments.models import Attempt
    from experiments.prompts import build_request
    from providers.adapters.openai.adapter import OpenAIChatAdapter
    from providers.registry import adapter_class
    from providers.types import ArmSpec

    adapter = cast(type[OpenAIChatAdapter], adapter_class("openai_compatible"))
    keys = set()
    for attempt in Attempt.objects.filter(run_id=run_id).select_related("run", "task", "arm"):
        params = adapter(ArmSpec("openai_compatible", attempt.arm.model_name, {})).params(build_request(attempt))
        keys.add((attempt.arm.model_name, int(params["seed"])))
    return keys


def mis_scored(drill: Drill, run_id: int) -> int:
    """Failures on an arm whose provider never failed; on the hanging arm, any failure that is
    not the provider's own `timeout`."""
    from experiments.models import Attempt, AttemptStatus

    failed = Attempt.objects.filter(run_id=run_id, status=AttemptStatus.FAILED)
    hanging = [arm_model(a) for a in drill.arms if a.hangs]
    return failed.exclude(arm__model_name__in=hanging, error_category="timeout").count()


def recovery_seconds(drill: Drill, stage: Stage, cleared: float | None, row: Row) -> float | None:
    progress = stage.progress
    if any(arm.hangs for arm in drill.arms):
        # What a hanging arm must not do is hold the healthy arms up.
        return None if progress.healthy_done is None else progress.healthy_done - stage.started
    if progress.ended < progress.total or cleared is None:
        return None
    done = progress.samples[-1][0]
    next_end = progress.first_change_after(cleared)
    if next_end is not None and drill.fault is not no_fault:
        row.details.append(f"first attempt ended {next_end - cleared:.1f} s after the fault cleared")
    return done - cleared


def manual_steps(stage: Stage, row: Row) -> list[str]:
    steps = []
    if stage.pool.poll() is not None:
        steps.append(f"restart the worker pool (exited {stage.pool.returncode})")
    if stage.sweep.poll() is not None:
        steps.append(f"restart the sweep (exited {stage.sweep.returncode})")
    if row.lost:
        steps.append(f"requeue {row.lost} attempt(s) by hand")
    return steps


# --- the table -----------------------------------------------------------------------------


HEADER = ("drill", "planned", "finished", "lost", "dup", "paid 2x", "mis-scored", "recovery s", "manual", "targets")


def format_row(row: Row) -> tuple[str, ...]:
    recovery = "never" if row.recovery_s is None else f"{row.recovery_s:.1f}"
    return (
        row.drill,
        str(row.planned),
        str(row.finished),
        _flag(row.lost),
        _flag(row.duplicated),
        _flag(row.paid_twice),
        _flag(row.mis_scored),
        recovery if row.recovery_s is not None and row.recovery_s <= RECOVERY_TARGET_S else f"{recovery} !",
        str(len(row.manual)) if not row.manual else f"{len(row.manual)} !",
        "met" if row.met else "MISSED",
    )


def _flag(count: int) -> str:
    return f"{count} !" if count else "0"


def print_table(rows: list[Row]) -> None:
    cells: list[tuple[str, ...]] = [HEADER, *map(format_row, rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(HEADER))]
    for number, line in enumerate(cells):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        if number == 0:
            print("  ".join("-" * width for width in widths))
    print("\n'!' marks a missed target (0 lost, duplicated, paid twice, mis-scored; no manual step; recovery <= 60 s)")
    for row in rows:
        for detail in row.details + [f"manual: {step}" for step in row.manual]:
            print(f"  {row.drill}: {detail}")


# --- main ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated drill names: " + ", ".join(d.name for d in DRILLS))
    parser.add_argument("--attempts", type=int, default=504, help="attempts per run (12 tasks x 3 arms x N)")
    parser.add_argument("--logs", type=Path, help="keep the workers', sweeps' and Postgres's logs in this directory")
    args = parser.parse_args()
    drills = choose_drills(parser, args.only)
    repetitions = max(1, args.attempts // (TASKS * 3))
    services = Services(args.logs)
    try:
        services.start()
        configure_django(services)
        rows = run_all(drills, services, repetitions)
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return 130
    finally:
        services.stop()
    print_table(rows)
    return 0


def choose_drills(parser: argparse.ArgumentParser, only: str | None) -> list[Drill]:
    if not only:
        return DRILLS
    names = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in names if name not in {d.name for d in DRILLS}]
    if unknown:
        parser.error(f"--only: no drill named {', '.join(unknown)} (choose from {', '.join(d.name for d in DRILLS)})")
    return [d for d in DRILLS if d.name in names]


def configure_django(services: Services) -> None:
    """This process and every child (workers, sweep) use the drill's own servers."""
    os.environ["DATABASE_URL"] = services.postgres.url
    os.environ["REDIS_URL"] = services.redis.url
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # the children's logs say what went wrong
    use_production_environment()
    os.environ["PRBENCH_VAR_DIR"] = str(services.directory / "var")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run_all(drills: list[Drill], services: Services, repetitions: int) -> list[Row]:
    from orgs.models import Organization
    from providers.models import ProviderCredential

    fake = FakeProvider()
    try:
        org, _ = Organization.objects.get_or_create(slug="drills", defaults={"name": "Drills"})
        credential = ProviderCredential(org=org, provider="openai_compatible", name="drill", base_url=fake.base_url)
        credential.set_api_key("sk-drill-000000000000")
        credential.save()
        rows = []
        for drill in drills:
            print(f"{drill.name}: {drill.what}", file=sys.stderr)
            rows.append(run_drill(drill, services, fake, org, repetitions))
        return rows
    finally:
        fake.close()


if __name__ == "__main__":
    raise SystemExit(main())
