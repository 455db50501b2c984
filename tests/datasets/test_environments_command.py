"""manage.py environments list|build|prune|set, with real (bare, offline) builds."""

from datasets.models import EnvironmentRecipe
from evaluation.environments import available_pythons, cached
from evaluation.models import Environment, EnvironmentStatus
from tests.cli import refused, run_command
from tests.conftest import work_queue
from tests.datasets.conftest import REPO


def set_bare_recipe(org, version: str = "", python: str = "3.11") -> str:
    return run_command(
        "environments",
        "set",
        "--org",
        org.slug,
        "--dataset",
        "tiny",
        "--repo",
        REPO,
        "--version",
        version,
        "--python",
        python,
        "--project",
        "",
    )


def test_set_creates_then_updates_the_recipe(org, repo_dataset):
    output = run_command(
        "environments",
        "set",
        "--org",
        org.slug,
        "--dataset",
        "tiny",
        "--repo",
        REPO,
        "--version",
        "1.0",
        "--python",
        "3.11",
        "--package",
        "pytest==8.3.4",
        "--package",
        "attrs",
        "--requirements",
        "requirements.txt",
        "--project",
        "-e .[test]",
        "--test-command",
        '["{python}", "-m", "pytest", "-q"]',
        "--test-env",
        "LANG=C.UTF-8",
    )
    assert output.startswith("Created the recipe local/tiny 1.0: Python 3.11, installs pytest==8.3.4 attrs")
    recipe = EnvironmentRecipe.objects.get(dataset=repo_dataset)
    assert recipe.packages == ["pytest==8.3.4", "attrs"] and recipe.requirements == ["requirements.txt"]
    assert recipe.test_command == ["{python}", "-m", "pytest", "-q"] and recipe.test_env == {"LANG": "C.UTF-8"}
    assert recipe.project == "-e .[test]" and recipe.source == "manage.py environments set"
    output = set_bare_recipe(org, "1.0")
    assert output.startswith("Updated the recipe local/tiny 1.0: Python 3.11, installs nothing")
    recipe.refresh_from_db()
    assert recipe.packages == [] and recipe.project == "" and recipe.test_command == []  # the whole recipe


def test_set_refuses_a_bad_field_by_its_option_and_changes_nothing(org, repo_dataset):
    base = ["environments", "set", "--org", org.slug, "--dataset", "tiny", "--repo", REPO]
    assert refused(*base, "--python", "3").startswith("--python: required")
    assert refused(*base, "--python", "3.11", "--package=-e/srv").startswith("--package: '-e/srv' starts with '-'")
    assert refused(*base, "--python", "3.11", "--requirements", "../x").startswith("--requirements: '../x'")
    assert "--test-command: not a JSON list" in refused(*base, "--python", "3.11", "--test-command", "pytest -q")
    assert refused(*base, "--python", "3.11", "--test-command", '"pytest"').startswith("--test-command: must be a list")
    assert refused(*base, "--python", "3.11", "--test-env", "LANG").startswith("--test-env: 'LANG' is not NAME=VALUE")
    assert "--repo: the dataset's tasks name no repository 'x/y'" in refused(*base[:-1], "x/y", "--python", "3.11")
    assert "has no dataset 'nope'" in refused(
        "environments", "set", "--org", org.slug, "--dataset", "nope", "--repo", REPO, "--python", "3.11"
    )
    assert not EnvironmentRecipe.objects.exists()


def test_build_builds_each_environment_once_then_reuses_it(org, repo_dataset, environment_cache):
    without = run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")
    assert without == "No task of 'tiny' has an environment recipe: they run with the worker's Python\n"
    set_bare_recipe(org)  # one recipe for every version: one environment for the three tasks
    output = run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")
    key = repo_dataset.tasks.exclude(repo="").values_list("environment_key", flat=True).distinct().get()
    assert f"{key[:12]} built in " in output and "(local/tiny every version, Python 3.11)" in output
    assert "1 environment(s) for 'tiny': 1 ready, 0 failed" in output
    record = Environment.objects.get(key=key)
    assert record.status == EnvironmentStatus.READY and record.size_bytes > 0 and record.build_seconds > 0
    assert record.steps_done == record.steps_total == 1 and "$ uv venv --python 3.11" in record.log
    assert [env.key for env in cached()] == [key]
    assert f"{key[:12]} reused in 0.0s" in run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")


def test_build_says_what_failed_and_quarantines_its_tasks(org, repo_dataset, environment_cache):
    missing = next(f"3.{minor}" for minor in range(30, 40) if f"3.{minor}" not in available_pythons())
    run_command(
        "environments",
        "set",
        "--org",
        org.slug,
        "--dataset",
        "tiny",
        "--repo",
        REPO,
        "--version",
        "2.0",
        "--python",
        "3.11",
        "--project",
        "",
        "--pre-install",
        "echo no such luck; exit 3",
    )
    set_bare_recipe(org, "1.0", python=missing)
    message = refused("environments", "build", "--org", org.slug, "--dataset", "tiny")
    assert message == "2 environment(s) could not be had: their tasks are quarantined"
    failed = Environment.objects.get(status=EnvironmentStatus.FAILED)
    assert (
        "no such luck" in failed.failure and "the build step `echo no such luck; exit 3` exited with 3" in failed.step
    )
    task = repo_dataset.tasks.get(version="2.0")
    assert task.quarantined and "no such luck" in task.quarantine_reason
    assert not repo_dataset.tasks.get(external_id="tiny-0").quarantined  # this worker's lack, not the recipe's fault
    assert cached() == []


def test_build_with_queue_builds_on_a_worker(org, repo_dataset, environment_cache, django_capture_on_commit_callbacks):
    set_bare_recipe(org)
    with django_capture_on_commit_callbacks(execute=True):
        output = run_command("environments", "build", "--org", org.slug, "--dataset", "tiny", "--queue")
    key = repo_dataset.tasks.exclude(environment_key="").values_list("environment_key", flat=True).first()
    assert output.startswith(f"Queued 1 build(s) of 'tiny': {key[:12]}")
    assert Environment.objects.get(key=key).status == EnvironmentStatus.QUEUED
    work_queue()
    assert Environment.objects.get(key=key).status == EnvironmentStatus.READY


def test_list_shows_recipes_environments_disk_and_interpreters(org, repo_dataset, environment_cache):
    set_bare_recipe(org)
    run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")
    key = Environment.objects.get().key
    output = run_command("environments", "list", "--org", org.slug, "--dataset", "tiny")
    assert "acme / tiny\n  recipe local/tiny (every version): Python 3.11, installs nothing" in output
    assert f"  environment {key[:12]}  ready, built in " in output and "3 task(s)  here: on disk, " in output
    assert "On this worker's disk: 1 environment(s)" in output and f"  {key[:12]}  " in output
    assert "Interpreters here: " in output and "3.11 (" in output
    assert "--dataset needs --org" in refused("environments", "list", "--dataset", "tiny")


def test_prune_removes_what_is_asked_and_says_what_it_freed(org, repo_dataset, environment_cache):
    set_bare_recipe(org)
    run_command("environments", "build", "--org", org.slug, "--dataset", "tiny")
    key = Environment.objects.get().key
    assert "Freed 0\xa0bytes (0 removed); 1 left" in run_command("environments", "prune")  # under the default limit
    output = run_command("environments", "prune", "--max-bytes", "0")
    assert output.startswith(f"removed {key[:12]}") and "(1 removed); 0 left" in output
    assert cached() == []
