"""The sample data the tests read (the files under tests/data/, as shipped) and what the tests
know about it: one name per file, whichever module reads it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"

# --- question sets ---------------------------------------------------------------------------------

JEOPARDY = DATA / "qa" / "jeopardy_sample.tsv"
TRUTHFULQA = DATA / "qa" / "TruthfulQA_sample.csv"
MMLU = DATA / "mmlu"
# TruthfulQA for free-text generation (judged by the evaluator agent), not multiple choice.
TRUTHFULQA_GEN = DATA / "truthfulqa" / "TruthfulQA_sample.csv"

# --- HumanEval -------------------------------------------------------------------------------------

HUMANEVAL = DATA / "humaneval" / "HumanEval.jsonl.gz"
PROBLEMS = [json.loads(line) for line in gzip.decompress(HUMANEVAL.read_bytes()).splitlines()]
HUMANEVAL_SAMPLE = 6  # the problems the ``humaneval`` fixture imports

# --- SWE-bench -------------------------------------------------------------------------------------

# The SWE-bench Lite dev split, as shipped (MIT licence beside it).
SWEBENCH_LITE = DATA / "swebench" / "SWE-bench_Lite_dev.jsonl"
SWEBENCH_LITE_LINES = SWEBENCH_LITE.read_text().splitlines()


def write_lines(tmp_path, lines, name="tasks.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def edited(line_number, **changes):
    """That line of the SWE-bench Lite sample with these fields changed (None: left out)."""
    row = json.loads(SWEBENCH_LITE_LINES[line_number - 1])
    for key, value in changes.items():
        if value is None:
            row.pop(key, None)
        else:
            row[key] = value
    return json.dumps(row)


# --- the textkit testbed (evaluation.testbed) ------------------------------------------------------

# plain textkit, newest first: "Name the word splitter" (rejected: no test turns green),
# "Test slugs of digits" (tests only), then three fixes dated 2026-01-05, -04 and -02.
SPLITTER = "Name the word splitter"
MINUTES = "parse_duration counts minutes as hours"
DASHES = "Strip dashes at the ends of slugs"
WORDS = "Count words across newlines"

# --- prices ----------------------------------------------------------------------------------------

# LiteLLM's published price file, as shipped.
LITELLM_PRICES = DATA / "litellm" / "model_prices_and_context_window.json"
