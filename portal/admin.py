from django.contrib import admin

from portal.forms import AdminLoginForm
from portal.models import ApiToken, Membership, Offering, Team

# The admin's login page checks passwords too: the same failed-login budgets apply.
admin.site.login_form = AdminLoginForm


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "namespace"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Offering)
class OfferingAdmin(admin.ModelAdmin):
    list_display = ["slug", "display_name", "kind", "gpu_model", "mig_profile", "price_per_hour", "is_active"]
    list_filter = ["kind", "is_active", "request_mode"]
    # The structure comes from the cluster profile; only commercial fields are edited here.
    readonly_fields = [
        "slug",
        "kind",
        "gpu_model",
        "mig_profile",
        "pool",
        "request_mode",
        "resource_name",
        "dra_device_class",
        "dra_selector",
        "node_selector",
        "node_affinity",
        "tolerations",
        "share_numerator",
        "share_denominator",
        "gpu_memory_gib",
    ]

    def save_model(self, request, obj, form, change):
        if change and "price_per_hour" in form.changed_data:
            obj.price_set_by_admin = True
        super().save_model(request, obj, form, change)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "hint", "created_at", "last_used_at"]
    readonly_fields = ["key_hash", "hint", "created_at", "last_used_at"]
