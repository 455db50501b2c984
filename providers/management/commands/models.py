from django.core.management.base import BaseCommand, CommandError

from providers import catalog


class Command(BaseCommand):
    help = "OpenRouter's model catalog: refresh it, search it, or show one model."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("refresh", help="fetch the live list into the cache")
        search = sub.add_parser("search", help="models whose id or name contains PATTERN (globs allowed)")
        search.add_argument("pattern")
        show = sub.add_parser("info", help="one model's details")
        show.add_argument("model_id")

    def handle(self, *args, action, **options):
        if action == "refresh":
            try:
                count = catalog.refresh()
            except catalog.CatalogError as exc:
                raise CommandError(f"{exc}; the cached or shipped list stays in use") from None
            self.stdout.write(f"cached {count} models")
            return
        listing = catalog.listing()
        if action == "search":
            found = catalog.search(options["pattern"], listing)
            for model in found:
                self.stdout.write(f"{model.id:<48} {model.price_label(' per Mtok')}")
            self.stdout.write(f"{len(found)} model(s) (from the {listing.source}: {listing.describe()})")
            return
        model = catalog.info(options["model_id"], listing)
        if model is None:
            raise CommandError(
                f"no model {options['model_id']!r} in the catalog ({listing.describe()}); try `models search`"
            )
        self.stdout.write(f"id: {model.id}\nname: {model.name}\ncontext length: {model.context_length or 'unknown'}")
        self.stdout.write(f"price per million tokens: {model.price_label()}")
        self.stdout.write(listing.describe())
