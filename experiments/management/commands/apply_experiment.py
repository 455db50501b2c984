from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from experiments.actions import SpecError, check_experiment_spec, do_apply_experiment
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import SPEC_FILE_MAX_BYTES, CheckedCommand, load_spec, read_input_file


class Command(CheckedCommand):
    help = "Create or update an experiment from a JSON or YAML spec file (all or nothing)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("file", help="path to a .json, .yaml or .yml spec")

    def handle(self, *args, org, file, **options):
        organisation = org_by_slug(org)
        try:
            raw = load_spec(read_input_file(file, SPEC_FILE_MAX_BYTES), file)
        except ValidationError as exc:
            raise CommandError("\n".join(exc.messages)) from None
        try:
            spec = check_experiment_spec(organisation, raw)
        except SpecError as exc:
            raise CommandError(f"{file}: invalid experiment spec:\n  " + "\n  ".join(exc.messages)) from None
        experiment, created = do_apply_experiment(organisation, spec)
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} experiment {experiment.name!r} ({experiment.code}) with {len(spec.arms)} arm(s)")
