"""Decided quota requests say Approved or Denied, by whom and when, wherever they appear.

bob: team admin of nlp (files requests). admin and root: platform admins (decide them).
"""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model

from quotas.approvals import decide_exception, decide_request
from quotas.expiry import expire_grants
from quotas.models import QuotaException, QuotaRequest
from quotas.requests import file_request, withdraw_request

pytestmark = pytest.mark.django_db

DECIDED_AT = datetime(2026, 12, 3, 10, 15, tzinfo=UTC)


def filed(cast, **extra):
    fields = {"gpu_class": "H100-80GB", "limit": 8, "justification": "Fine-tuning", **extra}
    return file_request(cast.bob, cast.nlp, **fields)


def decided(cast, approve: bool, **extra) -> QuotaRequest:
    with time_machine.travel(DECIDED_AT, tick=False):
        request = filed(cast, **extra)
        decide_request(cast.admin, request.pk, approve=approve, comment="ok" if approve else "not now")
    return QuotaRequest.objects.select_related("decided_by").get(pk=request.pk)


def test_an_approved_request_says_who_approved_it_and_when(cast, catalog):
    request = decided(cast, True)
    assert request.decision == "Approved"
    assert request.status == "Approved by admin on 2026-12-03 10:15 UTC"


def test_a_denied_request_says_who_denied_it_and_when(cast, catalog):
    request = decided(cast, False)
    assert request.decision == "Denied"
    assert request.status == "Denied by admin on 2026-12-03 10:15 UTC"


def test_a_temporary_grant_stays_approved_after_it_ends(cast, catalog):
    request = decided(cast, True, until=(DECIDED_AT + timedelta(days=2)).date())
    assert request.status == "Approved by admin on 2026-12-03 10:15 UTC; until 2026-12-06 00:00 UTC"
    with time_machine.travel(DECIDED_AT + timedelta(days=4), tick=False):
        expire_grants()
    request.refresh_from_db()
    assert request.state == "expired"
    assert request.decision == "Approved"
    assert request.status.startswith("Approved by admin on 2026-12-03 10:15 UTC; ended on 2026-12-07 10:15 UTC")


def test_pending_and_withdrawn_requests_say_so(cast, catalog):
    request = filed(cast)
    assert request.decision == "Pending"
    assert request.status == "Pending: waiting for a platform admin"
    withdraw_request(cast.bob, request)
    assert request.decision == "Withdrawn" and request.status.startswith("Withdrawn on ")


def test_the_overview_shows_the_decision_with_who_and_when(client, cast, catalog):
    decided(cast, False)
    client.force_login(cast.bob)
    html = client.get("/quotas/").content.decode()
    assert '<span class="badge decision-denied">Denied</span>' in html
    assert "Denied by admin" in html and "2026-12-03 10:15" in html and "not now" in html


def test_the_api_gives_the_decision_and_a_human_status(api, cast, catalog):
    request = decided(cast, True)
    api.force_authenticate(cast.bob)
    body = api.get(f"/api/v1/quota-requests/{request.pk}/").json()
    assert (body["state"], body["decision"]) == ("approved", "Approved")
    assert body["status"] == "Approved by admin on 2026-12-03 10:15 UTC"
    listed = api.get("/api/v1/quota-requests/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["status"] == body["status"]


def test_a_decided_exception_says_who_decided_it_and_when(api, cast, catalog):
    root = get_user_model().objects.create_user("root", "root@example.com", "x", is_staff=True)
    exception = QuotaException.objects.create(
        team=cast.vision, workload_id=424242, gpu_class="H100-80GB", amount=2, requested_by=root
    )
    assert exception.status == "Pending: waiting for a platform admin"
    with time_machine.travel(DECIDED_AT, tick=False):
        decide_exception(cast.admin, exception.pk, approve=False)
    api.force_authenticate(cast.alice)
    body = api.get(f"/api/v1/quota-exceptions/{exception.pk}/").json()
    assert body["status"] == "Denied by admin on 2026-12-03 10:15 UTC"
