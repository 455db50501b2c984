"""`import_tasks --format swebench`: the real SWE-bench Lite sample, and bad files refused whole."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError

from datasets.models import Dataset, TaskInstance
from evaluation.patches import patch_paths
from experiments.actions import ArmSpec, ExperimentSpec, check_start_run, do_save_experiment
from tests.cli import run_command
from tests.samples import SWEBENCH_LITE, SWEBENCH_LITE_LINES, edited, write_lines


def test_the_swebench_lite_sample_imports(org):
    out = run_command(
        "import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench",
        "--repo-source", "sqlfluff/sqlfluff=/srv/repos/sqlfluff", str(SWEBENCH_LITE),
    )  # fmt: skip
    assert "Created dataset 'lite': 23 task(s) from 6 repositories" in out
    assert "No source configured yet for: marshmallow-code/marshmallow" in out and "sqlfluff/sqlfluff," not in out
    dataset = Dataset.objects.get(org=org, name="lite")
    assert dataset.repo_sources == {"sqlfluff/sqlfluff": "/srv/repos/sqlfluff"}
    task = dataset.tasks.get(external_id="sqlfluff__sqlfluff-1625")
    first = json.loads(SWEBENCH_LITE_LINES[0])
    assert task.repo == "sqlfluff/sqlfluff" and task.base_commit == first["base_commit"]
    assert task.gold_patch == first["patch"] and task.test_patch == first["test_patch"]
    assert task.fail_to_pass == json.loads(first["FAIL_TO_PASS"])  # shipped as a JSON string
    assert task.pass_to_pass == json.loads(first["PASS_TO_PASS"]) and task.version == "0.6"
    assert task.title.startswith("TSQL - L031") and task.position == 0
    # Fields PRBench has no column for are kept, not dropped.
    assert {"created_at", "environment_setup_commit", "image", "eval_script"} <= task.metadata.keys()
    assert list(dataset.tasks.values_list("position", flat=True)) == list(range(23))


def test_a_bad_line_refuses_the_whole_file_naming_file_line_and_field(org, tmp_path):
    lines = [
        SWEBENCH_LITE_LINES[0],
        edited(2, base_commit="not-a-commit"),
        edited(3, patch=None),
        SWEBENCH_LITE_LINES[3],
    ]
    path = write_lines(tmp_path, lines)
    with pytest.raises(CommandError) as caught:
        run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", path)
    message = str(caught.value)
    assert "tasks.jsonl:2: field base_commit: 'not-a-commit' is not a hex commit id" in message
    assert "tasks.jsonl:3: field patch: missing or empty" in message
    assert "tasks.jsonl:1" not in message and "tasks.jsonl:4" not in message
    assert not Dataset.objects.filter(org=org, name="lite").exists() and not TaskInstance.objects.exists()


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "tasks.jsonl:1: not valid JSON"),
        ("[1, 2]", "tasks.jsonl:1: each line must be a JSON object"),
        (edited(1, FAIL_TO_PASS="[not json"), "tasks.jsonl:1: field FAIL_TO_PASS: not a JSON list of test ids"),
        (edited(1, PASS_TO_PASS=[1, 2]), "tasks.jsonl:1: field PASS_TO_PASS: must be a list of test ids"),
        (edited(1, repo="sqlfluff"), "tasks.jsonl:1: field repo: 'sqlfluff' is not owner/name"),
        (edited(1, patch="this is not a diff"), "tasks.jsonl:1: field patch: malformed patch"),
        (edited(1, problem_statement=42), "tasks.jsonl:1: field problem_statement: must be a string, not int"),
        (edited(1, version=[1]), "tasks.jsonl:1: field version: must be a string or a number"),
    ],
)
def test_each_kind_of_bad_line_is_named(org, tmp_path, line, problem):
    with pytest.raises(CommandError) as caught:
        run_command(
            "import_tasks", "--org", org.slug, "--dataset", "d", "--format", "swebench", write_lines(tmp_path, [line])
        )
    assert problem in str(caught.value)
    assert not Dataset.objects.exists()


def test_lists_may_be_given_as_lists_and_duplicates_are_refused(org, tmp_path):
    as_lists = edited(1, FAIL_TO_PASS=["t::a"], PASS_TO_PASS=[], version=0.6)
    run_command(
        "import_tasks", "--org", org.slug, "--dataset", "d", "--format", "swebench", write_lines(tmp_path, [as_lists])
    )
    task = TaskInstance.objects.get()
    assert task.fail_to_pass == ["t::a"] and task.pass_to_pass == [] and task.version == "0.6"

    with pytest.raises(CommandError) as caught:  # the same instance twice in one file
        run_command(
            "import_tasks", "--org", org.slug, "--dataset", "e", "--format", "swebench",
            write_lines(tmp_path, [SWEBENCH_LITE_LINES[1], SWEBENCH_LITE_LINES[2], SWEBENCH_LITE_LINES[1]]),
        )  # fmt: skip
    assert "tasks.jsonl:3: field instance_id:" in str(caught.value)
    assert "already appears on line 1" in str(caught.value)
    with pytest.raises(CommandError) as caught:  # a task the dataset already holds
        run_command(
            "import_tasks", "--org", org.slug, "--dataset", "d", "--format", "swebench",
            write_lines(tmp_path, [SWEBENCH_LITE_LINES[4], SWEBENCH_LITE_LINES[0]]),
        )  # fmt: skip
    assert "tasks.jsonl:2: field instance_id" in str(caught.value) and "is already in dataset 'd'" in str(caught.value)
    assert TaskInstance.objects.count() == 1  # neither file changed anything


def test_a_bad_repository_source_is_refused(org):
    with pytest.raises(CommandError) as caught:
        run_command(
            "import_tasks", "--org", org.slug, "--dataset", "d", "--format", "swebench",
            "--repo-source", "sqlfluff=/srv/x", str(SWEBENCH_LITE),
        )  # fmt: skip
    assert "repository source 'sqlfluff=/srv/x': expected owner/name=PATH_OR_URL" in str(caught.value)
    assert not Dataset.objects.exists()


def test_test_and_build_commands_are_kept_on_the_dataset(org):
    run_command(
        "import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench",
        "--test-command", "{python} -m pytest -x --junitxml={junit}", "--build-command", "make 'build all'",
        str(SWEBENCH_LITE),
    )  # fmt: skip
    dataset = Dataset.objects.get(name="lite")
    assert dataset.test_command == ["{python}", "-m", "pytest", "-x", "--junitxml={junit}"]
    assert dataset.build_command == ["make", "build all"]


def test_an_unparsable_test_command_imports_nothing(org):
    with pytest.raises(CommandError, match="--test-command: No closing quotation"):
        run_command(
            "import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench",
            "--test-command", "pytest 'oops", str(SWEBENCH_LITE),
        )  # fmt: skip
    assert not Dataset.objects.exists()


def test_a_run_on_repository_tasks_needs_their_sources_and_a_test_command(org):
    run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", str(SWEBENCH_LITE))
    dataset = Dataset.objects.get(name="lite")
    spec = ExperimentSpec(name="lite", dataset=dataset, arms=[ArmSpec("o", "mock", "m", {"mode": "oracle"})])
    experiment = do_save_experiment(org, spec)
    with pytest.raises(ValidationError) as caught:
        check_start_run(experiment)
    messages = "\n".join(caught.value.messages)
    assert "repository sqlfluff/sqlfluff has no source to clone it from" in messages
    # Each task runs the test files its instance names, as SWE-bench's harness runs them.
    assert "no test command to validate them with" not in messages
    sqlfluff = dataset.tasks.get(external_id="sqlfluff__sqlfluff-1625")
    assert sqlfluff.test_command == ["{python}", "-m", "pytest", "-rA", "test/cli/commands_test.py"]
    assert dataset.environment_recipes.filter(repo="sqlfluff/sqlfluff", version="0.6").exists()
    dataset.tasks.filter(pk=sqlfluff.pk).update(test_command=[])  # a task the harness has no command for
    with pytest.raises(ValidationError, match="no test command to validate them with"):
        check_start_run(experiment)
    # The default prompt shows repository files, so even inference needs the sources...
    with pytest.raises(ValidationError):
        check_start_run(experiment, inference_only=True)
    # ...and a prompt that shows none does not.
    experiment.prompt_template = "Fix this:\n{{problem_statement}}"
    experiment.save()
    check_start_run(experiment, inference_only=True)
    dataset.repo_sources = {repo: f"/srv/repos/{repo}" for repo in dataset.tasks.values_list("repo", flat=True)}
    dataset.test_command = ["{python}", "-m", "pytest"]
    dataset.save()
    check_start_run(experiment)


def test_the_dataset_page_shows_each_task_repository(org, alice):
    from django.urls import reverse

    from tests.conftest import client_for

    run_command(
        "import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench",
        "--repo-source", "sqlfluff/sqlfluff=/srv/repos/sqlfluff", str(SWEBENCH_LITE),
    )  # fmt: skip
    dataset = Dataset.objects.get(name="lite")
    content = client_for(alice).get(reverse("datasets:detail", args=[dataset.code])).content.decode()
    # Where the clone lies on the server is the operator's business, not the customer's.
    assert "<code>sqlfluff/sqlfluff</code> from a copy on the server" in content
    assert "/srv/repos" not in content
    assert "<code>14e1a23a31</code>" in content and "sqlfluff__sqlfluff-1625" in content


def test_an_imported_dataset_judges_by_the_tasks_own_tests_and_flags_a_gold_patch_it_would_refuse(org, tmp_path):
    # The first task's gold patch rewritten to touch a file beside its own test file, as a fix
    # that could never be validated would.
    first = json.loads(SWEBENCH_LITE_LINES[0])
    test_file = next(iter(patch_paths(first["test_patch"])))
    beside = test_file.rsplit("/", 1)[0] + "/helpers.py"
    refused_patch = f"--- a/{beside}\n+++ b/{beside}\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    path = write_lines(tmp_path, [edited(1, patch=refused_patch), *SWEBENCH_LITE_LINES[1:]])

    out = run_command("import_tasks", "--org", org.slug, "--dataset", "lite", "--format", "swebench", path)

    dataset = Dataset.objects.get(org=org, name="lite")
    assert dataset.harness_rule == "task"
    flagged = dataset.tasks.get(external_id=first["instance_id"])
    assert flagged.quarantined and beside in flagged.quarantine_reason
    assert dataset.tasks.filter(quarantined=True).count() == 1  # the real gold patches all pass the rule
    assert "Warning: 1 task(s) imported quarantined" in out and f"{first['instance_id']}: " in out
