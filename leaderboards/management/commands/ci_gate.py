import json
import time
from decimal import Decimal
from pathlib import Path

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.management.base import CommandError

from experiments.management.commands._helpers import run_by_code
from experiments.models import Run
from experiments.progress import run_progress
from leaderboards.gate import (
    FAIL,
    INCONCLUSIVE,
    GateRequest,
    check_gate_request,
    evaluate_gate,
    gate_markdown,
    parse_number,
    still_changing,
)
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand

PASSED, FAILED, ERROR, UNDECIDED = 0, 1, 2, 3  # exit codes: a build step fails on anything but 0
POLL_SECONDS = 2.0
# The request's fields as this command's options name them, for error messages.
OPTIONS = {
    "min_quality_lower_bound": "--min-quality",
    "baseline": "--baseline",
    "max_cost_per_task": "--max-cost-per-task",
    "max_p95_latency": "--max-p95-latency",
    "confidence": "--confidence",
    "arms": "--arm",
    "baseline_arms": "--baseline-arm",
}


def pause(seconds: float) -> None:
    time.sleep(seconds)


class Command(CheckedCommand):
    help = (
        "Gate a finished run for CI: each arm against thresholds (quality lower bound, cost per task, p95 latency) "
        "and against the same arm of a baseline run (no significant regression on the tasks both scored). Prints a "
        "Markdown summary for a pull-request comment. Exit code 0: pass, 1: fail, 2: error (bad arguments, unknown "
        "run, unfinished run, no shared tasks), 3: inconclusive (too few shared tasks to tell; --inconclusive pass "
        "exits 0 instead)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--run", required=True, help="the run to gate (its public id)")
        parser.add_argument("--baseline", help="a run of the same organisation and dataset to compare with")
        parser.add_argument(
            "--arm", action="append", default=[], metavar="LABEL", help="gate this arm (repeatable; default: all)"
        )
        parser.add_argument(
            "--baseline-arm",
            action="append",
            default=[],
            metavar="LABEL=BASELINE_LABEL",
            help="compare arm LABEL with the baseline's arm BASELINE_LABEL (default: the arm of the same label)",
        )
        parser.add_argument("--min-quality", metavar="X", help="lowest allowed lower bound of quality, 0-1")
        parser.add_argument("--max-cost-per-task", metavar="USD", help="highest allowed mean cost per task")
        parser.add_argument("--max-p95-latency", metavar="SECONDS", help="highest allowed p95 latency")
        parser.add_argument("--confidence", default="0.95", help="of the intervals and the paired test (0.95)")
        parser.add_argument(
            "--markdown", dest="markdown_file", metavar="FILE", help="also write the Markdown summary here"
        )
        parser.add_argument("--json", dest="json_file", metavar="FILE", help="write the result as JSON here")
        parser.add_argument("--wait", action="store_true", help="wait for the runs to finish (progress on stderr)")
        parser.add_argument("--timeout", metavar="SECONDS", help="with --wait: give up (exit 2) after this long")
        parser.add_argument(
            "--inconclusive",
            choices=["pass", "fail"],
            default="fail",
            help="what a gate that cannot decide (too few shared tasks) does to the build: fail (exit 3, the "
            "default) or pass (exit 0); the summary says inconclusive either way",
        )

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            exc.returncode = ERROR  # whatever went wrong, the gate could not say: never "failed"
            raise

    def handle(self, *args, org, run, baseline, arm, baseline_arm, wait, timeout, inconclusive, **options):
        markdown_file, json_file = options["markdown_file"], options["json_file"]
        gated = run_by_code(run, org=org_by_slug(org))
        if timeout is not None and not wait:
            raise CommandError("--timeout: only with --wait")
        try:
            request = GateRequest(
                min_quality_lower_bound=parse_number("min_quality_lower_bound", options["min_quality"]),
                baseline=baseline,
                max_cost_per_task=parse_number("max_cost_per_task", options["max_cost_per_task"], Decimal),
                max_p95_latency=parse_number("max_p95_latency", options["max_p95_latency"]),
                arms=arm,
                baseline_arms=_renamed(baseline_arm),
                confidence=parse_number("confidence", options["confidence"]),
            )
            plan = check_gate_request(gated, request)  # before any wait: a typo fails at once
            if wait:
                self.wait_for([gated] + ([plan.baseline] if plan.baseline else []), _seconds(timeout))
            result = evaluate_gate(gated, request)
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from None
        text = gate_markdown(result)
        self.stdout.write(text, ending="")
        _write(markdown_file, text)
        _write(json_file, _json_text(result.as_dict()))
        if result.verdict == FAIL:
            raise SystemExit(FAILED)
        if result.verdict == INCONCLUSIVE and inconclusive == "fail":
            raise SystemExit(UNDECIDED)

    def wait_for(self, runs: list[Run], timeout: float | None) -> None:
        """Poll until every run's figures are final, a line on stderr whenever one moves; past the
        timeout, return anyway and let evaluate_gate say which has not finished."""
        deadline = None if timeout is None else time.monotonic() + timeout
        shown: dict[int, str] = {}
        while True:
            for run in runs:
                run.refresh_from_db(fields=["status", "finished_at"])
                progress = run_progress(run)
                line = f"run {run.code}: {run.status}, {progress.done}/{progress.total} attempts done"
                if shown.get(run.pk) != line:
                    self.stderr.write(line)
                    shown[run.pk] = line
            if all(still_changing(run) is None for run in runs):
                return
            if deadline is not None and time.monotonic() >= deadline:
                self.stderr.write(f"gave up waiting after {timeout:g} s")
                return
            pause(POLL_SECONDS)


def _renamed(pairs: list[str]) -> dict[str, str]:
    """--baseline-arm LABEL=BASELINE_LABEL, split at the first '='."""
    renamed = {}
    for pair in pairs:
        label, equals, theirs = pair.partition("=")
        if not equals or not label or not theirs:
            raise CommandError(f"--baseline-arm: {pair!r} is not LABEL=BASELINE_LABEL")
        renamed[label] = theirs
    return renamed


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise CommandError(f"--timeout: must be a number of seconds, 0 or more, not {text!r}")
    return seconds


def _messages(error: ValidationError) -> str:
    """Each problem once, named by the command's option rather than the request's field."""
    if not hasattr(error, "error_dict"):
        return "; ".join(error.messages)
    lines = []
    for field, problems in error.message_dict.items():
        option = OPTIONS.get(field)
        for problem in problems:
            if option and problem.startswith(f"{field}:"):
                problem = f"{option} ({field}):{problem.removeprefix(f'{field}:')}"
            lines.append(problem if field != NON_FIELD_ERRORS else problem.capitalize())
    return "; ".join(lines)


def _json_text(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _write(path: str | None, text: str) -> None:
    if path is None:
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None
