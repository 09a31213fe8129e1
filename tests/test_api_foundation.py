import pytest

from portal.models import ApiToken

pytestmark = pytest.mark.django_db


def slugs(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [item["slug"] for item in response.json()["results"]]


def test_alice_sees_only_her_team(api, cast):
    api.force_authenticate(cast.alice)
    assert slugs(api.get("/api/v1/teams/")) == ["vision"]


def test_carol_sees_both_of_her_teams_with_her_role(api, cast):
    api.force_authenticate(cast.carol)
    body = api.get("/api/v1/teams/").json()
    assert [(t["slug"], t["role"]) for t in body["results"]] == [("nlp", "member"), ("vision", "member")]


def test_a_platform_admin_sees_every_team(api, cast):
    api.force_authenticate(cast.admin)
    assert slugs(api.get("/api/v1/teams/")) == ["nlp", "vision"]


def test_another_teams_detail_is_a_404_not_a_403(api, cast):
    api.force_authenticate(cast.alice)
    assert api.get("/api/v1/teams/nlp/").status_code == 404
    assert api.get("/api/v1/teams/vision/").json()["namespace"] == "team-vision"


def test_anonymous_callers_get_401_with_a_bearer_challenge(api, cast, catalog):
    for url in ("/api/v1/teams/", "/api/v1/offerings/"):
        response = api.get(url)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Bearer"


def test_a_bearer_token_authenticates_and_a_revoked_one_does_not(api, cast):
    token, secret = ApiToken.issue(cast.bob, "ci")
    assert ApiToken.objects.get(pk=token.pk).key_hash != secret  # only the hash is stored
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert slugs(api.get("/api/v1/teams/")) == ["nlp"]
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    token.delete()
    response = api.get("/api/v1/teams/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid or revoked API token."


def test_a_malformed_authorization_header_is_refused(api, cast):
    api.credentials(HTTP_AUTHORIZATION="Bearer two words")
    assert api.get("/api/v1/teams/").status_code == 401


def test_offerings_list_is_paginated_and_shows_the_share_and_price(api, cast, catalog):
    api.force_authenticate(cast.alice)
    body = api.get("/api/v1/offerings/").json()
    assert body["count"] == 5
    mig = next(o for o in body["results"] if o["slug"] == "a100-80gb-1g.10gb")
    assert mig["share_of_gpu"] == pytest.approx(1 / 7)
    assert mig["price_per_hour"] == "0.4000"
    assert mig["resource_name"] == "nvidia.com/mig-1g.10gb"
    assert api.get("/api/v1/offerings/a100-80gb-1g.10gb/").status_code == 200


def test_inactive_offerings_are_not_offered(api, cast, catalog):
    catalog["l4-shared"].is_active = False
    catalog["l4-shared"].save()
    api.force_authenticate(cast.alice)
    assert "l4-shared" not in slugs(api.get("/api/v1/offerings/"))


def test_the_openapi_schema_and_docs_are_served_without_a_cdn(client, cast):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/teams/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()
    assert b"/static/drf_spectacular_sidecar/" in docs.content
