"""Every bad input is a clear error: never a 500, never a traceback, never a half-written row.

One table per entry point (web form, query parameter, command). Each case says how it must
be answered (``400``, a form error, a ``CommandError``), what the answer must name, and the
test checks that no row of any table an entry point writes to changed.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.db.models import Model
from django.urls import reverse

from datasets.models import Dataset, TaskInstance
from experiments.models import DEFAULT_PROMPT, Attempt, Experiment, ModelArm, Run, RunArm
from orgs.models import Membership, Organization
from prbench.inputs import (
    ARM_CONFIG_MAX_BYTES,
    DESCRIPTION_MAX,
    JSONL_LINE_MAX_BYTES,
    PROMPT_TEMPLATE_MAX,
    SPEC_FILE_MAX_BYTES,
)
from tests.cli import refused, run_command
from tests.conftest import client_for

TABLES: list[type[Model]] = [
    get_user_model(),
    Organization,
    Membership,
    Dataset,
    TaskInstance,
    Experiment,
    ModelArm,
    Run,
    RunArm,
    Attempt,
]


def row_counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in TABLES}


DEEP = "[" * 5000 + "]" * 5000
NUL, SURROGATE, BIDI, BELL = "\x00", "\ud800", "\u202e", "\x07"
# Raw request bytes, percent-encoded: a NUL, a UTF-8-encoded lone surrogate, a byte that is no UTF-8.
RAW_BAD = {"NUL": "%00", "surrogate": "%ED%A0%80", "invalid UTF-8": "%FF"}


# --- web: the experiment form (create and edit) ----------------------------------------------


def experiment_fields(dataset, **changes: str) -> dict[str, str]:
    fields = {
        "name": "Shootout",
        "description": "Two mocks",
        "dataset": str(dataset.pk),
        "sample_size": "3",
        "sample_strategy": "first",
        "sample_seed": "5",
        "repetitions": "1",
        "prompt_template": DEFAULT_PROMPT,
        "context_mode": "oracle",
        "arms-TOTAL_FORMS": "1",
        "arms-INITIAL_FORMS": "0",
        "arms-MIN_NUM_FORMS": "0",
        "arms-MAX_NUM_FORMS": "1000",
        "arms-0-label": "oracle",
        "arms-0-provider": "mock",
        "arms-0-model_name": "mock-oracle",
        "arms-0-config": '{"mode": "oracle"}',
    }
    return fields | changes


def encoded(fields: dict[str, str], raw: dict[str, str] | None = None) -> str:
    """A urlencoded body; ``raw`` values go in as they are (already percent-encoded bytes)."""
    pairs = [f"{quote(k)}={quote(v)}" for k, v in fields.items() if k not in (raw or {})]
    return "&".join(pairs + [f"{quote(k)}={v}" for k, v in (raw or {}).items()])


FORM_FIELDS = ["name", "description", "prompt_template", "arms-0-label", "arms-0-model_name", "arms-0-config"]
RAW_FORM_CASES = [(field, kind) for field in FORM_FIELDS for kind in RAW_BAD]

FORM_ERROR_CASES = [
    ("name", "a" + BELL, "contains a control character (U+0007 at character 2)"),
    ("name", "evil" + BIDI + "txt.exe", "contains a bidirectional override (U+202E at character 5)"),
    ("name", "two\nlines", "contains a control character (U+000A at character 4)"),
    ("name", "x" * 201, "at most 200 characters"),
    ("description", "x" * (DESCRIPTION_MAX + 1), "at most 10,000 are allowed"),
    ("description", "colour \x1b[31m", "contains a control character (U+001B at character 8)"),
    ("prompt_template", "{{problem_statement}}" + "x" * PROMPT_TEMPLATE_MAX, "at most 100,000 are allowed"),
    ("prompt_template", "{{problem_statement}}\x0cend", "contains a control character (U+000C"),
    ("arms-0-label", BIDI + "oracle", "contains a bidirectional override (U+202E at character 1)"),
    ("arms-0-label", "tab\there", "contains a control character (U+0009"),
    ("arms-0-model_name", "gpt\x7f", "contains a control character (U+007F"),
    ("arms-0-config", DEEP, "nested more than 64 levels deep"),
    ("arms-0-config", '{"mode": "oracle", "quality": NaN}', "config.quality: nan is not a number JSON can hold"),
    ("arms-0-config", '{"mode": "oracle", "quality": 1e999}', "config.quality: inf is not a number JSON can hold"),
    ("arms-0-config", '{"mode": "oracle", "mode": "noisy"}', "the key &#x27;mode&#x27; appears twice"),
    ("arms-0-config", '{"mode": "\\u0000"}', "config.mode: contains a NUL character"),
    ("arms-0-config", '{"mode": "\\ud800"}', "config.mode: contains a lone surrogate"),
    ("arms-0-config", json.dumps({"mode": "oracle", "pad": "x" * ARM_CONFIG_MAX_BYTES}), "larger than 16,384 bytes"),
    ("arms-0-config", '{"mode": 1' + "0" * 5000 + "}", "a number with too many digits"),
]


@pytest.fixture(params=["create", "edit"])
def form_url(request, experiment):
    if request.param == "create":
        return reverse("experiments:create")
    return reverse("experiments:edit", args=[experiment.code])


@pytest.mark.parametrize(("field", "kind"), RAW_FORM_CASES)
def test_undecodable_form_fields_are_a_400(alice, dataset, form_url, field, kind):
    before = row_counts()
    body = encoded(experiment_fields(dataset), raw={field: "ok" + RAW_BAD[kind]})
    response = client_for(alice).post(form_url, body, content_type="application/x-www-form-urlencoded")

    assert response.status_code == 400
    assert row_counts() == before
    message = response.content.decode()
    assert f"form field {field!r}" in message
    assert ("NUL character" if kind == "NUL" else "not valid UTF-8") in message


@pytest.mark.parametrize(("field", "value", "message"), FORM_ERROR_CASES)
def test_bad_form_text_is_a_form_error(alice, dataset, form_url, field, value, message):
    before = row_counts()
    experiment_before = list(Experiment.objects.values())
    response = client_for(alice).post(form_url, experiment_fields(dataset, **{field: value}))

    assert response.status_code == 200
    assert row_counts() == before and list(Experiment.objects.values()) == experiment_before
    assert message in response.content.decode()


# --- web: the run start form and query parameters ---------------------------------------------


@pytest.mark.parametrize("kind", RAW_BAD)
def test_undecodable_run_start_fields_are_a_400(alice, experiment, kind):
    before = row_counts()
    response = client_for(alice).post(
        reverse("experiments:run_start", args=[experiment.code]),
        f"seed=1{RAW_BAD[kind]}",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assert row_counts() == before
    assert "form field 'seed'" in response.content.decode()


@pytest.mark.parametrize("seed", ["1e999", "nan", str(2**63), "--1", "1" * 5000])
def test_a_bad_seed_is_a_message_not_a_run(alice, experiment, seed):
    before = row_counts()
    client = client_for(alice)
    response = client.post(reverse("experiments:run_start", args=[experiment.code]), {"seed": seed})
    assert response.status_code == 302
    assert row_counts() == before
    assert "Cannot start a run: " in client.get(response.url).content.decode()


@pytest.fixture
def run(experiment, start):
    return start(experiment, inference_only=True)


def query_urls(org, run) -> dict[str, str]:
    return {
        "run page ?arm=": reverse("experiments:run", args=[run.code]) + "?arm=",
        "providers ?edit=": reverse("providers:settings", args=[org.code]) + "?edit=",
        "experiment list ?page=": reverse("experiments:list") + "?page=",
        "login ?next=": reverse("account_login") + "?next=",
    }


QUERY_CASES = [(page, kind) for page in ["run page ?arm=", "providers ?edit=", "experiment list ?page=", "login ?next="]
               for kind in RAW_BAD]  # fmt: skip


@pytest.mark.parametrize(("page", "kind"), QUERY_CASES)
def test_undecodable_query_parameters_are_a_400(alice, org, run, page, kind):
    before = row_counts()
    response = client_for(alice).get(query_urls(org, run)[page] + "x" + RAW_BAD[kind])

    assert response.status_code == 400
    assert row_counts() == before
    parameter = page.split("?")[1].rstrip("=")
    assert f"query parameter {parameter!r}" in response.content.decode()


@pytest.mark.parametrize("value", [quote(BIDI + "oracle"), quote("x" * 5000), quote(BELL)])
def test_odd_but_valid_arm_filters_show_the_page(alice, run, value):
    response = client_for(alice).get(reverse("experiments:run", args=[run.code]) + "?arm=" + value)
    assert response.status_code == 200


def test_an_undecodable_member_email_is_a_400(alice, org):
    before = row_counts()
    response = client_for(alice).post(
        reverse("orgs:members", args=[org.code]),
        "email=bob%00@example.com&role=member",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assert row_counts() == before
    assert "form field 'email'" in response.content.decode()


# --- commands ----------------------------------------------------------------------------------


SPEC: dict[str, Any] = {
    "name": "From a file",
    "dataset": "Demo: small Python bugs",
    "arms": [{"label": "a", "provider": "mock", "model_name": "m", "config": {"mode": "oracle"}}],
}


def spec_with(**changes) -> dict:
    return dict(SPEC, **changes)


def arm_with(**changes) -> dict:
    return spec_with(arms=[dict(SPEC["arms"][0], **changes)])


def as_yaml(spec: dict) -> bytes:
    return yaml.safe_dump(spec, allow_unicode=True).encode("utf-8", "surrogatepass")


def as_json(spec: dict) -> bytes:
    return json.dumps(spec).encode()


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n" for a, b in zip("abcdef", "bcdefg", strict=True)
)
SPEC_FILE_CASES = [
    # (file name, content, what the message must name)
    ("bad.yaml", b"name: caf\xe9\n", "bad.yaml:1: not valid UTF-8 (byte 0xe9 at byte 10 of the line)"),
    ("bad.json", b'{"name":\n "caf\xc3"}', "bad.json:2: not valid UTF-8"),
    ("bad.yaml", b"name: a\x00b\n", "bad.yaml:1: a NUL character at character 8 of the line"),
    ("bad.json", b'{"name": "a\x00b"}', "bad.json:1: a NUL character at character 12 of the line"),
    ("bad.json", as_json(spec_with(name="a\x00b")), "name: contains a NUL character at character 2"),
    ("bad.json", b'{"name": "\\ud800"}', "name: contains a lone surrogate"),
    ("bad.json", DEEP.encode(), "bad.json:1: invalid JSON: nested more than 64 levels deep"),
    ("bad.yaml", DEEP.encode(), "bad.yaml:1: invalid YAML: nested more than 64 levels deep"),
    ("bad.yaml", ("x:\n" + "".join("  " * i + "- \n" for i in range(200))).encode(), "nested more than 64 levels"),
    ("bad.yaml", b"name: a\nname: b\n", "bad.yaml:2: invalid YAML: the key 'name' appears twice in one mapping"),
    ("bad.json", b'{"name": "a", "name": "b"}', "bad.json:1: invalid JSON: the key 'name' appears twice"),
    ("bad.yaml", as_yaml(spec_with(**{"colour": 1})) + b"1: one\nnull: two\n", "key 1 is not a string"),
    ("bad.yaml", as_yaml(spec_with(colour="red", shade="blue")), "colour: unknown field"),
    ("bad.yaml", as_yaml(arm_with(config={"mode": "oracle"})) + b"seed: .nan\n", "seed: nan is not a number"),
    ("bad.yaml", as_yaml(spec_with()) + b"seed: .inf\n", "seed: inf is not a number JSON can hold"),
    ("bad.yaml", as_yaml(spec_with()) + b"seed: " + b"9" * 5000 + b"\n", "a number with too many digits"),
    ("bad.yaml", as_yaml(spec_with()) + b"description: 2024-01-01\n", "description: a date is not allowed here"),
    ("bad.yaml", ALIAS_BOMB.encode(), "more than 100,000 values"),
    ("bad.yaml", as_yaml(spec_with(name="evil" + BIDI + "cod.exe")), "name: contains a bidirectional override"),
    ("bad.yaml", as_yaml(spec_with(name="beep" + BELL)), "name: contains a control character (U+0007"),
    ("bad.yaml", as_yaml(spec_with(description="x" * 10_001)), "description: is 10,001 characters long"),
    ("bad.json", as_json(spec_with(description=["a"])), "description: must be text, not list"),
    (
        "bad.json",
        as_json(spec_with(prompt_template="{{problem_statement}}" + "x" * PROMPT_TEMPLATE_MAX)),
        "prompt_template: is 100,021 characters long",
    ),
    ("bad.json", as_json(arm_with(label="a" + BIDI)), "arms[0].label: contains a bidirectional override"),
    ("bad.json", as_json(arm_with(model_name="m\n")), "arms[0].model_name: contains a control character"),
    (
        "bad.json",
        as_json(arm_with(config={"mode": "oracle", "pad": "x" * ARM_CONFIG_MAX_BYTES})),
        "arms[0].config: 16,413 bytes as JSON; at most 16,384 are allowed",
    ),
    ("bad.json", b" " * SPEC_FILE_MAX_BYTES + b"{}", "bad.json: larger than 1,048,576 bytes"),
]


@pytest.mark.parametrize(("name", "content", "message"), SPEC_FILE_CASES)
def test_apply_experiment_refuses_bad_spec_files(tmp_path, dataset, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    before = row_counts()

    error = refused("apply_experiment", "--org", "acme", str(path))

    assert row_counts() == before
    assert message in error
    assert str(path) in error or name in error


@pytest.fixture
def task_line():
    row = {
        "instance_id": "demo__demo-1",
        "repo": "demo/demo",
        "base_commit": "0123456789abcdef0123456789abcdef01234567",
        "patch": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n",
        "problem_statement": "Fix it.",
        "version": "1.0",
    }

    def line(**changes):
        return json.dumps(row | changes, ensure_ascii=False).encode("utf-8", "surrogatepass")

    return line


JSONL_CASES = [
    # (changes to line 2, what the message must name)
    ({"problem_statement": "   \n\t "}, "tasks.jsonl:2: field problem_statement: blank (only whitespace)"),
    ({"problem_statement": "a\x00b"}, "tasks.jsonl:2: field problem_statement: contains a NUL character"),
    ({"hints_text": SURROGATE}, "tasks.jsonl:2: not valid UTF-8"),
    ({"created_at": float("nan")}, "tasks.jsonl:2: field created_at: nan is not a number JSON can hold"),
    ({"score": float("inf")}, "tasks.jsonl:2: field score: inf is not a number JSON can hold"),
    ({"repo": "o/" + "r" * 199}, "tasks.jsonl:2: field repo: longer than 200 characters"),
    ({"version": "1." + "0" * 49}, "tasks.jsonl:2: field version: is 51 characters long; at most 50"),
    ({"version": "1\n2"}, "tasks.jsonl:2: field version: contains a control character"),
    ({"instance_id": "a" + BIDI + "b"}, "tasks.jsonl:2: field instance_id: contains a bidirectional override"),
    ({"FAIL_TO_PASS": DEEP}, "tasks.jsonl:2: field FAIL_TO_PASS: not a JSON list of test ids (nested more than 64"),
    ({"FAIL_TO_PASS": '["t\\u0000"]'}, "tasks.jsonl:2: field FAIL_TO_PASS[0]: contains a NUL character"),
    ({"extra": json.loads('{"a": ' * 30 + "1" + "}" * 30)}, None),  # deep but within the limit: fine
]


@pytest.mark.parametrize(("changes", "message"), [c for c in JSONL_CASES if c[1]])
def test_import_tasks_refuses_bad_lines(org, tmp_path, task_line, changes, message):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(task_line(instance_id="demo__demo-0") + b"\n" + task_line(**changes) + b"\n")
    before = row_counts()

    error = refused("import_tasks", "--org", "acme", "--dataset", "d", "--format", "swebench", str(path))

    assert row_counts() == before
    assert message in error


RAW_LINE_CASES = [
    (b'{"instance_id": "caf\xe9"}', "tasks.jsonl:2: not valid UTF-8 (byte 0xe9 at byte 21 of the line)"),
    (b'{"instance_id": "a\x00"}', "tasks.jsonl:2: not valid JSON: Invalid control character"),
    (DEEP.encode(), "tasks.jsonl:2: not valid JSON: nested more than 64 levels deep"),
    (b'{"repo": "a/b", "repo": "c/d"}', "tasks.jsonl:2: not valid JSON: the key 'repo' appears twice"),
    (b'{"instance_id": 1' + b"0" * 5000 + b"}", "tasks.jsonl:2: not valid JSON: a number with too many digits"),
    (b'{"x": "' + b"y" * JSONL_LINE_MAX_BYTES + b'"}', "tasks.jsonl:2: longer than 8,388,608 bytes"),
]


@pytest.mark.parametrize(("line", "message"), RAW_LINE_CASES)
def test_import_tasks_refuses_raw_bad_lines(org, tmp_path, task_line, line, message):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(task_line() + b"\n" + line + b"\n" + task_line(instance_id="demo__demo-3") + b"\n")
    before = row_counts()

    error = refused("import_tasks", "--org", "acme", "--dataset", "d", "--format", "swebench", str(path))

    assert row_counts() == before
    assert message in error
    assert "tasks.jsonl:1" not in error and "tasks.jsonl:3" not in error


def test_a_deep_but_reasonable_extra_field_imports(org, tmp_path, task_line):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(task_line(extra=JSONL_CASES[-1][0]["extra"]) + b"\n")
    run_command("import_tasks", "--org", "acme", "--dataset", "d", "--format", "swebench", str(path))
    assert TaskInstance.objects.get().metadata["extra"]["a"]["a"]


@pytest.fixture
def tasks_file(tmp_path, task_line):
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(task_line() + b"\n")
    return str(path)


ARGUMENT_CASES = [
    # (command line, with {tasks} for a good task file, {run} for a run id; what the message must name)
    ("import_tasks --org acme --dataset d" + NUL + " --format swebench {tasks}", "--dataset contains a NUL"),
    ("import_tasks --org acme --dataset d" + SURROGATE + " --format swebench {tasks}", "--dataset is not valid UTF-8"),
    ("import_tasks --org acme --dataset d" + BIDI + " --format swebench {tasks}", "the dataset name: contains a bidi"),
    ("import_tasks --org acme --dataset " + "d" * 201 + " --format swebench {tasks}", "the dataset name: is 201"),
    ("import_tasks --org acme --dataset \t --format swebench {tasks}", "the dataset name must not be blank"),
    ("import_tasks --org ac" + NUL + "me --dataset d --format swebench {tasks}", "--org contains a NUL character"),
    ("import_tasks --org acme --dataset d --format swebench {tasks}" + SURROGATE, "file is not valid UTF-8 text"),
    (
        "import_tasks --org acme --dataset d --format swebench --repo-source o/" + "r" * 199 + "=/srv/r {tasks}",
        "owner/name at most 200 characters",
    ),
    ("ingest_prs --org acme --dataset d" + NUL + " --repo .", "--dataset contains a NUL character"),
    ("ingest_prs --org acme --dataset d" + BIDI + " --repo .", "the dataset name: contains a bidirectional"),
    ("ingest_prs --org acme --dataset d --repo . --repo-name o/" + "r" * 199, "owner/name at most 200"),
    ("ingest_prs --org acme --dataset d --repo . --branch=--all", "--branch '--all': a branch or commit cannot"),
    ("ingest_prs --org acme --dataset d --repo {git} --timeout nan", "--timeout must be a positive number"),
    ("ingest_prs --org acme --dataset d --repo {git} --timeout -1", "--timeout must be a positive number"),
    ("ingest_prs --org acme --dataset d --repo {git} --gold-runs 0", "--gold-runs and --max at least 1"),
    ("ingest_prs --org acme --dataset d --repo {git} --max-candidates 0", "--max-candidates must be at least 1"),
    ("ingest_prs --org acme --dataset d --repo {git} --since last-week", "--since 'last-week': not an ISO date"),
    ("ingest_prs --org acme --dataset d --repo /no" + NUL + "where", "--repo contains a NUL character"),
    ("create_org --slug new --name N" + NUL + " --owner-email n@example.com", "--name contains a NUL character"),
    ("create_org --slug new --name N" + SURROGATE + " --owner-email n@example.com", "--name is not valid UTF-8"),
    ("create_org --slug new --name N" + BIDI + " --owner-email n@example.com", "name: contains a bidirectional"),
    ("create_org --slug new --name N" + BELL + " --owner-email n@example.com", "name: contains a control character"),
    ("create_org --slug new --name N --owner-email n\n@example.com", "owner email: contains a control character"),
    ("create_org --slug new --name N --owner-email n@example.com --password p" + SURROGATE, "--password is not"),
    ("requeue_stale --stale-after -5", "--stale-after must be a number of seconds of at least 1, not -5"),
    ("requeue_stale --stale-after 0", "--stale-after must be a number of seconds of at least 1, not 0"),
    ("requeue_stale --every 0", "--every must be a number of seconds of at least 1, not 0"),
    ("requeue_stale --every -1", "--every must be a number of seconds of at least 1, not -1"),
    ("start_run --org acme --experiment Mock" + NUL + "duel", "--experiment contains a NUL character"),
    ("start_run --org acme --experiment Mock" + SURROGATE, "--experiment is not valid UTF-8 text"),
    ("start_run --org acme" + SURROGATE + " --experiment x", "--org is not valid UTF-8 text"),
    ("export_run {run}" + NUL, "run_id contains a NUL character"),
    ("export_run " + SURROGATE, "run_id is not valid UTF-8 text"),
    ("run_control pause {run}" + NUL, "run_id contains a NUL character"),
    ("run_control pause x" + SURROGATE, "run_id is not valid UTF-8 text"),
    ("recompute_costs --run x" + NUL, "--run contains a NUL character"),
    ("backfill_evaluations --profile judge" + NUL, "--profile contains a NUL character"),
    ("backfill_evaluations --profile judge:1 --run x" + SURROGATE, "--run is not valid UTF-8 text"),
    ("evaluator_agreement --profile a" + NUL + " --profile b", "--profile contains a NUL character"),
    ("apply_experiment --org acme x" + NUL + ".yaml", "file contains a NUL character"),
]


@pytest.fixture
def git_repo(tmp_path):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    identity = ["-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(["git", "-C", str(repo), *identity, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    return str(repo)


@pytest.mark.parametrize(("command", "message"), ARGUMENT_CASES)
def test_commands_refuse_bad_arguments(experiment, run, tasks_file, git_repo, command, message):
    before = row_counts()
    args = [a.format(tasks=tasks_file, run=run.code, git=git_repo) for a in command.split(" ")]

    error = refused(*args)

    assert row_counts() == before
    assert message in error
