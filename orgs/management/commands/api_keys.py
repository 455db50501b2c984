"""Headless management of an organisation's API keys, for operators.

``create`` prints the key once, on standard output alone (so ``KEY=$(manage.py api_keys create
...)`` captures just the key); what was made goes to standard error. The same
``check_create_api_key`` / ``do_create_api_key`` / ``do_revoke_api_key`` as the browser page, and
the same audit log entries (with no person: an operator at the command line).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from orgs.api_keys import check_create_api_key, do_create_api_key, do_revoke_api_key, parse_expiry
from orgs.models import ApiKey, Organization


class Command(BaseCommand):
    help = "Create, list or revoke an organisation's API keys (a new key is printed once)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a key and print it once")
        create.add_argument("--org", required=True, help="organisation slug")
        create.add_argument("--name", required=True, help='what the key is for, e.g. "ci"')
        create.add_argument("--scopes", default="read", help="comma-separated: read, run, admin (default: read)")
        create.add_argument("--expires", default="", help="last day the key works, YYYY-MM-DD (default: never)")
        listing = sub.add_parser("list", help="name, prefix, scopes, expiry, last use and status")
        listing.add_argument("--org", required=True, help="organisation slug")
        revoke = sub.add_parser("revoke", help="revoke the live key of that name")
        revoke.add_argument("--org", required=True, help="organisation slug")
        revoke.add_argument("--name", required=True)

    def handle(self, *args, action, **options):
        org = Organization.objects.filter(slug=options["org"]).first()
        if org is None:
            raise CommandError(f"org: no organisation with slug {options['org']!r}")
        {"create": self.create, "list": self.list, "revoke": self.revoke}[action](org, options)

    def create(self, org: Organization, options: dict) -> None:
        try:
            expires_at = parse_expiry(options["expires"])
            scopes = check_create_api_key(org, options["name"], options["scopes"], expires_at)
        except ValidationError as exc:
            raise CommandError(_problem(exc)) from None
        key, raw = do_create_api_key(org, options["name"], scopes, expires_at)
        self.stderr.write(f"created key {key.name!r} ({key.prefix}…) of {org.slug} with scopes {','.join(scopes)}")
        self.stderr.write("it is printed once, below: store it now")
        self.stdout.write(raw)

    def list(self, org: Organization, options: dict) -> None:
        keys = ApiKey.objects.filter(org=org).order_by("revoked_at", "-created_at")
        for key in keys:
            expires = f"{key.expires_at:%Y-%m-%d}" if key.expires_at else "never"
            used = f"{key.last_used_at:%Y-%m-%d %H:%M}" if key.last_used_at else "never"
            self.stdout.write(
                f"{key.name}\t{key.prefix}…\t{','.join(key.scopes)}\texpires {expires}\tlast used {used}\t{key.status}"
            )
        self.stdout.write(f"{len(keys)} key(s) in {org.slug}")

    def revoke(self, org: Organization, options: dict) -> None:
        key = ApiKey.objects.filter(org=org, name=options["name"], revoked_at=None).first()
        if key is None:
            raise CommandError(f"name: {org.slug} has no live key named {options['name']!r}")
        do_revoke_api_key(key)
        self.stdout.write(f"revoked key {key.name!r} ({key.prefix}…) of {org.slug}")


def _problem(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{field}: {message}" for field, errors in exc.message_dict.items() for message in errors)
    return "; ".join(exc.messages)
