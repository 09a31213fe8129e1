"""Monthly budgets: warnings at 80 % and 100 %, once each per month, and 'over budget' for admission."""

from __future__ import annotations

from decimal import Decimal

from portal.models import Notice
from tests.usage.conftest import at
from usage import budgets
from usage.models import Budget, BudgetPolicy


def test_warnings_go_out_once_per_threshold_and_month(make_workload, cast):
    Budget.objects.create(team=cast.vision, monthly_amount=Decimal("100"), policy=BudgetPolicy.APPROVAL)
    make_workload("h100-80gb", started="2026-03-01 00:00:00", units=2)  # 8.00 per hour

    assert budgets.check(now=at("2026-03-01 09:59:00")) == []  # 80.00 at 10:00 exactly; 79.87 before
    assert budgets.check(now=at("2026-03-01 10:00:00")) == [("vision", 80)]
    # vision has no team admin, so its members hear it.
    assert Notice.objects.filter(subject__contains="80 % of its GPU budget").count() == 2
    assert budgets.check(now=at("2026-03-01 11:00:00")) == []
    assert not budgets.over_budget(cast.vision, now=at("2026-03-01 11:00:00"))

    assert budgets.check(now=at("2026-03-01 12:30:00")) == [("vision", 100)]
    assert budgets.check(now=at("2026-03-01 13:00:00")) == []
    notice = Notice.objects.filter(user=cast.alice, subject__contains="100 %").get()
    assert "need a platform admin's approval" in notice.body
    assert budgets.over_budget(cast.vision, now=at("2026-03-01 13:00:00"))


def test_a_new_month_starts_from_zero(make_workload, cast):
    Budget.objects.create(team=cast.vision, monthly_amount=Decimal("10"), policy=BudgetPolicy.APPROVAL)
    make_workload("h100-80gb", started="2026-02-28 20:00:00", finished="2026-03-01 01:00:00")
    assert budgets.check(now=at("2026-02-28 23:00:00")) == [("vision", 100)]
    assert budgets.over_budget(cast.vision, now=at("2026-02-28 23:00:00"))
    assert not budgets.over_budget(cast.vision, now=at("2026-03-01 02:00:00"))  # 4.00 of 10 in March
    assert budgets.check(now=at("2026-03-01 02:00:00")) == []


def test_a_notify_budget_never_holds_back_requests(make_workload, cast):
    Budget.objects.create(team=cast.nlp, monthly_amount=Decimal("1"), policy=BudgetPolicy.NOTIFY)
    make_workload("h100-80gb", team=cast.nlp, user=cast.bob, started="2026-03-01 00:00:00")
    assert budgets.check(now=at("2026-03-01 05:00:00")) == [("nlp", 100)]
    assert Notice.objects.filter(user=cast.bob).count() == 1  # the team admin, not the members
    assert not budgets.over_budget(cast.nlp, now=at("2026-03-01 05:00:00"))
    assert not budgets.over_budget(cast.vision)  # no budget at all
