"""Deciding quota requests and exceptions: effects, notices, audit, and who may decide."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import lifecycle
from jobs.models import State, Workload
from portal.models import Notice
from quotas import approvals
from quotas.admission import QuotaRefused
from quotas.models import AuditEntry, Decision, Quota, QuotaException, QuotaRequest, RequestState
from quotas.requests import file_request, set_quota
from quotas.signals import exception_decided
from tests.quotas.conftest import make_quota, notebook

pytestmark = pytest.mark.django_db


@pytest.fixture
def nlp_h100(cast, catalog):
    """nlp: 2 H100s guaranteed, 4 at most."""
    return make_quota(cast.nlp, "H100-80GB", 2, 4)


def ask(cast, **fields):
    fields = {"gpu_class": "H100-80GB", "limit": 8, "justification": "Fine-tuning", **fields}
    return file_request(cast.bob, cast.nlp, **fields)


def quota(team, gpu_class="H100-80GB") -> Quota:
    return Quota.objects.get(team=team, gpu_class=gpu_class)


# -- quota requests ----------------------------------------------------------------------------


def test_approving_a_request_applies_it_and_tells_the_requester(
    cast, nlp_h100, django_capture_on_commit_callbacks, mailoutbox
):
    request = ask(cast, guaranteed=4)
    with django_capture_on_commit_callbacks(execute=True):
        approvals.decide_request(cast.admin, request.pk, approve=True, comment="Go ahead")
    request.refresh_from_db()
    assert (request.state, request.decided_by, request.comment) == ("approved", cast.admin, "Go ahead")
    assert (quota(cast.nlp).guaranteed, quota(cast.nlp).limit) == (4, 8)
    entry = AuditEntry.objects.get(action="request.approved")
    assert (entry.before["limit"], entry.after["limit"], entry.request) == ("4", "8", request)
    notice = Notice.objects.get(user=cast.bob)
    assert notice.subject == "Approved: nlp gets 8 H100-80GB"
    assert "Go ahead" in notice.body and notice.link == "/quotas/"
    assert [m.to for m in mailoutbox] == [["bob@example.com"]]


def test_denying_a_request_changes_nothing_but_tells_the_requester(cast, nlp_h100):
    request = ask(cast)
    approvals.decide_request(cast.admin, request.pk, approve=False, comment="Not this quarter")
    assert quota(cast.nlp).limit == 4
    assert QuotaRequest.objects.get(pk=request.pk).state == RequestState.DENIED
    assert Notice.objects.get(user=cast.bob).subject == "Denied: more H100-80GB for nlp"
    assert AuditEntry.objects.get(action="request.denied").reason == "Not this quarter"


def test_a_decided_request_cannot_be_decided_again(cast, nlp_h100):
    request = ask(cast)
    approvals.decide_request(cast.admin, request.pk, approve=False)
    with pytest.raises(approvals.AlreadyDecided, match="already denied"):
        approvals.decide_request(cast.admin, request.pk, approve=True)


def test_only_platform_admins_decide(cast, nlp_h100):
    request = ask(cast)
    for user in (cast.alice, cast.bob, cast.carol):
        with pytest.raises(PermissionDenied):
            approvals.decide_request(user, request.pk, approve=True)


def test_the_requester_can_never_approve_their_own_request(cast, nlp_h100):
    # A platform admin who is also nlp's team admin files a request...
    from portal.models import Membership

    Membership.objects.create(user=cast.admin, team=cast.nlp, role=Membership.TEAM_ADMIN)
    request = file_request(cast.admin, cast.nlp, gpu_class="H100-80GB", limit=16, justification="mine")
    with pytest.raises(approvals.SelfDecision, match="another platform admin must decide it"):
        approvals.decide_request(cast.admin, request.pk, approve=True)
    assert quota(cast.nlp).limit == 4
    # ... and the database refuses it whatever the application does.
    with pytest.raises(IntegrityError, match="quota_request_not_decided_by_requester"), transaction.atomic():
        QuotaRequest.objects.filter(pk=request.pk).update(decided_by=cast.admin, state="approved")


def test_the_requester_can_never_decide_their_own_exception(cast, catalog):
    exception = QuotaException.objects.create(
        team=cast.vision, workload_id=999, gpu_class="H100-80GB", amount=1, requested_by=cast.admin
    )
    with pytest.raises(approvals.SelfDecision):
        approvals.decide_exception(cast.admin, exception.pk, approve=True)
    with pytest.raises(IntegrityError, match="exception_not_decided_by_requester"), transaction.atomic():
        QuotaException.objects.filter(pk=exception.pk).update(decided_by=cast.admin)


def test_approving_a_request_that_no_longer_makes_sense_is_refused(cast, nlp_h100):
    request = ask(cast, limit=None, guaranteed=4)
    set_quota(cast.nlp, "H100-80GB", 1, 3, cast.admin, "cut meanwhile")
    with pytest.raises(approvals.DecisionError, match="guaranteed 4 above the limit 3"):
        approvals.decide_request(cast.admin, request.pk, approve=True)
    assert QuotaRequest.objects.get(pk=request.pk).state == RequestState.PENDING


def test_a_temporary_grant_records_its_end_and_what_to_restore(cast, nlp_h100):
    until = timezone.localdate() + timedelta(days=7)
    request = ask(cast, until=until)
    approvals.decide_request(cast.admin, request.pk, approve=True)
    request.refresh_from_db()
    assert request.expires_at == timezone.make_aware(
        timezone.datetime.combine(until + timedelta(days=1), timezone.datetime.min.time())
    )
    assert (request.restore_guaranteed, request.restore_limit) == (2, 4)
    assert request.is_active_grant


def test_a_grant_on_top_of_a_running_grant_inherits_its_restore_point(cast, nlp_h100):
    first = ask(cast, limit=6, until=timezone.localdate() + timedelta(days=7))
    approvals.decide_request(cast.admin, first.pk, approve=True)
    second = ask(cast, limit=10, until=timezone.localdate() + timedelta(days=14))
    approvals.decide_request(cast.admin, second.pk, approve=True)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, first.ended_at is not None) == ("expired", True)
    assert "superseded" in first.end_note
    assert (second.restore_guaranteed, second.restore_limit) == (2, 4)  # the permanent values
    assert quota(cast.nlp).limit == 10


def test_a_permanent_change_during_a_grant_ends_the_grant_without_restoring(cast, nlp_h100):
    grant = ask(cast, limit=6, until=timezone.localdate() + timedelta(days=7))
    approvals.decide_request(cast.admin, grant.pk, approve=True)
    set_quota(cast.nlp, "H100-80GB", 2, 12, cast.admin, "New budget")
    grant.refresh_from_db()
    assert grant.state == RequestState.EXPIRED and grant.ended_at is not None
    assert AuditEntry.objects.filter(action="grant.expired", request=grant).exists()


# -- exceptions ----------------------------------------------------------------------------


@pytest.fixture
def waiting_workload(cast, catalog, vision_h100):
    """vision uses all 8 H100s; alice asks for one more with an exception."""
    Quota.objects.filter(pk=vision_h100.pk).update(used=8)
    workload = lifecycle.request_workload(
        cast.alice, cast.vision, notebook(), wants_exception=True, reason="Deadline on Friday"
    )
    assert workload.state == State.PENDING_APPROVAL
    return workload


def test_approving_an_exception_charges_the_quota_above_the_limit_and_queues_the_workload(
    cast, waiting_workload, vision_h100
):
    exception = QuotaException.objects.get(workload_id=waiting_workload.pk)
    approvals.decide_exception(cast.admin, exception.pk, approve=True, comment="Once")
    q = quota(cast.vision)
    assert (q.used, q.limit, q.overage) == (9, 8, 1)
    workload = Workload.objects.get(pk=waiting_workload.pk)
    assert (workload.state, workload.admission, workload.quota_charge) == (State.QUEUED, "exception", 1)
    assert QuotaException.objects.get(pk=exception.pk).decision == Decision.APPROVED
    entry = AuditEntry.objects.get(action="exception.approved")
    assert (entry.before["overage"], entry.after["overage"], entry.exception) == ("0", "1", exception)
    assert Notice.objects.get(user=cast.alice).link == f"/workloads/{waiting_workload.pk}/"
    # New work is still refused: the overage belongs to the approved workload only.
    with pytest.raises(QuotaRefused), transaction.atomic():
        from quotas.admission import admit

        admit(cast.vision, waiting_workload.offering, 1)


def test_denying_an_exception_rejects_the_workload(cast, waiting_workload):
    exception = QuotaException.objects.get(workload_id=waiting_workload.pk)
    approvals.decide_exception(cast.admin, exception.pk, approve=False, comment="No")
    assert Workload.objects.get(pk=waiting_workload.pk).state == State.REJECTED
    assert quota(cast.vision).used == 8
    notice = Notice.objects.get(user=cast.alice)
    assert notice.subject == f"Denied: workload {waiting_workload.pk} over quota (1 H100-80GB GPU)"
    assert notice.body == "admin denied the exception; the workload will not run.\n\nComment: No"


def test_an_exception_whose_workload_is_gone_is_withdrawn_and_charges_nothing(cast, catalog, vision_h100):
    exception = QuotaException.objects.create(
        team=cast.vision, workload_id=424242, gpu_class="H100-80GB", amount=2, requested_by=cast.alice
    )

    def gone(sender, **kwargs):
        return False  # what jobs answers when no workload waits

    exception_decided.connect(gone)
    try:
        result = approvals.decide_exception(cast.admin, exception.pk, approve=True)
    finally:
        exception_decided.disconnect(gone)
    assert result.decision == Decision.WITHDRAWN
    assert quota(cast.vision).used == 0
    assert AuditEntry.objects.filter(action="exception.withdrawn").count() == 1


def test_jobs_withdraws_the_exception_of_a_workload_it_ends(cast, waiting_workload):
    assert approvals.withdraw_exception(waiting_workload.pk)
    assert QuotaException.objects.get(workload_id=waiting_workload.pk).decision == Decision.WITHDRAWN
    assert not approvals.withdraw_exception(waiting_workload.pk)


def test_several_decisions_at_once_report_the_ones_that_cannot_be_made(cast, nlp_h100, waiting_workload):
    from portal.models import Membership

    Membership.objects.create(user=cast.admin, team=cast.vision, role=Membership.TEAM_ADMIN)
    theirs = ask(cast)
    own = file_request(cast.admin, cast.vision, gpu_class="H100-80GB", limit=12, justification="mine")
    exception = QuotaException.objects.get(workload_id=waiting_workload.pk)
    result = approvals.decide_many(
        cast.admin, request_ids=[theirs.pk, own.pk, 9999], exception_ids=[exception.pk], approve=True, comment="ok"
    )
    assert result.decided == [
        f"request #{theirs.pk} (nlp, H100-80GB)",
        f"exception for workload {waiting_workload.pk} (vision)",
    ]
    assert result.errors == [
        f"You asked for quota request #{own.pk} yourself; another platform admin must decide it.",
        "Quota request #9999 does not exist.",
    ]
    assert QuotaRequest.objects.get(pk=own.pk).state == RequestState.PENDING
    assert quota(cast.nlp).limit == 8
