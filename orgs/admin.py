from django.contrib import admin

from orgs.models import Membership, Organization


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
