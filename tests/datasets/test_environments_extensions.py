"""A repository with a C extension its tests import (made here; gcc and the Python headers are
on the machine, setuptools comes from the worker's own installation: no internet). Its
recipe's checkout build compiles it at each base commit and again after each patch, as
SWE-bench's eval script installs the project again; without one its tasks are the
platform's failure, and a patch that breaks the C code is the model's."""

from __future__ import annotations

import base64
import difflib
import hashlib
import importlib.metadata
import subprocess
import zipfile
from pathlib import Path

import pytest

from datasets.environments import runtime_for
from datasets.gold import check_gold, tasks_to_check
from datasets.ingest import IngestOptions, ingest
from datasets.models import EnvironmentRecipe, GoldStatus, TaskInstance
from datasets.validation import validate_task
from evaluation.environments import EnvironmentUnavailable, Recipe, environment_key
from evaluation.models import Environment
from tests.datasets.test_environments import PYTHON, UNITTEST, _commit, reachable_dir, remove_sealed

SETUP = """from setuptools import Extension, setup

setup(
    name="fastsum",
    version="1.0",
    packages=["fastsum"],
    ext_modules=[
        Extension("fastsum._speedups", ["fastsum/_speedups.c"]),
        Extension("fastsum._other", ["fastsum/_other.c"]),
    ],
)
"""
SPEEDUPS = """#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(ADD);
}

static PyObject *mul(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(MUL);
}

static PyMethodDef methods[] = {
    {"add", add, METH_VARARGS, ""}, {"mul", mul, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}
};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
"""
OTHER = """#include <Python.h>

static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_other", NULL, -1, methods};
PyMODINIT_FUNC PyInit__other(void) { return PyModule_Create(&module); }
"""
TESTS = """import unittest

from fastsum import add, mul
from fastsum._other import answer


class FastsumTest(unittest.TestCase):
    def test_answer(self):
        self.assertEqual(answer(), 42)
"""
ADD_TEST = """
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
"""
MUL_TEST = """
    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
"""


def _speedups(add: str, mul: str) -> str:
    return SPEEDUPS.replace("ADD", add).replace("MUL", mul)


# -v: distutils then says which extension it found up to date (and did not compile again).
BUILD = "python setup.py -v build_ext --inplace"
RECIPE = Recipe(python=PYTHON, packages=("setuptools",), project="", checkout_build=BUILD)


def _wheel_of_installed(directory: Path, name: str) -> None:
    """A wheel of a package as the worker has it installed (setuptools: what an offline
    test can give an environment to build with)."""
    dist = importlib.metadata.distribution(name)
    site = Path(str(dist.locate_file("")))
    info = f"{dist.metadata['Name']}-{dist.version}.dist-info"
    wanted = [
        str(path)
        for path in dist.files or []
        if not str(path).startswith("..")
        and "__pycache__" not in str(path)
        and Path(path).name not in ("RECORD", "INSTALLER", "direct_url.json", "REQUESTED")
    ]
    record = []
    with zipfile.ZipFile(directory / f"{name}-{dist.version}-py3-none-any.whl", "w") as archive:
        for path in wanted:
            data = (site / path).read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")


@pytest.fixture(scope="module")
def fastsum():
    """The repository (three commits: two bugs, then a fix of each with its test), the
    package index, and an environment cache kept for the module: each base commit's
    environment is compiled once, whichever test asks for it first."""
    shared = reachable_dir("prbench-ext-test-")
    (shared / "wheels").mkdir()
    _wheel_of_installed(shared / "wheels", "setuptools")
    repo = shared / "fastsum"
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", "--initial-branch=main"], cwd=repo, check=True)
    files = {"setup.py": SETUP, "fastsum/__init__.py": "from fastsum._speedups import add, mul\n",
             "fastsum/_other.c": OTHER, "tests/__init__.py": "", "tests/test_fastsum.py": TESTS}  # fmt: skip
    _commit(repo, "Start fastsum", {**files, "fastsum/_speedups.c": _speedups("a + b + 1", "a * b + 1")})
    _commit(
        repo,
        "add adds one too many",
        {"fastsum/_speedups.c": _speedups("a + b", "a * b + 1"),
         "tests/test_fastsum.py": TESTS + ADD_TEST},
    )  # fmt: skip
    _commit(
        repo,
        "mul adds one too many",
        {"fastsum/_speedups.c": _speedups("a + b", "a * b"), "tests/test_fastsum.py": TESTS + ADD_TEST + MUL_TEST},
    )
    yield repo
    remove_sealed(shared)


@pytest.fixture
def mined(org, fastsum, settings):
    """The repository mined with the checkout build: a task per fix, by base commit."""
    settings.PRBENCH_ENV_INDEX_URL = "none"
    settings.PRBENCH_ENV_FIND_LINKS = str(fastsum.parent / "wheels")
    settings.PRBENCH_ENV_CACHE_DIR = fastsum.parent / "environments"
    settings.PRBENCH_REPO_CACHE_DIR = fastsum.parent / "repos"
    options = IngestOptions("local/fastsum", str(fastsum), test_command=UNITTEST, gold_runs=1, recipe=RECIPE)
    verdicts = list(ingest(org, "fastsum", options))
    assert [verdict.kept for verdict in verdicts] == [True, True], [verdict.rejected for verdict in verdicts]
    return {task.fail_to_pass[0].split()[0]: task for task in TaskInstance.objects.select_related("dataset")}


def _patch_of(task: TaskInstance, path: str, before: str, after: str) -> str:
    text = subprocess.run(
        ["git", "show", f"{task.base_commit}:{path}"], cwd=task.dataset.repo_sources["local/fastsum"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert before in text
    changed = text.replace(before, after)
    return "".join(difflib.unified_diff(text.splitlines(True), changed.splitlines(True), f"a/{path}", f"b/{path}"))


def test_gold_resolves_in_the_checkout_build_and_the_empty_patch_does_not(mined):
    assert set(mined) == {"test_add", "test_mul"}
    findings = list(check_gold(tasks_to_check(mined["test_add"].dataset, recheck=True), runs=1, empty=True))
    assert [finding.status for finding in findings] == [GoldStatus.RESOLVED, GoldStatus.RESOLVED]
    for task in mined.values():
        empty = validate_task(task, "")
        assert (empty.passed, empty.tally.fail_to_pass_passed, empty.environment_missing) == (False, 0, "")
        assert empty.tally.pass_to_pass_failed == 0  # the warm start's extensions import


def test_each_base_commit_has_its_own_environment_holding_what_the_build_made(mined):
    used = {task.base_commit: runtime_for(task) for task in mined.values()}
    assert len(used) == 2 and len({key for key, _ in used.values()}) == 2
    labels = set(Environment.objects.filter(key__in=[key for key, _ in used.values()]).values_list("label", flat=True))
    assert all(sum(commit[:12] in label for label in labels) == 1 for commit in used), labels  # says whose
    for _, environment in used.values():
        produced = sorted(path.name for path in environment.produced.glob("fastsum/*.so"))
        assert [name.split(".")[0] for name in produced] == ["_other", "_speedups"]
        assert (environment.produced / "build").is_dir()  # the object files' tree
        assert not (environment.produced / "setup.py").exists()  # what the commit tracks is not kept
    same_files = {"setup.py": SETUP}
    without = Recipe(python=PYTHON, packages=("setuptools",), project="")
    assert environment_key(RECIPE, same_files, "a" * 40) != environment_key(RECIPE, same_files, "b" * 40)
    assert environment_key(without, same_files, "a" * 40) == environment_key(without, same_files, "b" * 40)


def test_a_patch_to_the_c_code_is_compiled_and_only_what_it_changed(mined):
    task = mined["test_add"]
    # The model's own fix, written differently from the gold patch: its behaviour shows.
    patch = _patch_of(task, "fastsum/_speedups.c", "a + b + 1", "b + a")
    result = validate_task(task, patch)
    assert result.passed, result.log
    assert "skipping 'fastsum._other' extension (up-to-date)" in result.build.log
    assert "building 'fastsum._speedups' extension" in result.build.log
    wrong = validate_task(task, _patch_of(task, "fastsum/_speedups.c", "a + b + 1", "a + b + 2"))
    assert not wrong.passed and wrong.build.ok and wrong.tally.fail_to_pass_passed == 0


def test_a_patch_that_does_not_compile_is_the_models_failure(mined):
    task = mined["test_add"]
    broken = _patch_of(task, "fastsum/_speedups.c", "return PyLong_FromLong(a + b + 1);", "return a +;")
    result = validate_task(task, broken)
    assert result.applied and not result.passed and result.checkout_build_failed
    assert result.build.ok is False and "error" in result.build.log and result.environment_missing == ""
    assert result.tally.fail_to_pass_passed == 0 and result.log.startswith("the patched tree does not build")


def test_without_the_checkout_build_the_tasks_are_the_platforms_failures(mined):
    task = mined["test_add"]
    EnvironmentRecipe.objects.filter(dataset=task.dataset).update(checkout_build="")
    TaskInstance.objects.update(environment_key="")
    result = validate_task(TaskInstance.objects.select_related("dataset").get(pk=task.pk), task.gold_patch)
    assert result.environment_missing == "fastsum._speedups" and not result.passed
    findings = list(check_gold(tasks_to_check(task.dataset, recheck=True), runs=1, empty=False))
    assert [finding.status for finding in findings] == [GoldStatus.NO_ENVIRONMENT] * 2
    assert "cannot import 'fastsum._speedups'" in findings[0].detail


def test_a_checkout_build_that_fails_without_any_patch_is_the_platforms_failure(mined):
    task = mined["test_mul"]
    # Succeeds in the environment's build (which has uv's cache), fails in every validation.
    EnvironmentRecipe.objects.filter(dataset=task.dataset).update(checkout_build=f'{BUILD} && test -n "$UV_CACHE_DIR"')
    task = TaskInstance.objects.select_related("dataset").get(pk=task.pk)
    with pytest.raises(EnvironmentUnavailable, match="fails without any patch too"):
        validate_task(task, task.gold_patch)
