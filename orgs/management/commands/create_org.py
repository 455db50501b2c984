from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from orgs.actions import check_create_org, do_create_org
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = "Create an organisation and its owner (the user is created if it does not exist)."

    def add_arguments(self, parser):
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--owner-email", required=True)
        parser.add_argument("--password", help="set (or reset) the owner's password")

    def handle(self, *args, slug, name, owner_email, password, **options):
        try:
            check_create_org(slug, name, owner_email)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        org, user = do_create_org(slug, name, owner_email, password)
        self.stdout.write(f"Created organisation {org.slug} ({org.code}) owned by {user.email}")
