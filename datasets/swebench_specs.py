"""What SWE-bench's harness sets up for a task, as PRBench's environment recipe: per repository
and version, the Python, the packages, the requirements files, how the project is installed,
the pre-install steps, the system packages and the test command; per task, the test files its
test patch names (the harness's test directives) after that command.

The data is ``swebench_specs.json``, translated from the harness's source; its header names the
commit read, the fields taken and how, and what was left out and why. Nothing here touches the
database: the import and ``manage.py`` use it as they like.

A recipe is a dict of ``RECIPE_FIELDS``: ``python`` ("3.9"), ``packages`` (requirement
specifiers installed first), ``requirements`` (repository paths of requirements files: the
harness installs the first that exists; a ``.yml`` one is a conda environment file, which the
build reads with ``evaluation/conda_files.py``), ``project`` (pip arguments installing the checkout, "" for
none), ``pre_install`` (shell steps run in the checkout first), ``system_packages`` (Debian
packages the worker must have), ``test_command`` (argument list; ``{python}`` is the
environment's interpreter), ``test_env``, ``checkout_build`` (the shell command that builds
a project with compiled extensions in its checkout; only those groups have one, "" for the
rest) and ``source``.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SPECS_FILE = Path(__file__).with_name("swebench_specs.json")
RECIPE_FIELDS = (
    "python",
    "packages",
    "requirements",
    "project",
    "pre_install",
    "system_packages",
    "test_command",
    "test_env",
    "checkout_build",
    "source",
)
OPTIONAL = ("checkout_build", "source")  # absent from most groups / made here
# get_test_directives: every file a diff header names ("diff --git a/x b/x" -> "x"), the same
# pattern the harness searches the whole test patch with.
DIFF_TARGET = re.compile(r"diff --git a/.* b/(.*)")


@functools.cache
def _specs() -> dict[str, Any]:
    return json.loads(SPECS_FILE.read_text())


def harness_commit() -> str:
    """The commit of SWE-bench's repository the specifications were read from."""
    return _specs()["harness"]["commit"]


def specified() -> list[tuple[str, str]]:
    """Every (repository, version) with a specification, in the harness's order."""
    return [
        (repo, version)
        for repo, entry in _specs()["repos"].items()
        for group in entry["recipes"]
        for version in group["versions"]
    ]


@functools.cache
def _groups() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (repo, version): group
        for repo, entry in _specs()["repos"].items()
        for group in entry["recipes"]
        for version in group["versions"]
    }


def recipe_for(repo: str, version: str) -> dict[str, Any] | None:
    """The environment recipe the harness's specification gives (a fresh copy), or None when it
    has none for this repository version."""
    group = _groups().get((repo, version))
    if group is None:
        return None
    recipe = {name: copy.deepcopy(group[name]) for name in RECIPE_FIELDS if name not in OPTIONAL}
    recipe["checkout_build"] = group.get("checkout_build", "")
    recipe["source"] = f"SWE-bench harness {harness_commit()}: {repo} {version}"
    return recipe


def test_directives(repo: str, test_patch: str) -> list[str]:
    """The test files ``test_patch`` names, as the harness passes them to the test command:
    files with a data suffix dropped (the harness's list, 'csv' without its dot included);
    Django's as the module labels its runner takes (``tests/a/b.py`` -> ``a.b``). Other runners,
    sympy's ``bin/test`` included, take the paths as they are."""
    suffixes = tuple(_specs()["non_test_suffixes"])
    files = [path for path in DIFF_TARGET.findall(test_patch) if not path.endswith(suffixes)]
    if _specs()["repos"].get(repo, {}).get("directives") == "django":
        return [_django_label(path) for path in files]
    return files


def _django_label(path: str) -> str:
    return path.removesuffix(".py").removeprefix("tests/").replace("/", ".")


def task_test_command(repo: str, version: str, test_patch: str) -> list[str]:
    """The argument list validation runs for a task: its version's test command, then the test
    files its test patch names. Empty when the harness has no specification for it (the
    dataset's own command applies)."""
    recipe = recipe_for(repo, version)
    if recipe is None:
        return []
    return [*recipe["test_command"], *test_directives(repo, test_patch)]


def python_needed(repo: str, version: str) -> str:
    """The interpreter version ("3.11") the specification names; "" when there is none."""
    group = _groups().get((repo, version))
    return group["python"] if group else ""


def missing_python(python: str, interpreters: Iterable[str]) -> str:
    """What a worker with ``interpreters`` (versions: "3.11", "3.11.4") lacks to run ``python``
    (compared by major.minor): "needs Python 3.9", or "" when it has it."""
    wanted = _major_minor(python)
    if any(_major_minor(have) == wanted for have in interpreters):
        return ""
    return f"needs Python {wanted}"


def interpreter_problem(repo: str, version: str, interpreters: Iterable[str]) -> str:
    """Why a worker with ``interpreters`` cannot run this repository version's recipe ("needs
    Python 3.9", or that the harness has no specification for it); "" when it can."""
    python = python_needed(repo, version)
    if not python:
        return f"the SWE-bench harness has no specification for {repo} {version}"
    return missing_python(python, interpreters)


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2])
