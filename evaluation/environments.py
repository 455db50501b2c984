"""Task environments: a virtualenv per recipe, built once with uv and shared read-only.

A repository whose tests import its dependencies needs them installed. A *recipe* says how
(the interpreter, pinned packages, requirements files, how the project itself is installed,
shell steps before that). An environment is keyed by the recipe and by the content of the
files that decide what gets installed at the task's base commit (the requirements files,
``setup.py``, ``setup.cfg``, ``pyproject.toml``): every task and run whose key matches
shares one build, and a repository that changes its dependencies gets a new one.

Building (``build``) happens outside any validation, in a sandbox that keeps the network
(to reach the package index) but runs as the build user, with the worker's state hidden;
the finished environment then belongs to the worker and is read-only to everyone else, and
validations see it read-only (``runtime.surroundings``). A half-built environment never
lies where a validation would find it: it is built under a temporary name and renamed whole.

The project itself is installed editable from the build's checkout, then that checkout is
removed: what its ``.pth`` files pointed at becomes *import roots* relative to the checkout,
put on ``PYTHONPATH`` for each validation's own fresh checkout. The project's metadata
(its version, entry points) stays installed.

A project that compiles extensions in place (scikit-learn, astropy, matplotlib) makes its
``.so`` files in the build's checkout, which a validation's fresh checkout lacks: its recipe
names a *checkout build* (``python setup.py build_ext --inplace``). Its environment is then
per base commit, as SWE-bench's instance images are; the build runs that command last and
keeps what it made in the checkout (every file the commit does not track: extension modules,
a generated ``_version.py``, the ``build/`` tree) under ``checkout/``. A validation copies
them into its checkout (``warm_start``) and runs the command again after the patch, in its
sandbox, as the harness's eval script installs the project again: only what the patch
changed is compiled, since the copies keep their build time, later than the sources' (a
``git archive`` gives every file its commit's time) and earlier than the patch's edits.

One lock file per key serialises building it on a machine (two workers never build the
same one); a validation holds the same lock shared while it uses an environment, so
``prune`` never removes one in use.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from django.conf import settings

from evaluation.conda_files import environment_yml_requirements, is_conda_file
from evaluation.sandbox import Finished, Surroundings, hand_over, isolation, run_limited
from prbench.redaction import redact_text

META = "prbench-env.json"
# Writes the repository's files at the base commit into a directory; may return the release
# that commit descends from ("5.4.0"), for projects that take their version from git.
ExportCheckout = Callable[[Path], str | None]
PRODUCED = "checkout"  # what the checkout build made, under the environment's root
# What decides what a recipe installs, besides the recipe: read at the task's base commit.
PROJECT_FILES = ("setup.py", "setup.cfg", "pyproject.toml")
PYTHON_VERSION = re.compile(r"^3\.\d{1,2}$")
# Between requirements files of which the first present is installed (SWE-bench's harness
# looks for a repository's requirements in several places).
ALTERNATIVES = "|"
# Builds run as one fixed user (where the sandbox changes users), so that uv's download cache
# can be shared by every build; below the range validations draw their users from.
BUILD_UID = 1_999_999
LOG_TAIL_LINES = 30
ENVIRONMENT_MARK = "<environment>"  # where a build log names the directory it builds in
# What a build needs of the worker's environment to reach the package index (its proxy, the
# certificates a proxy that inspects TLS signs with); nothing else of it goes in.
NETWORK_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY",
                     "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")  # fmt: skip
BUILD_LOG_LIMIT = 200_000


class EnvironmentUnavailable(Exception):
    """The task's environment cannot be had on this worker: its interpreter is missing, or
    its build failed. The platform's failure, never a model's."""


@dataclass(frozen=True)
class Recipe:
    """How to make a task's environment (see the module docstring). ``project`` is how the
    project itself is installed, in pip's words with ``.`` for the checkout: "-e .",
    "-e .[test]", or "" for not at all."""

    python: str
    packages: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    project: str = "-e ."
    pre_install: tuple[str, ...] = ()
    system_packages: tuple[str, ...] = ()
    test_env: tuple[tuple[str, str], ...] = ()
    # Resolve as the package index stood then (an ISO date or time; uv's --exclude-newer): an
    # old version of a project installs what its developers had, not today's releases (today's
    # setuptools has no pkg_resources, which 2021's sqlfluff imports).
    exclude_newer: str = ""
    # A shell command run in the checkout after the project's install, and again in each
    # validation's checkout after the patch (see the module docstring); "" for none.
    checkout_build: str = ""

    @classmethod
    def from_fields(cls, fields: dict) -> Recipe:
        return cls(
            python=str(fields.get("python") or ""),
            packages=tuple(fields.get("packages") or ()),
            requirements=tuple(fields.get("requirements") or ()),
            project=str(fields.get("project") or ""),
            pre_install=tuple(fields.get("pre_install") or ()),
            system_packages=tuple(fields.get("system_packages") or ()),
            test_env=tuple(sorted((str(k), str(v)) for k, v in (fields.get("test_env") or {}).items())),
            exclude_newer=str(fields.get("exclude_newer") or ""),
            checkout_build=str(fields.get("checkout_build") or ""),
        )

    def as_fields(self) -> dict:
        fields = asdict(self)
        fields["test_env"] = dict(self.test_env)
        return {name: list(value) if isinstance(value, tuple) else value for name, value in fields.items()}

    @property
    def needs(self) -> tuple[str, ...]:
        return needs_of(self.python, self.system_packages)

    def dependency_paths(self) -> tuple[str, ...]:
        files = [path for entry in self.requirements for path in entry.split(ALTERNATIVES)]
        return (*files, *(PROJECT_FILES if self.project else ()))


def environment_key(recipe: Recipe, dependency_files: dict[str, str], commit: str = "") -> str:
    """The recipe and what its dependency files hold (a missing file counts as missing); with
    a checkout build, the base ``commit`` too: what it compiles is that commit's source."""
    fields = recipe.as_fields()
    if not recipe.checkout_build:
        del fields["checkout_build"]  # the keys of recipes without one stay what they were
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    if recipe.checkout_build:
        digest.update(f"\0commit\0{commit}".encode())
    for path in recipe.dependency_paths():
        content = dependency_files.get(path)
        digest.update(f"\0{path}\0".encode())
        digest.update(b"-" if content is None else hashlib.sha256(content.encode()).digest())
    return digest.hexdigest()[:32]


# -- interpreters ---------------------------------------------------------------------------


@functools.cache
def available_pythons() -> dict[str, str]:
    """The interpreters this worker can make environments from, by ``3.x`` version: those
    named in PRBENCH_PYTHONS, else every ``python3.x`` on PATH and under pyenv."""
    candidates = list(settings.PRBENCH_PYTHONS)
    if not candidates:
        candidates += [path for minor in range(6, 16) if (path := shutil.which(f"python3.{minor}"))]
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
        candidates += sorted(glob.glob(str(pyenv / "3.*" / "bin" / "python3")))
        candidates.append(sys.executable)
    # All at once: a pyenv shim is a chain of shell scripts, and a worker asked seventeen of them
    # in turn for 5 s idle and over 30 s on a busy machine, longer than a worker may take to start.
    with ThreadPoolExecutor(max_workers=max(1, len(candidates))) as pool:
        said = list(pool.map(_version_of, dict.fromkeys(candidates)))
    found: dict[str, str] = {}
    for version, executable in said:  # in the candidates' order: the first one of a version wins
        if version:
            found.setdefault(version, executable)
    return dict(sorted(found.items(), key=lambda item: int(item[0].split(".")[1])))


def _version_of(python: str) -> tuple[str, str]:
    """Its ``3.x`` version and real executable (a pyenv shim is a script that finds one)."""
    try:
        said = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"],
            capture_output=True,
            timeout=10,
            text=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "", ""
    version, _, executable = said.stdout.strip().partition("\n")
    if said.returncode != 0 or not PYTHON_VERSION.match(version):
        return "", ""
    return version, executable or python


# -- needs and capabilities -----------------------------------------------------------------
# What a recipe needs of a worker, and what a worker has, in one vocabulary of names: the
# queues builds and validations are routed to are named from them (experiments/attempt_queue.py,
# prbench/queues.py), and a worker listens to the queues whose needs it has.
PYTHON_NEED = "python"
SYSTEM_NEED = "sys:"


def needs_of(python: str, system_packages: Iterable[str] = ()) -> tuple[str, ...]:
    """A recipe's needs, canonical and sorted: ("python3.9",), ("python3.11", "sys:ffmpeg")."""
    needs = {f"{SYSTEM_NEED}{name.strip()}" for name in system_packages if name.strip()}
    if python:
        needs.add(f"{PYTHON_NEED}{python}")
    return tuple(sorted(needs))


def capabilities(system_packages: Iterable[str] = ()) -> tuple[str, ...]:
    """This worker's capabilities: its interpreters, and which of ``system_packages`` it has
    (a worker cannot list every package it has, so it is asked about those recipes name)."""
    present = [name for name in set(system_packages) if name.strip() and _system_package_present(name.strip())]
    return tuple(sorted({*needs_of("", present), *(f"{PYTHON_NEED}{version}" for version in available_pythons())}))


def describe_needs(needs: Iterable[str]) -> str:
    """In words, for "waiting for a worker with ...": "Python 3.9 and system package ffmpeg"."""
    pythons = [f"Python {need.removeprefix(PYTHON_NEED)}" for need in needs if need.startswith(PYTHON_NEED)]
    packages = [need.removeprefix(SYSTEM_NEED) for need in needs if need.startswith(SYSTEM_NEED)]
    if packages:
        pythons.append(f"system package{'s' if len(packages) > 1 else ''} {', '.join(packages)}")
    return " and ".join(pythons)


def missing_need(recipe: Recipe) -> str:
    """What this worker lacks to build the recipe ("" when nothing): its interpreter, or a
    system package it names (looked for as a program or a Debian package)."""
    if recipe.python not in available_pythons():
        return f"needs Python {recipe.python}"
    if absent := [name for name in recipe.system_packages if not _system_package_present(name)]:
        return f"needs system packages {', '.join(absent)}"
    return ""


@functools.cache
def _system_package_present(name: str) -> bool:
    if shutil.which(name):
        return True
    return Path(f"/var/lib/dpkg/info/{name}.list").exists() or bool(glob.glob(f"/var/lib/dpkg/info/{name}:*.list"))


# -- built environments ---------------------------------------------------------------------


@dataclass(frozen=True)
class Runtime:
    """A built environment, as a validation uses it."""

    root: Path
    python: str  # the venv's interpreter
    base_prefix: str  # the interpreter it was made from: the sandbox must show it too
    import_roots: tuple[str, ...]  # relative to the checkout, "" for the checkout itself
    test_env: tuple[tuple[str, str], ...] = ()
    checkout_build: str = ""  # run in each validation's checkout after the patch ("" for none)

    @property
    def produced(self) -> Path:
        """What the checkout build made at the base commit, as paths relative to the checkout."""
        return self.root / PRODUCED

    def surroundings(self, checkout: str) -> Surroundings:
        venv = self.root / "venv"
        roots = [str(Path(checkout, root)) if root else checkout for root in self.import_roots]
        variables = {
            **dict(self.test_env),
            "VIRTUAL_ENV": str(venv),
            "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYTHONPATH": ":".join(roots),
        }
        return Surroundings(tuple(variables.items()), keep=(str(self.root), self.base_prefix))


def cache_dir() -> Path:
    return Path(settings.PRBENCH_ENV_CACHE_DIR)


def environment_path(key: str) -> Path:
    return cache_dir() / key


def runtime(key: str) -> Runtime | None:
    """The built environment under ``key`` on this worker, or None."""
    try:
        meta = json.loads((environment_path(key) / META).read_text())
    except (OSError, ValueError):
        return None
    return Runtime(
        root=environment_path(key),
        python=str(environment_path(key) / "venv" / "bin" / "python"),
        base_prefix=meta["base_prefix"],
        import_roots=tuple(meta["import_roots"]),
        test_env=tuple((str(name), str(value)) for name, value in meta.get("test_env", [])),
        checkout_build=str(meta.get("checkout_build", "")),
    )


@contextlib.contextmanager
def in_use(key: str) -> Iterator[None]:
    """Held while a validation uses the environment: ``prune`` leaves it alone meanwhile."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{key}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            os.utime(handle.fileno())  # when it was last used, for eviction
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def building(key: str) -> Iterator[None]:
    """Held while the environment is built: a second worker waits, then finds it built."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{key}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class BuildLog:
    """What a build did, step by step; ``report`` is called after each step (progress)."""

    report: Callable[[BuildLog], None] = lambda log: None
    steps_total: int = 0
    steps_done: int = 0
    step: str = ""
    lines: list[str] = field(default_factory=list)

    # Every line passes the redaction chokepoint: a step's command line names the package
    # index, and a failing pip or uv prints the proxy or index address back, credentials and
    # all; the log is shown on the dataset page.
    def begin(self, step: str) -> None:
        self.step = redact_text(step)
        self.lines.append(f"$ {self.step}")
        self.report(self)

    def finish(self, output: str) -> None:
        self.lines.append(redact_text(output.rstrip()))
        self.steps_done += 1
        self.report(self)

    def text(self) -> str:
        text = "\n".join(self.lines)
        return text if len(text) <= BUILD_LOG_LIMIT else "…\n" + text[-BUILD_LOG_LIMIT:]

    def tail(self) -> str:
        return "\n".join(self.text().splitlines()[-LOG_TAIL_LINES:])


class BuildFailed(EnvironmentUnavailable):
    def __init__(self, message: str, log: BuildLog | None = None) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class Built:
    key: str
    runtime: Runtime
    seconds: float
    size_bytes: int
    log: str
    reused: bool  # another worker (or an earlier build) had made it


def build(key: str, recipe: Recipe, export_checkout: ExportCheckout, log: BuildLog | None = None) -> Built:
    """Build the environment ``key`` from ``recipe`` unless it is already built; the
    repository's files at the base commit are written by ``export_checkout(directory)``.
    Raises BuildFailed (with the log) when a step fails."""
    log = log or BuildLog()
    with building(key):
        if found := runtime(key):
            return Built(key, found, 0.0, _size(found.root), "", reused=True)
        started = time.monotonic()
        partial = cache_dir() / f"{key}.partial-{uuid.uuid4().hex[:8]}"
        try:
            found = _build_into(partial, key, recipe, export_checkout, log)
            partial.rename(environment_path(key))
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        seconds = time.monotonic() - started
        built = runtime(key)
        assert built is not None
        return Built(key, built, seconds, _size(built.root), log.text(), reused=False)


def _build_into(partial: Path, key: str, recipe: Recipe, export_checkout: ExportCheckout, log: BuildLog) -> Runtime:
    if need := missing_need(recipe):
        raise BuildFailed(need, log)
    interpreter = available_pythons()[recipe.python]
    source, venv = partial / "src", partial / "venv"
    source.mkdir(parents=True)
    release = export_checkout(source) or ""
    tracked = _files_under(source)
    uid = BUILD_UID if isolation().separate_user else None
    uv_cache = cache_dir() / ".uv-cache"
    uv_cache.mkdir(exist_ok=True)
    hand_over(partial, uid)
    hand_over(uv_cache, uid)
    try:
        steps = _steps(recipe, interpreter, source, venv)
    except BuildFailed as exc:
        raise BuildFailed(str(exc), log) from None
    log.steps_total = len(steps)
    variables = {
        **{name: os.environ[name] for name in NETWORK_VARIABLES if name in os.environ},
        "UV_CACHE_DIR": str(uv_cache),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "PIP_CONFIG_SETTINGS": "editable_mode=compat",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_CONFIG_FILE": "/dev/null",  # the machine's pip settings are not the recipe's
        # setuptools-scm reads the version from git history, which the export does not have
        # (pytest, attrs...): the last release tag stands in, as the harness's clone gives it.
        **({"SETUPTOOLS_SCM_PRETEND_VERSION": release} if release else {}),
        **({"UV_EXCLUDE_NEWER": resolve_at} if (resolve_at := resolution_date(recipe)) else {}),
        # uv leaves the installed packages uncompiled, and a sealed environment never gets the
        # bytecode written (nor may a validation write it): every test run would compile pytest
        # and the rest from source again, about a third of a second each (bench/validation.py).
        "UV_COMPILE_BYTECODE": "1",
    }
    surroundings = Surroundings(
        tuple(variables.items()),
        keep=(_prefix_of(interpreter), str(Path(_uv()).parent.parent)),
        network=True,
        writable=(str(partial), str(uv_cache)),
    )
    for title, command in steps:
        log.begin(title)
        finished = _run_step(command, source, uid, surroundings)
        # Pages show the log: it names no directory of the server's.
        log.finish(finished.output.replace(str(partial), ENVIRONMENT_MARK).replace(str(cache_dir()), "<cache>"))
        if finished.timed_out or finished.returncode != 0:
            why = "timed out" if finished.timed_out else f"exited with {finished.returncode}"
            raise BuildFailed(f"the build step `{title}` {why}", log)
    roots = _relocate_editable_paths(venv, source)
    # With a checkout build, all it made; without, only the Python files the install wrote
    # into the checkout (setuptools-scm's ``_version.py``: pytest reports version "unknown"
    # without it and refuses its own plugins), never binaries, which are one commit's.
    _keep_produced(source, tracked, partial / PRODUCED, python_only=not recipe.checkout_build)
    shutil.rmtree(source)
    _seal(partial)
    base_prefix = _prefix_of(interpreter)
    meta = {
        "key": key,
        "recipe": recipe.as_fields(),
        "base_prefix": base_prefix,
        "import_roots": roots,
        "test_env": [list(pair) for pair in recipe.test_env],
        "checkout_build": recipe.checkout_build,
        "built_at": time.time(),
    }
    (partial / META).write_text(json.dumps(meta, indent=2))
    (partial / META).chmod(0o444)
    python = str(venv / "bin" / "python")
    return Runtime(partial, python, base_prefix, tuple(roots), recipe.test_env, recipe.checkout_build)


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _prefix_of(interpreter: str) -> str:
    """The interpreter's installation (``.../3.9.18`` for ``.../3.9.18/bin/python3``)."""
    said = subprocess.run(
        [interpreter, "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, timeout=10
    )
    return said.stdout.strip() or str(Path(interpreter).resolve().parent.parent)


def _index_options(index_flag: str = "--default-index") -> list[str]:
    """Where packages come from, in uv's words (pip's: ``index_flag="--index-url"``)."""
    options = []
    if settings.PRBENCH_ENV_INDEX_URL == "none":
        options.append("--no-index")
    elif settings.PRBENCH_ENV_INDEX_URL:
        options += [index_flag, settings.PRBENCH_ENV_INDEX_URL]
    if settings.PRBENCH_ENV_FIND_LINKS:
        options += ["--find-links", settings.PRBENCH_ENV_FIND_LINKS]
    return options


def _steps(recipe: Recipe, interpreter: str, source: Path, venv: Path) -> list[tuple[str, list[str]]]:
    """(what the log calls it, argv) for each step of the build."""
    uv = _uv()
    install = [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *_index_options()]
    # A project's own install (and, through pkg_resources, often its tests) expects pip and
    # setuptools in the environment, as a virtualenv or a conda environment has them.
    seed = ["--seed", *_index_options()] if recipe.project else []
    venv_step = [uv, "venv", "--python", interpreter, *seed, str(venv)]
    steps: list[tuple[str, list[str]]] = [(f"uv venv --python {recipe.python}", venv_step)]
    steps += [(command, ["/bin/sh", "-c", command]) for command in recipe.pre_install]
    # As SWE-bench's harness orders them: the requirements files, then the pinned packages,
    # whose pins must win over the files'.
    for entry in recipe.requirements:
        requirements = _first_present(source, entry)
        if is_conda_file(requirements):
            steps.append(_conda_file_step(source, requirements, install))
            continue
        if recipe.project:  # the project step installs the checkout: its own line is left out
            _drop_self_install(source, source / requirements)
        steps.append((f"install -r {requirements}", [*install, "-r", str(source / requirements)]))
    if recipe.packages:
        steps.append(_packages_step(recipe, install))
    if recipe.project:
        # Its dependencies through uv, resolved at the recipe's date like the rest (a plain
        # install, whose wheel an old setuptools can build); then the project itself, editable,
        # with the environment's own pip, as the harness installs it: an old setuptools has no
        # PEP 660 editable build, which uv requires, and pip falls back to ``setup.py develop``.
        # Where setuptools has one, its "compat" mode writes a plain path into a .pth file,
        # which can be moved to each validation's checkout (its default finder hard-codes it).
        target = [str(source) + arg[1:] if arg.startswith(".") else arg for arg in shlex.split(recipe.project)]
        plain = [arg for arg in target if arg not in ("-e", "--editable")]
        steps.append((f"install {' '.join(shlex.split(recipe.project)[-1:])} and its dependencies", [*install, *plain]))
        if _built_by_setuptools(source):
            # Without isolation: the environment's own setuptools, of the recipe's date (today's
            # turns ``setup.py develop`` into a pip call of its own, which an old pip cannot take).
            python = str(venv / "bin" / "python")
            pip = [python, "-m", "pip", "install", "--no-input", "--no-deps", "--no-build-isolation"]
            steps.append(
                (f"pip install --no-deps {recipe.project}", [*pip, *_index_options("--index-url"), "-e", *plain])
            )
        else:  # hatchling, flit, poetry...: PEP 660 from the start, which uv builds
            steps.append((f"install --no-deps {recipe.project}", [*install, "--no-deps", "-e", *plain]))
    if recipe.checkout_build:
        steps.append((f"checkout build: {recipe.checkout_build}", in_environment(venv, recipe.checkout_build)))
    return steps


# When each CPython minor version came out. Packages older than the interpreter mostly do not
# run on it (setuptools 41 calls HTMLParser.unescape, gone in 3.9; pytest 2.9 fails to start on
# 3.9), and SWE-bench's harness, which runs 2016's requests on Python 3.9, installed what the
# index held when its images were built, in 2024.
PYTHON_RELEASED = {
    "3.6": "2016-12-23", "3.7": "2018-06-27", "3.8": "2019-10-14", "3.9": "2020-10-05",
    "3.10": "2021-10-04", "3.11": "2022-10-24", "3.12": "2023-10-02", "3.13": "2024-10-07",
}  # fmt: skip
INTERPRETER_SETTLES = timedelta(days=183)  # the releases that fixed what a new Python broke


def resolution_date(recipe: Recipe) -> str:
    """The date uv resolves the recipe at: its own, but never earlier than half a year after
    its interpreter came out ("" for none: the index as it stands)."""
    released = PYTHON_RELEASED.get(recipe.python)
    if not recipe.exclude_newer or released is None:
        return recipe.exclude_newer
    floor = (date.fromisoformat(released) + INTERPRETER_SETTLES).isoformat()
    return floor if recipe.exclude_newer[:10] < floor else recipe.exclude_newer


def _packages_step(recipe: Recipe, install: list[str]) -> tuple[str, list[str]]:
    """The recipe's packages, at its date but for the versions it pins exactly. A pinned
    release later than the date can need dependencies later than it too (SWE-bench's Sphinx
    recipes pin tox 4.16.0, of 2024, for tasks of 2022, and tox wants cachetools 5.3.3): if
    the dated resolution fails, the packages resolve as the index stands today, and the log
    shows both tries."""
    pins = tuple(_exact_pins(recipe.packages))
    title = f"install {' '.join(recipe.packages)}"
    if not pins or not recipe.exclude_newer:
        return title, [*install, *recipe.packages]
    dated = [*install, *[f"--exclude-newer-package={name}=false" for name in pins]]
    today = [*install, f"--exclude-newer={datetime.now(UTC).isoformat(timespec='seconds')}"]
    script = (
        f"{shlex.join([*dated, *recipe.packages])} || "
        "{ echo 'Not resolvable at the recipe date: resolving as the package index stands today.'; "
        f"{shlex.join([*today, *recipe.packages])}; }}"
    )
    return title, ["/bin/sh", "-c", script]


def _conda_file_step(source: Path, conda_file: str, install: list[str]) -> tuple[str, list[str]]:
    """A conda environment file's dependencies, installed as pip requirements (the harness
    creates a conda environment from it); what PyPI has no package for is named in the step's
    title, for the log: the worker's system must provide it or the tests go without."""
    kept, dropped = environment_yml_requirements((source / conda_file).read_text(errors="replace"))
    translated = source / f"{conda_file}.prbench-requirements.txt"
    translated.write_text("".join(f"{requirement}\n" for requirement in kept))
    title = f"install {conda_file}'s dependencies from the package index"
    if dropped:
        title += f" (not on PyPI, left to the worker: {', '.join(dropped)})"
    return title, [*install, "-r", str(translated)]


SELF_INSTALL = re.compile(r"\s*(?:(?:-e|--editable)\s+)?\.(?:/)?(?:\[[^\]]*\])?\s*(?:#.*)?")


def _drop_self_install(source: Path, requirements: Path, seen: set[Path] | None = None) -> None:
    """Leave the checkout's own line (``-e .``, ``.[test]``) out of a requirements file and of
    those it includes, in the build's copy: the project step installs it, with the pip that
    can build it editable (uv needs a PEP 660 backend, which an old setuptools lacks)."""
    seen = set() if seen is None else seen
    if requirements in seen or not requirements.is_file():
        return
    seen.add(requirements)
    lines = requirements.read_text(errors="replace").splitlines()
    kept = [line for line in lines if not SELF_INSTALL.fullmatch(line)]
    if len(kept) != len(lines):
        requirements.write_text("\n".join(kept) + "\n")
    for line in kept:
        if include := re.fullmatch(r"\s*(?:-r|--requirement)\s*(\S+)\s*", line):
            _drop_self_install(source, requirements.parent / include.group(1), seen)


def in_environment(venv: Path, command: str) -> list[str]:
    """``command`` for the shell, with the environment's ``python`` (and its programs) first
    on PATH, as a validation's commands have them."""
    activate = f'VIRTUAL_ENV={shlex.quote(str(venv))}; PATH="$VIRTUAL_ENV/bin:$PATH"; export VIRTUAL_ENV PATH'
    return ["/bin/sh", "-c", f"{activate}\n{command}"]


EXACT_PIN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*===?\s*[^,;\s*]+\s*")


def _exact_pins(packages: Sequence[str]) -> list[str]:
    """The packages pinned to one version (``name==1.2``): the recipe's date does not hold
    them back. A recipe's author names that version on purpose, later than the date at times
    (SWE-bench's harness pins setuptools 70.0.0 for Flask 2.3, whose tasks date from 2023);
    what they depend on resolves at the date where it can (``_packages_step``)."""
    return [match.group(1) for package in packages if (match := EXACT_PIN.fullmatch(package))]


def _built_by_setuptools(source: Path) -> bool:
    """Whether the project builds with setuptools: no ``pyproject.toml``, none naming a build
    backend, or one naming setuptools'."""
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text())
    except (OSError, ValueError):
        return True
    backend = project.get("build-system", {}).get("build-backend", "")
    return not backend or backend.startswith("setuptools")


def _first_present(source: Path, entry: str) -> str:
    """A requirements entry is a path, or alternatives ``a|b``: the first that exists."""
    for path in entry.split(ALTERNATIVES):
        if (source / path).is_file():
            return path
    raise BuildFailed(f"the repository has no requirements file {' or '.join(entry.split(ALTERNATIVES))}")


def _run_step(command: list[str], source: Path, uid: int | None, surroundings: Surroundings) -> Finished:
    variables = dict(surroundings.variables)
    variables["PATH"] = f"{Path(command[0]).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return run_limited(
        command,
        str(source),
        settings.PRBENCH_ENV_BUILD_TIMEOUT_SECONDS,
        uid=uid,
        output_limit=40_000,
        surroundings=replace(surroundings, variables=tuple(variables.items())),
    )


def _relocate_editable_paths(venv: Path, source: Path) -> list[str]:
    """Turn the editable install's paths into the checkout's import roots, and drop them
    from the venv (the build's checkout is about to go). No editable path: the checkout."""
    roots: list[str] = []
    for pth in venv.glob("lib/python3*/site-packages/*.pth"):
        lines = pth.read_text().splitlines()
        kept = []
        for line in lines:
            path = Path(line.strip()) if line.strip() and not line.startswith(("#", "import")) else None
            if path is not None and path.is_relative_to(source):
                relative = str(path.relative_to(source))
                roots.append("" if relative == "." else relative)
            else:
                kept.append(line)
        if kept != lines:
            pth.write_text("\n".join(kept) + ("\n" if kept else ""))
    roots = list(dict.fromkeys(roots)) or [""]
    # ``setup.py develop`` leaves the project's metadata (its version, its entry points:
    # sqlfluff finds its own rules through them) in the checkout, which is about to go: it
    # moves into site-packages, where importlib.metadata finds it as well.
    for site_packages in venv.glob("lib/python3*/site-packages"):
        for root in roots:
            for metadata in (source / root).glob("*.egg-info"):
                if not (site_packages / metadata.name).exists():
                    shutil.move(str(metadata), site_packages / metadata.name)
    return roots


def _files_under(root: Path) -> set[str]:
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, dirs, files in os.walk(root)
        for name in [*files, *(name for name in dirs if os.path.islink(os.path.join(directory, name)))]
    }


def _keep_produced(source: Path, tracked: set[str], target: Path, python_only: bool = False) -> None:
    """Move what the build made in the checkout (the files the commit does not track) to
    ``target``, keeping their times: copied into a validation's checkout, they are newer than
    its sources, so the build there remakes only what the patch touched. A link that leads
    outside the checkout is left behind."""
    for relative in sorted(_files_under(source) - tracked):
        path = source / relative
        if python_only and (not relative.endswith(".py") or "__pycache__" in relative or path.is_symlink()):
            continue
        if path.is_symlink() and not path.resolve().is_relative_to(source.resolve()):
            continue
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, target / relative)


def warm_start(environment: Runtime, checkout: Path) -> None:
    """Put what the checkout build made at the base commit into a validation's ``checkout``
    (before it is handed to the sandbox user), writable there: the build may remake it."""
    produced = environment.produced
    if not produced.is_dir():
        return
    # Older than whatever changes the checkout from here on (a patch, the task's tests), newer
    # than the files the export wrote (their commit's time): the build then remakes exactly
    # what a change touched. Kept as built, a product made a moment ago could be newer than
    # the patch applied next, and the build skipped it as up to date (the fix never compiled).
    stamp = time.time() - 1
    for directory, dirs, files in os.walk(produced):
        relative = Path(directory).relative_to(produced)
        (checkout / relative).mkdir(parents=True, exist_ok=True)
        for name in [*files, *(name for name in dirs if os.path.islink(os.path.join(directory, name)))]:
            copied = checkout / relative / name
            if copied.is_symlink() or copied.is_file():
                copied.unlink()
            shutil.copy2(Path(directory, name), copied, follow_symlinks=False)
            if not copied.is_symlink():
                copied.chmod(copied.stat().st_mode | 0o200)
                os.utime(copied, (stamp, stamp))


def _seal(root: Path) -> None:
    """The worker's, read-only: no validation's user may change what every task shares."""
    uid, gid = os.geteuid(), os.getegid()
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            os.lchown(path, uid, gid)
            if not os.path.islink(path):
                mode = os.lstat(path).st_mode
                os.chmod(path, mode & 0o555)
    os.chown(root, uid, gid)
    os.chmod(root, 0o555)


def _size(root: Path) -> int:
    total = 0
    for directory, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(directory, name)).st_size
    return total


# -- the cache ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CachedEnvironment:
    key: str
    size_bytes: int
    last_used: float
    recipe: dict


def cached() -> list[CachedEnvironment]:
    """Every built environment on this worker, least recently used first."""
    found = []
    for meta_file in cache_dir().glob(f"*/{META}"):
        try:
            meta = json.loads(meta_file.read_text())
        except (OSError, ValueError):
            continue
        key = meta_file.parent.name
        lock = cache_dir() / f"{key}.lock"
        last_used = lock.stat().st_mtime if lock.exists() else meta.get("built_at", 0)
        found.append(CachedEnvironment(key, _size(meta_file.parent), last_used, meta.get("recipe", {})))
    return sorted(found, key=lambda env: env.last_used)


def prune(max_bytes: int | None = None, keys: list[str] | None = None) -> list[CachedEnvironment]:
    """Remove least recently used environments until the cache holds at most ``max_bytes``
    (PRBENCH_ENV_CACHE_BYTES by default), or exactly ``keys``; one in use is skipped.
    Returns what was removed."""
    limit = settings.PRBENCH_ENV_CACHE_BYTES if max_bytes is None else max_bytes
    environments = cached()
    total = sum(env.size_bytes for env in environments)
    removed = []
    for env in environments:
        if keys is None and total <= limit:
            break
        if keys is not None and env.key not in keys:
            continue
        if _remove_unless_in_use(env.key):
            removed.append(env)
            total -= env.size_bytes
    return removed


def _remove_unless_in_use(key: str) -> bool:
    with open(cache_dir() / f"{key}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            path = environment_path(key)
            doomed = path.with_name(f"{key}.removing-{uuid.uuid4().hex[:8]}")
            path.rename(doomed)  # gone for validations at once; deleting takes longer
            for directory, dirs, _ in os.walk(doomed):
                for name in dirs:
                    os.chmod(os.path.join(directory, name), 0o755)
            os.chmod(doomed, 0o755)
            shutil.rmtree(doomed)
            return True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
