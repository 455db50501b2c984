from django.contrib import admin
from django.http import HttpRequest

from orgs.models import Invitation, Membership, Organization, Webhook, WebhookDelivery


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "code", "created_at"]
    search_fields = ["name", "slug", "code"]
    readonly_fields = ["code", "created_at"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "org", "role", "created_at"]
    list_filter = ["role", "org"]
    search_fields = ["user__email", "org__name", "org__slug"]
    raw_id_fields = ["user"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Read-only: an invitation is made on the members page, where its link is shown once.
    The token's hash is left out too: it is no use to staff and one less thing to leak."""

    list_display = ["email", "org", "role", "status", "invited_by", "created_at", "expires_at"]
    list_filter = ["role", "org"]
    search_fields = ["email", "org__name", "org__slug"]
    fields = readonly_fields = (
        "code", "org", "email", "role", "status", "invited_by",
        "created_at", "expires_at", "accepted_at", "accepted_by", "revoked_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Invitation | None = None) -> bool:
        return False


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    """Read-only, and without the secret (not even encrypted): webhooks are managed on the
    organisation's webhooks page, where the secret is shown once."""

    list_display = ["code", "org", "url", "active", "created_by", "created_at"]
    list_filter = ["active", "org"]
    search_fields = ["code", "url", "org__slug"]
    fields = readonly_fields = ("code", "org", "url", "events", "active", "created_by", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Webhook | None = None) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["code", "webhook", "event", "status", "attempts", "response_status", "created_at", "delivered_at"]
    list_filter = ["status", "event"]
    search_fields = ["code", "subject"]
    fields = readonly_fields = (
        "code", "webhook", "event", "subject", "payload", "status", "attempts", "response_status",
        "error", "next_attempt_at", "claimed_until", "created_at", "delivered_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: WebhookDelivery | None = None) -> bool:
        return False
