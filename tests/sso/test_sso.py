"""Sign in with OpenID Connect, against the local provider in tests/sso/provider.py.

The cast (tests/cast.py) are local accounts with passwords. dora exists only at the
identity provider: she is created by her first SSO login.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model

from portal.models import Membership, Team
from portal.oidc import team_roles
from tests.cast import PASSWORD

pytestmark = pytest.mark.django_db


def sso_login(client, provider, next_url: str = "/profile/"):
    """Click "Sign in with SSO", let the provider approve, come back to the callback."""
    start = client.get("/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302, start.content
    assert start["Location"].startswith(f"{provider.url}/authorize?")
    approved = requests.get(start["Location"], allow_redirects=False, timeout=5)
    assert approved.status_code == 302, approved.text
    back = urlsplit(approved.headers["Location"])
    assert (back.scheme, back.netloc, back.path) == ("http", "testserver", "/oidc/callback/")
    return client.get(f"{back.path}?{back.query}")


def signed_in_as(client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id).username if user_id else None


def memberships(username: str) -> list[tuple[str, str, str]]:
    return sorted(Membership.objects.filter(user__username=username).values_list("team__slug", "role", "source"))


def test_a_new_user_is_created_with_memberships_from_her_groups(client, cast, sso_on, provider):
    provider.login_as("dora", ["gpu-vision-member", "gpu-nlp-admin", "gpu-speech-member", "staff-all"])
    response = sso_login(client, provider, next_url="/profile/")
    assert response.status_code == 302
    assert response["Location"] == "/profile/"
    assert signed_in_as(client) == "dora"
    dora = get_user_model().objects.get(username="dora")
    assert dora.email == "dora@example.com"
    assert not dora.has_usable_password()
    assert not dora.is_staff
    # speech is not a team of the portal: ignored, not created.
    assert memberships("dora") == [("nlp", "team_admin", "sso"), ("vision", "member", "sso")]
    assert not Team.objects.filter(slug="speech").exists()


def test_the_authorization_request_carries_state_nonce_and_a_pkce_challenge(client, sso_on, provider):
    start = client.get("/oidc/authenticate/")
    query = {k: v[0] for k, v in parse_qs(urlsplit(start["Location"]).query).items()}
    assert query["client_id"] == "gpu-portal"
    assert query["redirect_uri"] == "http://testserver/oidc/callback/"
    assert query["code_challenge_method"] == "S256"
    assert query["state"] and query["nonce"] and query["code_challenge"]
    assert query["scope"].split()[0] == "openid"


def test_a_later_login_with_fewer_groups_removes_sso_memberships_but_keeps_local_ones(client, cast, sso_on, provider):
    provider.login_as("dora", ["gpu-vision-member", "gpu-nlp-member"])
    sso_login(client, provider)
    speech = Team.objects.create(slug="speech", name="Speech")
    dora = get_user_model().objects.get(username="dora")
    Membership.objects.create(user=dora, team=speech, role=Membership.TEAM_ADMIN)  # given in the portal
    client.logout()

    provider.login_as("dora", ["gpu-vision-admin"])
    sso_login(client, provider)
    assert signed_in_as(client) == "dora"
    assert memberships("dora") == [("speech", "team_admin", "local"), ("vision", "team_admin", "sso")]


def test_sso_never_changes_a_local_membership_even_for_a_team_its_groups_name(client, cast, sso_on, provider):
    provider.login_as("dora", [])
    sso_login(client, provider)
    dora = get_user_model().objects.get(username="dora")
    Membership.objects.create(user=dora, team=cast.vision, role=Membership.MEMBER)
    client.logout()
    provider.login_as("dora", ["gpu-vision-admin", "ml-leads"])
    sso_login(client, provider)
    assert memberships("dora") == [("nlp", "team_admin", "sso"), ("vision", "member", "local")]


def test_the_admin_group_makes_a_platform_admin_and_leaving_it_ends_that(client, cast, sso_on, provider):
    provider.login_as("dora", ["gpu-platform-admins"])
    sso_login(client, provider)
    assert get_user_model().objects.get(username="dora").is_staff
    client.logout()
    provider.login_as("dora", ["gpu-vision-member"])
    sso_login(client, provider)
    assert not get_user_model().objects.get(username="dora").is_staff


def expired(now: int) -> dict:
    return {"iat": now - 900, "exp": now - 600}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("bad signature", "Signature verification failed"),
        ("wrong audience", "Audience doesn't match"),
        ("expired", "Signature has expired"),
        ("wrong issuer", "Invalid issuer"),
        ("nonce of another login", "Nonce verification failed"),
    ],
)
def test_a_bad_id_token_is_refused(client, cast, sso_on, provider, caplog, case, reason):
    now = int(time.time())
    provider.login_as("dora", ["gpu-vision-member"])
    if case == "bad signature":
        provider.sign_with_stranger_key = True
    elif case == "wrong audience":
        provider.id_token_claims = {"aud": "another-client"}
    elif case == "expired":
        provider.id_token_claims = expired(now)
    elif case == "wrong issuer":
        provider.id_token_claims = {"iss": "https://evil.example"}
    else:
        provider.id_token_claims = {"nonce": "0123456789abcdef"}
    with caplog.at_level(logging.WARNING, logger="portal.oidc"):
        response = sso_login(client, provider)
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert signed_in_as(client) is None
    assert not get_user_model().objects.filter(username="dora").exists()
    assert reason in caplog.text
    page = client.get("/login/").content.decode()
    assert "Single sign-on did not sign you in" in page


def test_a_replayed_callback_does_not_sign_in_again(client, cast, sso_on, provider):
    provider.login_as("dora", [])
    start = client.get("/oidc/authenticate/")
    approved = requests.get(start["Location"], allow_redirects=False, timeout=5)
    back = urlsplit(approved.headers["Location"])
    callback = f"{back.path}?{back.query}"
    assert client.get(callback)["Location"] == "/"
    client.logout()
    assert client.get(callback)["Location"] == "/login/"  # the state was used up with the session
    assert signed_in_as(client) is None


def test_userinfo_about_another_subject_is_refused(client, cast, sso_on, provider):
    provider.login_as("dora", [])
    provider.userinfo_claims = {"sub": "sub-mallory"}
    assert sso_login(client, provider)["Location"] == "/login/"
    assert signed_in_as(client) is None


def test_a_local_account_of_the_same_name_is_not_taken_over(client, cast, sso_on, provider):
    provider.login_as("alice", ["gpu-platform-admins"])
    assert sso_login(client, provider)["Location"] == "/login/"
    assert signed_in_as(client) is None
    assert not get_user_model().objects.get(username="alice").is_staff


def test_linking_local_accounts_keeps_their_password_and_local_memberships(client, cast, sso_on, provider):
    sso_on.OIDC_LINK_LOCAL_USERS = True
    provider.login_as("alice", ["gpu-nlp-member"])
    sso_login(client, provider)
    assert signed_in_as(client) == "alice"
    assert memberships("alice") == [("nlp", "member", "sso"), ("vision", "member", "local")]
    client.logout()
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302


def test_password_logins_work_as_before_with_sso_on(client, cast, sso_on, provider):
    page = client.get("/login/").content.decode()
    assert 'name="password"' in page
    assert "Sign in with SSO" in page
    assert 'href="/oidc/authenticate/"' in page
    assert client.post("/login/", {"username": "bob", "password": PASSWORD}).status_code == 302
    assert signed_in_as(client) == "bob"
    assert provider.token_requests == 0


def test_a_deactivated_sso_user_is_signed_out_and_cannot_sign_in(client, cast, sso_on, provider):
    provider.login_as("dora", [])
    sso_login(client, provider)
    get_user_model().objects.filter(username="dora").update(is_active=False)
    assert client.get("/profile/").status_code == 302  # to the login page
    assert sso_login(client, provider)["Location"] == "/login/"


def test_a_provider_whose_discovery_names_another_issuer_is_not_used(client, cast, sso_on, provider, caplog):
    provider.discovery_issuer = "https://elsewhere.example"
    with caplog.at_level(logging.WARNING, logger="portal.oidc"):
        response = client.get("/oidc/authenticate/")
    assert response["Location"] == "/login/"
    assert "not 'http://127.0.0.1" in caplog.text
    assert "Single sign-on is unavailable" in client.get("/login/").content.decode()


def test_with_sso_off_there_is_no_button_and_the_endpoints_are_404(client, cast, sso_off):
    page = client.get("/login/").content.decode()
    assert 'name="password"' in page
    assert "Sign in with SSO" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404


def test_the_portal_urlconf_mounts_the_sso_endpoints():
    from django.urls import resolve

    assert resolve("/oidc/authenticate/").url_name == "oidc_authentication_init"
    assert resolve("/oidc/callback/").url_name == "oidc_authentication_callback"


# -- the mapping, as a pure function ---------------------------------------------------------


def test_a_pattern_maps_groups_to_teams_and_roles():
    groups = ["gpu-vision-member", "GPU-ML-Infra-Admin", "gpu-nlp-owner", "other"]
    assert team_roles(groups, "gpu-{team}-{role}") == {"vision": "member", "ml-infra": "team_admin"}


def test_a_pattern_without_role_makes_members():
    assert team_roles(["/teams/vision"], "/teams/{team}") == {"vision": "member"}


def test_the_explicit_map_wins_and_the_higher_role_wins():
    group_map = {"cn=vision-leads": ["vision", "team_admin"], "gpu-nlp-admin": ["nlp", "member"]}
    groups = ["gpu-vision-member", "cn=vision-leads", "gpu-nlp-admin"]
    assert team_roles(groups, "gpu-{team}-{role}", group_map) == {"vision": "team_admin", "nlp": "member"}


# -- settings fail fast -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OIDC_ISSUER": "https://login.example.com"}, "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET must be set"),
        (
            {"OIDC_ISSUER": "http://login.example.com", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b"},
            "OIDC_ISSUER must be an https:// URL in production",
        ),
        ({"OIDC_GROUP_MAP": '{"g": ["vision", "owner"]}'}, "OIDC_GROUP_MAP must be a JSON object"),
        ({"OIDC_GROUP_MAP": "{nope"}, "OIDC_GROUP_MAP is not JSON"),
        ({"OIDC_TEAM_GROUP_PATTERN": "gpu-{group}"}, "OIDC_TEAM_GROUP_PATTERN must contain {team} once"),
        ({"OIDC_SIGN_ALGO": "HS256"}, "OIDC_SIGN_ALGO must be an RS/ES/PS algorithm"),
    ],
)
def test_a_bad_sso_setting_stops_the_portal_at_start_with_its_name(env, message):
    from tests.test_shell import PRODUCTION_ENV, run_manage

    result = run_manage("check", env={**PRODUCTION_ENV, **env})
    assert result.returncode != 0
    assert message in result.stderr
