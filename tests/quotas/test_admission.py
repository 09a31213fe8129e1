"""Admission at each boundary, MIG slices counted toward a model quota, limits lowered under usage."""

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from quotas.admission import PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE, QuotaRefused, admit, release
from quotas.models import Quota
from quotas.requests import set_quota
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


def admit_now(team, offering, units, **kwargs):
    with transaction.atomic():
        return admit(team, offering, units, **kwargs)


def used(team, gpu_class="H100-80GB") -> Decimal:
    return Quota.objects.get(team=team, gpu_class=gpu_class).used


def test_a_request_exactly_at_the_guarantee_runs_guaranteed(cast, catalog, vision_h100):
    decision = admit_now(cast.vision, catalog["h100-80gb"], 4)
    assert (decision.admission, decision.priority_class) == ("guaranteed", PRIORITY_GUARANTEED)
    assert used(cast.vision) == 4


def test_one_gpu_above_the_guarantee_runs_preemptible(cast, catalog, vision_h100):
    admit_now(cast.vision, catalog["h100-80gb"], 4)
    decision = admit_now(cast.vision, catalog["h100-80gb"], 1)
    assert (decision.admission, decision.priority_class) == ("preemptible", PRIORITY_PREEMPTIBLE)


def test_a_request_exactly_at_the_limit_is_admitted(cast, catalog, vision_h100):
    admit_now(cast.vision, catalog["h100-80gb"], 6)
    decision = admit_now(cast.vision, catalog["h100-80gb"], 2)
    assert decision.admission == "preemptible"
    assert used(cast.vision) == 8


def test_one_gpu_over_the_limit_is_refused_with_the_numbers(cast, catalog, vision_h100):
    admit_now(cast.vision, catalog["h100-80gb"], 6)
    with pytest.raises(QuotaRefused) as refused:
        admit_now(cast.vision, catalog["h100-80gb"], 3)
    assert "vision has 6 of 8 H100-80GB GPUs in use; this request needs 3 H100-80GB GPUs" in str(refused.value)
    assert used(cast.vision) == 6


def test_over_the_limit_with_an_exception_asked_for_waits_for_approval_without_charging(cast, catalog, vision_h100):
    admit_now(cast.vision, catalog["h100-80gb"], 8)
    decision = admit_now(cast.vision, catalog["h100-80gb"], 1, wants_exception=True)
    assert decision.pending_approval and decision.admission == ""
    assert decision.charge.amount == 1
    assert "waiting for approval" in decision.message
    assert used(cast.vision) == 8


def test_a_team_without_a_quota_for_the_class_is_refused_and_told_so(cast, catalog):
    with pytest.raises(QuotaRefused, match="vision has no quota for H100-80GB; this request needs 1 H100-80GB GPU"):
        admit_now(cast.vision, catalog["h100-80gb"], 1)


@pytest.mark.django_db(transaction=True)
def test_admission_outside_a_transaction_is_a_programming_error(cast, catalog, vision_h100):
    with pytest.raises(RuntimeError, match="inside the transaction"):
        admit(cast.vision, catalog["h100-80gb"], 1)


def test_seven_mig_slices_fit_in_one_a100_and_the_eighth_does_not(cast, catalog):
    make_quota(cast.vision, "A100-80GB", 1, 1)
    slice_ = catalog["a100-80gb-1g.10gb"]
    for _ in range(7):
        decision = admit_now(cast.vision, slice_, 1)
        assert decision.charge.gpu_class == "A100-80GB"
        assert decision.charge.amount == Decimal("0.142857")
    assert used(cast.vision, "A100-80GB") == Decimal("0.999999")
    with pytest.raises(
        QuotaRefused,
        match=r"vision has 1 of 1 A100-80GB GPU in use; "
        r"this request needs 1 slice of A100-80GB \(1g.10gb\) = 0.14 A100-80GB GPU",
    ):
        admit_now(cast.vision, slice_, 1)


def test_a_quota_of_the_slices_own_profile_counts_slices_not_gpus(cast, catalog):
    make_quota(cast.vision, "A100-80GB", 1, 1)
    make_quota(cast.vision, "A100-80GB/1g.10gb", 2, 3)
    decision = admit_now(cast.vision, catalog["a100-80gb-1g.10gb"], 3)
    assert (decision.charge.gpu_class, decision.charge.amount) == ("A100-80GB/1g.10gb", 3)
    assert used(cast.vision, "A100-80GB") == 0


def test_a_model_quota_that_does_not_count_slices_admits_none(cast, catalog):
    make_quota(cast.vision, "A100-80GB", 1, 1, count_mig_slices=False)
    with pytest.raises(QuotaRefused, match="no quota for A100-80GB"):
        admit_now(cast.vision, catalog["a100-80gb-1g.10gb"], 1)


def test_lowering_a_limit_below_usage_keeps_running_work_and_refuses_new_work(cast, catalog, vision_h100):
    admit_now(cast.vision, catalog["h100-80gb"], 6)
    change = set_quota(cast.vision, "H100-80GB", 2, 4, cast.admin, "Budget cut")
    assert (change.quota.used, change.quota.limit, change.quota.overage) == (6, 4, 2)
    with pytest.raises(
        QuotaRefused, match="vision has 6 of 4 H100-80GB GPUs in use; this request needs 1 H100-80GB GPU"
    ):
        admit_now(cast.vision, catalog["h100-80gb"], 1)
    # The running work finishes; overage shrinks with it, and new work fits again once under the limit.
    release(cast.vision, "H100-80GB", Decimal(3))
    quota = Quota.objects.get(pk=change.quota.pk)
    assert (quota.used, quota.overage) == (3, 0)
    assert admit_now(cast.vision, catalog["h100-80gb"], 1).admission == "preemptible"


def test_the_database_refuses_usage_above_limit_plus_overage(cast, catalog, vision_h100):
    with pytest.raises(IntegrityError, match="used_within_limit"), transaction.atomic():
        Quota.objects.filter(pk=vision_h100.pk).update(used=9)
