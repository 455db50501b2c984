import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from rq import Worker
from rq.worker import BaseWorker

from evaluation.models import Verdict, VerdictStatus
from experiments.actions import do_start_run, sampled_task_ids
from experiments.board_views import board_views
from experiments.demo import (
    load_code_experiment,
    load_demo_evaluator,
    load_demo_experiment,
    load_jeopardy_experiment,
    load_mmlu_experiment,
    load_repository_experiment,
)
from experiments.management.commands._helpers import wait_for_run
from experiments.models import AttemptStatus, Run, RunStatus
from orgs.actions import do_create_org
from orgs.api_keys import do_create_api_key, do_revoke_api_key
from orgs.models import ApiKey, Organization
from prbench.queues import ensure_redis, get_connection, stop_embedded_redis
from prbench.recovery import sweep_forever

DEMO_EMAIL = "demo@prbench.local"
DEMO_PASSWORD = "prbench-demo"
WORKERS = 2
SWEEP_SECONDS = 30
# How long a stopping worker may finish its calls in flight before it is killed.
STOP_SECONDS = 10
WORKERS_START_S = 120  # how long a pool may take to show its workers (start_workers)
PR_SET_PDEATHSIG = 1


class Command(BaseCommand):
    help = "Load the demo organisation and data, run its benchmarks, then serve the UI."

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="run the benchmark, print it and exit")
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args, no_serve, addr, **options):
        # SIGTERM must unwind like Ctrl-C so the workers and the embedded Redis stop too.
        signal.signal(signal.SIGTERM, _exit_once)
        try:
            with demo_services(WORKERS):
                self.run_demo(no_serve, addr)
        except KeyboardInterrupt:
            self.stdout.write("\nStopped.\n")  # Ctrl-C is how a demo ends, not an error

    def run_demo(self, no_serve: bool, addr: str) -> None:
        org, user = self.demo_org()
        load_demo_evaluator()
        experiments = [
            load_demo_experiment(org, user),
            load_repository_experiment(org, user),
            load_mmlu_experiment(org, user),
            load_jeopardy_experiment(org, user),
            load_code_experiment(org, user),
        ]
        for experiment in experiments:
            self.run_experiment(experiment, user)
        key = demo_api_key(org, user)
        run = Run.objects.filter(org=org).latest("created_at")
        self.stdout.write(
            f"\nAPI key (read, run), shown once: {key}\n"
            f"  curl -H 'Authorization: Bearer {key}' http://{addr}/api/runs/{run.code}/leaderboards\n"
            f"  docs: http://{addr}/api/docs\n"
        )
        if no_serve:
            return
        self.stdout.write(f"\nPRBench is at http://{addr}/ — log in as {DEMO_EMAIL} / {DEMO_PASSWORD}\n")
        call_command("runserver", addr, use_reloader=False)

    def run_experiment(self, experiment, user) -> None:
        tasks, arms = len(sampled_task_ids(experiment, experiment.sample_seed)), experiment.arms.count()
        self.stdout.write(f"Running {experiment.name!r}: {tasks} tasks × {arms} arms × {experiment.repetitions}")
        run = wait_for_run(do_start_run(experiment, user))
        self.stdout.write(f"\nRun {run.code} {run.status}\n")
        self.stdout.write(board_views().board_text(run) + "\n")
        if run.status != RunStatus.COMPLETED:
            raise CommandError(f"the demo run ended {run.status}")
        self.stdout.write(board_views().evaluator_text(wait_for_verdicts(run)))

    def demo_org(self):
        org = Organization.objects.filter(slug="demo").first()
        if org is None:
            org, user = do_create_org("demo", "Demo Org", DEMO_EMAIL, DEMO_PASSWORD, reset_password=True)
        else:
            user = org.memberships.get(user__email=DEMO_EMAIL).user
        # The demo user is staff too, so the admin (evaluator rationale, raw records) is one click away.
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
        return org, user


def demo_api_key(org: Organization, user: Any) -> str:
    """A fresh key for trying the API: the previous demo's is revoked (its key was shown once,
    in that demo's output), through the same actions as the API keys page."""
    for previous in ApiKey.objects.filter(org=org, name="demo", revoked_at=None):
        do_revoke_api_key(previous, user=user)
    _, raw = do_create_api_key(org, "demo", ["read", "run"], None, user=user)
    return raw


def wait_for_verdicts(run: Run, timeout_s: float = 120) -> Run:
    """The evaluator judges after the attempts are recorded: give it time to finish."""
    if run.evaluator_profile_id is None:
        return run  # a kind the evaluator does not review: nothing to wait for
    deadline = time.monotonic() + timeout_s
    answered = run.attempts.filter(status=AttemptStatus.COMPLETED).count()
    while time.monotonic() < deadline:
        done = Verdict.objects.filter(attempt__run=run).exclude(status=VerdictStatus.PENDING).count()
        if done >= answered:
            break
        time.sleep(0.2)
    return run


@contextlib.contextmanager
def demo_services(workers: int) -> Iterator[list[subprocess.Popen]]:
    """The embedded Redis, ``workers`` RQ workers and the recovery sweep, for as long as the
    block runs; however it ends (an error, Ctrl-C, SIGTERM), all of them are stopped."""
    ensure_redis()
    processes: list[subprocess.Popen] = []
    try:
        processes = start_workers(workers)
        threading.Thread(target=sweep_forever, args=(SWEEP_SECONDS,), daemon=True).start()
        yield processes
    finally:
        stop_workers(processes, timeout_s=STOP_SECONDS)


def stop_workers(processes: list[subprocess.Popen], timeout_s: float = 30) -> None:
    """Stop the worker pools started by ``start_workers``, then the embedded Redis they used
    (when this process started one): nothing is left running behind a demo or a bench script.

    A pool gets SIGTERM and passes it on: RQ's warm shutdown, each worker finishing the calls
    in flight. A pool still busy after ``timeout_s`` is killed with its workers (its process
    group): what they held, the recovery sweep gives back."""
    ignoring = _ignore_interrupts()  # a second Ctrl-C must not cut the clean-up short
    try:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + timeout_s
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    finally:
        stop_embedded_redis()
        if ignoring is not None:
            signal.signal(signal.SIGINT, ignoring)


def _ignore_interrupts() -> Any:
    if threading.current_thread() is not threading.main_thread():
        return None  # only the main thread may set handlers; it is the one Ctrl-C reaches
    return signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_workers(count: int) -> list[subprocess.Popen]:
    """``count`` workers under RQ's worker pool, which replaces any that dies (as in
    production: see the README), in one process group of their own."""
    manage = str(settings.BASE_DIR / "manage.py")
    pool = subprocess.Popen(
        [
            sys.executable,
            manage,
            "rqworker-pool",
            *settings.WORKER_QUEUES,
            "--num-workers",
            str(count),
            "--verbosity",
            "0",
        ],
        preexec_fn=_die_with_parent,
        # Not in the terminal's process group: Ctrl-C reaches the demo alone, which then
        # stops the pool once (a worker signalled twice stops cold, mid-job).
        start_new_session=True,
    )
    # A pool that dies is caught at once (poll); the wait only bounds one that hangs. A worker
    # takes 5 s to start on an idle machine (imports, its interpreters asked their versions),
    # and it took over 30 s on a busy one, which this wait used to refuse.
    deadline = time.monotonic() + WORKERS_START_S
    while len(pool_workers(pool)) < count:
        if time.monotonic() > deadline or pool.poll() is not None:
            stop_workers([pool], timeout_s=STOP_SECONDS)
            raise CommandError("the RQ workers did not start; see their output above")
        time.sleep(0.2)
    return [pool]


def pool_workers(pool: subprocess.Popen) -> list[BaseWorker]:
    """The live workers registered by this pool: Redis may still list workers of an earlier,
    killed demo until their registration expires."""
    return [worker for worker in Worker.all(connection=get_connection()) if _parent_pid(worker.pid) == pool.pid]


def _parent_pid(pid: int | None) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "pid (comm)": state, then ppid


def _exit_once(signum: int, frame: object) -> None:
    # A second SIGTERM (timeout(1) and a process group both sending one) must not cut the
    # clean-up short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(128 + signum)


def _die_with_parent() -> None:
    """Linux: the worker gets SIGTERM if the demo process dies, even by SIGKILL."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
