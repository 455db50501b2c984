"""Setting a repository's environment recipe (``EnvironmentRecipe``): one check for every way
a recipe comes in (the dataset page's form, ``manage.py environments set``, an experiment
spec's ``environments:``, the admin), and one write.

``check_recipe`` names each bad field, as "python: ..." (or "environments[0].python: ..."
with ``where``), and refuses what a build would read as something else: a package that
starts with "-" (an option to uv, such as another index), a requirements file outside the
checkout, a project install that is not the checkout itself. ``do_set_recipe`` assumes a
checked recipe and makes the dataset's recipe for that repository and version exactly it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import PurePosixPath
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from datasets.models import Dataset, EnvironmentRecipe
from evaluation.environments import ALTERNATIVES, PYTHON_VERSION
from prbench.inputs import document_problems, text_problem

RECIPE_INPUT_FIELDS = (
    "repo", "version", "python", "packages", "requirements", "project", "pre_install", "system_packages",
    "test_command", "test_env", "exclude_newer", "checkout_build", "source",
)  # fmt: skip
LIST_FIELDS = ("packages", "requirements", "pre_install", "system_packages", "test_command")
DEFAULT_PROJECT = "-e ."
# pip's words for installing the checkout: "-e .", "-e .[test]", ".[test,docs]", "." ("" for not at all).
PROJECT = re.compile(r"^(-e )?\.(\[[A-Za-z0-9][A-Za-z0-9_.-]*(,[A-Za-z0-9][A-Za-z0-9_.-]*)*\])?$")
# A Debian package or a program the worker must have (evaluation.environments.missing_need).
SYSTEM_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*$")
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
# Set by the environment itself for every test run (evaluation/environments.py Runtime): a
# recipe's value would be overwritten, so it is refused rather than silently ignored.
RESERVED_VARIABLES = ("PATH", "PYTHONPATH", "VIRTUAL_ENV")
ITEMS_MAX = 200
ITEM_MAX = {"pre_install": 10_000, "test_command": 10_000}
ITEM_DEFAULT_MAX = 500
VALUE_MAX = 10_000
VERSION_MAX = 50  # EnvironmentRecipe.version's column
SOURCE_MAX = 300  # EnvironmentRecipe.source's column
PROJECT_MAX = 200  # EnvironmentRecipe.project's column
CHECKOUT_BUILD_MAX = 10_000


@dataclass(frozen=True)
class CheckedRecipe:
    """A recipe ``check_recipe`` accepted, for ``do_set_recipe``."""

    repo: str
    version: str
    python: str
    packages: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    project: str = DEFAULT_PROJECT
    pre_install: list[str] = field(default_factory=list)
    system_packages: list[str] = field(default_factory=list)
    test_command: list[str] = field(default_factory=list)
    test_env: dict[str, str] = field(default_factory=dict)
    exclude_newer: str = ""
    checkout_build: str = ""
    source: str = ""

    def fields(self) -> dict[str, Any]:
        return asdict(self)


def recipe_fields(recipe: EnvironmentRecipe) -> dict[str, Any]:
    """A stored recipe as the fields ``check_recipe`` reads (to edit it, or show it)."""
    return {name: getattr(recipe, name) for name in RECIPE_INPUT_FIELDS}


def dataset_repositories(dataset: Dataset) -> dict[str, list[str]]:
    """The repositories the dataset's tasks name, each with the versions they name."""
    found: dict[str, set[str]] = {}
    for repo, version in dataset.tasks.exclude(repo="").values_list("repo", "version").distinct():
        found.setdefault(repo, set()).add(version)
    return {repo: sorted(versions) for repo, versions in sorted(found.items())}


def check_recipe(dataset: Dataset, raw: Any, where: str = "") -> CheckedRecipe:
    """``raw`` (a mapping of the fields above) as a recipe for one of the dataset's
    repositories, or a ValidationError whose messages name each bad field (``where`` before
    it: ``environments[0]``)."""
    prefix = f"{where}." if where else ""
    if not isinstance(raw, dict):
        raise ValidationError([f"{where or 'the recipe'}: must be a mapping of fields"])
    if unstorable := document_problems(raw, where):
        raise ValidationError(unstorable)
    errors = [f"{name}: unknown field" for name in sorted(set(raw) - set(RECIPE_INPUT_FIELDS), key=str)]
    repo, version = _check_repo(dataset, raw, errors)
    python = raw.get("python")
    if not isinstance(python, str) or not PYTHON_VERSION.match(python):
        errors.append('python: required, an interpreter version such as "3.11"')
    lists = {name: _check_list(raw.get(name, []), name, errors) for name in LIST_FIELDS}
    for package in lists["packages"]:
        if package.startswith("-"):
            errors.append(f"packages: {package[:60]!r} starts with '-': give requirement specifiers, not uv options")
    for name in lists["system_packages"]:
        if not SYSTEM_PACKAGE.match(name):
            errors.append(f"system_packages: {name[:60]!r} is not a package or program name")
    for path in lists["requirements"]:
        if problem := _relative_path_problem(path):
            errors.append(f"requirements: {path[:60]!r} {problem}")
    project = raw.get("project", DEFAULT_PROJECT)
    if not isinstance(project, str) or (project.strip() and not PROJECT.match(project.strip())):
        errors.append(
            'project: how the checkout is installed: "-e .", "-e .[extras]", ".[extras]", or "" for not at all'
        )
    test_env = _check_test_env(raw.get("test_env", {}), errors)
    exclude_newer = raw.get("exclude_newer", "")
    if not isinstance(exclude_newer, str) or (exclude_newer and not _is_date(exclude_newer)):
        errors.append('exclude_newer: a date such as "2021-12-31" (install what the package index held then), or ""')
    checkout_build = raw.get("checkout_build", "")
    if problem := text_problem(checkout_build, CHECKOUT_BUILD_MAX):
        errors.append(f"checkout_build: {problem}")
    source = raw.get("source", "")
    if problem := text_problem(source, SOURCE_MAX):
        errors.append(f"source: {problem}")
    if errors:
        raise ValidationError([f"{prefix}{error}" for error in errors])
    return CheckedRecipe(
        repo=repo,
        version=version,
        python=str(python),
        packages=lists["packages"],
        requirements=lists["requirements"],
        project=str(project).strip(),
        pre_install=lists["pre_install"],
        system_packages=lists["system_packages"],
        test_command=lists["test_command"],
        test_env=test_env,
        exclude_newer=str(exclude_newer),
        checkout_build=str(checkout_build).strip(),
        source=str(source).strip(),
    )


def _check_repo(dataset: Dataset, raw: dict, errors: list[str]) -> tuple[str, str]:
    repositories = dataset_repositories(dataset)
    named = ", ".join(repositories) or "none: the dataset has no repository tasks"
    repo = raw.get("repo")
    if not isinstance(repo, str) or not repo.strip():
        errors.append(f"repo: required, a repository the dataset's tasks name ({named})")
        return "", ""
    repo = repo.strip()
    if repo not in repositories:
        errors.append(f"repo: the dataset's tasks name no repository {repo[:200]!r} (they name: {named})")
    version = raw.get("version", "")
    if not isinstance(version, str) or text_problem(version, VERSION_MAX):
        errors.append(
            f"version: the tasks' version as text of at most {VERSION_MAX} characters, or empty for every version"
        )
        return repo, ""
    version = version.strip()
    if version and repo in repositories and version not in repositories[repo]:
        shown = ", ".join(repr(v) for v in repositories[repo])
        errors.append(f"version: no task of {repo} has version {version!r} (theirs: {shown})")
    return repo, version


def _check_list(value: Any, name: str, errors: list[str]) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        errors.append(f"{name}: must be a list of non-empty strings")
        return []
    if len(value) > ITEMS_MAX:
        errors.append(f"{name}: {len(value)} items; at most {ITEMS_MAX} are allowed")
        return []
    for index, item in enumerate(value):
        if problem := text_problem(item, ITEM_MAX.get(name, ITEM_DEFAULT_MAX)):
            errors.append(f"{name}[{index}]: {problem}")
    return [item if name == "test_command" else item.strip() for item in value]


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _relative_path_problem(entry: str) -> str | None:
    """A requirements file, or alternatives ``a|b`` (the first present is installed)."""
    for path in entry.split(ALTERNATIVES):
        if problem := _one_path_problem(path):
            return problem
    return None


def _one_path_problem(path: str) -> str | None:
    if not path:
        return "has an empty path"
    if path.startswith(("/", "~")) or "\\" in path:
        return "must be a path relative to the repository's root"
    if ".." in PurePosixPath(path).parts:
        return "must stay inside the repository (no '..')"
    if path.startswith("-"):
        return "cannot start with '-'"
    return None


def _check_test_env(value: Any, errors: list[str]) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        errors.append("test_env: must be a mapping of variable names to text values")
        return {}
    for name, text in value.items():
        if not VARIABLE_NAME.match(name):
            errors.append(f"test_env: {name[:60]!r} is not a variable name (letters, digits and _, not first a digit)")
        elif name in RESERVED_VARIABLES:
            errors.append(f"test_env: {name} is set by the environment itself")
        elif problem := text_problem(text, VALUE_MAX):
            errors.append(f"test_env.{name}: {problem}")
    return dict(value)


@transaction.atomic
def do_set_recipe(dataset: Dataset, checked: CheckedRecipe) -> tuple[EnvironmentRecipe, bool]:
    """Make the dataset's recipe for the checked repository and version exactly ``checked``;
    returns it and whether it is new. A recipe that changes forgets the environment keys of
    the repository's tasks: theirs are worked out again when they are next built or used, and
    until then no page shows them the old recipe's environment."""
    values = checked.fields()
    repo, version = values.pop("repo"), values.pop("version")
    recipe = EnvironmentRecipe.objects.select_for_update().filter(dataset=dataset, repo=repo, version=version).first()
    if recipe is not None and all(getattr(recipe, name) == value for name, value in values.items()):
        return recipe, False
    recipe, created = EnvironmentRecipe.objects.update_or_create(
        dataset=dataset, repo=repo, version=version, defaults=values
    )
    dataset.tasks.filter(repo=repo).exclude(environment_key="").update(environment_key="")
    return recipe, created


@transaction.atomic
def do_set_recipes(dataset: Dataset, checked: list[CheckedRecipe]) -> list[tuple[EnvironmentRecipe, bool]]:
    """Several recipes at once (a spec's): all of them, or none."""
    return [do_set_recipe(dataset, recipe) for recipe in checked]


def recipe_installs(recipe: EnvironmentRecipe) -> str:
    """What the recipe installs, in a line: its packages, requirements files and project."""
    parts = [*recipe.packages, *(f"-r {path}" for path in recipe.requirements), recipe.project]
    return " ".join(part for part in parts if part) or "nothing"
