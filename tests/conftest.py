"""Shared fixtures: real Postgres (pytest-django) and a real Redis database set aside for tests.

alice owns the org, bob is a member, vera a viewer, charlie an outsider with his own org.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from datasets.demo import load_demo_dataset
from datasets.environments import set_this_process_capabilities
from datasets.formats import FormatOptions
from datasets.formats.truthfulqa_gen import parse
from datasets.imports import do_import_questions
from datasets.models import Dataset
from evaluation.models import EvaluatorProfile
from evaluation.testbed import build_testbed
from experiments import liveness
from experiments.actions import ArmSpec, ExperimentSpec, do_save_experiment, do_start_run
from experiments.models import Attempt, Run, RunStatus, SampleStrategy, WorkerLease
from experiments.worker import AttemptWorker
from orgs.models import Membership, Organization, Role
from prbench.queues import get_connection, worker_queues
from prbench.redaction import forget_secrets
from providers.adapters.mock.mock_book import forget_books
from providers.pricing import forget_catalog
from tests.cli import run_command
from tests.factories import ZERO_LATENCY_ARMS, import_file
from tests.providers.fake_server import FakeProvider
from tests.samples import HUMANEVAL_SAMPLE, MMLU, PROBLEMS, TRUTHFULQA_GEN

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="session", autouse=True)
def worker_lease_stopped_at_the_end(django_db_setup):
    """The lease thread of this process (started by the first claim) uses its own database
    connection: it must be gone before pytest-django drops the test database."""
    yield
    liveness.stop()


@pytest.fixture(autouse=True)
def fresh_price_catalog():
    forget_catalog()  # the per-process cache must not carry prices from one test to the next
    yield
    forget_catalog()


@pytest.fixture(autouse=True)
def fresh_secret_registry():
    forget_secrets()  # the per-process registry of keys to redact must not outlive a test
    yield
    forget_secrets()


@pytest.fixture(autouse=True)
def fresh_mock_books():
    forget_books()  # what the mock knows is what each test's own runs (or the test) registered
    yield
    forget_books()


@pytest.fixture(autouse=True)
def fresh_worker_capabilities():
    set_this_process_capabilities(None)  # what a worker of an earlier test found is not this one's
    yield
    set_this_process_capabilities(None)


@pytest.fixture(autouse=True)
def clean_redis():
    connection = get_connection()
    assert connection.connection_pool.connection_kwargs.get("db", 0) >= 10, "tests must use a test Redis database"
    connection.flushdb()
    yield connection
    connection.flushdb()


def make_user(django_user_model, email: str):
    from allauth.account.models import EmailAddress

    user = django_user_model.objects.create_user(username=email, email=email, password=PASSWORD)
    EmailAddress.objects.create(user=user, email=email, primary=True, verified=True)
    return user


@pytest.fixture
def org(db):
    return Organization.objects.create(slug="acme", name="Acme")


@pytest.fixture
def alice(django_user_model, org):
    user = make_user(django_user_model, "alice@example.com")
    Membership.objects.create(user=user, org=org, role=Role.OWNER)
    return user


@pytest.fixture
def bob(django_user_model, org):
    user = make_user(django_user_model, "bob@example.com")
    Membership.objects.create(user=user, org=org, role=Role.MEMBER)
    return user


@pytest.fixture
def vera(django_user_model, org):
    user = make_user(django_user_model, "vera@example.com")
    Membership.objects.create(user=user, org=org, role=Role.VIEWER)
    return user


@pytest.fixture
def charlie(django_user_model, db):
    user = make_user(django_user_model, "charlie@example.com")
    other = Organization.objects.create(slug="other", name="Other Co")
    Membership.objects.create(user=user, org=other, role=Role.OWNER)
    return user


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def dataset(org):
    return load_demo_dataset(org)


@pytest.fixture
def experiment(org, dataset, alice):
    spec = ExperimentSpec(name="Mock duel", dataset=dataset, arms=list(ZERO_LATENCY_ARMS), sample_size=4, seed=11)
    return do_save_experiment(org, spec, alice)


def work_queue() -> None:
    """Drain the test queues with a real RQ worker, in this process (as the style guide says)."""
    AttemptWorker(worker_queues(), connection=get_connection()).work(burst=True)


def as_if_its_worker_died(*attempt_ids: int) -> None:
    """The process that claimed these attempts is gone: its lease ran out a minute ago."""
    name, now = uuid.uuid4().hex, timezone.now()
    lapsed = now - timedelta(minutes=1)
    WorkerLease.objects.create(name=name, hostname="gone", pid=1, started_at=lapsed, expires_at=lapsed)
    Attempt.objects.filter(pk__in=attempt_ids).update(claimed_by=name)


@pytest.fixture
def start(django_capture_on_commit_callbacks):
    """Start a run and queue its jobs, as the commit would."""

    def start_run(experiment, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return do_start_run(experiment, **kwargs)

    return start_run


def readable_export(data: bytes | str) -> str:
    """An export as text to search for what must not be in it: a zip's members read out,
    since inside the zip their text is compressed and a search would find nothing."""
    if isinstance(data, str):
        return data
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "\n".join(archive.read(name).decode() for name in archive.namelist())
    return data.decode()


def command_export(run, format: str) -> str:
    """``export_run`` of the run in that format, as a shell redirect would take it (bytes,
    for the zip of every arm's predictions), read out as text."""
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", write_through=True)
    call_command("export_run", str(run.code), format=format, stdout=out)
    out.flush()
    return readable_export(raw.getvalue())


def make_api_key(org, scopes=("read", "run", "admin"), name: str | None = None, expires_at=None) -> str:
    """A new API key of ``org`` (the key itself, as shown once on creation)."""
    from orgs.api_keys import do_create_api_key

    _, raw = do_create_api_key(org, name or f"key-{uuid.uuid4().hex[:8]}", list(scopes), expires_at)
    return raw


def api_client(raw_key: str) -> Client:
    """A client that sends ``raw_key`` as a Bearer token on every request, as a CI script would."""
    return Client(headers={"authorization": f"Bearer {raw_key}"})


# --- shared by several modules -----------------------------------------------------------------


@pytest.fixture
def fake():
    """A local server speaking a provider's wire format (tests/providers/fake_server.py)."""
    server = FakeProvider()
    yield server
    server.close()


@pytest.fixture
def mmlu(org):
    import_file(org, "mmlu", MMLU, dataset="mmlu")
    dataset = Dataset.objects.get(org=org, name="mmlu")
    assert dataset.tasks.count() == 56
    return dataset


@pytest.fixture
def finished_run(org, alice, start, mmlu):
    """A run of these arms on every MMLU sample question, worked to the end."""
    made = []

    def run_of(*arms: ArmSpec, seed: int = 7, finish: bool = True, sample_size: int | None = None) -> Run:
        name = f"gate {len(made)}"
        spec = ExperimentSpec(name=name, dataset=mmlu, arms=list(arms), seed=seed, sample_size=sample_size)
        run = start(do_save_experiment(org, spec, alice))
        if finish:
            work_queue()
            run.refresh_from_db()
            assert run.status == RunStatus.COMPLETED
        made.append(run)
        return run

    return run_of


TRUTH_AND_MYTH_ARMS = [
    ArmSpec("truth-teller", "mock", "mock-oracle", {"mode": "oracle"}),
    ArmSpec("myth-teller", "mock", "mock-wrong", {"mode": "wrong"}),
]


@pytest.fixture
def text_profile(db):
    return EvaluatorProfile.objects.create(
        name="mock-fact-checker",
        workload="free_text",
        provider="mock",
        model_name="mock-evaluator",
        provider_config={"mode": "evaluator"},
    )


@pytest.fixture
def truthfulqa(org):
    tasks = parse(TRUTHFULQA_GEN.name, TRUTHFULQA_GEN.read_bytes(), FormatOptions())
    return do_import_questions(org, "truthfulqa", tasks, TRUTHFULQA_GEN.name).dataset


@pytest.fixture
def text_experiment(org, truthfulqa, alice):
    return do_save_experiment(
        org, ExperimentSpec(name="Truth", dataset=truthfulqa, arms=list(TRUTH_AND_MYTH_ARMS), seed=5), alice
    )


@pytest.fixture
def humaneval(org, tmp_path):
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(problem) + "\n" for problem in PROBLEMS[:HUMANEVAL_SAMPLE]))
    run_command("import_tasks", "--org", org.slug, "--dataset", "humaneval", "--format", "humaneval", str(path))
    return Dataset.objects.get(org=org, name="humaneval")


@pytest.fixture
def four_tasks(org, dataset, alice):
    """The demo dataset's first four tasks, with one live arm beside the replay arm to come."""
    spec = ExperimentSpec(
        name="Replayed",
        dataset=dataset,
        arms=[ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})],
        sample_size=4,
        sample_strategy=SampleStrategy.FIRST,
        seed=3,
    )
    experiment = do_save_experiment(org, spec, alice)
    tasks = list(dataset.tasks.order_by("position")[:4])
    return experiment, tasks


@pytest.fixture
def plain_textkit(tmp_path, settings):
    """Without the flaky fix: its newest task is a plain bug fix."""
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    return build_testbed(tmp_path / "textkit")
