"""The files a pull-request prompt shows the model, read from the task's repository at its
base commit.

Two modes, named as in SWE-bench: ``oracle`` gives the files the gold patch touches;
``bm25`` gives the files that BM25 ranks highest for the problem statement. Both keep the
total content within a character budget. Pure functions over a bare clone: no ORM, so
attempt threads can call them.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from evaluation.patches import check_patch, touches_test_harness
from evaluation.repositories import list_files, read_files

CONTEXT_MODES = ("oracle", "bm25")
# About 13K tokens at ~4 characters a token: the smallest of SWE-bench's BM25 budgets.
DEFAULT_BUDGET_CHARS = 50_000
DEFAULT_MAX_FILES = 20
# Larger files are data or generated code far more often than the source a fix edits, and
# one of them would swamp the index's length normalisation.
MAX_INDEXED_CHARS = 500_000
TRUNCATION_MARKER = "\n... [truncated: the file is longer than the context budget]\n"

SOURCE_SUFFIXES = frozenset(
    {
        # code
        *(".py", ".pyi", ".pyx", ".pxd", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cs"),
        *(".java", ".kt", ".kts", ".scala", ".go", ".rs", ".rb", ".php", ".swift", ".m", ".mm", ".r"),
        *(".jl", ".lua", ".pl", ".pm", ".ex", ".exs", ".erl", ".hs", ".ml", ".clj", ".sql", ".proto"),
        *(".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".vue", ".svelte", ".graphql"),
        *(".html", ".htm", ".css", ".scss", ".less", ".xml", ".xsl"),
        *(".sh", ".bash", ".zsh", ".ps1", ".gradle", ".cmake"),
        # configuration and documentation
        *(".json", ".toml", ".yaml", ".yml", ".ini", ".cfg", ".conf", ".in"),
        *(".txt", ".md", ".rst", ".tex"),
    }
)
SOURCE_NAMES = frozenset({"Makefile", "Dockerfile", "Gemfile", "Rakefile"})

if TYPE_CHECKING:
    import bm25s
IDENTIFIER = re.compile(r"[A-Za-z0-9_]+")
# One word of an identifier: an acronym (HTTP in HTTPServer), a capitalised or lower-case
# word, or a number.
WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


@dataclass(frozen=True)
class FilesContext:
    mode: str
    files: dict[str, str] = field(default_factory=dict)  # path -> content, in prompt order
    omitted: int = 0  # files left out because the budget was spent


def oracle_context(clone: Path, commit: str, gold_patch: str, budget_chars: int = DEFAULT_BUDGET_CHARS) -> FilesContext:
    """The files the gold patch touches, as they are at ``commit``, in the patch's order.

    Files the patch creates (absent at ``commit``) and binary files have no content to
    show and are left out without counting as omitted. Raises PatchRejected for a
    malformed patch.
    """
    paths = list(dict.fromkeys(check_patch(gold_patch).paths))
    found = read_files(clone, commit, paths)
    return _within_budget("oracle", [(path, found[path]) for path in paths if path in found], budget_chars)


def bm25_context(
    clone: Path,
    commit: str,
    query: str,
    budget_chars: int = DEFAULT_BUDGET_CHARS,
    max_files: int = DEFAULT_MAX_FILES,
) -> FilesContext:
    """The up to ``max_files`` files at ``commit`` that BM25 ranks highest for ``query``
    (the problem statement), best first.

    Files that share no word with the query are never shown, so a query the repository
    knows nothing of gives an empty context.
    """
    ranked = rank_files(clone, commit, query)[:max_files]
    found = read_files(clone, commit, ranked)
    return _within_budget("bm25", [(path, found[path]) for path in ranked if path in found], budget_chars)


def rank_files(clone: Path, commit: str, query: str) -> list[str]:
    """The indexed files sharing a word with ``query``, best BM25 score first, ties by path."""
    index = _repository_index(clone, commit)
    query_tokens = tokenize(query)
    if index is None or not query_tokens:
        return []
    paths, retriever = index
    scores = retriever.get_scores(query_tokens)
    hits = [(float(score), path) for path, score in zip(paths, scores, strict=True) if score > 0]
    return [path for _, path in sorted(hits, key=lambda hit: (-hit[0], hit[1]))]


def tokenize(text: str) -> list[str]:
    """Lower-case words with identifiers split at underscores and case changes, so that
    ``ParseExpression`` and ``parse_expression`` both give ``parse`` and ``expression``.
    A compound identifier also gives its words joined (``parseexpression``): an exact
    identifier match then outscores the same words scattered through a file."""
    tokens: list[str] = []
    for identifier in IDENTIFIER.findall(text):
        words = [word.lower() for word in WORD.findall(identifier)]
        tokens.extend(word for word in words if len(word) > 1 and word not in _stopwords())
        if len(words) > 1:
            tokens.append("".join(words))
    return tokens


def render_files(context: FilesContext) -> str:
    """The files as prompt text, in the same layout as prompts.render_repository."""
    return "\n\n".join(f"--- {path} ---\n{content}" for path, content in context.files.items())


def _within_budget(mode: str, files: list[tuple[str, str]], budget_chars: int) -> FilesContext:
    """Take the files in order while they fit, skipping (and counting) any that do not. A
    first file too large for the whole budget is cut short with a marker instead: its
    beginning is still the best context there is."""
    kept: dict[str, str] = {}
    omitted = 0
    remaining = budget_chars
    for path, content in files:
        if len(content) <= remaining:
            kept[path] = content
            remaining -= len(content)
        elif not kept and remaining > len(TRUNCATION_MARKER):
            kept[path] = content[: remaining - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER
            remaining = 0
        else:
            omitted += 1
    return FilesContext(mode=mode, files=kept, omitted=omitted)


RepositoryIndex = tuple[tuple[str, ...], "bm25s.BM25"]


@functools.cache
def _bm25s():
    """bm25s, imported on first use: every process imports this module, few retrieve."""
    import bm25s

    # bm25s sets its logger to DEBUG when imported and logs every index it builds; leave the
    # level to the project's logging settings.
    logging.getLogger("bm25s").setLevel(logging.NOTSET)
    return bm25s


@functools.cache
def _stopwords() -> frozenset[str]:
    return frozenset(_bm25s().stopwords.STOPWORDS_EN)


_index_locks: dict[tuple[str, str], threading.Lock] = {}
_index_locks_guard = threading.Lock()


def _repository_index(clone: Path, commit: str) -> RepositoryIndex | None:
    # The attempts of one task run side by side on a job's threads: without a lock per
    # (clone, commit) each of them would read the whole repository and build the same index.
    key = (str(clone), commit)
    with _index_locks_guard:
        lock = _index_locks.setdefault(key, threading.Lock())
    with lock:
        return _cached_index(*key)


@functools.lru_cache(maxsize=16)
def _cached_index(clone: str, commit: str) -> RepositoryIndex | None:
    """The BM25 index of the source files at ``commit``, each document being its path and
    its content; None when there is nothing to index."""
    candidates = [path for path in list_files(Path(clone), commit) if _is_source(path)]
    contents = read_files(Path(clone), commit, candidates)
    paths = tuple(path for path in candidates if path in contents and len(contents[path]) <= MAX_INDEXED_CHARS)
    if not paths:
        return None
    retriever = _bm25s().BM25()
    retriever.index([tokenize(f"{path}\n{contents[path]}") for path in paths], show_progress=False)
    return paths, retriever


def _is_source(path: str) -> bool:
    pure = PurePosixPath(path)
    # Test files, as SWE-bench's retrieval does: the model may not change them, and the
    # task's tests are applied after its patch anyway.
    if ".git" in pure.parts or touches_test_harness(path):
        return False
    return pure.suffix.lower() in SOURCE_SUFFIXES or pure.name in SOURCE_NAMES
