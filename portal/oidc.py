"""Single sign-on with OpenID Connect, next to local accounts.

The authorization code flow with PKCE and a nonce, through mozilla-django-oidc; this
module adds what the portal needs around it:

- **Off means absent.** Without ``OIDC_ISSUER`` the login page has no SSO button and
  both endpoints answer 404; the backend is not even in ``AUTHENTICATION_BACKENDS``.
- **Endpoints from discovery, lazily.** The issuer's discovery document is fetched on
  the first SSO login, not at start and never for an ordinary request, so an identity
  provider that is down stops SSO logins only.
- **ID tokens are checked in full**: signature (key from the provider's JWKS by
  ``kid``), algorithm, issuer, audience (and ``azp`` when there are several), expiry,
  issue time and nonce. The base library checks neither audience nor issuer.
- **Who is who.** A user is the account whose username is the ``OIDC_USERNAME_CLAIM``
  claim. Accounts created by SSO have no usable password. A local account (one with a
  password) is not taken over by an SSO login of the same name unless
  ``OIDC_LINK_LOCAL_USERS`` is on.
- **Groups become memberships** at every login (``team_roles``, ``sync_memberships``):
  memberships that came from SSO are added, changed and removed to match the claim;
  local memberships are never touched. Teams are not created: a group naming a team the
  portal does not have is ignored (and logged). The ``OIDC_ADMIN_GROUP`` makes a user a
  platform admin (staff) while they are in it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import jwt
import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect
from django.urls import path
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from portal.models import Membership, Team

log = logging.getLogger(__name__)

SSO = "sso"
ROLE_RANK = {Membership.MEMBER: 0, Membership.TEAM_ADMIN: 1}
# The words {role} stands for in OIDC_TEAM_GROUP_PATTERN.
PATTERN_ROLES = {"member": Membership.MEMBER, "admin": Membership.TEAM_ADMIN}
# Seconds of clock difference tolerated between the provider and us for exp and iat.
CLOCK_SKEW = 60
DISCOVERY_TTL = 3600
FAILED = "Single sign-on did not sign you in. Try again, or ask a platform admin."


def sso(request) -> dict:
    """Context processor: whether the login page offers SSO."""
    return {"sso_enabled": settings.OIDC_ENABLED}


# -- the provider ------------------------------------------------------------------------


class ProviderError(Exception):
    """The identity provider's discovery document could not be had or is wrong."""


@dataclass(frozen=True)
class Provider:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str
    jwks_uri: str


_discovered: dict[str, tuple[float, dict]] = {}
_discovery_lock = threading.Lock()


def provider() -> Provider:
    """The provider's endpoints: the settings where given, else its discovery document."""
    issuer = settings.OIDC_ISSUER
    given = {
        "authorization_endpoint": settings.OIDC_OP_AUTHORIZATION_ENDPOINT,
        "token_endpoint": settings.OIDC_OP_TOKEN_ENDPOINT,
        "userinfo_endpoint": settings.OIDC_OP_USER_ENDPOINT,
        "jwks_uri": settings.OIDC_OP_JWKS_ENDPOINT,
    }
    document = {} if all(given.values()) else _discovery(issuer)
    endpoints = {key: value or str(document.get(key) or "") for key, value in given.items()}
    missing = sorted(key for key, value in endpoints.items() if not value)
    if missing:
        raise ProviderError(f"the provider {issuer} names no {', '.join(missing)}")
    return Provider(issuer=issuer, **endpoints)


def _discovery(issuer: str) -> dict:
    with _discovery_lock:
        cached = _discovered.get(issuer)
        if cached and cached[0] > time.monotonic():
            return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=True)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderError(f"cannot read {url}: {exc}") from exc
    # OpenID Connect Discovery 1.0, section 4.3: the document must name the issuer it was
    # fetched for, or tokens "from" it could come from somewhere else.
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        raise ProviderError(f"{url} is for issuer {document.get('issuer')!r}, not {issuer!r}")
    with _discovery_lock:
        _discovered[issuer] = (time.monotonic() + DISCOVERY_TTL, document)
    return document


def forget_discovery() -> None:
    with _discovery_lock:
        _discovered.clear()


# -- groups to memberships ---------------------------------------------------------------


def compile_team_pattern(pattern: str) -> re.Pattern[str]:
    """``gpu-{team}-{role}`` -> a regex with the groups ``team`` and (optionally) ``role``."""
    pieces = re.split(r"(\{team\}|\{role\})", pattern.lower())
    regex = "".join(
        r"(?P<team>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)"
        if piece == "{team}"
        else "(?P<role>" + "|".join(PATTERN_ROLES) + ")"
        if piece == "{role}"
        else re.escape(piece)
        for piece in pieces
    )
    return re.compile(regex)


def team_roles(groups: Iterable[str], pattern: str = "", group_map: Mapping[str, list] | None = None) -> dict[str, str]:
    """Team slug -> role from a user's groups; the higher role wins when several groups name one team.

    A group in ``group_map`` is mapped as listed; any other group is matched against
    ``pattern`` (case-insensitively; without ``{role}`` every match is a member).
    """
    group_map = group_map or {}
    regex = compile_team_pattern(pattern) if pattern else None
    roles: dict[str, str] = {}
    for group in groups:
        if group in group_map:
            slug, role = group_map[group]
        elif regex and (match := regex.fullmatch(group.lower())):
            slug = match["team"]
            role = PATTERN_ROLES[match.groupdict().get("role") or "member"]
        else:
            continue
        if ROLE_RANK[role] >= ROLE_RANK.get(roles.get(slug, ""), -1):
            roles[slug] = role
    return roles


def sync_memberships(user, wanted: Mapping[str, str]) -> None:
    """Make the user's SSO memberships exactly ``wanted`` (slug -> role); local ones stay as they are.

    Runs in the caller's transaction with the user's row locked, so two logins of the
    same user at once do not both create a membership.
    """
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    teams = {team.slug: team for team in Team.objects.filter(slug__in=list(wanted))}
    if unknown := sorted(set(wanted) - set(teams)):
        log.info("SSO groups of %s name teams the portal does not have: %s", user.username, ", ".join(unknown))
    current = {m.team.slug: m for m in Membership.objects.filter(user=user).select_related("team")}
    for slug, membership in current.items():
        if membership.source != SSO:
            continue
        if slug not in teams:
            membership.delete()
        elif membership.role != wanted[slug]:
            membership.role = wanted[slug]
            membership.save(update_fields=["role"])
    for slug, team in teams.items():
        if slug not in current:
            Membership.objects.create(user=user, team=team, role=wanted[slug], source=SSO)


def _groups(claims: Mapping) -> list[str]:
    raw = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(raw, str):
        return [raw]
    return [str(group) for group in raw if isinstance(group, str | int)]


# -- the backend -------------------------------------------------------------------------


class SSOBackend(OIDCAuthenticationBackend):
    """Authenticates the callback of the code flow; ``ModelBackend`` keeps handling passwords."""

    def __init__(self, *args, **kwargs):
        # The base class reads the provider's endpoints here. Django builds a backend for
        # every request of a signed-in user (to load them from the session), so the
        # endpoints are looked up in authenticate() instead, when a login needs them.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        # Only the callback view passes a nonce; a password login never reaches the provider.
        if not settings.OIDC_ENABLED or request is None or "nonce" not in kwargs:
            return None
        try:
            endpoints = provider()
            self.OIDC_OP_TOKEN_ENDPOINT = endpoints.token_endpoint
            self.OIDC_OP_USER_ENDPOINT = endpoints.userinfo_endpoint
            self.OIDC_OP_JWKS_ENDPOINT = endpoints.jwks_uri
            self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
            self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
            self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
            self.OIDC_RP_IDP_SIGN_KEY = None
            return super().authenticate(request, **kwargs)
        except (ProviderError, SuspiciousOperation, requests.RequestException, jwt.PyJWTError) as exc:
            log.warning("single sign-on refused: %s", exc)
            return None

    def get_user(self, user_id):
        # ModelBackend's, which refuses inactive users; the base class's does not.
        return ModelBackend.get_user(self, user_id)

    def _verify_jws(self, payload, key):
        header = jwt.get_unverified_header(payload)
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"the token is signed with {header.get('alg')!r}, not {self.OIDC_RP_SIGN_ALGO}")
        try:
            claims = jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.OIDC_ISSUER,
                leeway=CLOCK_SKEW,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("ID token refused: several audiences and azp is not this client")
        return claims

    def get_userinfo(self, access_token, id_token, payload):
        """The ID token's claims, completed by the userinfo endpoint's for the same subject."""
        userinfo = super().get_userinfo(access_token, id_token, payload)
        if userinfo.get("sub") != payload.get("sub"):
            # OpenID Connect Core 1.0, 5.3.2: a different sub means the response is not about this user.
            raise SuspiciousOperation("the userinfo response is about another subject")
        return {**payload, **userinfo}

    def verify_claims(self, claims):
        username = claims.get(settings.OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username:
            log.warning("SSO login without the %r claim", settings.OIDC_USERNAME_CLAIM)
            return False
        try:
            UnicodeUsernameValidator()(username)
        except ValidationError:
            log.warning("SSO username %r is not a valid portal username", username)
            return False
        return len(username) <= self.UserModel._meta.get_field("username").max_length

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(username=claims[settings.OIDC_USERNAME_CLAIM])

    def describe_user_by_claims(self, claims):
        return f"username {claims.get(settings.OIDC_USERNAME_CLAIM)!r}"

    def get_or_create_user(self, access_token, id_token, payload):
        with transaction.atomic():
            return super().get_or_create_user(access_token, id_token, payload)

    def create_user(self, claims):
        user = self.UserModel(username=claims[settings.OIDC_USERNAME_CLAIM])
        user.set_unusable_password()
        self._update(user, claims)
        return user

    def update_user(self, user, claims):
        if user.has_usable_password() and not settings.OIDC_LINK_LOCAL_USERS:
            raise SuspiciousOperation(
                f"{user.username!r} is a local account; set OIDC_LINK_LOCAL_USERS to let SSO sign in to it"
            )
        self._update(user, claims)
        return user

    def _update(self, user, claims) -> None:
        """Copy the profile claims, set staff from the admin group, and sync memberships."""
        groups = _groups(claims)
        user.email = str(claims.get("email") or user.email or "")
        user.first_name = str(claims.get("given_name") or user.first_name or "")[:150]
        user.last_name = str(claims.get("family_name") or user.last_name or "")[:150]
        if settings.OIDC_ADMIN_GROUP:
            admin = settings.OIDC_ADMIN_GROUP in groups
            # A linked local account keeps staff it was given locally; SSO only adds it.
            if admin or not user.has_usable_password():
                user.is_staff = admin
        user.save()
        sync_memberships(user, team_roles(groups, settings.OIDC_TEAM_GROUP_PATTERN, settings.OIDC_GROUP_MAP))


# -- the endpoints -----------------------------------------------------------------------


class SSOLoginView(OIDCAuthenticationRequestView):
    """Redirects to the provider's authorization endpoint (with state, nonce and PKCE)."""

    def __init__(self, **kwargs):
        # Skip the base __init__: it reads the endpoint from settings before we know SSO is on.
        View.__init__(self, **kwargs)

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider().authorization_endpoint
        except ProviderError as exc:
            log.warning("single sign-on unavailable: %s", exc)
            messages.error(request, "Single sign-on is unavailable right now; sign in with a password or try later.")
            return redirect(settings.LOGIN_URL)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class SSOCallbackView(OIDCAuthenticationCallbackView):
    """Where the provider sends the browser back with a code; signs the user in or explains."""

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404("Single sign-on is not configured.")
        return super().get(request)

    def login_failure(self):
        messages.error(self.request, FAILED)
        return redirect(settings.LOGIN_URL)


# Mounted by portal/urls.py at oidc/; the names are the ones mozilla-django-oidc reverses.
urlpatterns = [
    path("authenticate/", SSOLoginView.as_view(), name="oidc_authentication_init"),
    path("callback/", SSOCallbackView.as_view(), name="oidc_authentication_callback"),
]
