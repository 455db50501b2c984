from django.contrib import admin
from django.http import HttpRequest

from providers.models import AllowedProvider, Price, ProviderCredential


@admin.register(ProviderCredential)
class ProviderCredentialAdmin(admin.ModelAdmin):
    # The encrypted key is not editable and never listed; staff see the last four only.
    list_display = [
        "org",
        "provider",
        "name",
        "masked_key",
        "base_url",
        "api_version",
        "requests_per_minute",
        "tokens_per_minute",
        "updated_at",
    ]
    list_filter = ["provider"]
    search_fields = ["org__slug", "org__name", "name", "base_url"]
    readonly_fields = ["code", "masked_key", "created_at", "updated_at"]
    fields = [
        "org",
        "provider",
        "name",
        "code",
        "masked_key",
        "base_url",
        "api_version",
        "deployments",
        "requests_per_minute",
        "tokens_per_minute",
        "created_at",
        "updated_at",
    ]
    # Where a saved key goes (and whose it is) changes only with the key typed again
    # (providers.actions.check_credential), and this page never takes a key: an endpoint is
    # changed on the organisation's settings page, by someone who can type the key in.
    endpoint_fields = ["org", "provider", "base_url", "api_version", "deployments"]

    def get_readonly_fields(self, request: HttpRequest, obj: ProviderCredential | None = None) -> list[str]:
        readonly = list(super().get_readonly_fields(request, obj))
        return readonly + self.endpoint_fields if obj is not None else readonly


@admin.register(AllowedProvider)
class AllowedProviderAdmin(admin.ModelAdmin):
    list_display = ["org", "provider", "model_patterns"]
    list_filter = ["provider"]
    search_fields = ["org__slug", "model_patterns"]


@admin.register(Price)
class PriceAdmin(admin.ModelAdmin):
    list_display = [
        "provider",
        "model_pattern",
        "input_per_mtok",
        "output_per_mtok",
        "cached_input_per_mtok",
        "valid_from",
        "source",
    ]
    list_filter = ["provider", "valid_from"]
    search_fields = ["model_pattern", "source"]
    ordering = ["provider", "model_pattern", "-valid_from"]
