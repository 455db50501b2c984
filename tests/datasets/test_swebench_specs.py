"""The SWE-bench harness's specifications as environment recipes and per-task test commands
(datasets/swebench_specs.py). Pure data and functions: no database."""

import json
import re
import shlex
import subprocess

import pytest

from datasets import swebench_specs as specs
from evaluation.conda_files import environment_yml_requirements
from tests.samples import SWEBENCH_LITE_LINES

LITE_DEV = [json.loads(line) for line in SWEBENCH_LITE_LINES]
START, END = ": '>>>>> Start Test Output'", ": '>>>>> End Test Output'"

SWEBENCH_REPOS = [
    "astropy/astropy", "django/django", "matplotlib/matplotlib", "mwaskom/seaborn", "pallets/flask",
    "psf/requests", "pydata/xarray", "pylint-dev/pylint", "pytest-dev/pytest", "scikit-learn/scikit-learn",
    "sphinx-doc/sphinx", "sympy/sympy",
]  # fmt: skip
LITE_DEV_REPOS = [
    "sqlfluff/sqlfluff", "pvlib/pvlib-python", "pydicom/pydicom", "marshmallow-code/marshmallow",
    "pylint-dev/astroid", "pyvista/pyvista",
]  # fmt: skip


def _eval_script_test_line(script: str) -> str:
    lines = script.splitlines()
    start = lines.index(START)
    assert lines[start + 2] == END, "one command between the markers"
    return lines[start + 1]


def _as_argv(line: str) -> tuple[list[str], dict[str, str]]:
    """The eval script's shell line as the argument list we run: the ``pytest`` console script
    is the environment's ``python -m pytest``; a leading NAME=value is the environment's."""
    words = shlex.split(line)
    env = {}
    while "=" in words[0] and words[0].split("=")[0].isupper():
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    if words[0] in ("pytest", "tox"):
        words = ["{python}", "-m", *words]
    elif words[0] == "python":
        words = ["{python}", *words[1:]]
    else:
        words = ["{python}", *words]
    return words, env


def _diff(*paths: str) -> str:
    return "".join(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n" for path in paths)


@pytest.mark.parametrize("row", LITE_DEV, ids=[row["instance_id"] for row in LITE_DEV])
def test_it_runs_the_test_command_of_the_harness_eval_script(row):
    expected, env = _as_argv(_eval_script_test_line(row["eval_script"]))

    assert specs.task_test_command(row["repo"], row["version"], row["test_patch"]) == expected
    assert specs.recipe_for(row["repo"], row["version"])["test_env"] == env


@pytest.mark.parametrize("row", LITE_DEV, ids=[row["instance_id"] for row in LITE_DEV])
def test_it_installs_the_project_as_the_eval_script_does(row):
    script = row["eval_script"].splitlines()
    install = next(line for line in script if line.startswith("python -m pip install"))
    project = specs.recipe_for(row["repo"], row["version"])["project"]

    assert install.removeprefix("python -m pip install ").replace("'", "") == project


def test_it_covers_every_version_of_the_python_repositories():
    covered = specs.specified()

    assert {repo for repo, _ in covered} == set(SWEBENCH_REPOS + LITE_DEV_REPOS)
    assert len(covered) == len(set(covered)) == 282
    assert sum(specs.python_needed(repo, version) == "3.11" for repo, version in covered) == 14
    assert ("astropy/astropy", "v5.3") in covered  # the harness's own spelling of that version
    assert ("dbt-labs/dbt-core", "1.0") not in covered  # no test command in the harness


def test_a_recipe_has_the_recipe_fields_and_names_its_source():
    recipe = specs.recipe_for("django/django", "5.0")

    assert list(recipe) == list(specs.RECIPE_FIELDS)
    assert re.fullmatch(r"SWE-bench harness [0-9a-f]{40}: django/django 5\.0", recipe["source"])
    assert recipe["source"].split()[2].rstrip(":") == specs.harness_commit()
    assert recipe["python"] == "3.11"
    assert recipe["requirements"] == ["tests/requirements/py3.txt"]
    assert recipe["project"] == "-e ."
    assert recipe["test_command"] == [
        "{python}", "./tests/runtests.py", "--verbosity", "2", "--settings=test_sqlite", "--parallel", "1",
    ]  # fmt: skip
    assert specs.recipe_for("django/django", "0.1") is None
    assert specs.recipe_for("octo/unknown", "1.0") is None


def test_a_recipe_is_a_fresh_copy():
    specs.recipe_for("pallets/flask", "2.3")["packages"].append("mutated")

    assert "mutated" not in specs.recipe_for("pallets/flask", "2.3")["packages"]


def test_it_translates_the_harness_fields():
    old_django = specs.recipe_for("django/django", "2.2")
    assert old_django["project"] == "."  # python setup.py install
    assert old_django["system_packages"] == ["locales-all"]  # locale-gen en_US.UTF-8
    assert old_django["test_env"] == {
        "LANG": "en_US.UTF-8", "LC_ALL": "en_US.UTF-8", "PYTHONIOENCODING": "utf8", "LANGUAGE": "en_US:en",
    }  # fmt: skip
    assert specs.recipe_for("django/django", "1.9")["test_command"][2:] == ["--verbosity", "2"]

    sympy = specs.recipe_for("sympy/sympy", "1.12")
    assert sympy["test_command"] == ["{python}", "bin/test", "-C", "--verbose"]
    assert sympy["test_env"] == {"PYTHONWARNINGS": "ignore::UserWarning,ignore::SyntaxWarning"}
    assert sympy["packages"] == ["mpmath==1.3.0", "flake8", "flake8-comprehensions"]

    # conda's numpy==1.19.2 stays: pip was then given a bare "numpy", which it leaves alone
    sklearn = specs.recipe_for("scikit-learn/scikit-learn", "1.3")
    assert sklearn["packages"][:3] == ["numpy==1.19.2", "scipy==1.5.2", "cython==3.0.10"]
    assert sklearn["packages"].count("pytest") == 1
    assert sklearn["project"] == "--no-build-isolation -e ."

    matplotlib = specs.recipe_for("matplotlib/matplotlib", "3.5")
    assert matplotlib["python"] == "3.11"
    assert matplotlib["requirements"] == ["environment.yml"]
    assert {"imagemagick", "ffmpeg", "dvipng", "wget"} <= set(matplotlib["system_packages"])
    assert any("qhull-2020-src-8.0.2.tgz -C build" in step for step in matplotlib["pre_install"])
    assert not any("apt-get" in step for step in matplotlib["pre_install"])

    assert specs.recipe_for("pytest-dev/pytest", "6.3")["pre_install"] == ["sed -i 's/>=>=/>=/' setup.cfg"]
    assert specs.recipe_for("sphinx-doc/sphinx", "8.0")["python"] == "3.10"
    assert specs.recipe_for("sphinx-doc/sphinx", "8.0")["system_packages"] == ["graphviz"]
    assert specs.recipe_for("sphinx-doc/sphinx", "8.0")["test_command"] == [
        "{python}", "-m", "tox", "--current-env", "-epy39", "-v", "--",
    ]  # fmt: skip
    assert specs.recipe_for("astropy/astropy", "v5.3")["python"] == "3.10"
    assert specs.recipe_for("pyvista/pyvista", "0.39")["requirements"] == ["requirements_test.txt", "requirements.txt"]
    seaborn = specs.recipe_for("mwaskom/seaborn", "0.12")
    assert seaborn["test_command"] == ["{python}", "-m", "pytest", "--no-header", "-rA"]


def test_the_requirements_step_replaces_the_yanked_package(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "dev.txt").write_text("pytest\ntypes-pkg_resources==0.1.3\ntypes-pkg_resources2\n")
    step = next(step for step in specs.recipe_for("pallets/flask", "2.3")["pre_install"] if "types-" in step)

    subprocess.run(["bash", "-c", step], cwd=tmp_path, check=True)

    assert (tmp_path / "requirements" / "dev.txt").read_text() == "pytest\ntypes-setuptools\ntypes-pkg_resources2\n"
    subprocess.run(["bash", "-c", step], cwd=tmp_path / "requirements", check=True)  # no such folder: no error


def test_django_directives_are_module_labels():
    patch = _diff("tests/admin_views/tests.py", "tests/admin_views/models.py", "tests/i18n/data/fr.json")

    assert specs.test_directives("django/django", patch) == ["admin_views.tests", "admin_views.models"]
    assert specs.task_test_command("django/django", "4.2", patch)[-2:] == ["admin_views.tests", "admin_views.models"]


def test_directives_drop_data_files_and_keep_paths_elsewhere():
    patch = _diff(
        "sympy/core/tests/test_basic.py",
        "doc/changes.md",
        "sympy/data/table.csv",
        "sympy/data/tablecsv",  # the harness's "csv" has no dot
        "setup.cfg",
        "pyproject.toml",
    )

    assert specs.test_directives("sympy/sympy", patch) == ["sympy/core/tests/test_basic.py", "setup.cfg"]
    assert specs.task_test_command("sympy/sympy", "1.12", patch) == [
        "{python}", "bin/test", "-C", "--verbose", "sympy/core/tests/test_basic.py", "setup.cfg",
    ]  # fmt: skip


def test_a_task_without_a_specification_has_no_command():
    assert specs.task_test_command("octo/widgets", "1.0", _diff("tests/test_a.py")) == []


def test_it_says_which_python_a_worker_lacks():
    assert specs.python_needed("django/django", "4.2") == "3.9"
    assert specs.python_needed("octo/widgets", "1.0") == ""
    assert specs.interpreter_problem("django/django", "4.2", ["3.11"]) == "needs Python 3.9"
    assert specs.interpreter_problem("django/django", "4.2", ["3.11", "3.9.18"]) == ""
    assert specs.interpreter_problem("django/django", "5.0", ["3.11"]) == ""
    assert specs.interpreter_problem("django/django", "5.0", []) == "needs Python 3.11"
    assert specs.interpreter_problem("pydicom/pydicom", "2.3", ["3.1"]) == "needs Python 3.10"
    assert "no specification for octo/widgets 1.0" in specs.interpreter_problem("octo/widgets", "1.0", ["3.11"])
    assert specs.missing_python("3.11", ["3.11.4"]) == ""


def test_an_environment_file_becomes_pip_requirements():
    text = """\
name: mpl-dev
channels:
  - conda-forge
dependencies:
  # runtime dependencies
  - cairocffi
  - c-compiler
  - contourpy>=1.0.1
  - numpy=1.21
  - pillow=9.0.1=py39_0
  - dask-core
  - python>=3.8
  - pip
  - pip:
      - mpl-sphinx-theme~=3.11.0  # needed by the docs
      - sphinxcontrib-svg2pdfconverter>=1.1.0
  - conda-forge::pytest-cov
  - graphviz
prefix: /opt/conda/envs/mpl-dev
"""

    kept, dropped = environment_yml_requirements(text)

    assert kept == [
        "cairocffi", "contourpy>=1.0.1", "numpy==1.21.*", "pillow==9.0.1", "dask", "mpl-sphinx-theme~=3.11.0",
        "sphinxcontrib-svg2pdfconverter>=1.1.0", "pytest-cov",
    ]  # fmt: skip
    assert dropped == ["c-compiler", "python>=3.8", "pip", "graphviz"]


def test_the_json_says_where_it_came_from():
    header = json.loads(specs.SPECS_FILE.read_text())

    assert re.fullmatch(r"[0-9a-f]{40}", header["harness"]["commit"])
    assert header["harness"]["repository"] == "https://github.com/SWE-bench/SWE-bench"
    for field in ("python", "packages", "requirements", "project", "pre_install", "system_packages", "test_command"):
        assert field in header["taken"]
    assert "per_instance_environment_yml" in header["left_out"]


def test_the_projects_compiling_extensions_in_place_are_built_in_each_checkout():
    # The harness installs them editable again after the model's patch; here the environment
    # is read-only and shared, so the compile belongs to the checkout (the JSON says why).
    compiled = ("scikit-learn/scikit-learn", "astropy/astropy", "matplotlib/matplotlib")
    for repo, version in specs.specified():
        recipe = specs.recipe_for(repo, version)
        editable = "-e" in recipe["project"].split()
        expected = "python setup.py build_ext --inplace" if repo in compiled and editable else ""
        assert recipe["checkout_build"] == expected, (repo, version)
    assert specs.recipe_for("scikit-learn/scikit-learn", "1.3")["checkout_build"]
    assert specs.recipe_for("matplotlib/matplotlib", "2.2")["checkout_build"] == ""  # installed, not editable
    assert "checkout_build" in specs._specs()["taken"]
