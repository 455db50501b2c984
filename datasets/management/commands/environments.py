import re
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db.models import QuerySet
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from tqdm import tqdm

from datasets.environments import (
    UsedEnvironment,
    do_build,
    enqueue_builds,
    tasks_needing_environments,
    used_environments,
)
from datasets.management.commands._helpers import dataset_by_name
from datasets.models import Dataset, EnvironmentRecipe
from datasets.recipes import check_recipe, do_set_recipe, recipe_installs
from evaluation.environments import BuildLog, EnvironmentUnavailable, available_pythons, cached, prune
from orgs.management.commands._helpers import org_by_slug
from prbench.inputs import CheckedCommand, JsonRejected, parse_json

# "python: ..." or "test_env: ..." as check_recipe says it -> the option that gave it.
_FIELD = re.compile(r"^(?P<field>[a-z_]+)(?P<rest>[:.\[].*)$", re.DOTALL)
OPTIONS = {
    "packages": "--package",
    "requirements": "--requirements",
    "system_packages": "--system-package",
    "pre_install": "--pre-install",
    "exclude_newer": "--exclude-newer",
}


class Command(CheckedCommand):
    help = (
        "Task environments (a virtualenv per repository recipe, built with uv into this worker's cache): "
        "list them, build a dataset's, prune the cache, or set a repository's recipe."
    )

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="list|build|prune|set")
        listing = actions.add_parser("list", help="recipes, environments and what this worker has on disk")
        listing.add_argument("--org", help="only this organisation's datasets (slug)")
        listing.add_argument("--dataset", help="only this dataset (with --org)")
        building = actions.add_parser("build", help="build every environment a dataset's tasks need")
        building.add_argument("--org", required=True, help="organisation slug")
        building.add_argument("--dataset", required=True, help="the organisation's dataset, by name")
        building.add_argument("--retry", action="store_true", help="build again what failed before")
        building.add_argument("--queue", action="store_true", help="queue the builds as jobs instead of here")
        pruning = actions.add_parser("prune", help="remove least recently used environments from this worker")
        pruning.add_argument("--max-bytes", type=int, help="what the cache may hold (default PRBENCH_ENV_CACHE_BYTES)")
        pruning.add_argument("--key", action="append", help="remove exactly this environment (repeatable)")
        setting = actions.add_parser(
            "set", help="set a repository's recipe (the whole recipe: what is not given is left out)"
        )
        setting.add_argument("--org", required=True, help="organisation slug")
        setting.add_argument("--dataset", required=True, help="the organisation's dataset, by name")
        setting.add_argument("--repo", required=True, help="owner/name, as the dataset's tasks name it")
        setting.add_argument("--version", default="", help="the tasks' version (default: every version)")
        setting.add_argument("--python", required=True, help='the interpreter, e.g. "3.11"')
        setting.add_argument("--package", action="append", default=[], help="a requirement specifier (repeatable)")
        setting.add_argument(
            "--requirements", action="append", default=[], help="a requirements file in the repository"
        )
        setting.add_argument("--project", default="-e .", help='how the project is installed: "-e .[test]", "" for not')
        setting.add_argument("--pre-install", action="append", default=[], help="a shell command run first")
        setting.add_argument("--system-package", action="append", default=[], help="what the worker must have")
        setting.add_argument(
            "--test-command", help='the tests\' argv as a JSON list, e.g. ["{python}", "-m", "pytest"]'
        )
        setting.add_argument("--test-env", action="append", default=[], metavar="NAME=VALUE", help="(repeatable)")
        setting.add_argument(
            "--exclude-newer", default="", metavar="DATE", help="install what the package index held then (ISO date)"
        )
        setting.add_argument(
            "--checkout-build",
            default="",
            metavar="COMMAND",
            help="a shell command building the project in its checkout (compiled extensions), run again after "
            "each patch: python setup.py build_ext --inplace",
        )
        setting.add_argument("--source", default="", help="where the recipe came from")

    def handle(self, *args, action, **options):
        {
            "list": self.list_environments,
            "build": self.build_environments,
            "prune": self.prune_cache,
            "set": self.set_recipe,
        }[action](**options)

    # -- list -------------------------------------------------------------------------------

    def list_environments(self, org, dataset, **options):
        datasets = self._datasets(org, dataset)
        on_disk = {env.key: env for env in cached()}
        for found in datasets:
            recipes = list(found.environment_recipes.all())
            used = used_environments(found)
            if not recipes and not used:
                continue
            self.stdout.write(f"{found.org.slug} / {found.name}")
            for recipe in recipes:
                self.stdout.write(f"  recipe {_describe(recipe)}")
            for env in used:
                here = on_disk.get(env.key)
                self.stdout.write(
                    f"  environment {env.short_key}  {_status(env)}  {env.tasks} task(s)  here: {_here(here)}"
                )
        self.stdout.write(
            f"On this worker's disk: {len(on_disk)} environment(s), "
            f"{filesizeformat(sum(env.size_bytes for env in on_disk.values()))}"
        )
        for env in on_disk.values():
            label = f"{env.recipe.get('python', '?')} {' '.join(env.recipe.get('packages', []))}".strip()
            self.stdout.write(
                f"  {env.key[:12]}  {filesizeformat(env.size_bytes)}  last used {_ago(env.last_used)}  Python {label}"
            )
        pythons = available_pythons()
        self.stdout.write("Interpreters here: " + (", ".join(f"{v} ({p})" for v, p in pythons.items()) or "none"))

    def _datasets(self, org: str | None, dataset: str | None) -> QuerySet[Dataset] | list[Dataset]:
        if dataset and not org:
            raise CommandError("--dataset needs --org (dataset names are per organisation)")
        if org and dataset:
            return [dataset_by_name(org_by_slug(org), dataset)]
        found = Dataset.objects.select_related("org").order_by("org__slug", "name")
        return found.filter(org=org_by_slug(org)) if org else found

    # -- build ------------------------------------------------------------------------------

    def build_environments(self, org, dataset, retry, queue, **options):
        found = dataset_by_name(org_by_slug(org), dataset)
        tasks = found.tasks.select_related("dataset").order_by("position")
        if queue:
            queued = enqueue_builds(tasks, retry=retry)
            self.stdout.write(
                f"Queued {len(queued)} build(s) of {found.name!r}: "
                + (" ".join(k[:12] for k in queued) or "nothing to build (built here already, or failed: --retry)")
            )
            return
        needed = tasks_needing_environments(tasks)
        if not needed:
            self.stdout.write(f"No task of {found.name!r} has an environment recipe: they run with the worker's Python")
            return
        failed = 0
        with tqdm(total=len(needed), unit="environment", file=sys.stderr) as bar:

            def show(log: BuildLog) -> None:
                bar.set_postfix_str(
                    f"step {min(log.steps_done + 1, log.steps_total)}/{log.steps_total}: {log.step[:40]}"
                )

            for key, (task, recipe) in needed.items():
                bar.set_description(f"{recipe.repo} {recipe.version or ''}".strip())
                try:
                    built = do_build(task, recipe, key, retry=retry, on_progress=show)
                except EnvironmentUnavailable as exc:
                    failed += 1
                    with tqdm.external_write_mode(file=sys.stderr):
                        self.stdout.write(f"{key[:12]} failed: {exc}")
                else:
                    how = "reused" if built.reused else "built"
                    with tqdm.external_write_mode(file=sys.stderr):
                        self.stdout.write(
                            f"{key[:12]} {how} in {built.seconds:.1f}s, {filesizeformat(built.size_bytes)}"
                            f" ({recipe.repo} {recipe.version or 'every version'}, Python {recipe.python})"
                        )
                bar.update()
        self.stdout.write(
            f"{len(needed)} environment(s) for {found.name!r}: {len(needed) - failed} ready, {failed} failed"
        )
        if failed:
            raise CommandError(f"{failed} environment(s) could not be had: their tasks are quarantined")

    # -- prune ------------------------------------------------------------------------------

    def prune_cache(self, max_bytes, key, **options):
        if max_bytes is not None and max_bytes < 0:
            raise CommandError("--max-bytes must be 0 or more")
        removed = prune(max_bytes, key)
        for env in removed:
            self.stdout.write(
                f"removed {env.key[:12]}  {filesizeformat(env.size_bytes)}  last used {_ago(env.last_used)}"
            )
        left = cached()
        self.stdout.write(
            f"Freed {filesizeformat(sum(env.size_bytes for env in removed))} ({len(removed)} removed); "
            f"{len(left)} left, {filesizeformat(sum(env.size_bytes for env in left))}"
        )

    # -- set --------------------------------------------------------------------------------

    def set_recipe(self, org, dataset, test_command, test_env, **options):
        found = dataset_by_name(org_by_slug(org), dataset)
        raw = {
            "repo": options["repo"],
            "version": options["version"],
            "python": options["python"],
            "packages": options["package"],
            "requirements": options["requirements"],
            "project": options["project"],
            "pre_install": options["pre_install"],
            "system_packages": options["system_package"],
            "test_env": _test_env(test_env),
            "exclude_newer": options["exclude_newer"],
            "checkout_build": options["checkout_build"],
            "source": options["source"] or "manage.py environments set",
        }
        if test_command is not None:
            try:
                raw["test_command"] = parse_json(test_command)
            except JsonRejected as exc:
                raise CommandError(f"--test-command: not a JSON list of arguments ({exc})") from None
        try:
            checked = check_recipe(found, raw)
        except ValidationError as exc:
            raise CommandError("; ".join(_as_option(message) for message in exc.messages)) from None
        recipe, created = do_set_recipe(found, checked)
        self.stdout.write(f"{'Created' if created else 'Updated'} the recipe {_describe(recipe)}")


def _test_env(pairs: list[str]) -> dict[str, str]:
    variables = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            raise CommandError(f"--test-env: {pair[:60]!r} is not NAME=VALUE")
        variables[name] = value
    return variables


def _as_option(message: str) -> str:
    found = _FIELD.match(message)
    if not found:
        return message
    name = found["field"]
    return f"{OPTIONS.get(name, '--' + name.replace('_', '-'))}{found['rest']}"


def _describe(recipe: EnvironmentRecipe) -> str:
    source = f"  [{recipe.source}]" if recipe.source else ""
    version = recipe.version or "(every version)"
    return f"{recipe.repo} {version}: Python {recipe.python}, installs {recipe_installs(recipe)}{source}"


def _status(env: UsedEnvironment) -> str:
    record = env.record
    if record is None:
        return "not built yet"
    if env.waiting_for:
        return f"waiting for a worker with {env.waiting_for}"
    parts = [record.status]
    if record.build_seconds is not None:
        parts.append(f"built in {record.build_seconds:.1f}s")
    if record.size_bytes is not None:
        parts.append(filesizeformat(record.size_bytes))
    return ", ".join(parts)


def _here(env) -> str:
    if env is None:
        return "not on disk"
    return f"on disk, {filesizeformat(env.size_bytes)}, last used {_ago(env.last_used)}"


def _ago(timestamp: float) -> str:
    seconds = max(0, int(timezone.now().timestamp() - timestamp))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
