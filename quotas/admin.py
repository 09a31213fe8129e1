"""Django admin for quotas. Every change of a quota goes through ``quotas.requests.set_quota``.

Usage, overage and the decisions are read-only here: usage is what admission and the
re-count write, decisions are made in the approvals console (which checks that the
decider is not the requester and tells the requester).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied

from quotas.admission import fmt
from quotas.models import AuditEntry, Quota, QuotaDrift, QuotaException, QuotaRequest
from quotas.requests import QuotaInputError, check_values, set_quota


class QuotaAdminForm(forms.ModelForm):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the quota changes. Goes into the audit log; the team's admins can read it.",
    )

    class Meta:
        model = Quota
        fields = ["team", "gpu_class", "guaranteed", "limit", "count_mig_slices"]

    def clean(self):
        cleaned = super().clean()
        gpu_class = cleaned.get("gpu_class") or self.instance.gpu_class
        try:
            check_values(gpu_class, cleaned.get("guaranteed"), cleaned.get("limit"), cleaned.get("reason", ""))
        except QuotaInputError as exc:
            for name, messages_ in exc.errors.items():
                if name in self.fields and name not in self.errors:
                    self.add_error(name, messages_)
        return cleaned


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    form = QuotaAdminForm
    list_display = ["team", "gpu_class", "guaranteed", "limit", "used", "overage", "count_mig_slices"]
    list_filter = ["gpu_class"]
    search_fields = ["team__slug", "gpu_class"]
    readonly_fields = ["used", "overage"]

    def get_readonly_fields(self, request, obj=None):
        # The team and class name a row; changing them would move usage to another quota.
        return [*self.readonly_fields, "team", "gpu_class"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        team = obj.team if change else form.cleaned_data["team"]
        gpu_class = obj.gpu_class if change else form.cleaned_data["gpu_class"]
        try:
            result = set_quota(
                team,
                gpu_class,
                form.cleaned_data["guaranteed"],
                form.cleaned_data["limit"],
                request.user,
                form.cleaned_data["reason"],
                count_mig_slices=form.cleaned_data.get("count_mig_slices"),
            )
        except (QuotaInputError, PermissionDenied) as exc:
            messages.error(request, str(exc))
            return
        obj.pk = result.quota.pk
        obj.refresh_from_db()
        if result.quota.overage > 0:
            messages.warning(
                request,
                f"{team.slug} uses {fmt(result.quota.used)} {gpu_class}, more than the new limit: running work "
                "goes on, new work is refused until usage is back under the limit.",
            )

    def has_delete_permission(self, request, obj=None):
        return False  # set the limit to 0 instead: that is audited and keeps running work accounted


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(QuotaRequest)
class QuotaRequestAdmin(ReadOnlyAdmin):
    list_display = ["id", "team", "gpu_class", "guaranteed", "limit", "until", "state", "requested_by", "decided_by"]
    list_filter = ["state", "gpu_class"]
    search_fields = ["team__slug", "gpu_class", "justification"]


@admin.register(QuotaException)
class QuotaExceptionAdmin(ReadOnlyAdmin):
    list_display = ["id", "team", "workload_id", "gpu_class", "amount", "decision", "requested_by", "decided_by"]
    list_filter = ["decision", "gpu_class"]


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    list_display = ["at", "actor", "team", "action", "gpu_class", "reason"]
    list_filter = ["action", "gpu_class"]
    search_fields = ["team__slug", "reason"]
    date_hierarchy = "at"


@admin.register(QuotaDrift)
class QuotaDriftAdmin(ReadOnlyAdmin):
    list_display = ["detected_at", "team", "gpu_class", "recorded", "expected"]
    list_filter = ["gpu_class"]
