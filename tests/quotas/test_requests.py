"""Changing a quota through set_quota, and filing quota requests."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from quotas.models import AuditEntry, Quota, QuotaRequest, RequestState
from quotas.requests import QuotaInputError, file_request, set_quota, withdraw_request
from quotas.signals import quota_changed
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def announced():
    teams = []

    def receiver(sender, team, **kwargs):
        teams.append(team.slug)

    quota_changed.connect(receiver)
    yield teams
    quota_changed.disconnect(receiver)


def test_set_quota_creates_the_row_audits_and_announces_the_change(cast, catalog, announced):
    change = set_quota(cast.nlp, "H100-80GB", Decimal(2), Decimal(6), cast.admin, "New team")
    assert (change.quota.guaranteed, change.quota.limit) == (2, 6)
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.team, entry.action, entry.gpu_class) == (
        cast.admin,
        cast.nlp,
        "quota.changed",
        "H100-80GB",
    )
    assert (entry.before["limit"], entry.after["limit"], entry.after["guaranteed"]) == ("0", "6", "2")
    assert entry.reason == "New team"
    assert announced == ["nlp"]


def test_setting_the_same_values_again_writes_nothing(cast, catalog, vision_h100, announced):
    set_quota(cast.vision, "H100-80GB", 4, 8, cast.admin, "No change")
    assert not AuditEntry.objects.exists()
    assert announced == []


@pytest.mark.parametrize(
    ("guaranteed", "limit", "reason", "field"),
    [
        (9, 8, "x", "guaranteed"),
        (-1, 8, "x", "guaranteed"),
        (1, "lots", "x", "limit"),
        (1, "1.23456", "x", "limit"),
        (1, 2, "  ", "reason"),
    ],
)
def test_set_quota_refuses_bad_values_naming_the_field(cast, catalog, guaranteed, limit, reason, field):
    with pytest.raises(QuotaInputError) as refused:
        set_quota(cast.vision, "H100-80GB", guaranteed, limit, cast.admin, reason)
    assert field in refused.value.errors
    assert not Quota.objects.exists()


def test_only_platform_admins_set_quotas(cast, catalog):
    with pytest.raises(PermissionDenied):
        set_quota(cast.nlp, "H100-80GB", 1, 2, cast.bob, "I am the team admin")


def test_raising_the_limit_above_usage_clears_the_overage(cast, catalog, vision_h100):
    Quota.objects.filter(pk=vision_h100.pk).update(used=8)
    set_quota(cast.vision, "H100-80GB", 2, 6, cast.admin, "cut")
    assert Quota.objects.get(pk=vision_h100.pk).overage == 2
    set_quota(cast.vision, "H100-80GB", 2, 10, cast.admin, "restored")
    assert Quota.objects.get(pk=vision_h100.pk).overage == 0


def test_a_team_admin_files_a_request_and_it_is_audited(cast, catalog):
    until = timezone.localdate() + timedelta(days=30)
    request = file_request(
        cast.bob, cast.nlp, gpu_class="H100-80GB", limit="4", until=until, justification="Fine-tune the 70B model"
    )
    assert (request.state, request.guaranteed, request.limit, request.until) == ("pending", None, 4, until)
    entry = AuditEntry.objects.get(action="request.filed")
    assert entry.after == {"guaranteed": "0", "limit": "4", "until": until.isoformat()}


def test_members_cannot_file_requests(cast, catalog):
    with pytest.raises(PermissionDenied, match="Only team admins of vision"):
        file_request(cast.alice, cast.vision, gpu_class="H100-80GB", limit=4, justification="please")


def test_a_request_names_each_bad_field(cast, catalog):
    with pytest.raises(QuotaInputError) as refused:
        file_request(
            cast.bob,
            cast.nlp,
            gpu_class="TPU-v5",
            guaranteed="-1",
            until=timezone.localdate(),
            justification="",
        )
    assert set(refused.value.errors) == {"gpu_class", "guaranteed", "until", "justification"}
    assert "H100-80GB" in refused.value.errors["gpu_class"][0]  # it lists what is on offer


def test_a_request_must_ask_for_something_new_and_consistent(cast, catalog):
    make_quota(cast.nlp, "H100-80GB", 2, 4)
    with pytest.raises(QuotaInputError) as same:
        file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=4, justification="same")
    assert "already has 2 guaranteed and a limit of 4" in same.value.errors["non_field_errors"][0]
    with pytest.raises(QuotaInputError) as above:
        file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", guaranteed=6, justification="g above limit")
    assert "must not exceed the limit (4)" in above.value.errors["guaranteed"][0]


def test_mig_profile_classes_can_be_requested(cast, catalog):
    request = file_request(cast.bob, cast.nlp, gpu_class="A100-80GB/1g.10gb", limit=7, justification="slices")
    assert request.gpu_class == "A100-80GB/1g.10gb"


def test_one_pending_request_per_class_in_the_function_and_the_database(cast, catalog):
    file_request(cast.bob, cast.nlp, gpu_class="L4", limit=2, justification="a")
    with pytest.raises(QuotaInputError, match="already has a pending request for L4"):
        file_request(cast.bob, cast.nlp, gpu_class="L4", limit=3, justification="b")
    with pytest.raises(IntegrityError, match="one_pending_request_per_class"), transaction.atomic():
        QuotaRequest.objects.create(team=cast.nlp, gpu_class="L4", limit=3, justification="b", requested_by=cast.bob)


def test_the_requester_withdraws_a_pending_request_once(cast, catalog):
    request = file_request(cast.bob, cast.nlp, gpu_class="L4", limit=2, justification="a")
    with pytest.raises(PermissionDenied):
        withdraw_request(cast.carol, request)  # a member who did not file it
    assert withdraw_request(cast.bob, request)
    assert request.state == RequestState.WITHDRAWN
    assert not withdraw_request(cast.bob, request)
    assert AuditEntry.objects.filter(action="request.withdrawn").count() == 1
