"""Failed password logins are limited per username and per client address (portal/login_throttle.py).

Each test counts under a cache key prefix of its own, so nothing has to be cleared and
runs do not see each other's failures (clearing a Redis cache would empty the database
the Celery broker may share).
"""

from __future__ import annotations

import uuid

import pytest
import time_machine
from django.test import Client

from tests.cast import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_budgets(settings):
    settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}
    settings.LOGIN_MAX_FAILURES = 5
    settings.LOGIN_MAX_FAILURES_PER_IP = 20
    settings.LOGIN_LOCKOUT_SECONDS = 900
    settings.LOGIN_TRUSTED_PROXIES = 0


def log_in(client, username, password=PASSWORD, **extra):
    return client.post("/login/", {"username": username, "password": password}, **extra)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_five_wrong_passwords_lock_the_username_even_for_the_right_one(cast):
    client = Client()
    for _ in range(5):
        response = log_in(client, "alice", "wrong")
        assert response.status_code == 200
        assert "didn&#x27;t match" in response.content.decode()
    refused = log_in(client, "alice")
    assert refused.status_code == 429
    assert 890 <= int(refused["Retry-After"]) <= 900
    page = refused.content.decode()
    assert "Too many failed logins for this username: login is locked for 15 minutes." in page
    assert not signed_in(client)


def test_a_locked_username_does_not_lock_other_users(cast):
    client = Client()
    for _ in range(6):
        log_in(client, "alice", "wrong")
    assert log_in(client, "bob").status_code == 302


def test_the_lock_ends_with_the_window(cast, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "t"}}
    client = Client()
    with time_machine.travel("2026-12-03 08:00:00Z", tick=False) as clock:
        for _ in range(5):
            log_in(client, "alice", "wrong")
        clock.shift(600)
        refused = log_in(client, "alice")
        assert refused.status_code == 429
        assert int(refused["Retry-After"]) == 300
        assert "locked for 5 minutes" in refused.content.decode()
        clock.shift(301)
        assert log_in(client, "alice").status_code == 302


def test_a_successful_login_clears_the_usernames_failures(cast):
    client = Client()
    for _ in range(4):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice").status_code == 302
    client.logout()
    for _ in range(4):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice").status_code == 302


def test_usernames_differing_in_case_share_a_budget(cast):
    client = Client()
    for name in ("Alice", "ALICE", "alice", "aLiCe", "alice "):
        log_in(client, name, "wrong")
    assert log_in(client, "alice").status_code == 429


def test_failures_from_one_address_lock_that_address_for_every_username(cast, settings):
    settings.LOGIN_MAX_FAILURES_PER_IP = 3
    client = Client(REMOTE_ADDR="203.0.113.7")
    for name in ("nobody", "mallory", "root"):
        log_in(client, name, "wrong")
    refused = log_in(client, "carol")
    assert refused.status_code == 429
    assert "from your network address" in refused.content.decode()
    assert log_in(Client(REMOTE_ADDR="203.0.113.8"), "carol").status_code == 302


def test_successful_logins_do_not_use_the_address_budget(cast, settings):
    settings.LOGIN_MAX_FAILURES_PER_IP = 2
    for _ in range(5):
        assert log_in(Client(), "bob").status_code == 302
    client = Client()
    log_in(client, "alice", "wrong")
    assert log_in(client, "carol").status_code == 302


def test_a_forged_forwarded_for_header_is_ignored_without_trusted_proxies(cast, settings):
    settings.LOGIN_MAX_FAILURES_PER_IP = 2
    client = Client()
    for n in range(2):
        log_in(client, f"user{n}", "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    assert log_in(client, "carol", HTTP_X_FORWARDED_FOR="198.51.100.99").status_code == 429


def test_behind_a_trusted_proxy_the_forwarded_client_address_is_counted(cast, settings):
    settings.LOGIN_MAX_FAILURES_PER_IP = 2
    settings.LOGIN_TRUSTED_PROXIES = 1
    client = Client(REMOTE_ADDR="10.0.0.1")  # the ingress
    for n in range(2):
        # What the client sent itself (left of the proxy's entry) does not make a new address.
        log_in(client, f"user{n}", "wrong", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, 198.51.100.5")
    assert log_in(client, "carol", HTTP_X_FORWARDED_FOR="198.51.100.5").status_code == 429
    assert log_in(client, "carol", HTTP_X_FORWARDED_FOR="198.51.100.6").status_code == 302


def test_a_budget_of_zero_switches_that_limit_off(cast, settings):
    settings.LOGIN_MAX_FAILURES = 0
    settings.LOGIN_MAX_FAILURES_PER_IP = 0
    client = Client()
    for _ in range(10):
        log_in(client, "alice", "wrong")
    assert log_in(client, "alice").status_code == 302


def test_the_admin_login_page_shares_the_budget(cast):
    client = Client()
    for _ in range(5):
        client.post("/admin/login/", {"username": "admin", "password": "wrong"})
    response = client.post("/admin/login/?next=/admin/", {"username": "admin", "password": PASSWORD})
    assert response.status_code == 200
    assert "Too many failed logins for this username" in response.content.decode()
    assert log_in(Client(), "admin").status_code == 429


def test_a_missing_password_is_not_an_attempt(cast):
    client = Client()
    for _ in range(10):
        assert client.post("/login/", {"username": "alice", "password": ""}).status_code == 200
    assert log_in(client, "alice").status_code == 302


def test_when_the_cache_is_down_logins_still_work(cast, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
            "OPTIONS": {"socket_connect_timeout": 0.2},
        }
    }
    assert log_in(Client(), "alice").status_code == 302


def test_login_limits_are_read_from_the_environment_and_bad_values_stop_the_portal():
    from tests.test_shell import PRODUCTION_ENV, run_manage

    shown = run_manage(
        "shell",
        "-c",
        "from django.conf import settings as s; print(s.LOGIN_MAX_FAILURES, s.LOGIN_MAX_FAILURES_PER_IP, "
        "s.LOGIN_LOCKOUT_SECONDS, s.LOGIN_TRUSTED_PROXIES)",
        env={
            **PRODUCTION_ENV,
            "PORTAL_LOGIN_MAX_FAILURES": "3",
            "PORTAL_LOGIN_MAX_FAILURES_PER_IP": "0",
            "PORTAL_LOGIN_LOCKOUT_SECONDS": "60",
            "PORTAL_LOGIN_TRUSTED_PROXIES": "2",
        },
    )
    assert shown.stdout.strip().splitlines()[-1].split() == ["3", "0", "60", "2"], shown.stderr
    bad = run_manage("check", env={**PRODUCTION_ENV, "PORTAL_LOGIN_LOCKOUT_SECONDS": "0"})
    assert bad.returncode != 0
    assert "PORTAL_LOGIN_LOCKOUT_SECONDS must be at least 1, not 0" in bad.stderr
    bad = run_manage("check", env={**PRODUCTION_ENV, "PORTAL_LOGIN_MAX_FAILURES": "five"})
    assert "PORTAL_LOGIN_MAX_FAILURES must be a whole number, not 'five'" in bad.stderr
