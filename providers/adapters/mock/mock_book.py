"""What the mock provider knows: reference books of tasks, found by what a prompt says.

A real provider sees only the messages it is sent, and so does the mock: it answers a task
only when it reads that task in the prompt. A book is built from a dataset by the code that
runs it (``experiments``: providers/ does not import it) and registered here under a name
(the dataset's id and version); every registered book is the mock's knowledge of the world.

An entry is found by its keys, texts the workload kind says identify a task in a prompt (a
question, a problem statement, a function's signature; a multiple-choice question and its
options). The first key is searched for with an Aho-Corasick automaton over the last
``TAIL`` characters of every entry's first key, one pass over the prompt whatever the size
of the book; each hit is then checked whole, with the entry's other keys after it. A
few-shot prompt carries other tasks as solved examples before the one asked: the entry whose
first key ends last in the prompt is the one asked.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import cast

import ahocorasick

# Characters of a key the automaton holds. Enough to tell most tasks apart (a hit is checked
# whole anyway), few enough to bound the automaton's memory whatever the keys' length; the
# end rather than the start, since tasks share openings (HumanEval's imports, the reading
# passage several MMLU questions ask about) more than endings.
TAIL = 48
# Books kept at once: a long-lived worker runs many datasets and must not keep them all.
MAX_BOOKS = 8
# What the mock answers a prompt that carries no task it knows: plain text, wrong for every
# kind, with no tool call.
DONT_KNOW = "I don't know."


class Entry:
    """One task as the mock knows it: how a prompt shows it, the output that scores 1, and
    the outputs that score 0 (none for a patch, which the mock spoils itself). The wrong
    outputs are worked out when first needed: for a short-answer question that means grading
    a dozen candidates, too slow to do for every task of a large dataset up front."""

    __slots__ = ("_make_wrong", "_wrong", "keys", "right")

    def __init__(self, keys: Sequence[str], right: str, wrong: Callable[[], Sequence[str]] | Sequence[str] = ()):
        self.keys = tuple(_plain(key).strip() for key in keys)
        self.right = right
        self._make_wrong = wrong if callable(wrong) else None
        self._wrong: tuple[str, ...] | None = None if callable(wrong) else tuple(wrong)

    @property
    def wrong(self) -> tuple[str, ...]:
        if self._wrong is None:
            assert self._make_wrong is not None
            # Two threads may both work it out: the same tuple either way.
            self._wrong = tuple(self._make_wrong())
        return self._wrong

    def __repr__(self) -> str:
        return f"Entry({self.keys[0][:40]!r}…)" if self.keys else "Entry()"


class Book:
    def __init__(self, entries: Iterable[Entry]):
        self.size = 0
        self._automaton = ahocorasick.Automaton()
        for entry in entries:
            if not entry.keys or not entry.keys[0]:
                continue  # a task with nothing to recognise it by is never asked
            tail = entry.keys[0][-TAIL:]
            sharing = self._automaton.get(tail, None)
            if sharing is None:
                self._automaton.add_word(tail, [entry])
            else:
                sharing.append(entry)
            self.size += 1
        self._automaton.make_automaton()

    def __len__(self) -> int:
        return self.size

    def matches(self, prompt: str) -> Iterator[tuple[int, int, Entry]]:
        """(where its first key ends, that key's length, entry) for every entry the prompt
        holds, in the order they end; entries that share a tail in the book's order."""
        if not self.size:
            return
        for end, candidates in self._automaton.iter(prompt):
            for entry in candidates:
                key = entry.keys[0]
                start = end + 1 - len(key)
                if start >= 0 and prompt.startswith(key, start) and _holds_after(prompt, entry.keys[1:], start):
                    yield end, len(key), entry


def _holds_after(prompt: str, keys: tuple[str, ...], start: int) -> bool:
    return all(prompt.find(key, start) >= 0 for key in keys)


def _plain(text: str) -> str:
    """Line endings as one: a task's text may hold CRLF (SWE-bench's problem statements do),
    and a prompt's rendering may fold them."""
    return text.replace("\r\n", "\n") if "\r" in text else text


_books: OrderedDict[Hashable, Book] = OrderedDict()
_lock = threading.Lock()
# What look_up found for the prompts it was asked lately, for as long as the books and their
# order stay as they were (any change empties it). A run asks each of its prompts once per
# repetition, and searching a prompt of kilobytes cost the mock most of its CPU per call.
_found: OrderedDict[str, Entry | None] = OrderedDict()
MAX_FOUND = 1024  # prompts of a few kilobytes: a few megabytes at most
_NOT_FOUND_YET = object()


def has_book(name: Hashable) -> bool:
    """Whether a book of this name is registered; it then counts as just used."""
    with _lock:
        if name in _books:
            if next(reversed(_books)) != name:
                _books.move_to_end(name)
                _found.clear()  # the books' order decides between two that hold a prompt
            return True
        return False


def register_book(name: Hashable, book: Book) -> None:
    """Registered as the most recently used book; the least recently used goes past ``MAX_BOOKS``."""
    with _lock:
        _books[name] = book
        _books.move_to_end(name)
        while len(_books) > MAX_BOOKS:
            _books.popitem(last=False)
        _found.clear()


def forget_books() -> None:
    with _lock:
        _books.clear()
        _found.clear()


def look_up(prompt: str) -> Entry | None:
    """The task the prompt asks, or None when it carries none the mock knows: the entry
    whose first key ends last in the prompt (the longest, when two end at one place: a
    question that ends another question). Two books that both hold it (two datasets of one
    question) answer from the more recently used one, the run's own. Read from the prompt
    alone, so a prompt asked again gets what it got, while the books are unchanged."""
    with _lock:
        found = _found.get(prompt, _NOT_FOUND_YET)
        if found is not _NOT_FOUND_YET:
            return cast(Entry | None, found)
        books = list(_books.values())  # least recently used first
    entry = _search(books, prompt)
    with _lock:
        if list(_books.values()) == books:  # not found in books since changed
            _found[prompt] = entry
            if len(_found) > MAX_FOUND:
                _found.popitem(last=False)
    return entry


def _search(books: list[Book], prompt: str) -> Entry | None:
    prompt = _plain(prompt)
    best: tuple[tuple[int, int, int], Entry] | None = None
    for recency, book in enumerate(books):
        for end, length, entry in book.matches(prompt):
            rank = (end, length, recency)
            if best is None or rank > best[0]:  # a tie within a book: its first entry
                best = (rank, entry)
    return best[1] if best else None
