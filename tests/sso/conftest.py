from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sso.provider import CLIENT_ID, CLIENT_SECRET, OIDCProvider


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[OIDCProvider]:
    provider = OIDCProvider().start()
    yield provider
    provider.stop()


@pytest.fixture
def provider(oidc_provider: OIDCProvider) -> Iterator[OIDCProvider]:
    oidc_provider.reset()
    yield oidc_provider
    oidc_provider.reset()


@pytest.fixture
def sso_on(settings, provider):
    """The portal configured for the stub provider, as the environment would configure it.

    Groups: ``gpu-<team>-member`` / ``gpu-<team>-admin`` by pattern; ``ml-leads`` is
    mapped explicitly to team admin of nlp; ``gpu-platform-admins`` are platform admins.
    """
    from portal.oidc import forget_discovery

    settings.OIDC_ENABLED = True
    settings.OIDC_ISSUER = provider.url
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_TEAM_GROUP_PATTERN = "gpu-{team}-{role}"
    settings.OIDC_GROUP_MAP = {"ml-leads": ["nlp", "team_admin"]}
    settings.OIDC_ADMIN_GROUP = "gpu-platform-admins"
    settings.OIDC_LINK_LOCAL_USERS = False
    settings.AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "portal.oidc.SSOBackend"]
    forget_discovery()
    yield settings
    forget_discovery()


@pytest.fixture
def sso_off(settings):
    settings.OIDC_ENABLED = False
    settings.OIDC_ISSUER = ""
    return settings
