"""API routes of quotas, mounted under /api/v1/ by portal/urls.py."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from quotas import api

router = SimpleRouter(trailing_slash=True)
router.register("quota-requests", api.QuotaRequestViewSet, basename="quota-request")
router.register("quota-exceptions", api.QuotaExceptionViewSet, basename="quota-exception")
router.register("audit", api.AuditEntryViewSet, basename="audit-entry")

urlpatterns = [
    path("teams/<slug:slug>/quota/", api.TeamQuotaView.as_view(), name="team-quota"),
    *router.urls,
]
