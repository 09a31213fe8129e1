"""Django admin: a platform admin's quota edit goes through set_quota (audited, constraint kept)."""

from decimal import Decimal

import pytest

from quotas.models import AuditEntry, Quota
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


def test_lowering_a_limit_in_the_admin_keeps_running_work_as_overage_and_audits_it(client, cast, catalog):
    quota = make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(6))
    client.force_login(cast.admin)
    response = client.post(
        f"/admin/quotas/quota/{quota.pk}/change/",
        {"guaranteed": "2", "limit": "4", "count_mig_slices": "on", "reason": "Budget cut"},
        follow=True,
    )
    assert response.status_code == 200
    quota.refresh_from_db()
    assert (quota.guaranteed, quota.limit, quota.used, quota.overage) == (2, 4, 6, 2)
    entry = AuditEntry.objects.get()
    assert (entry.actor, entry.action, entry.reason, entry.after["overage"]) == (
        cast.admin,
        "quota.changed",
        "Budget cut",
        "2",
    )
    assert "new work is refused until usage is back under the limit" in response.content.decode()


def test_the_admin_form_shows_bad_values_next_to_the_fields(client, cast, catalog):
    quota = make_quota(cast.vision, "H100-80GB", 4, 8)
    client.force_login(cast.admin)
    response = client.post(
        f"/admin/quotas/quota/{quota.pk}/change/", {"guaranteed": "9", "limit": "8", "reason": "oops"}
    )
    assert response.status_code == 200  # the form again, with the error
    assert "must not exceed the limit (8)" in response.content.decode()
    assert Quota.objects.get(pk=quota.pk).guaranteed == 4
    assert not AuditEntry.objects.exists()


def test_adding_a_quota_in_the_admin_is_audited_and_usage_is_read_only(client, cast, catalog):
    client.force_login(cast.admin)
    response = client.post(
        "/admin/quotas/quota/add/",
        {"team": cast.nlp.pk, "gpu_class": "L4", "guaranteed": "1", "limit": "2", "reason": "New team", "used": "5"},
    )
    assert response.status_code == 302
    quota = Quota.objects.get(team=cast.nlp, gpu_class="L4")
    assert (quota.limit, quota.used) == (2, 0)
    assert AuditEntry.objects.get().reason == "New team"
    assert client.post(f"/admin/quotas/quota/{quota.pk}/delete/", {"post": "yes"}).status_code == 403
