"""What SWE-bench's harness sets up for a task, as PRBench's environment recipe: per repository
and version, the Python, the packages, the requirements files, how the project is installed,
the pre-install steps, the system packages and the test command; per task, the test files its
test patch names (the harness's test directives) after that command.

The data is ``swebench_specs.json``, translated from the harness's source; its header names the
commit read, the fields taken and how, and what was left out and why. Nothing here touches the
database: the import and ``manage.py`` use it as they like.

A recipe is a dict of ``RECIPE_FIELDS``: ``python`` ("3.9"), ``packages`` (requirement
specifiers installed first), ``requirements`` (repository paths of requirements files: the
harness installs the first that exists; a ``.yml`` one is a conda environment file, see
``environment_yml_requirements``), ``project`` (pip arguments installing the checkout, "" for
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


def environment_yml_requirements(text: str) -> tuple[list[str], list[str]]:
    """A conda environment file's dependencies as pip requirement specifiers, and the conda
    packages left out because PyPI has no such Python package (compilers, C libraries, system
    tools; the table is in the JSON's ``conda_to_pip``). Conda's ``name=1.2`` (any 1.2.x) becomes
    ``name==1.2.*``, ``name=1.2=build`` becomes ``name==1.2``; the ``pip:`` list is kept as it is."""
    table = _specs()["conda_to_pip"]
    kept: list[str] = []
    dropped: list[str] = []
    for item, from_pip in _dependencies(text):
        if from_pip:
            kept.append(item)
            continue
        name, constraint = _conda_spec(item)
        if name.lower() in table["not_on_pypi"]:
            dropped.append(item)
        else:
            kept.append(table["renamed"].get(name.lower(), name) + constraint)
    return kept, dropped


def _dependencies(text: str) -> Iterable[tuple[str, bool]]:
    """The ``dependencies:`` list items (and whether each is under ``pip:``), read line by line:
    these files are one flat list and a nested one, and the project does not depend on a YAML
    library."""
    in_dependencies = False
    pip_indent: int | None = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_dependencies = stripped == "dependencies:"
            pip_indent = None
            continue
        if not in_dependencies or not stripped.startswith("- "):
            continue
        item = stripped[2:].strip().strip("'\"")
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if item == "pip:":
            pip_indent = indent
        elif item:
            yield item, pip_indent is not None


def _conda_spec(item: str) -> tuple[str, str]:
    """("name", pip constraint) of a conda match specification."""
    item = item.split("::", 1)[-1].replace(" ", "")  # a channel prefix; "name 1.2" spacing
    match = re.match(r"^([A-Za-z0-9_.\-]+)(.*)$", item)
    if match is None:
        return item, ""
    name, rest = match.groups()
    if rest.startswith("=") and not rest.startswith("=="):
        version = rest[1:].split("=", 1)
        if len(version) == 2:  # name=version=build: that exact build
            return name, f"=={version[0]}"
        return name, f"=={version[0]}" if version[0].endswith("*") else f"=={version[0]}.*"
    return name, rest
