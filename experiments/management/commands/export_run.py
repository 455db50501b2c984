import sys
from pathlib import Path

from django.core.management.base import CommandError
from tqdm import tqdm

from experiments.exports import EXPORT_FORMATS, each_model_lines, prepare_export
from experiments.management.commands._helpers import run_by_code
from experiments.models import Run
from experiments.swebench_export import ExportRefused, check_patch_run, run_models
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Export a run to stdout: its leaderboard and attempts (json), its attempts (csv), SWE-bench "
        "predictions (swebench-preds: a zip of one JSONL per arm and repetition, or with --arm that arm's "
        "JSONL alone, or with --output-dir those files in a directory), the SWE-bench harness's report per "
        "arm and repetition (swebench-report: one JSON keyed by model, or with --arm that model's report "
        "alone) or a self-contained HTML report of the run's boards, pairwise verdicts and charts (html)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id")
        parser.add_argument("--format", choices=list(EXPORT_FORMATS), default="json")
        parser.add_argument("--arm", metavar="LABEL", help="swebench-preds, swebench-report: this arm's file alone")
        parser.add_argument(
            "--rep",
            type=int,
            metavar="N",
            help="with --arm: its repetition N, counted from 0 (needed when the run has several)",
        )
        parser.add_argument(
            "--output-dir",
            type=Path,
            metavar="DIR",
            help="swebench-preds: write each arm's (and repetition's) JSONL into DIR instead of a zip on stdout",
        )

    def handle(self, *args, run_id, format, arm, rep, output_dir, **options):
        run = run_by_code(run_id)
        try:
            if output_dir is not None:
                self.write_prediction_files(run, format, output_dir, arm, rep)
                return
            export = prepare_export(run, format, arm, rep)
            binary = self.binary_stdout() if export.content_type == "application/zip" else None
        except ExportRefused as exc:
            raise CommandError(str(exc)) from None
        for chunk in export.chunks:  # written as they come: a large run is never one string
            if isinstance(chunk, bytes):
                assert binary is not None
                binary.write(chunk)
            else:
                self.stdout.write(chunk, ending="")
        if binary is not None:
            binary.flush()

    def binary_stdout(self):
        """Where a zip goes: stdout's bytes, never a terminal."""
        stream = self.stdout._out
        if stream.isatty():
            raise ExportRefused(
                "the predictions of every arm come as a zip: redirect stdout to a file "
                "(> predictions.zip), or give --output-dir DIR, or --arm LABEL for one arm's JSONL"
            )
        stream.flush()
        return getattr(stream, "buffer", stream)

    def write_prediction_files(self, run: Run, format: str, output_dir: Path, arm: str | None, rep: int | None):
        """One JSONL per arm and repetition, ``<arm>[@rep<N>].jsonl``. Refused before anything is
        written when a file is already there: a predictions file is never silently replaced."""
        if format != "swebench-preds":
            raise ExportRefused(f"--output-dir writes SWE-bench predictions files, not {format}")
        if arm is not None or rep is not None:
            raise ExportRefused("--output-dir writes every arm's file: leave out --arm and --rep")
        check_patch_run(run)
        models = run_models(run)
        paths = {model: output_dir / f"{model.file_stem}.jsonl" for model in models}
        if taken := [str(path) for path in paths.values() if path.exists()]:
            raise ExportRefused("nothing written: already there: " + ", ".join(taken))
        try:
            output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ExportRefused(f"nothing written: cannot make {output_dir}: {exc.strerror}") from None
        files = tqdm(each_model_lines(run, models), total=len(models), unit="file", file=sys.stderr, leave=False)
        for model, chunks in files:
            lines = 0
            with paths[model].open("x", encoding="utf-8") as out:
                for chunk in chunks:
                    out.write(chunk)
                    lines += chunk.count("\n")
            self.stdout.write(f"{paths[model]}: {lines} prediction(s) of {model.name}")
