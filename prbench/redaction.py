"""Secrets out of every text that leaves the gateway, a log record or a flash message.

Two kinds of secret are removed, each replaced by ``MARKER``:

- a credential's own key, whole and any run of 8 or more of its characters (a provider that
  echoes a key shortened, or a message cut in the middle of one, still gives nothing away),
  and the forms a model or provider turns it into: any case, reversed, spelled out with
  separators, hex, base64 (alone or inside a blob), percent-encoded or HTML- or
  backslash-escaped (``prbench/echoes.py`` finds them; each whole echo becomes one marker);
- key-shaped tokens of any credential: ``sk-…`` (OpenAI, ``sk-proj-``, Anthropic's
  ``sk-ant-``, OpenRouter's ``sk-or-v1-``), ``Bearer …``, and the values of ``api-key``,
  ``x-api-key`` and friends, in header, query and JSON form; and PRBench's own secrets, an
  organisation API key (``prb_…``) and a webhook signing secret (``whsec_…``);
- the password of a URL that carries one (``https://user:secret@proxy:3128``), and a bare
  token standing as a URL's user (``https://ghp_…@host``): a build passes the worker's proxy
  and package-index addresses on, and a pip or uv error prints them back.

What is spared: the model's answer (``redact_answer``) loses only the credential's own key,
since an answer may legitimately quote a lookalike (a test fixture, a placeholder); error
text, raw bodies, request records, retry logs and log records lose both kinds.

Pure Python on purpose (no Django): the logging set-up and the message storage use it too.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from prbench.echoes import MIN_RUN, MIN_SECRET, EchoFinder

MARKER = "[redacted]"

# Each pattern starts with plain characters (no flags, no alternation), so the regex engine
# skips ahead to candidates: about 1 ms per 100 kB of prompt instead of 40.
SK_TOKEN = re.compile(r"sk-(?<![A-Za-z0-9_-]sk-)[A-Za-z0-9_-]{12,}")  # sk-, sk-proj-, sk-ant-api03-, sk-or-v1-
# PRBench's own: an organisation API key and a webhook's signing secret (orgs/api_keys.py,
# orgs/webhooks.py), so neither can reach a log line even outside an Authorization header.
OWN_TOKENS = (("prb_", re.compile(r"prb_[A-Za-z0-9_-]{20,}")), ("whsec_", re.compile(r"whsec_[A-Za-z0-9_-]{20,}")))
BEARER_TOKEN = re.compile(r"([Bb][Ee][Aa][Rr][Ee][Rr]\s+)[A-Za-z0-9._~+/=-]{16,}")
# A header, query or JSON value of an API-key field: `api-key: …`, `"x-api-key": "…"`,
# `?api-key=…`, Azure API Management's `Ocp-Apim-Subscription-Key`. Only token-like values,
# so our own "api_key: required" stays readable.
KEY_VALUES = (
    re.compile(r"([Aa][Pp][Ii][-_]?[Kk][Ee][Yy][\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._~+/=-]{16,}"),
    re.compile(r"([Ss]ubscription-[Kk]ey[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._~+/=-]{16,}"),
)
# A URL's userinfo: the password after "user:", or a user that is itself a token (16 or more
# token characters, no password), as an index or proxy address with credentials carries it.
URL_PASSWORD = re.compile(r"(://[^/\s:@]*:)[^@\s/]+(?=@)")
URL_TOKEN_USER = re.compile(r"(://)[A-Za-z0-9._~+=-]{16,}(?=@)")
# JSON keys whose string value is a credential whatever it looks like (compared lower-case,
# without "-" and "_").
SECRET_FIELDS = frozenset({"apikey", "xapikey", "authorization", "proxyauthorization", "ocpapimsubscriptionkey"})


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Error text, log lines, flash messages: the given keys and every key-shaped token."""
    if not text:
        return text
    text = remove_secrets(text, secrets)
    if "sk-" in text:
        text = SK_TOKEN.sub(MARKER, text)
    for prefix, pattern in OWN_TOKENS:
        if prefix in text:
            text = pattern.sub(MARKER, text)
    if "://" in text and "@" in text:
        text = URL_PASSWORD.sub(lambda match: match.group(1) + MARKER, text)
        text = URL_TOKEN_USER.sub(lambda match: match.group(1) + MARKER, text)
    lowered = text.lower()  # a plain search first: most texts need no regex at all
    patterns = ([BEARER_TOKEN] if "bearer" in lowered else []) + (list(KEY_VALUES) if "key" in lowered else [])
    for pattern in patterns:  # the scheme or field name stays, for the reader
        text = pattern.sub(lambda match: match.group(1) + MARKER, text)
    return text


def redact_answer(text: str, secrets: Iterable[str] = ()) -> str:
    """A model's answer: only the credential's own key goes (see the module docstring)."""
    return remove_secrets(text, secrets) if text else text


def redact_answer_data(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A model's answer as JSON (a tool call's arguments), keys and values, recursively: as an
    answer, only the credential's own key goes, since a file the model writes may quote a
    lookalike. A new copy."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact_answer(value, secrets)
    if isinstance(value, dict):
        return {redact_answer_data(key, secrets): redact_answer_data(item, secrets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_answer_data(item, secrets) for item in value)
    return value


def redact_data(value: Any, secrets: Iterable[str] = ()) -> Any:
    """Raw JSON (dicts, lists, strings, numbers), keys and values, recursively: a new copy."""
    secrets = tuple(secrets)
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        cleaned: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and _is_secret_field(key) and isinstance(item, str) and item:
                item = MARKER
            new_key = redact_text(key, secrets) if isinstance(key, str) else key
            while new_key in cleaned:  # two keys redacted alike must not overwrite each other
                new_key = f"{new_key}'"
            cleaned[new_key] = redact_data(item, secrets)
        return cleaned
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(item, secrets) for item in value)
    return value


def remove_secrets(text: str, secrets: Iterable[str]) -> str:
    """Every echo of any of the keys (``prbench/echoes.py``), each as one marker."""
    if len(text) < MIN_RUN:  # most JSON keys and values of a response: nothing to look for
        return text
    finder = echo_finder(tuple(secrets))
    spans = finder.spans(text) if finder is not None else []
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in _merged(spans):
        pieces += [text[last:start], MARKER]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


# Built once per set of keys, not once per text: a response has dozens of strings, and every
# log line is searched for the process's known keys. Few sets: the gateway's are one key
# each, and the registry's set replaces the one before it whenever it grows.
@lru_cache(maxsize=16)
def echo_finder(secrets: tuple[str, ...]) -> EchoFinder | None:
    searchable = [secret for secret in secrets if len(secret) >= MIN_SECRET]
    return EchoFinder(searchable) if searchable else None


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching spans as one: a run longer than 8 is one marker, not many."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _is_secret_field(name: str) -> bool:
    return name.lower().replace("-", "").replace("_", "") in SECRET_FIELDS


# Keys the gateway has resolved in this process, so log records and flash messages lose
# them even where they do not look like keys (an Azure key is 32 or 84 plain characters).
# Bounded: a long-lived worker serving many organisations keeps the newest ones.
_KNOWN_LIMIT = 1024
_known: dict[str, None] = {}
_known_lock = threading.Lock()


def remember_secret(secret: str) -> None:
    if len(secret) < MIN_SECRET or secret in _known:
        return
    with _known_lock:
        _known[secret] = None
        while len(_known) > _KNOWN_LIMIT:
            del _known[next(iter(_known))]


def forget_secrets() -> None:
    """Empty the registry (tests: one test's keys must not redact the next one's text)."""
    with _known_lock:
        _known.clear()


def known_secrets() -> tuple[str, ...]:
    return tuple(_known)


def redact_known(text: str) -> str:
    """``redact_text`` with every key this process has resolved."""
    return redact_text(text, known_secrets())


class RedactingFilter(logging.Filter):
    """Redacts a record's message, arguments, exception and stack text in place.

    On the handlers in ``LOGGING``; ``install_log_record_factory`` applies the same to every
    record as it is made, so handlers added later (pytest's caplog, an error tracker) get
    the clean record too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def redact_record(record: logging.LogRecord) -> None:
    # Idempotent, so a record made by the factory and then filtered by a handler is fine;
    # no "done" flag: makeLogRecord fills a record in after the factory has seen it empty.
    secrets = known_secrets()
    if isinstance(record.msg, dict):
        # A structlog event on its way to its formatter (prbench/logs.py), which needs it to
        # stay a dict: redacted as data, key by key, not flattened into a string.
        record.msg = redact_data(record.msg, secrets)
    else:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it at emit time, as it always has
            return
        clean = redact_text(message, secrets)
        if clean != message:
            record.msg, record.args = clean, ()
    # Formatted now, as every formatter would (and then caches), so the clean text is used.
    exc_text = record.exc_text or (logging.Formatter().formatException(record.exc_info) if record.exc_info else "")
    clean_exc_text = redact_text(exc_text, secrets)
    if clean_exc_text != exc_text:
        record.exc_text = clean_exc_text
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info, secrets)


_factory_lock = threading.Lock()


def install_log_record_factory() -> None:
    """Make every new log record pass through ``redact_record``. Safe to call twice."""
    with _factory_lock:
        current = logging.getLogRecordFactory()
        if getattr(current, "prbench_redacting", False):
            return

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = current(*args, **kwargs)
            redact_record(record)
            return record

        factory.prbench_redacting = True  # type: ignore[attr-defined]
        logging.setLogRecordFactory(factory)
