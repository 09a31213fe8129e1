"""Quota rows as people read them, and the re-count that corrects drift."""

from decimal import Decimal

import pytest

from quotas.models import AuditEntry, Quota, QuotaDrift, QuotaException
from quotas.signals import quota_changed
from quotas.usage import quota_rows, recount, team_quota
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


def test_rows_show_used_guaranteed_limit_pending_and_free(cast, catalog, vision_h100):
    Quota.objects.filter(pk=vision_h100.pk).update(used=6)
    QuotaException.objects.create(
        team=cast.vision, workload_id=1, gpu_class="H100-80GB", amount=Decimal(3), requested_by=cast.alice
    )
    [row] = team_quota(cast.vision)
    assert (row.gpu_class, row.used, row.guaranteed, row.limit, row.pending, row.free) == ("H100-80GB", 6, 4, 8, 3, 2)
    assert (row.state, row.scale, row.with_pending) == ("preemptible", 9, 9)


def test_rows_of_many_teams_take_a_fixed_number_of_queries(cast, catalog, django_assert_num_queries):
    for team in (cast.vision, cast.nlp):
        make_quota(team, "H100-80GB", 1, 2)
        make_quota(team, "L4", 1, 2)
    with django_assert_num_queries(4):
        rows = quota_rows([cast.vision, cast.nlp])
    assert [r.gpu_class for r in rows[cast.nlp.pk]] == ["H100-80GB", "L4"]


def test_the_recount_corrects_drift_and_records_it(cast, catalog, vision_h100):
    make_quota(cast.nlp, "L4", 1, 2, used=Decimal("0.5"))
    Quota.objects.filter(pk=vision_h100.pk).update(used=5)
    drifts = recount({(cast.vision.pk, "H100-80GB"): Decimal(3), (cast.nlp.pk, "L4"): Decimal("0.5")})
    assert [(d.team.slug, d.gpu_class, d.recorded, d.expected) for d in drifts] == [("vision", "H100-80GB", 5, 3)]
    assert Quota.objects.get(pk=vision_h100.pk).used == 3
    entry = AuditEntry.objects.get(action="usage.corrected")
    assert (entry.actor, entry.before["used"], entry.after["used"]) == (None, "5", "3")


def test_usage_missing_from_the_table_is_found_and_kept_valid_with_overage(cast, catalog, vision_h100):
    """Active work above the limit (the counter lost an admission): the row stays within its constraint."""
    changed = []
    quota_changed.connect(receiver := lambda sender, team, **kw: changed.append(team.slug))
    try:
        recount({(cast.vision.pk, "H100-80GB"): Decimal(10), (cast.nlp.pk, "L4"): Decimal(1)})
    finally:
        quota_changed.disconnect(receiver)
    vision = Quota.objects.get(pk=vision_h100.pk)
    assert (vision.used, vision.overage) == (10, 2)
    nlp = Quota.objects.get(team=cast.nlp, gpu_class="L4")  # no row before: limit 0, all of it overage
    assert (nlp.used, nlp.limit, nlp.overage) == (1, 0, 1)
    assert QuotaDrift.objects.count() == 2
    assert sorted(changed) == ["nlp", "vision"]


def test_usage_with_no_active_work_left_goes_to_zero(cast, catalog, vision_h100):
    Quota.objects.filter(pk=vision_h100.pk).update(used=2)
    recount({})
    assert Quota.objects.get(pk=vision_h100.pk).used == 0


def test_the_totals_callable_runs_while_the_quota_rows_are_locked(cast, catalog, vision_h100):
    from django.db import connection

    seen = {}

    def totals():
        seen["in_transaction"] = connection.in_atomic_block
        return {(cast.vision.pk, "H100-80GB"): Decimal(0)}

    assert recount(totals) == []
    assert seen == {"in_transaction": True}


def test_a_recount_that_agrees_records_nothing(cast, catalog, vision_h100):
    assert recount({(cast.vision.pk, "H100-80GB"): Decimal(0)}) == []
    assert not AuditEntry.objects.exists()
