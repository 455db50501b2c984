"""How often grading agrees with a person, on the labelled sets in tests/data/grading/:

- qa_exact, each grading mode: agreement with a Jeopardy judge's rulings, false accepts (a
  wrong response accepted; as a share of all rows, and of the wrong rows) and false rejects;
- multiple_choice: agreement with the letter a person reads, wrong letters read, letters read
  where a person reads none, and letters missed.

Each on the dev part (tuned against), the held-out part (never tuned against) and all.

    .venv/bin/python bench/grading_agreement.py [--data tests/data/grading] [--disagreements MODE]

``--disagreements jeopardy`` (or ``choices``) lists the rows where grading and person differ.
Pure functions: no database, no Redis.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "prbench.settings")
os.environ.setdefault("DEBUG", "True")  # the settings module asks production for its keys

import django  # noqa: E402

django.setup()

from evaluation.grading_agreement import (  # noqa: E402
    PARTS,
    ChoiceFigures,
    QaFigures,
    choice_figures,
    letter_read,
    load_choices,
    load_qa,
    qa_accepts,
    qa_figures,
)
from evaluation.workloads.answer_matching import MODES  # noqa: E402

DATA = ROOT / "tests" / "data" / "grading"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--disagreements", choices=[*MODES, "choices"], help="list the rows graded otherwise")
    args = parser.parse_args()
    qa, choices = load_qa(args.data), load_choices(args.data)
    if args.disagreements:
        _print_disagreements(qa, choices, args.disagreements)
        return 0
    parts = [*PARTS.values(), "all"]

    print(f"qa_exact: {len(qa)} judgements ({_sizes(qa)}); {sum(not j.correct for j in qa)} ruled wrong")
    print()
    print("| mode | part | agreement | false accepts (of all; of wrong) | false rejects |")
    print("| --- | --- | --- | --- | --- |")
    for mode in MODES:
        for part in parts:
            print(f"| {mode} | {part} | {_qa_cells(qa_figures((j for j in qa if part in ('all', j.part)), mode))} |")
    print()
    print(f"multiple_choice: {len(choices)} judgements ({_sizes(choices)})")
    print()
    print("| part | agreement | wrong letter read | letter read where a person reads none | letter missed |")
    print("| --- | --- | --- | --- | --- |")
    for part in parts:
        print(f"| {part} | {_choice_cells(choice_figures(j for j in choices if part in ('all', j.part)))} |")
    return 0


def _sizes(judgements: list) -> str:
    return ", ".join(f"{part} {sum(j.part == part for j in judgements)}" for part in PARTS.values())


def _qa_cells(f: QaFigures) -> str:
    return (
        f"{f.agreed}/{f.rows} = {_pct(f.agreed, f.rows)} | "
        f"{f.false_accepts} = {_pct(f.false_accepts, f.rows)}; {_pct(f.false_accepts, f.wrong_rows)} | "
        f"{f.false_rejects} = {_pct(f.false_rejects, f.rows)}"
    )


def _choice_cells(f: ChoiceFigures) -> str:
    return (
        f"{f.agreed}/{f.rows} = {_pct(f.agreed, f.rows)} | {f.wrong_letters} = {_pct(f.wrong_letters, f.rows)} | "
        f"{f.read_where_none} = {_pct(f.read_where_none, f.rows)} | {f.missed} = {_pct(f.missed, f.rows)}"
    )


def _pct(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


def _print_disagreements(qa: list, choices: list, which: str) -> None:
    if which == "choices":
        for j in choices:
            if (read := letter_read(j)) != j.letter:
                print(f"[{j.part}] {j.source} {j.style}: person {j.label}, read {read or '-'}: {j.output!r}")
        return
    for j in qa:
        if qa_accepts(j, which) != j.correct:
            ruling = "right" if j.correct else "wrong"
            print(f"[{j.part}] {j.convention}: {j.output!r} for {j.answer!r}: person {ruling}")


if __name__ == "__main__":
    sys.exit(main())
