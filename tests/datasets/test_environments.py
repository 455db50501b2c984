"""A repository whose tests import a package the worker does not have: mined, validated and
run in an environment built from a recipe (a wheel made here, served from a local directory:
no internet), and, without that environment, the platform's failure rather than the model's."""

from __future__ import annotations

import base64
import difflib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.management import CommandError
from django.db import connection

from datasets.environments import do_build_at, environment_at, key_for, recipe_for, runtime_for
from datasets.gold import check_gold, tasks_to_check
from datasets.ingest import IngestOptions, ingest
from datasets.models import Dataset, EnvironmentRecipe, GoldStatus, TaskInstance
from datasets.validation import validate_task
from evaluation import environments
from evaluation.environments import BuildFailed, BuildLog, EnvironmentUnavailable, Recipe, in_use, prune, runtime
from evaluation.models import Environment, EnvironmentStatus
from evaluation.repositories import RepositoryUnavailable, release_before
from evaluation.sandbox import isolation
from experiments.actions import ArmSpec, ExperimentSpec, check_start_run, do_save_experiment
from experiments.models import AttemptStatus
from providers.errors import ErrorCategory
from providers.outcomes import OutcomeClass
from tests.cli import run_command
from tests.conftest import work_queue
from tests.factories import ingest_textkit

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
UNITTEST = ["{python}", "-m", "unittest", "-v"]
RECIPE = Recipe(python=PYTHON, packages=("wordsmith==1.0",), project="")
STATS = """from wordsmith import split_words


def count_words(text):
    return len(split_words(text))


def average_length(text):
    words = split_words(text)
    return sum(len(word) for word in words) {op} len(words)
"""
TESTS = """import unittest

from textstats import average_length, count_words


class StatsTest(unittest.TestCase):
    def test_count(self):
        self.assertEqual(count_words("a bb ccc"), 3)
"""
AVERAGE_TEST = """
    def test_average(self):
        self.assertEqual(average_length("a bb"), 1.5)
"""


def _wheel(directory: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel, written as the format says (what a build backend would make)."""
    info = f"{name}-{version}.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: prbench-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in {**files, f"{info}/RECORD": "\n".join(record) + "\n"}.items():
            archive.writestr(path, text)
    return wheel


def _commit(repo: Path, message: str, files: dict[str, str]) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}  # fmt: skip
    subprocess.run(["git", "add", "--all"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "--quiet", "-m", message], cwd=repo, check=True, env=env)


def reachable_dir(prefix: str) -> Path:
    """A directory every sandbox user can reach (pytest's own are the worker's alone)."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    return directory


def remove_sealed(directory: Path) -> None:
    for root, dirs, _ in os.walk(directory):  # sealed environments are read-only
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(directory)


@pytest.fixture
def shared_dir():
    directory = reachable_dir("prbench-env-test-")
    yield directory
    remove_sealed(directory)


@pytest.fixture
def textstats(tmp_path, settings, shared_dir):
    """The repository (two commits: a bug, then its fix with a test) and the package index."""
    wheels = shared_dir / "wheels"
    wheels.mkdir()
    _wheel(wheels, "wordsmith", "1.0", {"wordsmith/__init__.py": "def split_words(text):\n    return text.split()\n"})
    settings.PRBENCH_ENV_INDEX_URL = "none"
    settings.PRBENCH_ENV_FIND_LINKS = str(wheels)
    settings.PRBENCH_ENV_CACHE_DIR = shared_dir / "environments"
    settings.PRBENCH_REPO_CACHE_DIR = tmp_path / "repos"
    repo = tmp_path / "textstats"
    repo.mkdir()
    subprocess.run(["git", "init", "--quiet", "--initial-branch=main"], cwd=repo, check=True)
    _commit(repo, "Start textstats", {"textstats/__init__.py": STATS.format(op="//"), "tests/__init__.py": "",
                                      "tests/test_stats.py": TESTS})  # fmt: skip
    _commit(
        repo,
        "average_length rounds down\n\naverage_length('a bb') is 1, not 1.5.",
        {"textstats/__init__.py": STATS.format(op="/"), "tests/test_stats.py": TESTS + AVERAGE_TEST},
    )
    return repo


def _mine(org, repo: Path, recipe: Recipe | None, dataset: str = "textstats") -> list:
    options = IngestOptions("local/textstats", str(repo), test_command=UNITTEST, gold_runs=1, recipe=recipe)
    return list(ingest(org, dataset, options))


def _task(dataset: str = "textstats") -> TaskInstance:
    return TaskInstance.objects.select_related("dataset").get(dataset__name=dataset)


def test_the_worker_lacks_the_package_the_repository_needs():
    with pytest.raises(ModuleNotFoundError):
        __import__("wordsmith")


def test_a_recipe_builds_the_environment_the_tests_need_and_gold_resolves_in_it(org, textstats):
    verdicts = _mine(org, textstats, RECIPE)
    assert [verdict.kept for verdict in verdicts] == [True], verdicts[0].rejected
    task = _task()
    [fixed], [kept] = task.fail_to_pass, task.pass_to_pass
    assert fixed.startswith("test_average (tests.test_stats.StatsTest") and kept.startswith("test_count (")
    recipe = EnvironmentRecipe.objects.get(dataset=task.dataset, repo="local/textstats", version="")
    assert (recipe.python, recipe.packages, recipe.source) == (PYTHON, ["wordsmith==1.0"], "ingest_prs")

    record = Environment.objects.get()
    assert record.status == EnvironmentStatus.READY and record.steps_done == record.steps_total == 2
    assert record.build_seconds > 0 and record.size_bytes > 0
    assert "install wordsmith==1.0" in record.log

    findings = list(check_gold(tasks_to_check(task.dataset, recheck=True), runs=2, empty=True))
    assert [(finding.status, finding.detail.count("passed")) for finding in findings] == [(GoldStatus.RESOLVED, 2)]
    empty = validate_task(task, "")
    assert (empty.passed, empty.tally.fail_to_pass_passed, empty.environment_missing) == (False, 0, "")
    assert Environment.objects.count() == 1  # built once, reused by mining, gold and the empty patch
    task.refresh_from_db()
    assert task.environment_key == record.key


def test_without_the_environment_the_same_tasks_are_the_platforms_failures(org, alice, textstats, start):
    _mine(org, textstats, RECIPE)
    task = _task()
    EnvironmentRecipe.objects.all().delete()  # the worker's own Python, which lacks wordsmith

    gold = list(check_gold(tasks_to_check(task.dataset, recheck=True), runs=1, empty=False))
    assert [finding.status for finding in gold] == [GoldStatus.NO_ENVIRONMENT]
    assert "cannot import 'wordsmith'" in gold[0].detail
    result = validate_task(task, task.gold_patch)
    assert result.environment_missing == "wordsmith" and not result.passed

    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    experiment = do_save_experiment(org, ExperimentSpec(name="e", dataset=task.dataset, arms=arms, repetitions=2))
    check_start_run(experiment)
    run = start(experiment)
    work_queue()
    attempts = list(run.attempts.all())
    assert len(attempts) == 2
    # Answered and paid for, but not scored against the model: the platform's failure.
    assert {(a.status, a.outcome, a.resolved) for a in attempts} == {
        (AttemptStatus.COMPLETED, OutcomeClass.INFRASTRUCTURE_FAILURE, False)
    }


def test_mining_without_the_environment_says_it_is_missing(org, textstats):
    verdicts = _mine(org, textstats, None, dataset="bare")
    assert [verdict.kept for verdict in verdicts] == [False]
    assert "environment missing: the tests cannot import 'wordsmith'" in verdicts[0].rejected
    assert not TaskInstance.objects.filter(dataset__name="bare").exists()


def test_a_recipe_that_cannot_build_quarantines_its_tasks_and_fails_before_the_call(org, alice, textstats, start):
    _mine(org, textstats, RECIPE)
    task = _task()
    EnvironmentRecipe.objects.filter(dataset=task.dataset).update(packages=["wordsmith==9.9"])
    with pytest.raises(BuildFailed, match="could not be built") as failed:
        validate_task(task, task.gold_patch)
    assert "wordsmith==9.9" in str(failed.value)
    task.refresh_from_db()
    assert task.quarantined and task.quarantine_reason.startswith("environment: ")
    broken = Environment.objects.get(key=task.environment_key)
    assert broken.status == EnvironmentStatus.FAILED and "wordsmith" in broken.failure

    TaskInstance.objects.filter(pk=task.pk).update(quarantined=False)  # as an experiment including them would
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    experiment = do_save_experiment(org, ExperimentSpec(name="e", dataset=task.dataset, arms=arms, repetitions=1))
    check_start_run(experiment)
    run = start(experiment)
    work_queue()
    attempt = run.attempts.get()
    assert (attempt.status, attempt.error_category) == (AttemptStatus.FAILED, ErrorCategory.PLATFORM_ERROR)
    assert attempt.outcome == OutcomeClass.INFRASTRUCTURE_FAILURE and broken.short_key in attempt.error_message
    assert attempt.output == ""  # refused before the model was asked: nothing paid


def test_a_worker_without_the_interpreter_says_which_it_needs(org, textstats, settings):
    _mine(org, textstats, RECIPE)
    task = _task()
    EnvironmentRecipe.objects.filter(dataset=task.dataset).update(python="3.99")
    with pytest.raises(EnvironmentUnavailable, match=r"needs Python 3\.99"):
        runtime_for(task)
    findings = list(check_gold(tasks_to_check(task.dataset, recheck=True), runs=1, empty=False))
    assert findings[0].status == GoldStatus.NO_ENVIRONMENT and "needs Python 3.99" in findings[0].detail
    task.refresh_from_db()
    assert not task.quarantined  # another worker may have it


@pytest.mark.skipif(not isolation().separate_user, reason="needs a sandbox user of its own (a root worker)")
def test_a_patch_cannot_alter_the_environment_another_task_uses(org, textstats):
    _mine(org, textstats, RECIPE)
    task = _task()
    key, environment = runtime_for(task)
    package = next(Path(environment.root).glob("venv/lib/python3*/site-packages/wordsmith/__init__.py"))
    before = package.read_text()
    venv = environment.root / "venv"
    base = STATS.format(op="//")
    attack = (
        "import pathlib, wordsmith\n"
        f"for target in (pathlib.Path(wordsmith.__file__), pathlib.Path({str(venv / 'planted.pth')!r})):\n"
        "    try:\n        target.write_text('raise SystemExit(1)')\n"
        "    except OSError as exc:\n        print('REFUSED', type(exc).__name__)\n"
    )
    hostile = "".join(
        difflib.unified_diff(
            base.splitlines(keepends=True),
            (attack + base).splitlines(keepends=True),
            "a/textstats/__init__.py",
            "b/textstats/__init__.py",
        )
    )
    result = validate_task(task, hostile)
    assert result.applied, result.log
    assert result.log.count("REFUSED") >= 2
    assert package.read_text() == before and not (venv / "planted.pth").exists()
    assert runtime(key) is not None


def test_prune_evicts_the_least_recently_used_but_never_one_in_use(org, textstats):
    _mine(org, textstats, RECIPE)
    task = _task()
    key = key_for(task, recipe_for(task))
    assert runtime(key) is not None
    with in_use(key):
        assert prune(max_bytes=0) == []
    assert [removed.key for removed in prune(max_bytes=0)] == [key]
    assert runtime(key) is None
    runtime_for(task)  # built again on demand
    assert runtime(key) is not None


def test_the_environment_holds_its_packages_bytecode(org, textstats):
    """Sealed read-only, it never gets bytecode later: without it every test run would compile
    what it imports from the environment again (pytest alone: about a third of a second)."""
    _mine(org, textstats, RECIPE)
    _, environment = runtime_for(_task())
    package = next(Path(environment.root).glob("venv/lib/python3*/site-packages/wordsmith"))
    assert list(package.glob("__pycache__/__init__.*.pyc"))


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        (["--package", "wordsmith"], "--package, --requirements, --pre-install and --checkout-build need --python"),
        (["--pre-install", "true"], "--package, --requirements, --pre-install and --checkout-build need --python"),
        (["--python", "three"], '--python must be a version such as "3.11"'),
    ],
)
def test_ingest_prs_refuses_an_incomplete_recipe_and_mines_nothing(org, textstats, options, refusal):
    with pytest.raises(CommandError, match=refusal):
        ingest_textkit(org, textstats, "--test-command", "{python} -m unittest -v", *options)
    assert not Dataset.objects.exists() and not Environment.objects.exists()


def test_ingest_prs_keeps_its_recipe_with_the_dataset(org, textstats):
    output = ingest_textkit(
        org, textstats, "--test-command", "{python} -m unittest -v", "--python", PYTHON, "--package", "wordsmith==1.0",
        "--project", "", "--pre-install", "echo prepared > prepared.txt", "--gold-runs", "1",
    )  # fmt: skip
    assert "kept 1" in output
    recipe = EnvironmentRecipe.objects.get(dataset__name="textkit")
    assert (recipe.packages, recipe.pre_install) == (["wordsmith==1.0"], ["echo prepared > prepared.txt"])
    assert "$ echo prepared > prepared.txt" in Environment.objects.get().log


def test_a_build_the_repository_cannot_feed_says_why_instead_of_waiting(db, textstats):
    def unreadable(target):
        raise RepositoryUnavailable("git archive abc failed: invalid object for 'data/big.h5'")

    with pytest.raises(RepositoryUnavailable):
        do_build_at("k" * 32, RECIPE, "local/textstats", unreadable)
    record = Environment.objects.get(key="k" * 32)
    assert record.step.startswith("not built: git archive abc failed") and record.finished_at is not None


def test_an_inference_only_run_builds_no_environment(org, textstats, start):
    _mine(org, textstats, RECIPE)
    task = _task()
    EnvironmentRecipe.objects.filter(dataset=task.dataset).update(packages=["wordsmith==9.9"])
    arms = [ArmSpec("oracle", "mock", "mock-oracle", {"mode": "oracle"})]
    experiment = do_save_experiment(org, ExperimentSpec(name="e", dataset=task.dataset, arms=arms, repetitions=1))
    run = start(experiment, inference_only=True)
    work_queue()
    assert run.attempts.get().status == AttemptStatus.COMPLETED
    assert Environment.objects.count() == 1  # mining's: the 9.9 recipe was never built


def test_two_workers_asking_for_one_environment_build_it_once(transactional_db, textstats):
    exports, built = [], []
    recipe = Recipe(python=PYTHON, project="")

    def worker():  # with its own database connection, as another worker has
        try:
            built.append(do_build_at("b" * 32, recipe, "twice", exports.append))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(exports) == 1 and sorted(b.reused for b in built) == [False, True]


def test_a_build_log_names_no_directory_of_the_server(org, textstats, settings):
    _mine(org, textstats, RECIPE)
    log = Environment.objects.get().log
    assert "Creating virtual environment at: <environment>/venv" in log
    assert str(settings.PRBENCH_ENV_CACHE_DIR) not in log


def test_a_build_log_keeps_no_proxy_or_index_credentials():
    # pip and uv print the proxy or index address back when they fail, password and all.
    log = BuildLog()
    log.begin("uv pip install --index-url https://__token__:s3cret-index-token@pkgs.corp/simple -r req.txt")
    log.finish("error: Failed to fetch: ProxyError('http://bob:hunter2-proxy@proxy.corp:3128')")
    assert "s3cret-index-token" not in log.text() and "hunter2-proxy" not in log.text()
    assert "https://__token__:[redacted]@pkgs.corp/simple" in log.text() and log.step.startswith("uv pip install")


def test_a_version_the_recipe_pins_is_not_held_back_by_its_date(tmp_path):
    # SWE-bench's Flask 2.3 recipe pins setuptools 70.0.0 (May 2024) for tasks of 2023: with the
    # date alone, uv finds no such version and the environment cannot be built.
    recipe = Recipe(python="3.11", packages=["setuptools==70.0.0", "click>=8", "pytest[testing]==7.3"])
    recipe = replace(recipe, exclude_newer="2023-05-15")
    steps = dict(environments._steps(recipe, sys.executable, tmp_path, tmp_path / "venv"))
    script = steps["install setuptools==70.0.0 click>=8 pytest[testing]==7.3"][-1]
    dated, today = script.split(" || ")
    assert "--exclude-newer-package=setuptools=false --exclude-newer-package=pytest=false" in dated
    # Sphinx's recipes pin tox 4.16.0 (2024), whose dependencies are later than the tasks' date.
    assert "resolving as the package index stands today" in today and "--exclude-newer=20" in today


def test_packages_are_never_resolved_older_than_the_interpreter():
    # The harness runs 2016's requests and 2019's pytest 4.4 on Python 3.9: pytest 2.9 does not
    # start on 3.9, nor does setuptools 41 run, so the date moves to half a year after 3.9 came out.
    assert environments.resolution_date(Recipe(python="3.9", exclude_newer="2016-06-01")) == "2021-04-06"
    assert environments.resolution_date(Recipe(python="3.9", exclude_newer="2022-01-01")) == "2022-01-01"
    assert environments.resolution_date(Recipe(python="3.9")) == ""  # no date: the index as it stands


def test_a_build_tells_setuptools_scm_the_release_the_commit_descends_from(db, textstats):
    # pytest and attrs take their version from git, which a git archive export does not have:
    # "setuptools-scm was unable to detect version" failed every pytest task's build.
    subprocess.run(["git", "tag", "v1.2.0", "HEAD~1"], cwd=textstats, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=textstats, capture_output=True, text=True).stdout.strip()
    assert release_before(textstats / ".git", head) == "1.2.0"
    # What setuptools-scm's write_to does at install, and a binary the install compiled.
    writes = "echo \"version = '$SETUPTOOLS_SCM_PRETEND_VERSION'\" > textstats/_version.py && touch textstats/_fast.so"
    recipe = Recipe(python=PYTHON, project="", pre_install=('echo "scm sees $SETUPTOOLS_SCM_PRETEND_VERSION"', writes))

    key, built = environment_at(textstats / ".git", head, recipe, "textstats at a release")

    assert "scm sees 1.2.0" in Environment.objects.get(key=key).log
    # Each validation's checkout gets the generated Python file (pytest without its _version.py
    # reports version "unknown" and refuses its own plugins), never a binary of one commit.
    checkout = Path(tempfile.mkdtemp(prefix="prbench-checkout-"))
    environments.warm_start(built, checkout)
    assert (checkout / "textstats/_version.py").read_text() == "version = '1.2.0'\n"
    assert not (checkout / "textstats/_fast.so").exists()
    shutil.rmtree(checkout)
    untagged = subprocess.run(["git", "rev-parse", "HEAD~1"], cwd=textstats, capture_output=True, text=True)
    subprocess.run(["git", "tag", "-d", "v1.2.0"], cwd=textstats, check=True, capture_output=True)
    assert release_before(textstats / ".git", untagged.stdout.strip()) == ""
    subprocess.run(["git", "tag", "1.3.0.dev0", "HEAD"], cwd=textstats, check=True)  # pytest tags a cycle's start
    assert release_before(textstats / ".git", head) == "1.3.0.dev0"


CONDA_FILE = """name: textstats-dev
channels:
  - conda-forge
dependencies:
  - python=3.11
  - pip
  - c-compiler
  - wordsmith=1.0
  - pip:
      - wordsmith==1.0  # the docs' tooling would come this way
"""


def test_a_conda_environment_file_installs_from_the_package_index(db, textstats):
    # SWE-bench's xarray and matplotlib recipes install environment.yml, with conda there.
    _commit(textstats, "A conda environment for developers", {"ci/environment.yml": CONDA_FILE})
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=textstats, capture_output=True, text=True).stdout.strip()
    recipe = Recipe(python=PYTHON, requirements=("ci/missing.txt|ci/environment.yml",), project="")

    key, built = environment_at(textstats / ".git", head, recipe, "textstats with conda")

    log = Environment.objects.get(key=key).log
    assert "install ci/environment.yml's dependencies from the package index" in log
    assert "(not on PyPI, left to the worker: python=3.11, pip, c-compiler)" in log
    said = subprocess.run([built.python, "-c", "import wordsmith; print(wordsmith.split_words('a b'))"],
                          capture_output=True, text=True)  # fmt: skip
    assert said.stdout.strip() == "['a', 'b']", said.stderr


def test_a_requirements_file_installing_the_checkout_leaves_that_to_the_project_step(tmp_path):
    # pylint 2.13's requirements_test.txt includes one whose "-e ." uv cannot build editable
    # with the setuptools of the recipe's date; the project step installs it with pip.
    (tmp_path / "requirements_test.txt").write_text("-r requirements_test_min.txt\ncoverage~=6.2\n")
    (tmp_path / "requirements_test_min.txt").write_text("-e .[testutils]\nastroid==2.11.2  # the pin\n.\n")
    recipe = Recipe(python="3.9", requirements=("requirements_test.txt",), project="-e .")
    environments._steps(recipe, sys.executable, tmp_path, tmp_path / "venv")
    assert (tmp_path / "requirements_test_min.txt").read_text() == "astroid==2.11.2  # the pin\n"
    assert (tmp_path / "requirements_test.txt").read_text() == "-r requirements_test_min.txt\ncoverage~=6.2\n"


def test_the_packages_date_is_kept_from_the_command(org, textstats):
    _mine(org, textstats, RECIPE)
    run_command(
        "environments", "set", "--org", org.slug, "--dataset", "textstats", "--repo", "local/textstats",
        "--python", PYTHON, "--project", "", "--exclude-newer", "2021-12-31",
    )  # fmt: skip
    assert EnvironmentRecipe.objects.get().exclude_newer == "2021-12-31"
    with pytest.raises(CommandError, match="--exclude-newer"):
        run_command(
            "environments", "set", "--org", org.slug, "--dataset", "textstats", "--repo", "local/textstats",
            "--python", PYTHON, "--exclude-newer", "last year",
        )  # fmt: skip
