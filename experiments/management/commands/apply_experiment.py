import json
from pathlib import Path

import yaml
from django.core.management.base import BaseCommand, CommandError

from experiments.actions import SpecError, check_experiment_spec, do_apply_experiment
from experiments.management.commands._helpers import org_by_slug


class Command(BaseCommand):
    help = "Create or update an experiment from a JSON or YAML spec file (all or nothing)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="organisation slug")
        parser.add_argument("file", help="path to a .json, .yaml or .yml spec")

    def handle(self, *args, org, file, **options):
        organisation = org_by_slug(org)
        raw = load_spec(Path(file))
        try:
            spec = check_experiment_spec(organisation, raw)
        except SpecError as exc:
            raise CommandError(f"{file}: invalid experiment spec:\n  " + "\n  ".join(exc.messages)) from None
        experiment, created = do_apply_experiment(organisation, spec)
        verb = "Created" if created else "Updated"
        self.stdout.write(f"{verb} experiment {experiment.name!r} ({experiment.code}) with {len(spec.arms)} arm(s)")


def load_spec(path: Path):
    try:
        text = path.read_text()
    except OSError as exc:
        raise CommandError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise CommandError(f"{path}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
