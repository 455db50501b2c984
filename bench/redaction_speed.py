"""Speed of redaction: a 100 KB completion, 20 registered keys, through the two paths every
answer and every log line take (``redact_answer``, ``redact_text``).

    .venv/bin/python bench/redaction_speed.py [--kb 100] [--keys 20] [--repeats 20]
    .venv/bin/python bench/redaction_speed.py --module /tmp/old_redaction.py   # another version

The completion mixes what answers hold: prose, a unified diff of Python (``%`` formats,
``\\x`` escapes, percent-encoded URLs), hex digests and a base64 blob of random bytes. It is
timed clean, and again with one key echoed in every form redaction looks for (the slower path,
where positions are mapped back to the text). The first call, which builds the per-key-set
search, is reported apart. Pure Python: no database, no Django.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import random
import statistics
import string
import sys
import time
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ALPHANUMERIC = string.ascii_letters + string.digits
SENTENCE = (
    "the patch fixes a race in the worker when two jobs claim the same attempt so the second "
    "returns early and the test covers it with a real queue and database"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", type=int, default=100, help="size of the completion")
    parser.add_argument("--keys", type=int, default=20, help="registered keys")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--module", type=Path, help="a redaction.py to time instead of prbench/redaction.py")
    args = parser.parse_args()

    redaction = load(args.module)
    rng = random.Random(25)
    keys = registered_keys(rng, args.keys)
    clean = completion(rng, args.kb * 1000)
    leaking = clean[: len(clean) // 2] + echoes(keys[0]) + clean[len(clean) // 2 :]

    started = time.perf_counter()
    redaction.redact_answer(clean, keys)
    first = time.perf_counter() - started
    print(f"{args.module or 'prbench/redaction.py'}: {len(clean) / 1000:.0f} KB, {len(keys)} keys")
    print(f"first call (builds the search for this key set)  {first * 1000:8.2f} ms")
    for name, text in (("clean", clean), ("echoing one key", leaking)):
        for function in ("redact_answer", "redact_text"):
            times = timed(getattr(redaction, function), text, keys, args.repeats)
            median, fastest = statistics.median(times) * 1000, min(times) * 1000
            print(f"{function:13} {name:16} median {median:8.2f} ms  fastest {fastest:8.2f} ms")
    return 0


def load(path: Path | None) -> ModuleType:
    if path is None:
        from prbench import redaction

        return redaction
    spec = importlib.util.spec_from_file_location("redaction_under_test", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(function, text: str, keys: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function(text, keys)
        times.append(time.perf_counter() - started)
    return times


def registered_keys(rng: random.Random, count: int) -> list[str]:
    """Keys of the shapes PRBench holds: OpenAI, Anthropic, Azure (hex and long), webhooks."""
    shapes = [("sk-proj-", 48), ("sk-ant-api03-", 95), ("", 32), ("", 84), ("whsec_", 32)]
    keys = []
    for number in range(count):
        prefix, length = shapes[number % len(shapes)]
        alphabet = "0123456789abcdef" if (prefix, length) == ("", 32) else ALPHANUMERIC
        keys.append(prefix + "".join(rng.choice(alphabet) for _ in range(length)))
    return keys


def completion(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        part = rng.choice([prose, diff, digests, blob])(rng)
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


def prose(rng: random.Random) -> str:
    words = SENTENCE.split()
    return " ".join(rng.choice(words) for _ in range(120)).capitalize() + ".\n\n"


def diff(rng: random.Random) -> str:
    name = rng.choice(["worker", "queue", "pipeline"])
    return (
        f"diff --git a/{name}.py b/{name}.py\n--- a/{name}.py\n+++ b/{name}.py\n@@ -10,7 +10,8 @@\n"
        f'-    log.info("claimed %s of %d", attempt.pk, total)\n'
        f'+    log.info("claimed %s of %d (%.1f%%)", attempt.pk, total, share)\n'
        f'     url = "https://example.com/search?q=a%20b%2Fc&page={rng.randint(1, 9)}"\n'
        f'+    SEPARATOR = b"\\x00\\x1f"\n'
        "     if attempt.finished_at is None:\n"
        "         return claim(attempt)\n"
    )


def digests(rng: random.Random) -> str:
    return "\n".join(f"{rng.getrandbits(160):040x}  src/module_{i}.py" for i in range(8)) + "\n"


def blob(rng: random.Random) -> str:
    return "data:image/png;base64," + base64.b64encode(rng.randbytes(1500)).decode() + "\n"


def echoes(key: str) -> str:
    """The key upper-cased, reversed, base64-encoded, percent-encoded and spelled out."""
    return "\n".join(
        [
            key.upper(),
            key[::-1],
            base64.b64encode(key.encode()).decode(),
            "".join(f"%{byte:02X}" for byte in key.encode()),
            quote(key),
            " ".join(key),
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
