"""Fields a caller may not set are refused or ignored, never applied.

Through the API and the HTML forms, callers try to set what only the portal or a
platform admin decides: a workload's team, state, admission, priority class and quota
charge; offering prices; a team's quota (used, limit, guaranteed); the decision on a
quota request; staff status. Each attempt must be answered 400/403/404/405 or leave the
database as it was.

alice: member of vision. bob: team admin of nlp. carol: member of both. admin: platform admin.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobs.models import Preset, State, Workload
from portal.models import Offering
from quotas.models import Quota, QuotaException, QuotaRequest, RequestState
from tests.security.conftest import NOTEBOOK_IMAGE

pytestmark = pytest.mark.django_db

NOTEBOOK = {"kind": "notebook", "name": "fresh", "offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE}
# What the portal decides about a workload, with values a caller might like.
WORKLOAD_DECISIONS = {
    "state": "running",
    "admission": "guaranteed",
    "priority_class": "system-cluster-critical",
    "quota_charge": "0",
    "quota_class": "CPU",
    "cluster_phase": "Running",
    "url": "https://evil.example.com/",
    "created_by": "bob",
    "applied_manifests": [],
    "submit_attempts": 0,
    "deleted_at": None,
    "id": 1,
    "is_staff": True,
}


def bearer(world, who: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {world.secrets[who]}"}


def snapshot(model, **filters) -> list[dict]:
    return list(model.objects.filter(**filters).order_by("pk").values())


# -- workloads ---------------------------------------------------------------------------------


@pytest.mark.parametrize("field", sorted(WORKLOAD_DECISIONS))
def test_the_api_refuses_a_workload_request_that_sets_a_decision(field, world, api):
    api.force_authenticate(world.cast.alice)
    before = Workload.objects.count()
    response = api.post(
        "/api/v1/workloads/", {"team": "vision", **NOTEBOOK, field: WORKLOAD_DECISIONS[field]}, format="json"
    )
    assert response.status_code == 400
    assert field in response.json()
    assert Workload.objects.count() == before


def test_the_api_refuses_a_workload_for_another_team(world, api):
    api.force_authenticate(world.cast.alice)
    response = api.post("/api/v1/workloads/", {"team": "nlp", **NOTEBOOK}, format="json")
    assert response.status_code == 400 and "team" in response.json()
    assert not Workload.objects.filter(name="fresh").exists()


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_workload_cannot_be_changed_through_the_api(method, world, api):
    pk = world.objects["workload"]["vision"]
    before = snapshot(Workload, pk=pk)
    for who in (world.cast.alice, world.cast.admin):
        api.force_authenticate(who)
        body = {"team": "nlp", "state": "succeeded", "priority_class": "x", "quota_charge": "0", "gpus_per_replica": 8}
        response = getattr(api, method)(f"/api/v1/workloads/{pk}/", body, format="json")
        assert response.status_code == 405
    assert snapshot(Workload, pk=pk) == before


def test_the_request_form_ignores_decision_fields_and_refuses_another_team(world, client):
    client.force_login(world.cast.alice)
    form = {"team": "vision", "name": "fresh", "offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE}
    decisions = {k: v for k, v in WORKLOAD_DECISIONS.items() if isinstance(v, str)} | {"created_by": world.cast.bob.pk}

    response = client.post("/workloads/new/notebook/", {**form, "team": "nlp", "action": "create"})
    assert response.status_code == 200  # the form again, with the team refused
    assert not Workload.objects.filter(name="fresh").exists()

    response = client.post("/workloads/new/notebook/", {**form, **decisions, "action": "create"})
    assert response.status_code == 302
    made = Workload.objects.get(name="fresh")
    assert made.team == world.cast.vision and made.created_by == world.cast.alice
    assert made.state == State.QUEUED and made.url == "" and made.cluster_phase == ""
    assert made.priority_class != decisions["priority_class"]
    assert made.quota_class == "A100-80GB" and made.quota_charge == Decimal("0.142857")


def test_a_member_cannot_save_or_delete_presets(world, client):
    client.force_login(world.cast.alice)
    before = snapshot(Preset)
    form = {"team": "vision", "name": "x", "offering": "a100-80gb-1g.10gb", "image": NOTEBOOK_IMAGE}
    response = client.post("/workloads/new/notebook/", {**form, "action": "save-preset", "preset_name": "mine"})
    assert response.status_code == 200 and "Only a team admin" in response.content.decode()
    pk = world.objects["preset"]["vision"]
    assert client.post(f"/presets/{pk}/delete/", {"confirmed": "yes"}).status_code == 403
    workload = world.objects["workload"]["vision"]
    assert client.post(f"/workloads/{workload}/save-preset/", {"preset_name": "mine"}).status_code == 403
    assert snapshot(Preset) == before


# -- the catalog -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
def test_offerings_are_read_only_in_the_api_even_for_platform_admins(method, world, api):
    before = snapshot(Offering)
    body = {"slug": "h100-80gb", "price_per_hour": "0.01", "is_active": False, "kind": "gpu"}
    for who in (world.cast.alice, world.cast.admin):
        api.force_authenticate(who)
        assert getattr(api, method)("/api/v1/offerings/h100-80gb/", body, format="json").status_code == 405
        if method == "post":
            assert api.post("/api/v1/offerings/", body, format="json").status_code == 405
    assert snapshot(Offering) == before


# -- quotas ------------------------------------------------------------------------------------


def test_only_platform_admins_set_a_team_quota(world, api):
    before = snapshot(Quota)
    body = {"gpu_class": "A100-80GB", "guaranteed": "50", "limit": "100", "reason": "mine now"}
    api.force_authenticate(world.cast.bob)  # team admin of nlp
    assert api.post("/api/v1/teams/nlp/quota/", body, format="json").status_code == 403
    api.force_authenticate(world.cast.carol)  # member of nlp
    assert api.post("/api/v1/teams/nlp/quota/", body, format="json").status_code == 403
    api.force_authenticate(world.cast.alice)  # not in nlp
    assert api.post("/api/v1/teams/nlp/quota/", body, format="json").status_code == 404
    for method in ("put", "patch", "delete"):
        api.force_authenticate(world.cast.admin)
        assert getattr(api, method)("/api/v1/teams/nlp/quota/", body, format="json").status_code == 405
    assert snapshot(Quota) == before


def test_a_platform_admin_setting_a_quota_cannot_set_what_is_used(world, api):
    api.force_authenticate(world.cast.admin)
    body = {"gpu_class": "A100-80GB", "guaranteed": "1", "limit": "3", "reason": "more", "used": "0", "overage": "9"}
    assert api.post("/api/v1/teams/nlp/quota/", body, format="json").status_code == 200
    quota = Quota.objects.get(team=world.cast.nlp, gpu_class="A100-80GB")
    assert (quota.limit, quota.used, quota.overage) == (Decimal(3), Decimal(0), Decimal(0))


def test_the_console_form_setting_quotas_refuses_team_admins(world, client):
    before = snapshot(Quota)
    client.force_login(world.cast.bob)
    body = {"team": "nlp", "gpu_class": "A100-80GB", "guaranteed": "50", "limit": "100", "reason": "mine"}
    assert client.post("/approvals/set-quota/", body).status_code == 403
    assert snapshot(Quota) == before


DECISION_FIELDS = {
    "state": "approved",
    "approved": True,
    "decision": "approved",
    "decided_by": "admin",
    "decided_at": "2026-01-01T00:00:00Z",
    "requested_by": "alice",
    "comment": "self-approved",
    "expires_at": "2030-01-01T00:00:00Z",
    "restore_limit": "100",
    "used": "0",
    "is_staff": True,
}


def test_a_quota_request_through_the_api_ignores_decision_fields(world, api):
    api.force_authenticate(world.cast.bob)
    body = {"team": "nlp", "gpu_class": "H100-80GB", "limit": "6", "justification": "training", **DECISION_FIELDS}
    response = api.post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 201
    made = QuotaRequest.objects.get(pk=response.json()["id"])
    assert made.state == RequestState.PENDING and made.decided_by is None and made.decided_at is None
    assert made.requested_by == world.cast.bob and made.comment == "" and made.expires_at is None
    assert made.restore_limit is None
    assert Quota.objects.get(team=world.cast.nlp, gpu_class="H100-80GB").limit == Decimal(2)
    assert not type(world.cast.bob).objects.get(pk=world.cast.bob.pk).is_staff


def test_a_quota_request_through_the_form_ignores_decision_fields(world, client):
    client.force_login(world.cast.bob)
    body = {"team": "nlp", "gpu_class": "H100-80GB", "limit": "6", "justification": "training"}
    body |= {k: v for k, v in DECISION_FIELDS.items() if isinstance(v, str)} | {"decided_by": world.cast.admin.pk}
    assert client.post("/quotas/requests/", body).status_code == 302
    made = QuotaRequest.objects.get(team=world.cast.nlp, gpu_class="H100-80GB")
    assert made.state == RequestState.PENDING and made.decided_by is None and made.requested_by == world.cast.bob


def test_members_cannot_file_quota_requests_nor_for_another_team(world, api, client):
    before = snapshot(QuotaRequest)
    body = {"gpu_class": "H100-80GB", "limit": "6", "justification": "please"}
    api.force_authenticate(world.cast.carol)  # member of both teams
    assert api.post("/api/v1/quota-requests/", {**body, "team": "nlp"}, format="json").status_code == 403
    api.force_authenticate(world.cast.bob)  # team admin of nlp, not in vision
    assert api.post("/api/v1/quota-requests/", {**body, "team": "vision"}, format="json").status_code == 400
    client.force_login(world.cast.carol)
    assert client.post("/quotas/requests/", {**body, "team": "vision"}).status_code == 403
    client.force_login(world.cast.bob)
    assert client.post("/quotas/requests/", {**body, "team": "vision"}).status_code == 404
    assert snapshot(QuotaRequest) == before


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
def test_quota_requests_and_exceptions_cannot_be_edited(method, world, api):
    requests_before, exceptions_before = snapshot(QuotaRequest), snapshot(QuotaException)
    api.force_authenticate(world.cast.admin)
    body = {"state": "approved", "decision": "approved", "limit": "100", "amount": "0"}
    for kind, objects in (("quota-requests", "quota_request"), ("quota-exceptions", "quota_exception")):
        for team in ("vision", "nlp"):
            pk = world.objects[objects][team]
            assert getattr(api, method)(f"/api/v1/{kind}/{pk}/", body, format="json").status_code == 405
    assert api.post("/api/v1/quota-exceptions/", body, format="json").status_code == 405
    assert (snapshot(QuotaRequest), snapshot(QuotaException)) == (requests_before, exceptions_before)


def test_nobody_but_another_platform_admin_decides_a_request(world, api):
    pk = world.objects["quota_request"]["nlp"]  # filed by bob
    api.force_authenticate(world.cast.bob)
    assert api.post(f"/api/v1/quota-requests/{pk}/approve/", {}, format="json").status_code == 403
    world.cast.bob.is_staff = True  # even a platform admin may not decide their own request
    world.cast.bob.save()
    assert api.post(f"/api/v1/quota-requests/{pk}/approve/", {}, format="json").status_code == 403
    assert QuotaRequest.objects.get(pk=pk).state == RequestState.PENDING
    assert Quota.objects.get(team=world.cast.nlp, gpu_class="A100-80GB").limit == Decimal(2)


# -- people ------------------------------------------------------------------------------------


def test_nobody_makes_themselves_staff(world, client, api):
    User = type(world.cast.alice)
    client.force_login(world.cast.alice)
    client.post("/profile/", {"name": "t", "is_staff": "on", "is_superuser": "on", "username": "root"})
    api.force_authenticate(world.cast.alice)
    body = {"is_staff": True, "role": "team_admin"}
    for method in ("put", "patch"):
        assert getattr(api, method)("/api/v1/teams/vision/", body, format="json").status_code == 405
    alice = User.objects.get(pk=world.cast.alice.pk)
    assert (alice.username, alice.is_staff, alice.is_superuser) == ("alice", False, False)
    assert alice.memberships.get().role == "member"


def test_switching_to_another_team_is_refused(world, client):
    client.force_login(world.cast.alice)
    client.post("/team/switch/", {"team": "vision"})
    assert client.post("/team/switch/", {"team": "nlp"}).status_code == 404
    assert client.session["team"] == "vision"


def test_a_token_acts_as_its_owner_only(world, client):
    """A Bearer token of alice reaches vision's objects, never nlp's, whatever else is sent."""
    nlp_workload = world.objects["workload"]["nlp"]
    headers = bearer(world, "alice")
    assert client.get(f"/api/v1/workloads/{nlp_workload}/", **headers).status_code == 404
    assert client.get("/api/v1/workloads/?team=nlp", **headers).json()["results"] == []
    assert client.get("/api/v1/teams/nlp/quota/", **headers).status_code == 404


@pytest.mark.parametrize(
    "next_url",
    [
        "//evil.example.com/",
        "/\\evil.example.com/",
        "/\t/evil.example.com/",
        "https://evil.example.com/",
        "javascript:x",
    ],
)
def test_the_team_switcher_only_sends_people_back_into_the_portal(next_url, world, client):
    """It was a prefix test, which "/\\evil.example.com" passes: browsers read it as //evil.example.com."""
    client.force_login(world.cast.alice)
    response = client.post("/team/switch/", {"team": "vision", "next": next_url})
    assert response.status_code == 302 and response["Location"] == "/"
    response = client.post("/team/switch/", {"team": "vision", "next": "/quotas/?team=vision"})
    assert response["Location"] == "/quotas/?team=vision"
