"""Headless provisioning of provider credentials, for operators.

The key is read from standard input (``--key-stdin``), never from an argument, so it does
not land in shell history or the process list. Every change goes through the same
``check_credential`` / ``do_save_credential`` actions as the settings page, all or nothing.
"""

from __future__ import annotations

import json
import sys

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from orgs.models import Organization
from providers.actions import PROVIDERS, check_credential, do_delete_credential, do_save_credential
from providers.models import ProviderCredential


class Command(BaseCommand):
    help = "Add, list or remove an organisation's provider credentials (keys from standard input only)."
    stealth_options = ("stdin",)  # tests hand a key in as if piped

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="add a named credential")
        add.add_argument("--org", required=True, help="organisation slug")
        add.add_argument("--provider", required=True, choices=PROVIDERS)
        add.add_argument("--name", required=True, help='what arms call it by, e.g. "vLLM on gpu-box"')
        add.add_argument("--base-url", default="", help="endpoint; empty means the provider's default")
        add.add_argument("--api-version", default="", help="Azure OpenAI api-version")
        add.add_argument("--deployments", default="", help='Azure: JSON, e.g. {"gpt-4o": "prod-4o"}')
        add.add_argument("--requests-per-minute", default="", help="the account's limit; empty: none")
        add.add_argument("--tokens-per-minute", default="", help="the account's limit; empty: none")
        add.add_argument("--key-stdin", action="store_true", help="read the API key from standard input")
        listing = sub.add_parser("list", help="name, provider, endpoint and the key's last four characters")
        listing.add_argument("--org", required=True, help="organisation slug")
        remove = sub.add_parser("remove", help="delete a credential by name")
        remove.add_argument("--org", required=True, help="organisation slug")
        remove.add_argument("--name", required=True)
        remove.add_argument("--provider", choices=PROVIDERS, help="needed when several providers use the name")

    def handle(self, *args, action, **options):
        org = _org(options["org"])
        {"add": self.add, "list": self.list, "remove": self.remove}[action](org, options)

    def add(self, org: Organization, options: dict) -> None:
        api_key = _read_key(options.get("stdin") or sys.stdin) if options["key_stdin"] else ""
        data = {
            "provider": options["provider"],
            "name": options["name"],
            "api_key": api_key,
            "base_url": options["base_url"],
            "api_version": options["api_version"],
            "deployments": options["deployments"],
            "requests_per_minute": options["requests_per_minute"],
            "tokens_per_minute": options["tokens_per_minute"],
        }
        if not options["name"].strip():
            raise CommandError("name: required, a non-empty name")
        try:
            values = check_credential(org, data)
        except ValidationError as exc:
            raise CommandError("credential not added:\n  " + "\n  ".join(exc.messages)) from None
        credential = do_save_credential(org, values)
        self.stdout.write(
            f"added {credential.provider} credential {credential.name!r} to {org.slug} (key {credential.masked_key})"
        )

    def list(self, org: Organization, options: dict) -> None:
        credentials = ProviderCredential.objects.filter(org=org)
        for credential in credentials:
            endpoint = credential.base_url or "default"
            self.stdout.write(
                f"{credential.name}\t{credential.provider}\t{endpoint}\tkey {credential.masked_key}"
                + (f"\tapi-version {credential.api_version}" if credential.api_version else "")
                + (f"\tdeployments {json.dumps(credential.deployments)}" if credential.deployments else "")
            )
        self.stdout.write(f"{len(credentials)} credential(s) in {org.slug}")

    @transaction.atomic
    def remove(self, org: Organization, options: dict) -> None:
        found = ProviderCredential.objects.filter(org=org, name=options["name"])
        if options["provider"]:
            found = found.filter(provider=options["provider"])
        matches = list(found.select_for_update())
        if not matches:
            raise CommandError(f"name: {org.slug} has no credential named {options['name']!r}")
        if len(matches) > 1:
            providers = ", ".join(sorted(c.provider for c in matches))
            raise CommandError(f"provider: several credentials are named {options['name']!r} ({providers}); choose one")
        do_delete_credential(matches[0])
        self.stdout.write(f"removed {matches[0].provider} credential {matches[0].name!r} from {org.slug}")


def _org(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise CommandError(f"org: no organisation with slug {slug!r}")
    return org


def _read_key(stream) -> str:
    if stream.isatty():
        raise CommandError("key: --key-stdin reads the key from a pipe or a file, e.g. `... --key-stdin < key.txt`")
    key = stream.read().strip()
    if not key:
        raise CommandError("key: standard input was empty")
    return key
