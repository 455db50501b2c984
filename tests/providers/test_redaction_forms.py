"""Keys echoed in another form: upper-cased, reversed, base64, percent- or HTML-escaped,
spelled out, hex. Each must come out as one marker wherever redaction runs (answers, error
text, raw bodies, logs), while ordinary text, diffs and unrelated base64 stay as they are.

The echoing provider is faked at the HTTP boundary (tests/providers/echo_provider.py), so
the real SDK and the real pipeline carry the echo to the database and the log."""

from __future__ import annotations

import base64
import json
import logging
import random
import secrets
import string

import pytest
from django.core.serializers.json import DjangoJSONEncoder

from experiments.actions import ArmSpec, do_replace_arms
from experiments.models import Attempt, AttemptStatus
from prbench.redaction import MARKER, redact_answer, redact_data, redact_text, remember_secret
from providers.models import ProviderCredential
from tests.conftest import work_queue
from tests.providers.echo_provider import LOOKALIKE, EchoProvider

KEY = "sk-proj-" + "Zq7Rm2Kx9Vb4Nw6Ht1Lc8Pf3Jd5Gs0Ya7Eu2Io9Tr4Wn6Mh1Qb"
AZURE_KEY = "4f9c2a7e1b8d4c6fa3e5b7d9c1f2a4e6"
KEYS = [KEY, AZURE_KEY]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def redacted(echo: str) -> str:
    """The echo between ordinary words, redacted both ways an echo can meet redaction."""
    text = f"the key is {echo} , see"
    answer = redact_answer(text, KEYS)
    assert redact_text(text, KEYS) == answer  # error text and logs lose it just the same
    return answer


def test_case_changed_echoes_go():
    for echo in (KEY.upper(), KEY.lower(), KEY.swapcase(), AZURE_KEY.upper()):
        assert redacted(echo) == f"the key is {MARKER} , see", echo
    assert redacted(KEY[10:30].upper()) == f"the key is {MARKER} , see"  # a run of it, shouted


def test_reversed_echoes_go():
    for echo in (KEY[::-1], KEY[::-1].upper(), AZURE_KEY[::-1], KEY[5:40][::-1]):
        assert redacted(echo) == f"the key is {MARKER} , see", echo


def test_base64_echoes_go_whole_with_their_padding():
    for key in (KEY, KEY[:-1], KEY[:-2], AZURE_KEY):  # "=", "==", none, "="
        for text in (key, key.upper(), key.lower()):
            standard = b64(text)
            url_safe = base64.urlsafe_b64encode(text.encode()).decode()
            for echo in (standard, standard.rstrip("="), url_safe.rstrip("="), standard.upper()):
                assert redact_answer(f"encoded: {echo}.", [key]) == f"encoded: {MARKER}.", (text, echo)


def test_a_key_inside_a_longer_base64_blob_goes_at_every_offset():
    """Only the characters carrying the key's bits go; the rest of the blob stays as sent."""
    for prefix in (b"", b"a", b"ab", b"Authorization: Bearer ", b"\xff\xfe\xfd\xfc"):
        for suffix in (b"\n", b"\xff\xff\xff}", b'", "model": "gpt-4o"}'):
            data = prefix + KEY.encode() + suffix
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                blob = encode(data).decode()
                first = 8 * len(prefix) // 6  # the first character any bit of the key is in
                end = -(-8 * (len(prefix) + len(KEY)) // 6)  # and one past the last
                expected = blob[:first] + MARKER + blob[end:]
                assert redact_answer(f"blob {blob} end", KEYS) == f"blob {expected} end", (prefix, suffix)


def test_escaped_echoes_go():
    every_other = "".join(f"%{ord(c):02x}" if i % 2 else c for i, c in enumerate(KEY))
    for echo in (
        "".join(f"%{ord(c):02X}" for c in KEY),  # every character percent-encoded
        "".join(f"%{ord(c):02x}" for c in KEY),
        every_other,  # or some of them
        "".join(f"&#{ord(c)};" for c in KEY),  # an HTML page
        "".join(f"&#x{ord(c):x};" for c in KEY),
        "".join(f"\\u{ord(c):04x}" for c in KEY),  # JSON or JavaScript
        "".join(f"\\x{ord(c):02x}" for c in KEY),  # a Python bytes repr
        "".join(f"%{ord(c):02X}" for c in KEY.upper()),  # and combined with the rest
        "".join(f"%{ord(c):02X}" for c in KEY[::-1]),
        "".join(f"&#{ord(c)};" for c in b64(KEY)),
    ):
        assert redacted(echo) == f"the key is {MARKER} , see", echo


def test_spelled_out_echoes_go_with_their_separators():
    for separator in (" ", "-", "_", ".", ",", ", ", "\n", " - ", "\t", "|"):
        for text in (KEY, KEY.upper(), KEY[::-1], AZURE_KEY):
            assert redacted(separator.join(text)) == f"the key is {MARKER} , see", (separator, text)
    one_per_line = "\n".join(KEY)
    assert redact_answer(f"Sure:\n{one_per_line}\nDone.", KEYS) == f"Sure:\n{MARKER}\nDone."


def test_hex_echoes_go():
    for echo in (KEY.encode().hex(), KEY.encode().hex().upper(), " ".join(f"{b:02x}" for b in KEY.encode())):
        assert redacted(echo) == f"the key is {MARKER} , see", echo


def test_raw_json_loses_transformed_echoes():
    raw = {"choices": [{"message": {"content": f"encoded: {b64(KEY)}"}}], "id": f"req-{KEY.upper()}"}
    assert redact_data(raw, KEYS) == {
        "choices": [{"message": {"content": f"encoded: {MARKER}"}}],
        "id": f"req-{MARKER}",
    }


def test_loose_forms_of_a_short_key_are_not_looked_for():
    """Below 16 letters and digits a spelled-out or reversed key would match ordinary words;
    a run of 8 of its characters, in any case, still goes."""
    short = "hunter2hunter"
    assert redact_answer("h u n t e r 2 h u n t e r", [short]) == "h u n t e r 2 h u n t e r"
    assert redact_answer(f"{short[::-1]} {b64(short)}", [short]) == f"{short[::-1]} {b64(short)}"
    assert redact_answer(f"password {short.upper()}!", [short]) == f"password {MARKER}!"


ORDINARY_DIFF = """\
diff --git a/providers/worker.py b/providers/worker.py
index 3b18e51..a9d4c1f 100644
--- a/providers/worker.py
+++ b/providers/worker.py
@@ -10,7 +10,8 @@ def claim(attempt):
-    log.info("claimed %s of %d", attempt.pk, total)
+    log.info("claimed %s of %d (%.1f%%)", attempt.pk, total, share)
     url = "https://example.com/search?q=sk%20proj%2Fkey&page=2"
+    SEPARATOR = b"\\x00\\x1f\\u00e9"
     if attempt.finished_at is None:
"""


def test_ordinary_text_is_left_alone():
    rng = random.Random(25)
    unrelated_base64 = base64.b64encode(rng.randbytes(4000)).decode()
    texts = [
        "The quick brown fox jumps over the lazy dog; rotate the project key in Settings, please.",
        "Keys look like sk-…; ours starts s k - p r o j and is 56 characters long.",
        ORDINARY_DIFF,
        unrelated_base64,
        base64.urlsafe_b64encode(rng.randbytes(999)).decode().rstrip("="),
        "\n".join(f"{rng.getrandbits(256):064x}" for _ in range(50)),  # sha-256 digests
        "<p>&#60;div&#62; &amp; caf&#233; &#x27;quoted&#x27; 100%25 done</p>",
        f"fixture = {LOOKALIKE!r}",
        " ".join(string.ascii_lowercase + string.digits),
        "".join(rng.choice(string.ascii_letters + string.digits + " -_.,\n") for _ in range(20000)),
    ]
    for text in texts:
        assert redact_answer(text, KEYS) == text, text[:80]
    for text in texts[2:7]:
        assert redact_text(text, KEYS) == text, text[:80]


def test_log_records_lose_transformed_echoes_of_known_keys(caplog):
    caplog.set_level(logging.INFO)
    remember_secret(KEY)
    logger = logging.getLogger("tests.redaction_forms")
    logger.warning("provider said %s", b64(KEY.upper()))
    try:
        raise RuntimeError(f"refused {' '.join(KEY[::-1])}")
    except RuntimeError:
        logger.exception("call failed: %s", "".join(f"%{ord(c):02X}" for c in KEY))
    assert f"provider said {MARKER}" in caplog.text and f"RuntimeError: refused {MARKER}" in caplog.text
    assert not traces(caplog.text, KEY)


def traces(text: str, key: str) -> list[str]:
    """The forms of the key the text holds: as written, in any case, reversed, base64 (the
    characters its bits alone make up, in any case) and any run of 8 of its characters."""
    folded = text.lower()
    found = [form for form in (key, key[::-1]) if form.lower() in folded]
    for variant in (key, key.upper()):
        core = b64(variant)[: 8 * len(variant) // 6]
        found += [core for core in (core, core.replace("+", "-").replace("/", "_")) if core.lower() in folded]
    found += [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8].lower() in folded]
    return found


# Fresh for every run, so nothing can pass by knowing it; short enough that an echo of it in
# three forms still fits the 200 characters of the attempt's model name unredacted.
GATEWAY_KEY = "sk-proj-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


@pytest.fixture
def encoding_echo():
    """An OpenAI server that echoes the caller's key base64-encoded and upper-cased, in its
    answers, ids, model names, headers and error text."""
    server = EchoProvider("openai", f"{b64(GATEWAY_KEY)} {GATEWAY_KEY.upper()} {b64(GATEWAY_KEY.upper())}")
    yield server
    server.close()


def test_an_encoding_provider_leaves_no_form_of_the_key(
    org, experiment, encoding_echo, start, django_capture_on_commit_callbacks, caplog
):
    caplog.set_level(logging.DEBUG)
    credential = ProviderCredential(org=org, provider="openai", base_url=encoding_echo.url + "/v1")
    credential.set_api_key(GATEWAY_KEY)
    credential.save()
    do_replace_arms(experiment, [ArmSpec("gpt", "openai", "gpt-4o", {"max_retries": 2, "retry_base_ms": 1})])
    run = start(experiment, inference_only=True)
    with django_capture_on_commit_callbacks(execute=True):
        work_queue()

    assert all(GATEWAY_KEY in headers["authorization"] for _, headers, _ in encoding_echo.seen)  # it was sent
    attempts = list(Attempt.objects.filter(run=run))
    completed = [a for a in attempts if a.status == AttemptStatus.COMPLETED]
    failed = [a for a in attempts if a.status == AttemptStatus.FAILED]
    assert completed and failed and len(completed) + len(failed) == len(attempts)
    echo = f"{MARKER} {MARKER} {MARKER}"  # each of the three forms, as one marker
    for attempt in completed:
        assert attempt.output == f"Fixed it. My key is {echo}; the test fixture keeps {LOOKALIKE}.\n"
        assert attempt.model_served == f"gpt-4o-{echo}"
        assert attempt.raw_response["echo"]["note"] == f"x-api-key: {echo}"
    for attempt in failed:
        assert attempt.error_message.startswith(f"HTTP 401: Incorrect API key provided: {echo}.")
        assert MARKER in attempt.retry_log[0]["message"]
    stored = json.dumps(list(Attempt.objects.filter(run=run).values()), cls=DjangoJSONEncoder)
    for text in (stored, caplog.text, "\n".join(r.getMessage() for r in caplog.records)):
        assert not traces(text, GATEWAY_KEY), traces(text, GATEWAY_KEY)
