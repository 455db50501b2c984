from django.contrib import admin

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
