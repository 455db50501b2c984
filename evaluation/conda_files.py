"""Conda environment files (``environment.yml``) as pip requirements: SWE-bench's matplotlib
and xarray recipes install one, and environments are built with uv from the package index, not
with conda. Conda's package names mostly are PyPI's; ``conda_to_pip.json`` lists the ones that
differ and the ones that are not Python packages on PyPI at all (compilers, C libraries, system
tools), which a worker must have or go without. Pure functions: the build (environments.py)
and the SWE-bench import both read files with it.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TABLE_FILE = Path(__file__).with_name("conda_to_pip.json")
CONDA_FILE_SUFFIXES = (".yml", ".yaml")


@functools.cache
def _table() -> dict[str, Any]:
    return json.loads(TABLE_FILE.read_text())


def is_conda_file(path: str) -> bool:
    return path.endswith(CONDA_FILE_SUFFIXES)


def environment_yml_requirements(text: str) -> tuple[list[str], list[str]]:
    """A conda environment file's dependencies as pip requirement specifiers, and the conda
    packages left out because PyPI has no such Python package (compilers, C libraries, system
    tools; the table is ``conda_to_pip.json``). Conda's ``name=1.2`` (any 1.2.x) becomes
    ``name==1.2.*``, ``name=1.2=build`` becomes ``name==1.2``; the ``pip:`` list is kept as it is."""
    table = _table()
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
