"""Speed of the nesting check every JSON line goes through before it is parsed
(prbench.inputs.json_nesting), on a malformed line and on a large well-formed task file.

    .venv/bin/python bench/json_nesting.py [--megabytes 64]

A line of escaped quotes with no closing quote (``"\\"\\"\\"...``) made the old string pattern
start again at every quote and scan to the end of the line from each: quadratic, so one 8 MiB
line (the longest a JSONL import accepts) would take hours. The check now matches an
unterminated string to the end of the text in one pass. Beside each figure, the old pattern's,
for scale (on the malformed line at 8 MiB extrapolated from 32 KiB, as it grows with the square of
the size). No database.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from prbench.inputs import _JSON_BRACKETS, json_nesting  # noqa: E402

OLD_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
TASKS = ROOT / "tests" / "data" / "swebench" / "SWE-bench_Lite_dev.jsonl"


def old_nesting(text: str) -> int:
    depth = deepest = 0
    for bracket in _JSON_BRACKETS.findall(OLD_STRINGS.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def seconds(check, lines: list[str]) -> float:
    start = time.perf_counter()
    for line in lines:
        check(line)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=64, help="size of the well-formed task file")
    args = parser.parse_args()

    print("malformed line of escaped quotes, no closing quote:")
    measured = 0.0
    for size in (16 * 1024, 32 * 1024, 8 * 1024 * 1024):
        line = '"' + '\\"' * (size // 2)
        if size <= 32 * 1024:
            measured = seconds(old_nesting, [line])
            old = f"{measured:.2f} s"
        else:
            old = f"about {measured * (size / (32 * 1024)) ** 2 / 3600:,.0f} hours (extrapolated)"
        print(f"  {size / 1024:>6,.0f} KiB: now {seconds(json_nesting, [line]):.3f} s, before {old}")

    lines = TASKS.read_text().splitlines()
    file_lines = lines * max(1, args.megabytes * 1024 * 1024 // sum(len(line) + 1 for line in lines))
    mebibytes = sum(len(line) + 1 for line in file_lines) / (1024 * 1024)
    now, before = seconds(json_nesting, file_lines), seconds(old_nesting, file_lines)
    print(f"well-formed SWE-bench task file, {mebibytes:.0f} MiB: now {now:.2f} s, before {before:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
