import math
import shlex
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from tqdm import tqdm

from datasets.imports import check_dataset_name, check_repo_sources
from datasets.ingest import (
    DEFAULT_TEST_COMMAND,
    IngestOptions,
    Skipped,
    TestCommandDoesNotStart,
    Verdict,
    check_repository,
    ingest,
    parse_since,
)
from evaluation.environments import PYTHON_VERSION, Recipe
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Mine PR tasks from a git repository's history: commits that change source and tests, "
        "kept when their gold patch turns tests green (flaky ones quarantined). Each decision is "
        "saved as it is made; a re-run skips the commits already decided."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--dataset", required=True, help="dataset name (created if it does not exist)")
        parser.add_argument("--repo", required=True, help="path of the git repository")
        parser.add_argument("--repo-name", help="owner/name for the tasks (default: local/<directory name>)")
        parser.add_argument("--branch", default="HEAD", help="branch or commit whose history is mined")
        parser.add_argument("--max", type=int, help="stop after this many kept tasks")
        parser.add_argument("--max-candidates", type=int, help="stop after judging this many candidates, kept or not")
        parser.add_argument("--since", help="only commits committed on or after this ISO date (UTC), e.g. 2024-01-31")
        parser.add_argument(
            "--retry-rejected", action="store_true", help="judge again the candidates an earlier run rejected"
        )
        parser.add_argument(
            "--test-command",
            default=shlex.join(DEFAULT_TEST_COMMAND),
            help="test command; {python} is this interpreter (a bare 'python' is not, inside the sandbox), "
            "{junit} where the JUnit report goes",
        )
        parser.add_argument("--gold-runs", type=int, default=2, help="times the gold patch is tested (flakiness)")
        parser.add_argument("--timeout", type=float, default=120, help="seconds allowed for one test run")
        environment = parser.add_argument_group(
            "environment", "for a repository whose tests import its dependencies: the recipe of the environment "
            "its tests run in, built with uv and kept as the dataset's recipe for the repository "
            "(default: the dataset's recipe, else the worker's own Python)"
        )  # fmt: skip
        environment.add_argument("--python", help='the interpreter, e.g. "3.11"')
        environment.add_argument("--package", action="append", default=[], help="a requirement installed first")
        environment.add_argument("--requirements", action="append", default=[], help="a requirements file to install")
        environment.add_argument("--project", default="-e .", help='how the project is installed (default "-e .")')
        environment.add_argument(
            "--pre-install", action="append", default=[], help="a shell command run in the checkout before installing"
        )
        environment.add_argument(
            "--checkout-build",
            default="",
            metavar="COMMAND",
            help="a shell command building the project in its checkout (compiled extensions), run at each base "
            "commit and again after each patch: python setup.py build_ext --inplace",
        )

    def handle(self, *args, org, dataset, **options):
        organisation = org_by_slug(org)
        settings = self._options(dataset, **options)
        found: list[Verdict | Skipped] = []
        try:
            self._mine(organisation, dataset, settings, found)
        except TestCommandDoesNotStart as exc:
            self._summarise(found, dataset)
            raise CommandError(f"stopped: {exc}") from None
        except KeyboardInterrupt:
            self._summarise(found, dataset)
            raise CommandError(
                "interrupted: the decisions above are saved; the same command goes on from there"
            ) from None
        self._summarise(found, dataset)

    def _options(self, dataset, *, repo, repo_name, branch, max, max_candidates, since, retry_rejected, **rest):
        source = str(Path(repo).resolve())
        name = repo_name or f"local/{Path(source).name}"
        try:
            check_dataset_name(dataset)
            check_repo_sources([f"{name}={source}"])
            if branch.startswith("-"):  # git would read it as an option
                raise ValidationError(f"--branch {branch!r}: a branch or commit cannot start with '-'")
            check_repository(source, branch)
            command = shlex.split(rest["test_command"])
            since_date = parse_since(since) if since is not None else None
        except ValidationError as exc:
            raise CommandError("nothing ingested:\n  " + "\n  ".join(exc.messages)) from None
        except ValueError as exc:
            raise CommandError(f"nothing ingested: --test-command: {exc}") from None
        recipe = _recipe(rest)
        gold_runs, timeout = rest["gold_runs"], rest["timeout"]
        if not command or gold_runs < 1 or (max is not None and max < 1):
            raise CommandError("nothing ingested: --test-command must be non-empty, --gold-runs and --max at least 1")
        if max_candidates is not None and max_candidates < 1:
            raise CommandError(f"nothing ingested: --max-candidates must be at least 1, not {max_candidates}")
        if not (math.isfinite(timeout) and timeout > 0):
            raise CommandError(f"nothing ingested: --timeout must be a positive number of seconds, not {timeout}")
        return IngestOptions(
            repo_name=name,
            source=source,
            branch=branch,
            max_tasks=max,
            test_command=command,
            gold_runs=gold_runs,
            timeout_s=timeout,
            max_candidates=max_candidates,
            since=since_date,
            retry_rejected=retry_rejected,
            recipe=recipe,
        )

    def _mine(self, organisation, dataset: str, settings: IngestOptions, found: list[Verdict | Skipped]) -> None:
        """Each decision printed as it is saved, above a bar of candidates judged."""
        counts: Counter[str] = Counter()
        with tqdm(total=settings.max_candidates, unit="candidate", desc="ingesting", file=sys.stderr) as bar:

            def show(subject: str) -> None:
                tally = f"kept {counts['kept']}, rejected {counts['rejected']}, skipped {counts['skipped']}"
                bar.set_postfix_str(f"{tally} | {subject[:40]}" if subject else tally)

            with closing(ingest(organisation, dataset, settings, progress=show)) as mined:
                for item in mined:
                    found.append(item)
                    if isinstance(item, Skipped):
                        counts["skipped"] += 1
                    else:
                        counts["kept" if item.kept else "rejected"] += 1
                        bar.update()
                        with tqdm.external_write_mode(file=sys.stderr):
                            self.stdout.write(self._decision(item))
                    show("")

    def _decision(self, verdict: Verdict) -> str:
        candidate = verdict.candidate
        if verdict.kept:
            flag = f"  QUARANTINED: {verdict.quarantine_reason}" if verdict.quarantine_reason else ""
            return (
                f"  kept     {candidate.commit[:12]} {candidate.subject[:60]!r}: "
                f"{len(verdict.fail_to_pass)} FAIL_TO_PASS, {len(verdict.pass_to_pass)} PASS_TO_PASS{flag}"
            )
        line = f"  rejected {candidate.commit[:12]} {candidate.subject[:60]!r}: {verdict.rejected}"
        if verdict.log_tail:
            line += "\n" + "\n".join(f"      | {text}" for text in verdict.log_tail.splitlines())
        return line

    def _summarise(self, found: list[Verdict | Skipped], dataset: str) -> None:
        verdicts = [item for item in found if isinstance(item, Verdict)]
        kept = [verdict for verdict in verdicts if verdict.kept]
        quarantined = [verdict for verdict in kept if verdict.quarantine_reason]
        saved = f"; saved to dataset {dataset!r}" if verdicts else "; nothing saved"
        self.stdout.write(
            f"{len(verdicts)} candidate(s): kept {len(kept)} ({len(quarantined)} quarantined as flaky), "
            f"rejected {len(verdicts) - len(kept)}{saved}"
        )
        skipped = Counter(item.why for item in found if isinstance(item, Skipped))
        if skipped:
            self.stdout.write(
                f"{skipped.total()} other commit(s) skipped: " + ", ".join(f"{n} {why}" for why, n in skipped.items())
            )


def _recipe(options: dict) -> Recipe | None:
    if not options["python"]:
        if options["package"] or options["requirements"] or options["pre_install"] or options["checkout_build"]:
            raise CommandError(
                "nothing ingested: --package, --requirements, --pre-install and --checkout-build need --python"
            )
        return None
    if not PYTHON_VERSION.match(options["python"]):
        raise CommandError(f'nothing ingested: --python must be a version such as "3.11", not {options["python"]!r}')
    return Recipe(
        python=options["python"],
        packages=tuple(options["package"]),
        requirements=tuple(options["requirements"]),
        project=options["project"],
        pre_install=tuple(options["pre_install"]),
        checkout_build=options["checkout_build"].strip(),
    )
