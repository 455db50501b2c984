from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from orgs.actions import check_create_org, do_create_org
from prbench.inputs import CheckedCommand


class Command(CheckedCommand):
    help = (
        "Create an organisation and its owner (the user is created if it does not exist). A new owner's "
        "--password must pass the same checks as signup; an existing owner's password is left as it is "
        "unless --reset-password is given too."
    )

    def add_arguments(self, parser):
        parser.add_argument("--slug", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--owner-email", required=True)
        parser.add_argument(
            "--password", help="the new owner's password (checked as at signup); for an existing owner see below"
        )
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="the owner already has an account: replace its password with --password",
        )

    def handle(self, *args, slug, name, owner_email, password, reset_password, **options):
        try:
            check_create_org(slug, name, owner_email, password, reset_password)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        existed = _has_account(owner_email)
        org, user = do_create_org(slug, name, owner_email, password, reset_password)
        self.stdout.write(f"Created organisation {org.slug} ({org.code}) owned by {user.email}")
        self.stdout.write(_what_happened_to(user.email, existed, password, reset_password))


def _has_account(email: str) -> bool:
    return get_user_model().objects.filter(email__iexact=email).exists()


def _what_happened_to(email: str, existed: bool, password: str | None, reset_password: bool) -> str:
    if not existed:
        how = "with the given password" if password else "with no usable password"
        return f"New user {email} created {how}"
    if reset_password:
        return f"Existing user {email}: password reset"
    return f"Existing user {email}: password unchanged"
