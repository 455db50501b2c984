from __future__ import annotations

import fnmatch
import uuid

from django.core.validators import MinValueValidator
from django.db import models

from prbench import crypto
from providers.price_patterns import match_rank
from providers.registry import provider_choices

NAME_MAX = 100
BASE_URL_MAX = 500
API_VERSION_MAX = 40


class ProviderCredential(models.Model):
    """One organisation's access to one provider, by name (an org may hold several per
    provider: "default", "vLLM on gpu-box"). The key is stored encrypted only, and the
    endpoint is the credential's alone: arms choose a credential by name, never a URL."""

    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="credentials")
    provider = models.CharField(max_length=32, choices=provider_choices)
    name = models.CharField(max_length=NAME_MAX, default="default", help_text="What arms call it by")
    api_key_encrypted = models.TextField(blank=True, editable=False)
    key_last_four = models.CharField(max_length=4, blank=True, editable=False)
    base_url = models.CharField(
        max_length=BASE_URL_MAX, blank=True, help_text="Endpoint; empty means the provider's default"
    )
    api_version = models.CharField(max_length=API_VERSION_MAX, blank=True, help_text="Azure OpenAI api-version")
    deployments = models.JSONField(default=dict, blank=True, help_text="Azure: model name -> deployment name")
    # The account's own limits, enforced before each call so we queue instead of collecting 429s.
    requests_per_minute = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Empty means no limit"
    )
    tokens_per_minute = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)], help_text="Empty means no limit"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "provider", "name"], name="one_credential_name_per_provider")
        ]
        ordering = ["provider", "name"]

    def __str__(self) -> str:
        return f"{self.get_provider_display()} {self.name!r} for {self.org_id} (…{self.key_last_four})"

    def set_api_key(self, api_key: str) -> None:
        self.api_key_encrypted = crypto.encrypt(api_key) if api_key else ""
        self.key_last_four = api_key[-4:] if len(api_key) >= 8 else ""

    def api_key(self) -> str:
        return crypto.decrypt(self.api_key_encrypted) if self.api_key_encrypted else ""

    @property
    def masked_key(self) -> str:
        if not self.api_key_encrypted:
            return "none"
        return f"…{self.key_last_four}" if self.key_last_four else "set"


class AllowedProvider(models.Model):
    """An org's allowlist: once an org has any entry, only listed providers (and models
    matching the entry's patterns, if any) may run."""

    org = models.ForeignKey("orgs.Organization", models.CASCADE, related_name="allowed_providers")
    provider = models.CharField(max_length=32, choices=provider_choices)
    model_patterns = models.TextField(blank=True, help_text="One glob per line, e.g. gpt-4o*; empty allows any model")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "provider"], name="one_allowlist_entry_per_provider")]
        ordering = ["provider"]

    def __str__(self) -> str:
        return f"{self.provider} for {self.org_id}"

    def patterns(self) -> list[str]:
        return [line.strip() for line in self.model_patterns.splitlines() if line.strip()]

    def allows_model(self, model_name: str) -> bool:
        patterns = self.patterns()
        return not patterns or any(fnmatch.fnmatchcase(model_name, p) for p in patterns)


class Price(models.Model):
    """What a provider charges for a model from a date on, per million tokens.

    ``model_pattern`` is a model id (``gpt-4.1``, which also prices its dated snapshots such
    as ``gpt-4.1-2025-04-14``) or a glob (``claude-sonnet-4*``); ``price_patterns.match_rank`` picks
    the most specific row, and among those the newest ``valid_from`` not after the call.
    """

    provider = models.CharField(max_length=32, choices=provider_choices)
    model_pattern = models.CharField(max_length=200)
    input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6)
    output_per_mtok = models.DecimalField(max_digits=12, decimal_places=6)
    cached_input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_write_per_mtok = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, help_text="Writing the prompt cache (Anthropic)"
    )
    reasoning_output_per_mtok = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Only where reasoning tokens are billed apart from output; empty: at the output price",
    )
    cache_write_1h_per_mtok = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="Writing Anthropic's 1-hour prompt cache; empty: at the cache write price",
    )
    # Past this many prompt tokens every token of a call is billed at the long-context prices
    # (OpenAI's gpt-5.4 above 272k, LiteLLM's ``*_above_272k_tokens``); an empty one of them
    # keeps its plain price.
    long_context_above_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Long-context tier: prompts longer than this many tokens"
    )
    long_input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    long_output_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    long_cached_input_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    long_cache_write_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    long_cache_write_1h_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    valid_from = models.DateField()
    source = models.CharField(max_length=300, blank=True, help_text="Where the figure comes from")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["provider", "model_pattern", "valid_from"], name="one_price_per_day")
        ]
        ordering = ["provider", "model_pattern", "-valid_from"]

    def __str__(self) -> str:
        return f"{self.provider}/{self.model_pattern} from {self.valid_from}"

    def matches(self, model_name: str) -> bool:
        return match_rank(self.model_pattern, model_name) is not None
