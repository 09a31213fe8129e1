from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from portal import api_views, health, views

handler404 = "portal.views.not_found"

router = SimpleRouter(trailing_slash=True)
router.register("teams", api_views.TeamViewSet, basename="team")
router.register("offerings", api_views.OfferingViewSet, basename="offering")

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("oidc/", include("portal.oidc")),
    path("profile/", views.profile, name="profile"),
    path("profile/tokens/<int:pk>/revoke/", views.revoke_token, name="revoke-token"),
    path("team/switch/", views.switch_team, name="switch-team"),
    path("notices/", views.notice_list, name="notice-list"),
    path("notices/read/", views.notice_read, name="notice-read"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("api/v1/", include(router.urls)),
    # Apps add their own API routes and pages; portal imports none of their modules.
    path("api/v1/", include("jobs.api_urls")),
    path("api/v1/", include("quotas.api_urls")),
    path("api/v1/", include("usage.api_urls")),
    path("", include("jobs.urls")),
    path("", include("quotas.urls")),
    path("", include("usage.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
