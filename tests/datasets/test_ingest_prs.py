"""ingest_prs on a long history: each decision saved as it is made, rejections remembered,
the work bounded, a broken test command stopped up front, merges described by their branch."""

import os
import signal
import subprocess
import sys

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError
from django.db import connection

from datasets.ingest import IngestOptions, Verdict, ingest
from datasets.models import MinedCandidate, TaskInstance
from evaluation.testbed import build_testbed
from orgs.models import Organization
from tests.factories import ingest_textkit
from tests.samples import DASHES, MINUTES, SPLITTER


@pytest.fixture
def textkit(tmp_path, settings):
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "cache"
    return build_testbed(tmp_path / "textkit")


def titles():
    return list(
        TaskInstance.objects.filter(dataset__name="textkit").order_by("position").values_list("title", flat=True)
    )


class Killed(Exception):
    pass


def test_a_killed_run_keeps_its_decisions_and_a_rerun_skips_them(org, textkit):
    judged = []

    def kill_at_the_third_candidate(subject):
        judged.append(subject)
        if len(judged) == 3:
            raise Killed

    mined = ingest(org, "textkit", IngestOptions("local/textkit", str(textkit)), kill_at_the_third_candidate)
    seen = []
    with pytest.raises(Killed):
        for found in mined:
            seen.append(found)
    assert [v.candidate.subject for v in seen if isinstance(v, Verdict)] == [SPLITTER, MINUTES]
    rejected = MinedCandidate.objects.get(subject=SPLITTER)
    assert not rejected.kept and rejected.task is None
    assert rejected.reason == "the gold patch turns no test green (no FAIL_TO_PASS test)"
    assert "passed" in rejected.log_tail and len(rejected.log_tail.splitlines()) <= 20
    assert MinedCandidate.objects.get(subject=MINUTES).task.title == MINUTES
    assert titles() == [MINUTES]

    # --since leaves "Count words" (2026-01-02) out; the decided two are not tested again.
    output = ingest_textkit(org, textkit, "--since", "2026-01-03")
    assert "1 candidate(s): kept 1 (0 quarantined as flaky), rejected 0" in output
    assert "1 already in the dataset" in output and "1 rejected before (--retry-rejected" in output
    assert titles() == [MINUTES, DASHES]

    # --max-candidates 1: the rejected one is judged again, and nothing after it.
    output = ingest_textkit(org, textkit, "--retry-rejected", "--max-candidates", "1")
    assert "1 candidate(s): kept 0 (0 quarantined as flaky), rejected 1" in output
    assert f"'{SPLITTER}': the gold patch turns no test green" in output
    assert "      | " in output and " passed" in output  # the tail of its test log
    assert MinedCandidate.objects.filter(subject=SPLITTER).count() == 1
    assert titles() == [MINUTES, DASHES]  # "Count words" was never reached


@pytest.mark.django_db(transaction=True)  # the command runs in a process of its own
def test_an_interrupted_command_keeps_what_it_decided(tmp_path):
    repo = build_testbed(tmp_path / "textkit")
    Organization.objects.create(slug="acme", name="Acme")
    database = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{database['USER']}@{database['HOST']}:{database['PORT']}/{database['NAME']}",
        "PRBENCH_VAR_DIR": str(tmp_path / "var"),
        "DEBUG": "True",
        "PYTHONUNBUFFERED": "1",  # each decision reaches the pipe as it is printed
    }
    manage = str(django_settings.BASE_DIR / "manage.py")
    args = ["ingest_prs", "--org", "acme", "--dataset", "textkit", "--repo", str(repo)]
    command = subprocess.Popen(
        [sys.executable, manage, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first = command.stdout.readline()
    command.send_signal(signal.SIGINT)  # while the next candidate's tests run
    _, errors = command.communicate(timeout=120)

    assert first.startswith("  rejected ") and SPLITTER in first
    assert command.returncode == 1
    assert "interrupted: the decisions above are saved; the same command goes on from there" in errors
    assert list(MinedCandidate.objects.values_list("subject", "kept")) == [(SPLITTER, False)]
    assert not TaskInstance.objects.exists()


def test_tasks_of_one_run_are_listed_oldest_first(org, textkit):
    ingest_textkit(org, textkit, "--max", "2")
    assert titles() == [DASHES, MINUTES]
    assert MinedCandidate.objects.filter(kept=False).count() == 1  # the splitter, on the way


def test_a_bare_python_stops_mining_before_anything_is_decided(org, textkit):
    with pytest.raises(CommandError) as raised:
        ingest_textkit(org, textkit, "--test-command", "python -m pytest -q")
    message = str(raised.value)
    assert message.startswith("stopped: the test command reported no per-test results at ")
    assert "'python' is not this interpreter inside the sandbox" in message
    assert "write {python}, which stands for this interpreter" in message
    assert "Last lines of its log:\n" in message
    assert not MinedCandidate.objects.exists() and not TaskInstance.objects.exists()


def test_a_missing_program_stops_mining_too(org, textkit):
    with pytest.raises(
        CommandError,
        match=r"(?s)stopped: the test command could not start at .*the program 'no-such-runner' was not found",
    ):
        ingest_textkit(org, textkit, "--test-command", "no-such-runner --junitxml={junit}")
    assert not MinedCandidate.objects.exists()


def git(repo, *args):
    identity = {
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(repo),
    }
    subprocess.run(["git", *args], cwd=repo, check=True, env={**os.environ, **identity})


def commit(repo, message, files):
    for path, content in files.items():
        (repo / path).write_text(content)
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "-m", message)


def test_a_merge_commit_is_described_by_its_branch_commits(org, textkit):
    duration = (textkit / "textkit/duration.py").read_text()
    tests = (textkit / "tests/test_duration.py").read_text()
    git(textkit, "checkout", "--quiet", "-b", "days")
    commit(
        textkit,
        "Accept days in durations\n\nparse_duration('1d') returns 0: days are not a unit.",
        {
            "textkit/duration.py": duration.replace('UNITS = {"h"', 'UNITS = {"d": 86400, "h"').replace(
                "[hms]", "[dhms]"
            )
        },
    )
    commit(
        textkit,
        "Test durations in days\n\nOne day is 86400 seconds.",
        {"tests/test_duration.py": tests + '\n\ndef test_days():\n    assert parse_duration("1d") == 86400\n'},
    )
    git(textkit, "checkout", "--quiet", "main")
    git(textkit, "merge", "--quiet", "--no-ff", "-m", "Merge branch 'days'", "days")

    output = ingest_textkit(org, textkit, "--max-candidates", "1")

    assert "kept     " in output and "'Accept days in durations': 1 FAIL_TO_PASS" in output
    task = TaskInstance.objects.get()
    assert task.problem_statement == (
        "Accept days in durations\n\nparse_duration('1d') returns 0: days are not a unit.\n\n"
        "Test durations in days\n\nOne day is 86400 seconds."
    )
    assert task.title == "Accept days in durations"
    assert task.fail_to_pass == ["tests/test_duration.py::test_days"]
    assert len(task.metadata["merged_commits"]) == 2
