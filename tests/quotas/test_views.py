"""The pages: quota overview, approvals console, audit log and its CSV export.

alice: member of vision. bob: team admin of nlp. carol: member of both. admin: platform admin.
"""

import csv
import io
from decimal import Decimal

import pytest

from jobs.models import Workload
from portal.models import Notice, Offering
from quotas.models import AuditEntry, Quota, QuotaException, QuotaRequest
from quotas.requests import file_request, set_quota
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def quotas(cast, catalog):
    make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(6))
    make_quota(cast.vision, "A100-80GB", 1, 1, used=Decimal("0.428571"))
    make_quota(cast.nlp, "H100-80GB", 2, 4)


def assert_csp_clean(response):
    html = response.content.decode()
    assert " style=" not in html and "<style" not in html
    assert "<script>" not in html and "onclick" not in html


# -- /quotas/ -------------------------------------------------------------------------------------


def test_a_member_sees_their_teams_bars_but_no_request_form(client, cast, quotas):
    client.force_login(cast.alice)
    response = client.get("/quotas/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="team-vision"' in html and 'id="team-nlp"' not in html
    assert '<meter min="0" max="8" low="4" high="8" optimum="0"\n               value="6"' in html
    assert "borrowing: preemptible" in html
    assert "Request more" not in html
    assert "{#" not in html and "{%" not in html
    assert_csp_clean(response)


def test_a_team_admin_sees_the_request_form_for_their_team_only(client, cast, quotas):
    from portal.models import Membership

    Membership.objects.create(user=cast.bob, team=cast.vision, role=Membership.MEMBER)
    client.force_login(cast.bob)
    html = client.get("/quotas/").content.decode()
    assert "Request more (or less) quota for nlp" in html
    assert "Request more (or less) quota for vision" not in html


def test_the_overview_takes_a_fixed_number_of_queries(client, cast, quotas, django_assert_max_num_queries):
    client.force_login(cast.admin)
    client.get("/quotas/")  # warm the session and the offering caches
    with django_assert_max_num_queries(16):
        assert client.get("/quotas/").status_code == 200


def test_filing_a_request_through_htmx_swaps_the_teams_card(client, cast, quotas):
    client.force_login(cast.bob)
    response = client.post(
        "/quotas/requests/",
        {"team": "nlp", "gpu_class": "H100-80GB", "limit": "8", "justification": "Fine-tuning"},
        **HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="team-nlp"' in html and "<html" not in html and "{#" not in html
    request = QuotaRequest.objects.get()
    assert f"Request #{request.pk} filed" in html
    assert "Withdraw" in html


def test_a_bad_request_comes_back_with_the_errors_by_the_fields(client, cast, quotas):
    client.force_login(cast.bob)
    response = client.post("/quotas/requests/", {"team": "nlp", "gpu_class": "H100-80GB", "justification": ""}, **HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "This field is required." in html  # justification
    assert not QuotaRequest.objects.exists()
    plain = client.post(
        "/quotas/requests/", {"team": "nlp", "gpu_class": "H100-80GB", "limit": "4", "justification": "x"}
    )
    assert plain.status_code == 400
    assert "already has 2 guaranteed and a limit of 4" in plain.content.decode()


def test_members_and_outsiders_cannot_file(client, cast, quotas):
    client.force_login(cast.carol)
    data = {"team": "nlp", "gpu_class": "H100-80GB", "limit": "8", "justification": "x"}
    assert client.post("/quotas/requests/", data).status_code == 403
    client.force_login(cast.alice)
    assert client.post("/quotas/requests/", data).status_code == 404


def test_withdrawing_from_the_overview(client, cast, quotas):
    request = file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, justification="x")
    client.force_login(cast.bob)
    response = client.post(f"/quotas/requests/{request.pk}/withdraw/")
    assert response.status_code == 302
    assert QuotaRequest.objects.get(pk=request.pk).state == "withdrawn"
    client.force_login(cast.alice)
    assert client.post(f"/quotas/requests/{request.pk}/withdraw/").status_code == 404


# -- /approvals/ -----------------------------------------------------------------------------------


@pytest.fixture
def pending(cast, quotas):
    request = file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, justification="Fine-tuning")
    # A real workload waits for the exception: approving it moves the workload (jobs listens).
    waiting = Workload.objects.create(
        team=cast.vision,
        created_by=cast.alice,
        kind="training",
        name="waiting",
        framework="torch",
        offering=Offering.objects.get(slug="h100-80gb"),
        replicas=3,
        image="nvcr.io/nvidia/pytorch:24.10-py3",
        state="pending_approval",
    )
    exception = QuotaException.objects.create(
        team=cast.vision,
        workload_id=waiting.pk,
        gpu_class="H100-80GB",
        amount=Decimal(3),
        requested_by=cast.alice,
        reason="Deadline",
    )
    return request, exception


def test_the_console_is_for_platform_admins_only(client, cast, pending):
    for user in (cast.alice, cast.bob, cast.carol):
        client.force_login(user)
        assert client.get("/approvals/").status_code == 403
        assert client.post("/approvals/decide/", {"request": pending[0].pk, "decision": "approve"}).status_code == 403
        assert client.get(f"/approvals/requests/{pending[0].pk}/preview/").status_code == 403


def test_the_console_lists_requests_and_exceptions_with_usage_and_history(client, cast, pending):
    set_quota(cast.nlp, "H100-80GB", 2, 4, cast.admin, "earlier")  # no change: no history
    set_quota(cast.nlp, "H100-80GB", 1, 4, cast.admin, "earlier decision")
    client.force_login(cast.admin)
    response = client.get("/approvals/")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'name="request" value="{pending[0].pk}"' in html
    assert f'name="exception" value="{pending[1].pk}"' in html
    assert "Fine-tuning" in html and "Deadline" in html
    assert "earlier decision" in html  # nlp's recent history
    assert 'hx-trigger="toggle once"' in html  # the cluster preview loads when opened
    assert_csp_clean(response)


def test_the_console_takes_a_fixed_number_of_queries(client, cast, pending, django_assert_max_num_queries):
    client.force_login(cast.admin)
    client.get("/approvals/")
    # 15: with one for the workloads behind the exceptions and one for the cluster's offerings (fit warnings).
    with django_assert_max_num_queries(15):
        client.get("/approvals/")
    for i in range(5):  # more pending items, same number of queries
        QuotaException.objects.create(
            team=cast.nlp, workload_id=9000 + i, gpu_class="H100-80GB", amount=1, requested_by=cast.carol
        )
    with django_assert_max_num_queries(15):
        client.get("/approvals/")


def test_approving_several_at_once_with_one_comment(client, cast, pending):
    request, exception = pending
    client.force_login(cast.admin)
    response = client.post(
        "/approvals/decide/",
        {"request": [request.pk], "exception": [exception.pk], "comment": "Approved for Q3", "decision": "approve"},
        **HTMX,
    )
    html = response.content.decode()
    assert response.status_code == 200 and 'id="pending"' in html and "<html" not in html
    assert "Decided: request #" in html
    assert "Nothing is waiting for a decision." in html
    assert Quota.objects.get(team=cast.nlp).limit == 8
    assert QuotaException.objects.get(pk=exception.pk).decision == "approved"
    assert {n.user.username for n in Notice.objects.all()} == {"alice", "bob"}
    assert {e.reason for e in AuditEntry.objects.filter(action__in=["request.approved", "exception.approved"])} == {
        f"Quota request #{request.pk}: Approved for Q3",
        "Approved for Q3",
    }


def test_denying_without_htmx_redirects_with_messages(client, cast, pending):
    request, _ = pending
    client.force_login(cast.admin)
    response = client.post("/approvals/decide/", {"request": [request.pk], "decision": "deny", "comment": "no"})
    assert response.status_code == 302
    assert QuotaRequest.objects.get(pk=request.pk).state == "denied"
    nothing = client.post("/approvals/decide/", {"decision": "deny"}, follow=True)
    assert "Tick at least one request or exception." in nothing.content.decode()


def test_the_console_refuses_an_admins_own_request_and_says_why(client, cast, pending):
    from portal.models import Membership

    Membership.objects.create(user=cast.admin, team=cast.nlp, role=Membership.TEAM_ADMIN)
    own = file_request(cast.admin, cast.nlp, gpu_class="L4", limit=2, justification="mine")
    client.force_login(cast.admin)
    html = client.post("/approvals/decide/", {"request": [own.pk], "decision": "approve"}, **HTMX).content.decode()
    assert "another platform admin must decide it" in html
    assert QuotaRequest.objects.get(pk=own.pk).state == "pending"


def test_the_preview_is_a_fragment_for_htmx_and_a_page_otherwise(client, cast, pending, volcano_builder):
    request, exception = pending
    client.force_login(cast.admin)
    fragment = client.get(f"/approvals/requests/{request.pk}/preview/", **HTMX).content.decode()
    assert "<html" not in fragment
    assert "-  hard: {requests.nvidia.com/gpu: &#x27;4&#x27;}" in fragment
    assert "+  hard: {requests.nvidia.com/gpu: &#x27;8&#x27;}" in fragment
    page = client.get(f"/approvals/exceptions/{exception.pk}/preview/")
    assert page.status_code == 200 and "<html" in page.content.decode()
    assert client.get("/approvals/requests/999999/preview/").status_code == 404


# -- /audit/ ---------------------------------------------------------------------------------------


@pytest.fixture
def changes(cast, quotas):
    set_quota(cast.vision, "H100-80GB", 4, 10, cast.admin, '=HYPERLINK("x") vision grows')
    set_quota(cast.nlp, "H100-80GB", 2, 6, cast.admin, "nlp grows")


def test_the_audit_log_is_for_team_admins_and_platform_admins(client, cast, changes):
    for user in (cast.alice, cast.carol):
        client.force_login(user)
        assert client.get("/audit/").status_code == 403
        assert client.get("/audit/export.csv").status_code == 403
    client.force_login(cast.bob)
    html = client.get("/audit/").content.decode()
    assert "nlp grows" in html and "vision grows" not in html
    client.force_login(cast.admin)
    response = client.get("/audit/?team=vision")
    assert "vision grows" in response.content.decode() and "nlp grows" not in response.content.decode()
    assert_csp_clean(response)


def test_the_csv_export_has_one_row_per_entry_and_defuses_formulas(client, cast, changes):
    client.force_login(cast.admin)
    response = client.get("/audit/export.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="quota-audit-')
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == ["at", "actor", "team", "action", "gpu_class", "before", "after", "reason"] + [
        "request",
        "exception",
    ]
    by_team = {row[2]: row for row in rows[1:]}
    assert set(by_team) == {"vision", "nlp"}
    assert by_team["nlp"][1:7] == [
        "admin",
        "nlp",
        "quota.changed",
        "H100-80GB",
        "guaranteed=2 limit=4 used=0 overage=0 count_mig_slices=True",
        "guaranteed=2 limit=6 used=0 overage=0 count_mig_slices=True",
    ]
    assert by_team["vision"][7].startswith("'=HYPERLINK")
    client.force_login(cast.bob)
    rows = list(csv.reader(io.StringIO(b"".join(client.get("/audit/export.csv").streaming_content).decode())))
    assert [row[2] for row in rows[1:]] == ["nlp"]


def test_the_quota_pages_are_in_the_navigation(client, cast, quotas):
    client.force_login(cast.admin)
    html = client.get("/quotas/").content.decode()
    assert 'href="/quotas/"' in html and 'href="/approvals/"' in html
    client.force_login(cast.alice)
    assert 'href="/approvals/"' not in client.get("/quotas/").content.decode()


def test_a_platform_admin_sets_a_quota_from_the_console(client, cast, quotas):
    data = {"team": "vision", "gpu_class": "H100-80GB", "guaranteed": "2", "limit": "4", "reason": "Budget cut"}
    client.force_login(cast.bob)
    assert client.post("/approvals/set-quota/", data).status_code == 403
    client.force_login(cast.admin)
    response = client.post("/approvals/set-quota/", data, follow=True)
    html = response.content.decode()
    assert "vision: H100-80GB set to 2 guaranteed, limit 4." in html
    assert "above the new limit: running work goes on" in html
    quota = Quota.objects.get(team=cast.vision, gpu_class="H100-80GB")
    assert (quota.limit, quota.overage) == (4, 2)
    bad = client.post("/approvals/set-quota/", {**data, "guaranteed": "5", "reason": ""})
    assert bad.status_code == 400
    assert "This field is required." in bad.content.decode()


def test_the_quota_bars_fragment_shows_one_visible_team_and_hides_others(client, cast, quotas):
    client.force_login(cast.alice)
    html = client.get("/quotas/bars/?team=vision").content.decode()
    assert "Quota of vision" in html and "H100-80GB" in html and "<meter" in html
    assert client.get("/quotas/bars/?team=nlp").status_code == 404
    assert "/quotas/bars/?team=vision" in client.get("/").content.decode()  # the dashboard loads it
