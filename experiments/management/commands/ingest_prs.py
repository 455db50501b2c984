import math
import shlex
import sys
from collections import Counter
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from tqdm import tqdm

from experiments.imports import check_dataset_name, check_repo_sources
from experiments.ingest import (
    DEFAULT_TEST_COMMAND,
    IngestOptions,
    Verdict,
    check_repository,
    do_save_ingested,
    existing_task_ids,
    ingest,
)
from experiments.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Mine PR tasks from a git repository's history: commits that change source and tests, "
        "kept when their gold patch turns tests green (flaky ones quarantined)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--dataset", required=True, help="dataset name (created if it does not exist)")
        parser.add_argument("--repo", required=True, help="path of the git repository")
        parser.add_argument("--repo-name", help="owner/name for the tasks (default: local/<directory name>)")
        parser.add_argument("--branch", default="HEAD", help="branch or commit whose history is mined")
        parser.add_argument("--max", type=int, help="stop after this many kept tasks")
        parser.add_argument(
            "--test-command",
            default=shlex.join(DEFAULT_TEST_COMMAND),
            help="test command; {python} is this interpreter, {junit} where the JUnit report goes",
        )
        parser.add_argument("--gold-runs", type=int, default=2, help="times the gold patch is tested (flakiness)")
        parser.add_argument("--timeout", type=float, default=120, help="seconds allowed for one test run")

    def handle(self, *args, org, dataset, repo, repo_name, branch, max, test_command, gold_runs, timeout, **options):
        organisation = org_by_slug(org)
        source = str(Path(repo).resolve())
        name = repo_name or f"local/{Path(source).name}"
        try:
            check_dataset_name(dataset)
            check_repo_sources([f"{name}={source}"])
            if branch.startswith("-"):  # git would read it as an option
                raise ValidationError(f"--branch {branch!r}: a branch or commit cannot start with '-'")
            check_repository(source, branch)
            command = shlex.split(test_command)
        except ValidationError as exc:
            raise CommandError("nothing ingested:\n  " + "\n  ".join(exc.messages)) from None
        except ValueError as exc:
            raise CommandError(f"nothing ingested: --test-command: {exc}") from None
        if not command or gold_runs < 1 or (max is not None and max < 1):
            raise CommandError("nothing ingested: --test-command must be non-empty, --gold-runs and --max at least 1")
        if not (math.isfinite(timeout) and timeout > 0):
            raise CommandError(f"nothing ingested: --timeout must be a positive number of seconds, not {timeout}")
        settings = IngestOptions(name, source, branch, max, command, gold_runs, timeout)
        verdicts, skipped = self._judge(settings, existing_task_ids(organisation, dataset))
        kept = [verdict for verdict in verdicts if verdict.kept]
        saved = do_save_ingested(organisation, settings, dataset, verdicts) if kept else None
        self._summarise(verdicts, saved.name if saved else dataset)
        if skipped:
            reasons = Counter(why for _, why in skipped)
            self.stdout.write(
                f"{len(skipped)} other commit(s) skipped: " + ", ".join(f"{n} {why}" for why, n in reasons.items())
            )

    def _judge(self, settings: IngestOptions, existing: set[str]) -> tuple[list[Verdict], list[tuple[str, str]]]:
        verdicts: list[Verdict] = []
        skipped: list[tuple[str, str]] = []
        with tqdm(total=settings.max_tasks, unit="task", desc="ingesting", file=sys.stderr) as bar:
            for found in ingest(settings, existing, progress=lambda subject: bar.set_postfix_str(subject[:40])):
                if isinstance(found, Verdict):
                    verdicts.append(found)
                    bar.update(found.kept)
                else:
                    skipped.append(found)
        return verdicts, skipped

    def _summarise(self, verdicts: list[Verdict], dataset: str) -> None:
        kept = [verdict for verdict in verdicts if verdict.kept]
        quarantined = [verdict for verdict in kept if verdict.quarantine_reason]
        rejected = [verdict for verdict in verdicts if not verdict.kept]
        self.stdout.write(
            f"{len(verdicts)} candidate(s): kept {len(kept)} ({len(quarantined)} quarantined as flaky), "
            f"rejected {len(rejected)}" + (f"; saved to dataset {dataset!r}" if kept else "; nothing saved")
        )
        for verdict in kept:
            candidate = verdict.candidate
            flag = f"  QUARANTINED: {verdict.quarantine_reason}" if verdict.quarantine_reason else ""
            self.stdout.write(
                f"  kept     {candidate.commit[:12]} {candidate.subject[:60]!r}: "
                f"{len(verdict.fail_to_pass)} FAIL_TO_PASS, {len(verdict.pass_to_pass)} PASS_TO_PASS{flag}"
            )
        for verdict in rejected:
            candidate = verdict.candidate
            self.stdout.write(f"  rejected {candidate.commit[:12]} {candidate.subject[:60]!r}: {verdict.rejected}")
