"""One check for a recipe however it comes in (datasets/recipes.py), and its all-or-nothing write."""

import pytest
from django.core.exceptions import ValidationError
from django.db import DataError

from datasets.models import EnvironmentRecipe
from datasets.recipes import check_recipe, do_set_recipe, do_set_recipes
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
        ({"repo": "someone/else"}, "repo"),
        ({"version": "9.9"}, "version"),
        ({"colour": "blue"}, "colour"),
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
