from django.contrib import admin

from usage.models import Budget, IdlePolicy, IdleWarning


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ("team", "monthly_amount", "policy", "warned_month", "warned_percent")
    list_filter = ("policy",)
    readonly_fields = ("warned_month", "warned_percent")


@admin.register(IdlePolicy)
class IdlePolicyAdmin(admin.ModelAdmin):
    list_display = ("team", "enabled", "threshold_percent", "idle_minutes", "grace_minutes")


@admin.register(IdleWarning)
class IdleWarningAdmin(admin.ModelAdmin):
    list_display = ("workload", "warned_at", "stop_at")
    readonly_fields = ("workload", "warned_at", "stop_at")
