"""API rate limits: a budget per token (or per user for session calls), counted in the shared cache.

alice and bob call the API with personal tokens; the rate is set tiny per test, and each
test counts under a cache key prefix of its own, so nothing has to be cleared (clearing a
Redis cache would empty the database the Celery broker may share).
"""

from __future__ import annotations

import os
import uuid

import pytest
import redis
from django.core.cache import caches
from rest_framework.views import APIView

from portal.models import ApiToken
from portal.throttling import ApiRateThrottle, parse_rate
from tests.test_shell import PRODUCTION_ENV, run_manage

pytestmark = pytest.mark.django_db


@pytest.fixture
def rate(settings, monkeypatch):
    """Set the API rate for this test, e.g. ``rate("3/min")``."""

    def set_rate(value: str) -> str:
        prefix = f"test-{uuid.uuid4().hex}"
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": value}}
        settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": prefix}}
        # APIView copies the throttle classes at import; make sure this one is there
        # even when the environment running the tests switched the limit off.
        monkeypatch.setattr(APIView, "throttle_classes", [ApiRateThrottle])
        return prefix

    return set_rate


def bearer(api, user, name="script"):
    _, secret = ApiToken.issue(user, name)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return api


def statuses(api, n: int) -> list[int]:
    return [api.get("/api/v1/teams/").status_code for _ in range(n)]


def test_a_token_over_its_rate_gets_429_with_retry_after(api, cast, rate):
    rate("3/min")
    bearer(api, cast.alice)
    assert statuses(api, 3) == [200, 200, 200]
    refused = api.get("/api/v1/teams/")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.json()["detail"]


def test_each_token_has_a_budget_of_its_own(api, cast, rate):
    rate("2/min")
    bearer(api, cast.alice, "first")
    assert statuses(api, 3) == [200, 200, 429]
    bearer(api, cast.alice, "second")
    assert statuses(api, 1) == [200]
    bearer(api, cast.bob)
    assert statuses(api, 1) == [200]


def test_session_callers_are_limited_per_user(api, cast, rate):
    rate("2/min")
    api.force_login(cast.carol)
    assert statuses(api, 3) == [200, 200, 429]


def test_pages_and_probes_are_not_rate_limited(client, cast, rate):
    rate("1/min")
    client.force_login(cast.alice)
    assert [client.get("/profile/").status_code for _ in range(3)] == [200, 200, 200]
    assert [client.get("/healthz").status_code for _ in range(3)] == [200, 200, 200]


def test_when_the_cache_is_down_the_api_still_answers(api, cast, rate, settings):
    rate("1/min")
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    bearer(api, cast.alice)
    assert statuses(api, 2) == [200, 200]


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="REDIS_URL is not set: the cache is local memory")
def test_with_redis_url_set_the_counters_live_in_redis(api, cast, rate):
    prefix = rate("5/min")
    assert type(caches["default"]).__name__ == "RedisCache"
    bearer(api, cast.alice)
    assert statuses(api, 2) == [200, 200]
    server = redis.Redis.from_url(os.environ["REDIS_URL"])
    [key] = server.keys(f"{prefix}:*")
    assert b":throttle:api:token:" in key
    assert int(server.get(key)) == 2
    assert 0 < server.ttl(key) <= 61


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("600/min", (600, 60)), ("10/s", (10, 1)), ("5000/hour", (5000, 3600)), ("1/day", (1, 86400))],
)
def test_rates_are_parsed(text, parsed):
    assert parse_rate(text) == parsed


@pytest.mark.parametrize("text", ["600", "0/min", "10/fortnight", "ten/min"])
def test_a_bad_rate_is_refused(text):
    with pytest.raises(ValueError):
        parse_rate(text)


def test_a_malformed_rate_stops_the_portal_at_start():
    result = run_manage("check", env={**PRODUCTION_ENV, "PORTAL_API_RATE": "lots"})
    assert result.returncode != 0
    assert "PORTAL_API_RATE must look like 600/min" in result.stderr
