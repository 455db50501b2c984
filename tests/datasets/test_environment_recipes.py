"""One check for a recipe however it comes in (datasets/recipes.py), and its all-or-nothing write."""

import json

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.db import DataError

from datasets.models import EnvironmentRecipe
from datasets.recipes import check_recipe, do_set_recipe, do_set_recipes
from experiments.actions import SpecError, check_experiment_spec, do_apply_experiment
from experiments.models import Experiment
from tests.cli import refused, run_command
from tests.conftest import api_client, make_api_key
from tests.datasets.conftest import REPO

GOOD = {"repo": REPO, "version": "1.0", "python": "3.11", "project": "", "packages": ["pytest==8.3.4"]}


def problems(dataset, raw, where=""):
    with pytest.raises(ValidationError) as caught:
        check_recipe(dataset, raw, where)
    return caught.value.messages


def test_a_good_recipe_is_accepted_with_its_defaults(repo_dataset):
    checked = check_recipe(repo_dataset, {"repo": REPO, "python": "3.11"})
    assert checked.version == "" and checked.project == "-e ." and checked.packages == [] and checked.test_env == {}
    checked = check_recipe(
        repo_dataset,
        {
            **GOOD,
            "requirements": ["requirements/test.txt"],
            "project": "-e .[test]",
            "test_command": ["{python}", "-m", "pytest"],
            "test_env": {"LANG": "C.UTF-8"},
        },
    )
    assert checked.requirements == ["requirements/test.txt"] and checked.test_env == {"LANG": "C.UTF-8"}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"python": "3"}, "python"),
        ({"python": "python3.11"}, "python"),
        ({"python": 3.11}, "python"),
        ({"packages": "pytest"}, "packages"),
        ({"packages": ["pytest", ""]}, "packages"),
        ({"packages": ["--index-url=https://evil.example/simple"]}, "packages"),
        ({"requirements": ["/etc/passwd"]}, "requirements"),
        ({"requirements": ["../other/requirements.txt"]}, "requirements"),
        ({"requirements": ["docs/../../x.txt"]}, "requirements"),
        ({"project": "-e /srv/other"}, "project"),
        ({"project": "-e .; rm -rf /"}, "project"),
        ({"project": "django"}, "project"),
        ({"test_command": "pytest -q"}, "test_command"),
        ({"test_command": ["pytest", 3]}, "test_command"),
        ({"test_env": {"1BAD": "x"}}, "test_env"),
        ({"test_env": {"PYTHONPATH": "/tmp"}}, "test_env"),
        ({"test_env": {"LANG": 1}}, "test_env"),
        ({"system_packages": ["libxml2\n"]}, "system_packages"),
        ({"system_packages": ["libxml2 && curl evil"]}, "system_packages"),
        ({"repo": "someone/else"}, "repo"),
        ({"version": "9.9"}, "version"),
        ({"colour": "blue"}, "colour"),
        ({"checkout_build": ["python", "setup.py"]}, "checkout_build"),
    ],
)
def test_each_bad_field_is_named(repo_dataset, change, field):
    found = problems(repo_dataset, {**GOOD, **change})
    assert len(found) == 1 and found[0].startswith(f"{field}"), found


def test_every_bad_field_is_named_at_once_with_where_it_is(repo_dataset):
    found = problems(repo_dataset, {"repo": REPO, "python": "3", "project": "x", "test_env": []}, "environments[1]")
    assert [message.split(":")[0] for message in found] == [
        "environments[1].python",
        "environments[1].project",
        "environments[1].test_env",
    ]


def test_the_repository_must_be_one_the_tasks_name(repo_dataset, dataset):
    assert "they name: local/tiny" in problems(repo_dataset, {**GOOD, "repo": "other/repo"})[0]
    assert "the dataset has no repository tasks" in problems(dataset, GOOD)[0]  # the demo's are self-contained


def test_what_the_database_cannot_hold_is_refused_before_the_fields(repo_dataset):
    assert "NUL" in problems(repo_dataset, {**GOOD, "source": "a\x00b"})[0]
    assert problems(repo_dataset, ["not", "a", "mapping"]) == ["the recipe: must be a mapping of fields"]


def test_setting_creates_then_updates_and_forgets_the_tasks_environment_keys(repo_dataset):
    recipe, created = do_set_recipe(repo_dataset, check_recipe(repo_dataset, GOOD))
    assert created and recipe.packages == ["pytest==8.3.4"] and recipe.version == "1.0"
    repo_dataset.tasks.filter(repo=REPO).update(environment_key="k" * 32)
    same, created = do_set_recipe(repo_dataset, check_recipe(repo_dataset, GOOD))
    assert not created and same.pk == recipe.pk
    assert repo_dataset.tasks.filter(environment_key="k" * 32).count() == 3  # unchanged: keys kept
    changed, created = do_set_recipe(repo_dataset, check_recipe(repo_dataset, {**GOOD, "packages": []}))
    assert not created and changed.pk == recipe.pk and changed.packages == []
    assert EnvironmentRecipe.objects.count() == 1
    assert not repo_dataset.tasks.exclude(environment_key="").exists()


def test_several_recipes_are_set_all_or_nothing(repo_dataset):
    first = check_recipe(repo_dataset, GOOD)
    clash = check_recipe(repo_dataset, {**GOOD, "version": "2.0"})
    broken = clash.__class__(**{**clash.fields(), "python": "x" * 50})  # too long for its column: the write fails
    with pytest.raises(DataError):
        do_set_recipes(repo_dataset, [first, broken])
    assert not EnvironmentRecipe.objects.exists()
    assert len(do_set_recipes(repo_dataset, [first, clash])) == 2


# --- an experiment spec's environments: the same check, applied with the experiment ---------


def spec_with(environments) -> dict:
    return {
        "name": "Tiny duel",
        "dataset": "tiny",
        "arms": [{"label": "a", "provider": "mock", "model_name": "m-a", "config": {"mode": "oracle"}}],
        "environments": environments,
    }


def test_a_spec_sets_its_datasets_recipes_with_the_experiment(tmp_path, org, repo_dataset):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with([GOOD, {"repo": REPO, "version": "2.0", "python": "3.11"}])))
    assert "Created experiment 'Tiny duel'" in run_command("apply_experiment", "--org", org.slug, str(path))
    recipes = {r.version: r for r in EnvironmentRecipe.objects.filter(dataset=repo_dataset)}
    assert set(recipes) == {"1.0", "2.0"} and recipes["1.0"].packages == ["pytest==8.3.4"]
    assert recipes["2.0"].project == "-e ."
    spec = check_experiment_spec(org, {k: v for k, v in spec_with([]).items() if k != "environments"})
    assert spec.environments == []  # left out: the recipes stay as they are
    do_apply_experiment(org, spec)
    assert EnvironmentRecipe.objects.count() == 2


def test_a_spec_names_a_checkout_build_for_a_project_compiling_extensions(tmp_path, org, repo_dataset):
    build = "python setup.py build_ext --inplace"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with([{**GOOD, "checkout_build": f"  {build} "}])))
    run_command("apply_experiment", "--org", org.slug, str(path))
    recipe = EnvironmentRecipe.objects.get(dataset=repo_dataset)
    assert recipe.checkout_build == build and recipe.recipe().checkout_build == build


def test_a_bad_recipe_in_a_spec_is_named_and_changes_nothing(tmp_path, org, repo_dataset):
    bad = spec_with([GOOD, {**GOOD, "python": "3"}, {**GOOD, "requirements": ["/etc/x"]}, GOOD])
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(bad))
    message = refused("apply_experiment", "--org", org.slug, str(path))
    assert "environments[1].python: required" in message
    assert "environments[2].requirements: '/etc/x' must be a path relative" in message
    assert "environments[3].version: a second recipe for local/tiny 1.0" in message
    with pytest.raises(SpecError) as caught:
        check_experiment_spec(org, spec_with({"repo": REPO}))
    assert caught.value.field == "environments" and not Experiment.objects.exists()
    assert not EnvironmentRecipe.objects.exists()


def test_through_the_api_a_spec_with_recipes_needs_a_manager(org, bob, repo_dataset):
    from orgs.api_keys import do_create_api_key

    as_member = api_client(do_create_api_key(org, "ci", ["read", "run"], None, user=bob)[1])
    body = json.dumps(spec_with([GOOD]))
    assert as_member.post("/api/experiments", body, content_type="application/json").status_code == 403
    assert not EnvironmentRecipe.objects.exists() and not Experiment.objects.exists()
    as_admin = api_client(make_api_key(org, ("read", "run", "admin")))
    assert as_admin.post("/api/experiments", body, content_type="application/json").status_code == 201
    assert EnvironmentRecipe.objects.get().packages == ["pytest==8.3.4"]


def test_staff_set_recipes_in_the_admin_through_the_same_check_and_read_build_logs(alice, repo_dataset):
    from django.urls import reverse

    from evaluation.models import Environment
    from tests.conftest import client_for

    alice.is_staff = alice.is_superuser = True
    alice.save()
    client = client_for(alice)
    add = reverse("admin:datasets_environmentrecipe_add")
    fields = {
        "dataset": repo_dataset.pk,
        "repo": REPO,
        "version": "1.0",
        "python": "3",
        "packages": '["-e/srv"]',
        "requirements": "[]",
        "project": "",
        "pre_install": "[]",
        "system_packages": "[]",
        "test_command": "[]",
        "test_env": "{}",
        "source": "",
    }
    response = client.post(add, fields)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"python", "packages"} and not EnvironmentRecipe.objects.exists()
    assert client.post(add, {**fields, "python": "3.11", "packages": '["attrs"]'}).status_code == 302
    assert EnvironmentRecipe.objects.get().packages == ["attrs"]
    record = Environment.objects.create(key="a" * 32, log="$ uv venv --python 3.11")
    page = client.get(reverse("admin:evaluation_environment_change", args=[record.pk]))
    assert page.status_code == 200 and "$ uv venv --python 3.11" in page.content.decode()
    assert client.get(reverse("admin:evaluation_environment_changelist")).status_code == 200
    assert client.get(reverse("admin:evaluation_environment_add")).status_code == 403


def test_the_command_sets_a_checkout_build(org, repo_dataset):
    run_command(
        "environments", "set", "--org", org.slug, "--dataset", "tiny", "--repo", REPO, "--python", "3.11",
        "--checkout-build", "python setup.py build_ext --inplace",
    )  # fmt: skip
    assert EnvironmentRecipe.objects.get().checkout_build == "python setup.py build_ext --inplace"
