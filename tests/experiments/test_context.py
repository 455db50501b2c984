"""Files context for pull-request prompts, on a real (tiny) git repository."""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from evaluation.patches import PatchRejected
from experiments.context import (
    TRUNCATION_MARKER,
    FilesContext,
    _cached_index,
    bm25_context,
    oracle_context,
    rank_files,
    render_files,
    tokenize,
)

PARSER_AT_BASE = (
    "def parse_expression(source):\n"
    "    return build_tree(split_tokens(source))\n"
    "\n"
    "def split_tokens(source):\n"
    "    return source.split()\n"
)
RENDER = (
    "def render_value(value):\n"
    '    """Show the result as text, with the thousands separated by commas."""\n'
    '    return format(value, ",")\n'
)
README = "# Calculator\n\nKnown issue: the renderer fails on very big numbers.\n"
TWIN = "zebra = 'striped'\n"


@dataclass(frozen=True)
class Repository:
    work: Path  # the working copy the commits were made in
    clone: Path  # a bare clone, as the repository cache holds
    base: str  # the task's base commit
    head: str  # a later commit that changes calc/parser.py


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write(root: Path, path: str, content: str | bytes) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Repository:
    root = tmp_path_factory.mktemp("context")
    work = root / "work"
    work.mkdir()
    git(work, "init", "--quiet")
    files: dict[str, str | bytes] = {
        "calc/parser.py": PARSER_AT_BASE,
        "calc/render.py": RENDER,
        "README.md": README,
        "left/twin.py": TWIN,
        "right/twin.py": TWIN,
        # Binary despite a text suffix: only read_files' NUL check keeps it out.
        "notes/blob.txt": b"\0parse expression parse_expression ParseExpression fails\0",
        "logo.png": b"\x89PNG\r\n\x1a\n\0parse expression fails",
        # Every word a query could want, but too large to be worth indexing.
        "data/huge.txt": "parse expression fails zebra " * 20_000,
    }
    for path, content in files.items():
        write(work, path, content)
    git(work, "add", "--all")
    git(work, "commit", "--quiet", "-m", "base")
    base = git(work, "rev-parse", "HEAD").strip()
    write(work, "calc/parser.py", PARSER_AT_BASE + "\n# changed after the base commit\n")
    git(work, "commit", "--quiet", "-am", "later")
    head = git(work, "rev-parse", "HEAD").strip()
    clone = root / "clone.git"
    git(root, "clone", "--bare", "--quiet", str(work), str(clone))
    return Repository(work=work, clone=clone, base=base, head=head)


def gold_patch(repository: Repository) -> str:
    """A diff against the base commit touching calc/parser.py and creating calc/new.py."""
    scratch = repository.work.parent / "scratch"
    if not scratch.exists():
        git(repository.work.parent, "clone", "--quiet", str(repository.clone), str(scratch))
    git(scratch, "checkout", "--quiet", repository.base)
    write(scratch, "calc/parser.py", PARSER_AT_BASE.replace("split()", "split(' ')"))
    write(scratch, "calc/new.py", "NEW = True\n")
    git(scratch, "add", "--all")
    patch = git(scratch, "diff", "--cached", repository.base)
    git(scratch, "reset", "--quiet", "--hard", repository.base)
    return patch


def total_chars(context: FilesContext) -> int:
    return sum(len(content) for content in context.files.values())


def test_tokenize_splits_identifiers():
    assert tokenize("ParseExpression parse_expression HTTPServer.get_URL2 a") == [
        "parse",
        "expression",
        "parseexpression",
        "parse",
        "expression",
        "parseexpression",
        "http",
        "server",
        "httpserver",
        "get",
        "url",
        "geturl2",
    ]


def test_oracle_gives_the_patched_files_at_the_base_commit(repository):
    context = oracle_context(repository.clone, repository.base, gold_patch(repository))

    # calc/new.py does not exist at the base commit: nothing to show, and not "omitted".
    assert context == FilesContext(mode="oracle", files={"calc/parser.py": PARSER_AT_BASE}, omitted=0)


def test_oracle_rejects_a_malformed_patch(repository):
    with pytest.raises(PatchRejected):
        oracle_context(repository.clone, repository.base, "this is not a diff\n")


def test_oracle_truncates_a_file_larger_than_the_budget(repository):
    context = oracle_context(repository.clone, repository.base, gold_patch(repository), budget_chars=120)

    content = context.files["calc/parser.py"]
    assert content.endswith(TRUNCATION_MARKER)
    assert content.startswith("def parse_expression(source):")
    assert total_chars(context) == 120


def test_bm25_finds_an_identifier_named_in_camel_case(repository):
    context = bm25_context(repository.clone, repository.base, "ParseExpression fails")

    assert next(iter(context.files)) == "calc/parser.py"
    assert context.files["calc/parser.py"] == PARSER_AT_BASE
    assert "README.md" in context.files  # it says "fails"
    assert context.omitted == 0


def test_bm25_reads_the_files_at_the_given_commit(repository):
    at_head = bm25_context(repository.clone, repository.head, "parse_expression")

    assert at_head.files["calc/parser.py"].endswith("# changed after the base commit\n")


def test_bm25_leaves_out_binary_oversized_and_unrelated_files(repository):
    ranked = rank_files(repository.clone, repository.base, "parse expression fails zebra PNG")

    assert set(ranked) == {"calc/parser.py", "README.md", "left/twin.py", "right/twin.py"}


def test_bm25_breaks_ties_by_path(repository):
    context = bm25_context(repository.clone, repository.base, "zebra")

    assert list(context.files) == ["left/twin.py", "right/twin.py"]


def test_bm25_ranking_is_deterministic(repository):
    query = "parse expression tokens value fails"
    first = bm25_context(repository.clone, repository.base, query)

    assert list(first.files) == ["calc/parser.py", "calc/render.py", "README.md"]
    assert bm25_context(repository.clone, repository.base, query) == first


def test_bm25_counts_the_files_the_budget_leaves_out(repository):
    query = "parse expression tokens value fails"
    budget = len(PARSER_AT_BASE) + len(README)

    context = bm25_context(repository.clone, repository.base, query, budget_chars=budget)

    assert len(README) < len(RENDER)
    # calc/render.py, second, does not fit once calc/parser.py is in; README.md still does.
    assert list(context.files) == ["calc/parser.py", "README.md"]
    assert context.omitted == 1
    assert total_chars(context) <= budget


def test_bm25_keeps_at_most_max_files(repository):
    query = "parse expression tokens value fails"

    context = bm25_context(repository.clone, repository.base, query, max_files=1)

    assert list(context.files) == ["calc/parser.py"]
    assert context.omitted == 0  # max_files is a choice, not the budget's doing


def test_attempts_of_one_task_on_threads_build_its_index_once(repository, tmp_path):
    clone = tmp_path / "fresh.git"  # a path no other test has indexed
    git(tmp_path, "clone", "--bare", "--quiet", str(repository.work), str(clone))
    threads = 8
    together = threading.Barrier(threads)

    def attempt() -> FilesContext:
        together.wait()
        return bm25_context(clone, repository.base, "parse expression tokens value fails")

    builds_before = _cached_index.cache_info().misses
    with ThreadPoolExecutor(max_workers=threads) as pool:
        contexts = list(pool.map(lambda _: attempt(), range(threads)))

    assert _cached_index.cache_info().misses - builds_before == 1
    assert all(context == contexts[0] for context in contexts)
    assert next(iter(contexts[0].files)) == "calc/parser.py"


def test_bm25_gives_nothing_for_a_query_the_repository_does_not_know(repository):
    context = bm25_context(repository.clone, repository.base, "quaternion slerp")

    assert context == FilesContext(mode="bm25")


def test_render_files_lists_each_file_under_its_path():
    context = FilesContext(mode="bm25", files={"b.py": "B = 1\n", "a.py": "A = 1\n"})

    assert render_files(context) == "--- b.py ---\nB = 1\n\n\n--- a.py ---\nA = 1\n"
