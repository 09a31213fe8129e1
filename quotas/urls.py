"""Browser pages of quotas (mounted at the site root by portal/urls.py)."""

from django.urls import path

from quotas import views

urlpatterns = [
    path("quotas/", views.quota_overview, name="quota-overview"),
    path("quotas/bars/", views.quota_bars, name="quota-bars"),
    path("quotas/requests/", views.quota_request_create, name="quota-request-create"),
    path("quotas/requests/<int:pk>/withdraw/", views.quota_request_withdraw, name="quota-request-withdraw"),
    path("approvals/", views.approvals_console, name="approvals-console"),
    path("approvals/decide/", views.approvals_decide, name="approvals-decide"),
    path("approvals/set-quota/", views.approvals_set_quota, name="approvals-set-quota"),
    path("approvals/requests/<int:pk>/preview/", views.request_preview, name="approvals-request-preview"),
    path("approvals/exceptions/<int:pk>/preview/", views.exception_preview, name="approvals-exception-preview"),
    path("audit/", views.audit_log, name="audit-log"),
    path("audit/export.csv", views.audit_export, name="audit-export"),
]
