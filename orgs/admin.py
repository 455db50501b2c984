from django.contrib import admin
from django.http import HttpRequest

from orgs.models import ApiKey, AuditEvent, Invitation, Membership, Organization, Webhook, WebhookDelivery


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


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Read-only: keys are made where they are shown once (the API keys page, the command).
    Their hash is left out, like an invitation's."""

    list_display = ["name", "org", "prefix", "status", "created_at", "last_used_at", "expires_at"]
    list_filter = ["org"]
    search_fields = ["name", "prefix", "org__slug"]
    fields = readonly_fields = (
        "code", "org", "name", "prefix", "scopes", "status", "created_by",
        "created_at", "expires_at", "last_used_at", "revoked_at",
    )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the log is written once and never changed."""

    list_display = ["at", "org", "action", "target", "actor_user", "actor_key"]
    list_filter = ["action", "org"]
    search_fields = ["target", "org__slug", "action"]
    fields = readonly_fields = ("org", "at", "action", "actor_user", "actor_key", "target", "detail")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEvent | None = None) -> bool:
        # Superusers only, so that deleting an organisation (which takes its log with it)
        # stays possible; staff cannot prune the record of what they did.
        return bool(request.user.is_superuser)


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
