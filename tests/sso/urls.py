"""The portal's URLs with the SSO endpoints mounted, whether or not portal/urls.py mounts them yet."""

from django.urls import include, path

from portal.urls import urlpatterns as portal_urlpatterns


def mounts_sso(patterns) -> bool:
    return any(getattr(p, "urlconf_name", None) == "portal.oidc" for p in patterns)


urlpatterns = list(portal_urlpatterns)
if not mounts_sso(urlpatterns):
    urlpatterns.insert(0, path("oidc/", include("portal.oidc")))
