"""Temporary grants end by themselves; the team's admins are warned once, a day before."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from portal.models import Notice
from quotas import approvals, tasks
from quotas.expiry import expire_grants, warn_expiring
from quotas.models import AuditEntry, Quota, QuotaRequest, RequestState
from quotas.requests import file_request
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock():
    with time_machine.travel(datetime(2026, 3, 2, 9, 0, tzinfo=timezone.get_current_timezone()), tick=False) as t:
        yield t


@pytest.fixture
def grant(cast, catalog, clock):
    """nlp has 2/4 H100s and is granted a limit of 8 through 2026-03-10 (ends 2026-03-11 00:00)."""
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    request = file_request(
        cast.bob, cast.nlp, gpu_class="H100-80GB", limit=8, until=datetime(2026, 3, 10).date(), justification="Sprint"
    )
    approvals.decide_request(cast.admin, request.pk, approve=True)
    Notice.objects.all().delete()
    request.refresh_from_db()
    assert request.expires_at == datetime(2026, 3, 11, tzinfo=timezone.get_current_timezone())
    return request


def nlp_h100() -> Quota:
    return Quota.objects.get(gpu_class="H100-80GB", team__slug="nlp")


def test_nothing_happens_before_the_last_day(grant, clock):
    clock.move_to(datetime(2026, 3, 9, 23, 59, tzinfo=timezone.get_current_timezone()))
    assert warn_expiring() == []
    assert expire_grants() == []
    assert nlp_h100().limit == 8


def test_the_team_admins_are_warned_once_a_day_before(cast, grant, clock):
    clock.move_to(datetime(2026, 3, 10, 0, 30, tzinfo=timezone.get_current_timezone()))
    assert warn_expiring() == [grant.pk]
    assert warn_expiring() == []  # once
    notice = Notice.objects.get(user=cast.bob)
    assert notice.subject == "nlp: the temporary H100-80GB grant ends 2026-03-11 00:00 UTC"
    assert "goes back to 4 H100-80GB" in notice.body
    assert QuotaRequest.objects.get(pk=grant.pk).expiry_warned_at is not None


def test_at_its_end_the_grant_restores_the_previous_values_once(cast, grant, clock):
    clock.move_to(datetime(2026, 3, 11, 0, 1, tzinfo=timezone.get_current_timezone()))
    assert tasks.expire_grants() == {"expired": [grant.pk]}
    q = nlp_h100()
    assert (q.guaranteed, q.limit) == (2, 4)
    grant.refresh_from_db()
    assert (grant.state, grant.ended_at) == (RequestState.EXPIRED, timezone.now())
    entry = AuditEntry.objects.get(action="grant.expired")
    assert (entry.actor, entry.before["limit"], entry.after["limit"]) == (None, "8", "4")
    assert Notice.objects.get(user=cast.bob).subject == "nlp: the temporary H100-80GB grant has ended"
    assert tasks.expire_grants() == {"expired": []}  # idempotent
    assert AuditEntry.objects.filter(action="grant.expired").count() == 1


def test_work_running_above_the_restored_limit_goes_on_as_overage(cast, grant, clock):
    Quota.objects.filter(team=cast.nlp, gpu_class="H100-80GB").update(used=Decimal(7))
    clock.move_to(datetime(2026, 3, 11, 0, 1, tzinfo=timezone.get_current_timezone()))
    expire_grants()
    q = nlp_h100()
    assert (q.used, q.limit, q.overage) == (7, 4, 3)


def test_a_grant_warned_late_is_still_warned_and_a_missed_expiry_still_ends(cast, grant, clock):
    # Beat was down for two days: the warning is pointless now, the expiry is not.
    clock.move_to(datetime(2026, 3, 12, 8, 0, tzinfo=timezone.get_current_timezone()))
    assert tasks.warn_expiring_grants() == {"warned": []}
    assert expire_grants() == [grant.pk]
    assert nlp_h100().limit == 4


def test_expiry_runs_the_quota_changed_signal_for_the_cluster(cast, grant, clock, monkeypatch):
    from quotas.signals import quota_changed

    seen = []
    quota_changed.connect(receiver := lambda sender, team, **kw: seen.append(team.slug))
    try:
        clock.move_to(datetime(2026, 3, 11, 0, 0, tzinfo=timezone.get_current_timezone()) + timedelta(seconds=1))
        expire_grants()
    finally:
        quota_changed.disconnect(receiver)
    assert seen == ["nlp"]
