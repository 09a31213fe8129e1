import re
import subprocess
import sys
from decimal import Decimal

import pytest
from django.core.management import call_command

from portal.models import ApiToken, Membership, Team
from tests.cast import PASSWORD
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db


def test_the_login_page_is_served_and_pages_need_a_login(client):
    assert client.get("/login/").status_code == 200
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_alice_logs_in_and_sees_vision_only_in_the_team_switcher(client, cast, catalog):
    assert client.post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    page = client.get("/").content.decode()
    assert re.findall(r'<option value="([a-z]+)"', page) == ["vision"]
    assert "a100-80gb-1g.10gb" in page


def test_switching_to_a_team_you_are_not_in_is_a_404(client, cast):
    client.force_login(cast.alice)
    assert client.post("/team/switch/", {"team": "nlp"}).status_code == 404
    client.force_login(cast.carol)
    assert client.post("/team/switch/", {"team": "nlp", "next": "/profile/"})["Location"] == "/profile/"
    assert client.session["team"] == "nlp"


def test_the_team_switcher_never_redirects_off_site(client, cast):
    client.force_login(cast.carol)
    assert client.post("/team/switch/", {"team": "nlp", "next": "//evil.example"})["Location"] == "/"


def test_every_script_and_stylesheet_is_served_by_the_portal_itself(client, cast):
    client.force_login(cast.alice)
    page = client.get("/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', page)
    assert assets, "the shell loads no assets"
    for url in assets:
        assert url.startswith("/static/"), url
        assert client.get(url).status_code == 200, url


def test_pages_carry_a_content_security_policy_without_unsafe_eval(client, cast):
    client.force_login(cast.alice)
    csp = client.get("/")["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-eval" not in csp


def test_the_profile_page_creates_a_token_shown_once(client, cast):
    client.force_login(cast.alice)
    page = client.post("/profile/", {"name": "laptop"}).content.decode()
    secret = re.search(r"(gpp_[A-Za-z0-9_-]+)", page).group(1)
    assert ApiToken.objects.get(user=cast.alice).key_hash == ApiToken.hash(secret)
    assert secret not in client.get("/profile/").content.decode()


def test_a_token_without_a_name_is_refused_with_the_field_named(client, cast):
    client.force_login(cast.alice)
    page = client.post("/profile/", {"name": " "}, follow=True).content.decode()
    assert "Token name: give the token a name" in page
    assert not ApiToken.objects.exists()


def test_nobody_can_revoke_someone_elses_token(client, cast):
    token, _ = ApiToken.issue(cast.bob, "ci")
    client.force_login(cast.alice)
    assert client.post(f"/profile/tokens/{token.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=token.pk).exists()


def test_seed_demo_is_idempotent(settings):
    settings.DEMO_PASSWORD = "demo-pass"
    call_command("seed_demo")
    call_command("seed_demo")
    assert sorted(Team.objects.values_list("slug", flat=True)) == ["nlp", "vision"]
    from quotas.models import AuditEntry, Quota

    assert Quota.objects.filter(team__slug="vision").count() == 5  # three GPU classes, cpu and memory
    assert AuditEntry.objects.count() == 10  # the second run changed nothing
    roles = sorted(Membership.objects.values_list("user__username", "team__slug", "role"))
    assert roles == [
        ("alice", "vision", "member"),
        ("bob", "nlp", "team_admin"),
        ("carol", "nlp", "member"),
        ("carol", "vision", "member"),
    ]


def test_seed_demo_keeps_an_approved_quota_and_audits_nothing_on_a_rerun(settings):
    from django.contrib.auth import get_user_model

    from quotas.models import AuditEntry, Quota
    from quotas.requests import set_quota

    settings.DEMO_PASSWORD = "demo-pass"
    call_command("seed_demo")
    admin = get_user_model().objects.get(username="admin")
    set_quota(Team.objects.get(slug="vision"), "H100-80GB", Decimal(2), Decimal(16), admin, "approved request")
    entries = AuditEntry.objects.count()
    call_command("seed_demo")
    quota = Quota.objects.get(team__slug="vision", gpu_class="H100-80GB")
    assert (quota.guaranteed, quota.limit) == (Decimal(2), Decimal(16))
    assert AuditEntry.objects.count() == entries


def test_seed_demo_keeps_changed_roles_passwords_and_staff_flags(settings):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    settings.DEMO_PASSWORD = "demo-pass"
    call_command("seed_demo")
    Membership.objects.filter(user__username="bob").update(role=Membership.MEMBER)
    alice = User.objects.get(username="alice")
    alice.set_password("alice-chose-this")
    alice.save()
    User.objects.filter(username="admin").update(is_superuser=False)
    call_command("seed_demo")
    assert Membership.objects.get(user__username="bob").role == Membership.MEMBER
    assert User.objects.get(username="alice").check_password("alice-chose-this")
    assert not User.objects.get(username="admin").is_superuser


def test_seed_demo_creates_only_what_is_missing_and_audits_that(settings, capsys):
    from quotas.models import AuditEntry, Quota

    settings.DEMO_PASSWORD = "demo-pass"
    call_command("seed_demo")
    Quota.objects.filter(team__slug="nlp", gpu_class="L4").delete()
    entries = AuditEntry.objects.count()
    capsys.readouterr()
    call_command("seed_demo")
    quota = Quota.objects.get(team__slug="nlp", gpu_class="L4")
    assert (quota.guaranteed, quota.limit) == (Decimal(2), Decimal(4))
    assert AuditEntry.objects.count() == entries + 1
    assert "created 1 quotas (nlp L4)" in capsys.readouterr().out


def test_issue_token_prints_a_working_token(cast, api, capsys):
    call_command("issue_token", "alice")
    secret = capsys.readouterr().out.strip()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/teams/").status_code == 200


def test_healthz_answers_and_readyz_checks_database_broker_and_cluster(client, portal_on_sandbox):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.content
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok", "cluster": "ok"}


def test_readyz_names_the_broker_when_it_is_down(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"] == "ok"
    assert ready.json()["checks"]["broker"] == "down"  # the details go to the log, not to anonymous callers


PRODUCTION_ENV = {
    "PORTAL_ENV": "production",
    "SECRET_KEY": "x" * 20 + "abcdefghijklmnopqrstuvwxyz0123456789",
    "ALLOWED_HOSTS": "portal.example.com",
    "DATABASE_URL": "postgres://portal@db.example.com/portal",
    "CELERY_BROKER_URL": "redis://redis.example.com:6379/0",
    "PORTAL_KUBECONFIG": "in-cluster",
    "PATH": "/usr/bin:/bin",
}


def run_manage(*args, env):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_production_settings_pass_check_deploy_with_no_warnings():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_a_malformed_setting_is_named_at_start():
    result = run_manage("check", env={**PRODUCTION_ENV, "PORTAL_KUBE_TIMEOUT_SECONDS": "soon"})
    assert result.returncode != 0
    assert "PORTAL_KUBE_TIMEOUT_SECONDS must be a whole number, not 'soon'" in result.stderr
