"""The floors between the apps hold (pyproject.toml, [tool.importlinter]; README, "Architecture").

One test runs import-linter on the project itself. The others run the same configuration on a
tree of empty apps with one import added, so the check is known to fail on a back-arrow (at
module level or inside a function) and to let a downward import and the URL registration pass."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
APPS = ["prbench", "orgs", "providers", "evaluation", "datasets", "experiments", "leaderboards"]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    # No cache: a cached graph of another tree must never answer for this one.
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(cwd / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_project_keeps_its_floors():
    result = lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken" in result.stdout


@pytest.fixture
def empty_apps(tmp_path):
    """Every app as an empty package, with the project's own layer configuration."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for app in APPS:
        (tmp_path / app).mkdir()
        (tmp_path / app / "__init__.py").write_text("")
        (tmp_path / app / "things.py").write_text("")
    return tmp_path


def test_a_module_level_back_arrow_breaks_the_check(empty_apps):
    (empty_apps / "orgs" / "access.py").write_text("from experiments.things import *\n")

    result = lint_imports(empty_apps)

    assert result.returncode == 1
    assert "orgs is not allowed to import experiments" in result.stdout
    assert "orgs.access -> experiments.things" in result.stdout


def test_a_back_arrow_inside_a_function_breaks_the_check(empty_apps):
    (empty_apps / "evaluation" / "evaluator.py").write_text(
        "def record():\n    from leaderboards.things import refresh\n    return refresh\n"
    )

    result = lint_imports(empty_apps)

    assert result.returncode == 1
    assert "evaluation is not allowed to import leaderboards" in result.stdout


def test_downward_imports_and_the_url_registration_pass(empty_apps):
    (empty_apps / "leaderboards" / "boards.py").write_text("import experiments.things\nimport datasets.things\n")
    (empty_apps / "experiments" / "pipeline.py").write_text("from evaluation import things\nimport prbench.things\n")
    (empty_apps / "prbench" / "urls.py").write_text("import leaderboards.things\nimport experiments.things\n")

    result = lint_imports(empty_apps)

    assert result.returncode == 0, result.stdout + result.stderr
