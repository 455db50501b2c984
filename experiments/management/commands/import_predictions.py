from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from experiments.models import Experiment
from experiments.replay import PredictionsRejected, check_replay_label, do_import_predictions, parse_predictions
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand, read_input_file

SHOWN_IGNORED = 5


class Command(CheckedCommand):
    help = (
        "Add another system's SWE-bench predictions to an experiment as a replay arm: its patches are "
        "validated and scored like a live arm's. All or nothing: a bad line changes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("--experiment", required=True, help="experiment name")
        parser.add_argument(
            "--arm", required=True, help="the replay arm's label (an existing replay arm's predictions are replaced)"
        )
        parser.add_argument(
            "file",
            help="SWE-bench predictions: JSONL, one {instance_id, model_name_or_path, model_patch} per line, "
            "or a .json list or mapping of them",
        )

    def handle(self, *args, org, experiment, arm, file, **options):
        organisation = org_by_slug(org)
        chosen = Experiment.objects.filter(org=organisation, name=experiment).select_related("dataset").first()
        if chosen is None:
            raise CommandError(f"no experiment named {experiment!r} in {organisation.slug}")
        path = Path(file)
        try:
            check_replay_label(chosen, arm)  # before reading a large file for nothing
        except ValidationError as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.messages)) from None
        data = read_input_file(path, settings.PRBENCH_UPLOAD_MAX_BYTES, "PRBENCH_UPLOAD_MAX_BYTES, as for uploads")
        try:
            report = do_import_predictions(chosen, arm, parse_predictions(path.name, data))
        except PredictionsRejected as exc:
            raise CommandError(f"nothing imported: {path} has problems:\n  " + "\n  ".join(exc.problems)) from None
        except ValidationError as exc:
            raise CommandError("nothing imported:\n  " + "\n  ".join(exc.messages)) from None
        verb = "Replaced the predictions of" if report.replaced else "Added"
        self.stdout.write(
            f"{verb} replay arm {arm!r} ({report.arm.model_name}) in {chosen.name!r}: {report.kept} prediction(s) "
            f"for dataset {chosen.dataset.name!r}, {report.empty} of them empty"
        )
        if report.unanswered:
            self.stdout.write(
                f"{report.unanswered} task(s) of the dataset have no prediction: the arm gives them no answer "
                "(scored as the replayed system's failure, as the harness counts them)"
            )
        if report.ignored:
            shown = ", ".join(report.ignored[:SHOWN_IGNORED]) + (", ..." if len(report.ignored) > SHOWN_IGNORED else "")
            self.stdout.write(
                f"{len(report.ignored)} prediction(s) for instances not in the dataset were left out: {shown}"
            )
