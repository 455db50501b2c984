"""Finding, checking and measuring unified diffs in model output."""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

# Any spelling git might accept: leading zeros, extra blanks, a carriage return.
SYMLINK_MODE = re.compile(r"^(new file mode|new mode|old mode|deleted file mode)\s+0*120000\s*$", re.MULTILINE)
FENCE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


class PatchRejected(Exception):
    """The patch must not be applied: malformed, escaping the work directory, a link, compiled
    Python, or (where the caller refuses them) binary."""


@dataclass(frozen=True)
class PatchStats:
    files: int
    added: int
    removed: int
    paths: tuple[str, ...] = ()  # where each changed file ends up (its old path if deleted)

    @property
    def lines_changed(self) -> int:
        return self.added + self.removed


def extract_patch(text: str) -> str:
    """The diff in a model answer: its fenced blocks that look like diffs, joined (a model
    often gives one block per file), or the whole answer when it is a bare diff. A block
    that changes a file an earlier block already changed is left out: models restate
    their patch, and the first statement is the answer (as SWE-bench's extraction takes
    the first). "" when there is none."""
    blocks = [_with_final_newline(block) for block in FENCE.findall(text) if _looks_like_diff(block)]
    if blocks:
        return "".join(_without_restatements(blocks))
    stripped = text.strip("\n")
    if _looks_like_diff(stripped):
        return _with_final_newline(stripped)
    return ""


def _without_restatements(blocks: list[str]) -> list[str]:
    kept, seen = [blocks[0]], _touched(blocks[0])
    for block in blocks[1:]:
        touched = _touched(block)
        if touched and not touched & seen:
            kept.append(block)
            seen |= touched
    return kept


def _touched(block: str) -> set[str]:
    """The files a block changes, read from its headers (it may not parse as a whole): the
    new name, or the old one for a deletion."""
    lines = block.splitlines()
    touched = set()
    for old, new in itertools.pairwise(lines):
        if old.startswith("--- ") and new.startswith("+++ "):
            source, target = (_strip_prefix(line[4:].split("\t")[0].strip()) for line in (old, new))
            touched.add(target or source)
    return touched


def _looks_like_diff(text: str) -> bool:
    return text.lstrip().startswith(("diff --git", "--- ")) and "\n+++ " in text


def _with_final_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def check_patch(patch: str, binary: bool = False) -> PatchStats:
    """Parse and vet a patch before it touches a disk. Raises PatchRejected with the reason.

    ``binary``: accept binary hunks, as SWE-bench's harness does for a model's patch. It
    applies them with ``git apply`` (a ``GIT binary patch`` with full index lines applies when
    its preimage matches; one that does not leaves the patch not applied), and a ``Binary files
    ... differ`` line carries no content: ``git apply`` refuses it and ``patch`` skips it (a new
    such file comes out empty), so the rest of the patch applies. A binary hunk's path is vetted
    like any other; what Python would load in place of source is refused whatever its form
    (COMPILED_PYTHON). Task supplies (imports, mining) keep refusing them: a task's test patch
    with a binary hunk never applies whole."""
    if not patch.strip():
        raise PatchRejected("the patch is empty")
    if SYMLINK_MODE.search(patch):
        raise PatchRejected("symbolic links are not accepted (a link can aim a later write outside the checkout)")
    if not binary and ("GIT binary patch" in patch or re.search(r"^Binary files .* differ$", patch, re.MULTILINE)):
        raise PatchRejected("binary patches are not accepted")
    try:
        # Names, kinds and counts are all a check needs: unidiff's metadata pass validates
        # every hunk line and counts them as the full parse does, without building a Line
        # object per line, at a third of the CPU. The full parse was a tenth of a worker's
        # CPU per attempt (issue 31); test_patches.py holds the two to the same verdicts.
        files = PatchSet(patch, metadata_only=True)
    except UnidiffParseError as exc:
        raise PatchRejected(f"malformed patch: {exc}") from None
    if not files:
        raise PatchRejected("malformed patch: no file changes found")
    for patched_file in files:
        if patched_file.is_binary_file and not binary:
            raise PatchRejected(f"binary patches are not accepted ({patched_file.path})")
        for raw in (patched_file.source_file, patched_file.target_file):
            _vet_path(_strip_prefix(raw))
    paths = tuple(_strip_prefix(f.target_file) or _strip_prefix(f.source_file) for f in files)
    return PatchStats(files=len(files), added=files.added, removed=files.removed, paths=paths)


def _strip_prefix(path: str) -> str:
    if path == "/dev/null":
        return ""
    return path[2:] if path[:2] in ("a/", "b/") else path


@functools.lru_cache(maxsize=4096)
def _vet_path(path: str) -> None:
    """Both checks of a path a patch names; a path that passed is remembered, since a run's
    patches name the same few files again and again (building its PurePosixPath twice per
    path was 2% of a worker's CPU, issue 31). A refusal raises each time: never remembered."""
    check_relative_path(path)
    check_not_compiled(path)


def check_relative_path(path: str) -> None:
    """Refuse a path that would land outside the work directory (or inside .git)."""
    if not path:
        return
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or "\\" in path:
        raise PatchRejected(f"path {path!r} escapes the work directory")
    if ".git" in pure.parts:
        raise PatchRejected(f"path {path!r} touches .git")


# Python loads a compiled module in place of a source file of the same name: an extension
# module before it, a package directory before it, and a cached .pyc under __pycache__ whose
# recorded size and time (known: a checkout's files carry their commit's time) match it. Such a
# file could replace a test file the validation puts back, or a runner hook, without naming it.
COMPILED_SUFFIXES = (".pyc", ".pyo", ".pyd", ".so")


def check_not_compiled(path: str) -> None:
    pure = PurePosixPath(path)
    if pure.name.endswith(COMPILED_SUFFIXES) or "__pycache__" in pure.parts:
        raise PatchRejected(f"compiled Python is not accepted ({path}): it would be loaded in place of source")


# Files that decide whether tests pass. A patch is judged by the task's tests, so it may not
# edit them, add to them, or shadow the runner (a conftest hook can mark every test passed).
HARNESS_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "pytest.py",
        "sitecustomize.py",
        "usercustomize.py",
    }
)


def touches_test_harness(path: str) -> bool:
    pure = PurePosixPath(path)
    name = pure.name
    return (
        name in HARNESS_NAMES
        or name.startswith("test_")
        or name.endswith(("_test.py", ".pth"))
        or any(part in ("tests", "test", "_pytest") for part in pure.parts[:-1])
    )


# Files that run inside the test process wherever they sit: a patch may not add or change them
# under either rule. (A package named "pytest" is not one: pytest's own repository has one.)
RUNNER_HOOKS = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.py"})


class HarnessRule:
    """Which changes count as "changing the tests". STRICT: any test file, test directory or
    test configuration (mined tasks: their tests are whatever the project's look like).
    TASK: the task's own test files and the directories they sit in, test files by name and
    runner hooks, as SWE-bench's harness has it: a project whose source is a test framework
    (pytest's ``_pytest/``) or whose fix touches its packaging (``setup.cfg``,
    ``pyproject.toml``, ``tox.ini``) can be fixed. A TASK with a test patch has a change to its
    tests undone rather than refused, as the harness does (``paths_to_reset``); runner hooks
    stay refused under both rules."""

    STRICT = "strict"
    TASK = "task"


def check_leaves_tests_alone(
    patch: str, protected: frozenset[str] = frozenset(), rule: str = HarnessRule.STRICT
) -> None:
    """Refuse changes to ``protected`` (the task's own test files, from its test patch) and,
    under ``rule``, to the tests or their harness. Under TASK with a test patch, a change to
    the task's tests is not refused but undone (``paths_to_reset``); runner hooks stay refused."""
    resets = _resets(protected, rule)
    test_dirs = _test_directories(protected)
    for path in _paths(patch):
        if resets:
            if path not in protected and _is_runner_hook(path):
                raise PatchRejected(f"the patch changes the task's test runner ({path})")
            continue
        if path in protected or _shadows(path, protected):
            raise PatchRejected(f"the patch changes the task's test file {path}")
        if rule == HarnessRule.TASK:
            if _in_directories(path, test_dirs) or _is_test_file_or_hook(path):
                raise PatchRejected(f"the patch changes the task's tests or their runner ({path})")
        elif touches_test_harness(path):
            raise PatchRejected(f"the patch changes the tests or their harness ({path})")


def paths_to_reset(patch: str, protected: frozenset[str], rule: str) -> frozenset[str]:
    """What SWE-bench's harness does instead of refusing: after the model's patch it checks the
    test patch's files out at the base commit, then applies the test patch. Under TASK with a
    test patch, these are the paths ``patch`` touches that are the task's tests, to be put back
    as they were at the base commit (removed if they were not there): the test patch's own
    files (the harness's set; a file the test patch adds too, which the harness leaves for the
    test patch to fail on), the files beside them, test files by name, and whatever would be
    imported in their place (a package of the same name). The harness keeps a model's change
    to a test file the test patch does not touch; here it is undone as well, as a change to the
    tests the task does not ask for. Empty under any other rule, where such a patch is refused."""
    if not _resets(protected, rule):
        return frozenset()
    test_dirs = _test_directories(protected)
    return frozenset(
        path
        for path in _paths(patch)
        if path in protected
        or _shadows(path, protected)
        or _in_directories(path, test_dirs)
        or _is_test_file_or_hook(path)
    )


def _resets(protected: frozenset[str], rule: str) -> bool:
    return rule == HarnessRule.TASK and bool(protected)


def _paths(patch: str) -> list[str]:
    """Every path the patch touches, old and new names."""
    paths = (_strip_prefix(raw) for patched in PatchSet(patch) for raw in (patched.source_file, patched.target_file))
    return [path for path in dict.fromkeys(paths) if path]


def _shadows(path: str, protected: frozenset[str]) -> bool:
    """A package directory Python would import instead of a protected module (``tests/x/``
    for ``tests/x.py``); a test file at the repository's root has no test directory to hold it."""
    parents = PurePosixPath(path).parents
    return any(str(parent) + ".py" in protected for parent in parents if parent.parts)


def _test_directories(test_files: frozenset[str]) -> frozenset[PurePosixPath]:
    """The directories the task's test files sit in (not the repository's root)."""
    return frozenset(PurePosixPath(path).parent for path in test_files if PurePosixPath(path).parent.parts)


def _in_directories(path: str, directories: frozenset[PurePosixPath]) -> bool:
    return any(PurePosixPath(path).is_relative_to(directory) for directory in directories)


def _is_test_file_or_hook(path: str) -> bool:
    name = PurePosixPath(path).name
    return _is_runner_hook(path) or name.startswith("test_") or name.endswith("_test.py")


def _is_runner_hook(path: str) -> bool:
    """A hook by name, or inside a package named like one (imported in the hook's place)."""
    pure = PurePosixPath(path)
    return (
        pure.name in RUNNER_HOOKS
        or pure.name.endswith(".pth")
        or any(f"{part}.py" in RUNNER_HOOKS for part in pure.parts[:-1] if part != "pytest")
    )


def gold_patch_refusal(gold_patch: str, test_patch: str, rule: str) -> str:
    """Why validation would refuse the task's own gold patch under ``rule``, or undo part of
    it as a change to the task's tests ("" when neither): such a task could never be resolved,
    so an import flags it."""
    if not gold_patch.strip():
        return ""
    protected = patch_paths(test_patch)
    try:
        check_leaves_tests_alone(gold_patch, protected=protected, rule=rule)
        undone = paths_to_reset(gold_patch, protected, rule)
    except PatchRejected as exc:
        return str(exc)
    except UnidiffParseError as exc:
        return f"malformed patch: {exc}"
    if undone:
        return f"the patch changes the task's tests, which validation puts back ({', '.join(sorted(undone))})"
    return ""


def patch_paths(patch: str) -> frozenset[str]:
    """Every path a (trusted) patch touches, old and new names; empty for no patch."""
    if not patch.strip():
        return frozenset()
    paths: set[str] = set()
    for patched_file in PatchSet(patch):
        paths.update(_strip_prefix(raw) for raw in (patched_file.source_file, patched_file.target_file))
    paths.discard("")
    return frozenset(paths)
