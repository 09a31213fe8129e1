"""The quota API: who sees and does what, error bodies, and query counts of the lists.

alice: member of vision. bob: team admin of nlp. carol: member of both. admin: platform admin.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from quotas import approvals
from quotas.models import AuditEntry, Quota, QuotaException, QuotaRequest
from quotas.requests import file_request, set_quota
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def quotas(cast, catalog):
    make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(6))
    make_quota(cast.nlp, "H100-80GB", 2, 4)


@pytest.fixture
def nlp_request(cast, quotas):
    return file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, justification="Fine-tuning")


def as_(api, user):
    api.force_authenticate(user)
    return api


# -- GET /teams/{slug}/quota/ -----------------------------------------------------------------


def test_a_member_reads_their_teams_quota_rows(api, cast, quotas):
    QuotaException.objects.create(
        team=cast.vision, workload_id=5, gpu_class="H100-80GB", amount=Decimal(3), requested_by=cast.alice
    )
    body = as_(api, cast.alice).get("/api/v1/teams/vision/quota/").json()
    assert body == {
        "team": "vision",
        "rows": [
            {
                "gpu_class": "H100-80GB",
                "used": "6.000000",
                "guaranteed": "4.000000",
                "limit": "8.000000",
                "pending": "3.000000",
                "free": "2.000000",
                "overage": "0.000000",
                "requested_limit": None,
                "expires_at": None,
            }
        ],
    }


def test_another_teams_quota_is_a_404_and_anonymous_is_a_401(api, cast, quotas):
    assert as_(api, cast.alice).get("/api/v1/teams/nlp/quota/").status_code == 404
    assert as_(api, cast.admin).get("/api/v1/teams/nlp/quota/").status_code == 200
    api.force_authenticate(None)
    assert api.get("/api/v1/teams/vision/quota/").status_code == 401


# -- /quota-requests/ ---------------------------------------------------------------------------


def test_members_see_their_teams_requests_only(api, cast, nlp_request):
    assert as_(api, cast.alice).get("/api/v1/quota-requests/").json()["count"] == 0
    body = as_(api, cast.carol).get("/api/v1/quota-requests/").json()
    assert [(r["id"], r["team"], r["state"], r["requested_by"]) for r in body["results"]] == [
        (nlp_request.pk, "nlp", "pending", "bob")
    ]
    assert as_(api, cast.alice).get(f"/api/v1/quota-requests/{nlp_request.pk}/").status_code == 404
    assert as_(api, cast.admin).get("/api/v1/quota-requests/?state=pending&team=nlp").json()["count"] == 1


def test_a_team_admin_files_a_request(api, cast, quotas):
    until = (timezone.localdate() + timedelta(days=10)).isoformat()
    response = as_(api, cast.bob).post(
        "/api/v1/quota-requests/",
        {"team": "nlp", "gpu_class": "H100-80GB", "limit": "8", "until": until, "justification": "Sprint"},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["state"], body["limit"], body["guaranteed"], body["until"], body["requested_by"]) == (
        "pending",
        "8.0000",
        None,
        until,
        "bob",
    )


def test_members_may_not_file_requests(api, cast, quotas):
    response = as_(api, cast.carol).post(
        "/api/v1/quota-requests/", {"team": "nlp", "gpu_class": "H100-80GB", "limit": "8", "justification": "x"}
    )
    assert response.status_code == 403
    assert response.json()["detail"] == "Only team admins of nlp may ask for more quota."


def test_filing_for_a_team_you_are_not_in_names_the_team_field(api, cast, quotas):
    response = as_(api, cast.bob).post(
        "/api/v1/quota-requests/", {"team": "vision", "gpu_class": "H100-80GB", "limit": "8", "justification": "x"}
    )
    assert response.status_code == 400
    assert response.json()["team"] == ["you are not in a team named 'vision'"]


def test_a_bad_request_is_a_400_naming_each_field(api, cast, quotas):
    response = as_(api, cast.bob).post(
        "/api/v1/quota-requests/",
        {"team": "nlp", "gpu_class": "TPU", "guaranteed": "9", "until": "2001-01-01", "justification": "x"},
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"detail", "gpu_class", "until"}
    assert body["detail"].startswith("Invalid input:")
    missing = as_(api, cast.bob).post("/api/v1/quota-requests/", {"team": "nlp"}, format="json").json()
    assert set(missing) == {"detail", "gpu_class", "justification"}


def test_state_and_decision_fields_cannot_be_written(api, cast, quotas):
    response = as_(api, cast.bob).post(
        "/api/v1/quota-requests/",
        {
            "team": "nlp",
            "gpu_class": "H100-80GB",
            "limit": "8",
            "justification": "x",
            "state": "approved",
            "decided_by": "admin",
        },
        format="json",
    )
    assert response.status_code == 201
    assert (response.json()["state"], response.json()["decided_by"]) == ("pending", None)


def test_only_platform_admins_approve_and_members_of_another_team_get_a_404(api, cast, nlp_request):
    url = f"/api/v1/quota-requests/{nlp_request.pk}/approve/"
    assert as_(api, cast.alice).post(url).status_code == 404  # not in nlp
    for user in (cast.bob, cast.carol):  # in nlp, not platform admins
        response = as_(api, user).post(url)
        assert response.status_code == 403
        assert response.json()["detail"] == "Only platform admins decide quota requests and exceptions."
    response = as_(api, cast.admin).post(url, {"comment": "ok"}, format="json")
    assert response.status_code == 200
    assert (response.json()["state"], response.json()["decided_by"]) == ("approved", "admin")
    assert Quota.objects.get(team=cast.nlp).limit == 8
    again = as_(api, cast.admin).post(url)
    assert again.status_code == 409
    assert again.json()["detail"] == f"Quota request #{nlp_request.pk} is already approved."


def test_the_requester_cannot_approve_their_own_request_through_the_api(api, cast, quotas):
    from portal.models import Membership

    Membership.objects.create(user=cast.admin, team=cast.nlp, role=Membership.TEAM_ADMIN)
    own = file_request(cast.admin, cast.nlp, gpu_class="H100-80GB", limit=8, justification="mine")
    response = as_(api, cast.admin).post(f"/api/v1/quota-requests/{own.pk}/approve/")
    assert response.status_code == 403
    assert response.json()["detail"] == (
        f"You asked for quota request #{own.pk} yourself; another platform admin must decide it."
    )
    assert QuotaRequest.objects.get(pk=own.pk).state == "pending"


def test_deny_and_withdraw(api, cast, nlp_request):
    assert as_(api, cast.carol).post(f"/api/v1/quota-requests/{nlp_request.pk}/withdraw/").status_code == 403
    response = as_(api, cast.admin).post(f"/api/v1/quota-requests/{nlp_request.pk}/deny/", {"comment": "no"})
    assert response.json()["state"] == "denied"
    assert as_(api, cast.bob).post(f"/api/v1/quota-requests/{nlp_request.pk}/withdraw/").status_code == 409
    other = file_request(cast.bob, cast.nlp, gpu_class="L4", limit=2, justification="inference")
    assert as_(api, cast.bob).post(f"/api/v1/quota-requests/{other.pk}/withdraw/").json()["state"] == "withdrawn"


def test_the_request_list_takes_a_fixed_number_of_queries(api, cast, quotas, django_assert_num_queries):
    for gpu_class in ("H100-80GB", "L4", "A100-80GB"):
        request = file_request(cast.bob, cast.nlp, gpu_class=gpu_class, limit=9, justification="x")
        approvals.decide_request(cast.admin, request.pk, approve=True)
    as_(api, cast.carol)
    with django_assert_num_queries(2):  # count, page (auth is forced)
        body = api.get("/api/v1/quota-requests/").json()
    assert body["count"] == 3


# -- /quota-exceptions/ -------------------------------------------------------------------------


def test_exceptions_are_listed_for_members_and_decided_by_platform_admins(api, cast, quotas):
    exception = QuotaException.objects.create(
        team=cast.vision, workload_id=12345, gpu_class="H100-80GB", amount=Decimal(1), requested_by=cast.alice
    )
    assert as_(api, cast.carol).get("/api/v1/quota-exceptions/").json()["count"] == 1
    assert as_(api, cast.bob).get("/api/v1/quota-exceptions/").json()["count"] == 0
    assert as_(api, cast.bob).post(f"/api/v1/quota-exceptions/{exception.pk}/deny/").status_code == 404
    assert as_(api, cast.carol).post(f"/api/v1/quota-exceptions/{exception.pk}/deny/").status_code == 403
    response = as_(api, cast.admin).post(f"/api/v1/quota-exceptions/{exception.pk}/deny/", {"comment": "no"})
    assert response.status_code == 200
    assert response.json()["decision"] == "denied"


# -- /audit/ --------------------------------------------------------------------------------------


def test_the_audit_log_is_for_platform_admins_and_team_admins_of_their_teams(api, cast, quotas):
    set_quota(cast.vision, "H100-80GB", 4, 10, cast.admin, "vision grows")
    set_quota(cast.nlp, "H100-80GB", 2, 6, cast.admin, "nlp grows")
    assert as_(api, cast.alice).get("/api/v1/audit/").status_code == 403
    assert as_(api, cast.carol).get("/api/v1/audit/").status_code == 403
    bob = as_(api, cast.bob).get("/api/v1/audit/").json()
    assert [(e["team"], e["reason"]) for e in bob["results"]] == [("nlp", "nlp grows")]
    admin = as_(api, cast.admin).get("/api/v1/audit/?team=vision").json()
    [entry] = admin["results"]
    assert (entry["actor"], entry["action"], entry["before"]["limit"], entry["after"]["limit"]) == (
        "admin",
        "quota.changed",
        "8",
        "10",
    )
    assert as_(api, cast.admin).get("/api/v1/audit/").json()["count"] == AuditEntry.objects.count() == 2


def test_the_openapi_schema_documents_the_quota_endpoints(api, cast):
    schema = as_(api, cast.alice).get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    for path in (
        "/api/v1/teams/{slug}/quota/",
        "/api/v1/quota-requests/",
        "/api/v1/quota-requests/{id}/approve/",
        "/api/v1/quota-requests/{id}/deny/",
        "/api/v1/audit/",
    ):
        assert path in schema


def test_platform_admins_set_a_quota_through_the_api_and_others_cannot(api, cast, quotas):
    body = {"gpu_class": "H100-80GB", "guaranteed": "2", "limit": "4", "reason": "Budget cut"}
    assert as_(api, cast.alice).post("/api/v1/teams/nlp/quota/", body).status_code == 404
    refused = as_(api, cast.bob).post("/api/v1/teams/nlp/quota/", body)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "Only platform admins set quotas; team admins file a quota request."
    response = as_(api, cast.admin).post("/api/v1/teams/vision/quota/", body, format="json")
    assert response.status_code == 200
    [row] = response.json()["rows"]
    assert (row["used"], row["limit"], row["overage"], row["free"]) == ("6.000000", "4.000000", "2.000000", "0.000000")
    assert AuditEntry.objects.get().reason == "Budget cut"


def test_setting_a_quota_through_the_api_names_bad_fields(api, cast, quotas):
    as_(api, cast.admin)
    unknown = api.post(
        "/api/v1/teams/nlp/quota/", {"gpu_class": "TPU", "guaranteed": "1", "limit": "2", "reason": "x"}
    ).json()
    assert unknown["gpu_class"] == ["no GPU class 'TPU' is on offer"]
    inverted = api.post(
        "/api/v1/teams/nlp/quota/", {"gpu_class": "L4", "guaranteed": "3", "limit": "2", "reason": "x"}
    ).json()
    assert inverted["guaranteed"] == ["must not exceed the limit (2)"]
    assert set(api.post("/api/v1/teams/nlp/quota/", {}).json()) == {
        "detail",
        "gpu_class",
        "guaranteed",
        "limit",
        "reason",
    }
