"""Monthly team budgets: warnings at 80 % and 100 %, and the 'over budget' answer for admission.

Spend here is *allocated* cost (what the team held), the figure chargeback uses,
counted per calendar month in UTC. Each threshold is announced once per month: the
budget row remembers the month and the highest threshold announced, and the update
that raises it is a compare-and-set, so two concurrent checks send one warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.models import Membership
from portal.notices import notify
from usage import spend
from usage.models import Budget, BudgetPolicy

THRESHOLDS = (80, 100)


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    spent: Decimal  # currency, rounded to cents
    percent: int

    @property
    def over(self) -> bool:
        return self.percent >= 100


def status(budget: Budget, now: datetime | None = None) -> BudgetStatus:
    spent = spend.money(spend.team_month_spend(budget.team, now))
    # A zero budget is exhausted by the first cent.
    percent = int(spent * 100 / budget.monthly_amount) if budget.monthly_amount > 0 else (100 if spent else 0)
    return BudgetStatus(budget, spent, percent)


def over_budget(team, now: datetime | None = None) -> bool:
    """True when the team's budget has policy 'approval' and this month's spend reached it.

    For quota admission: burst (preemptible) requests of such a team go to approval.
    A team without a budget, or with policy 'notify', is never 'over' here.
    """
    budget = Budget.objects.select_related("team").filter(team=team, policy=BudgetPolicy.APPROVAL).first()
    return budget is not None and status(budget, now).over


def _recipients(team):
    admins = [m.user for m in Membership.objects.filter(team=team, role=Membership.TEAM_ADMIN).select_related("user")]
    if admins:
        return admins
    return [m.user for m in Membership.objects.filter(team=team).select_related("user")]


def check(now: datetime | None = None) -> list[tuple[str, int]]:
    """Announce every budget that crossed a threshold this month. Returns (team, threshold) sent."""
    now = now or timezone.now()
    month = spend.month_start(now).date()
    sent = []
    for budget in Budget.objects.select_related("team"):
        st = status(budget, now)
        already = budget.warned_percent if budget.warned_month == month else 0
        crossed = [t for t in THRESHOLDS if st.percent >= t and t > already]
        if not crossed:
            continue
        level = max(crossed)
        with transaction.atomic():
            # Compare-and-set: only the check that moves the level sends the notice.
            won = (
                Budget.objects.filter(pk=budget.pk)
                .filter(Q(warned_month__isnull=True) | ~Q(warned_month=month) | Q(warned_percent__lt=level))
                .exclude(warned_month=month, warned_percent__gte=level)
                .update(warned_month=month, warned_percent=level)
            )
            if not won:
                continue
            subject = f"{budget.team.slug} has used {st.percent} % of its GPU budget for {month:%B %Y}"
            body = f"Spent {st.spent} of {budget.monthly_amount} this month."
            if level >= 100 and budget.policy == BudgetPolicy.APPROVAL:
                body += " New burst (preemptible) requests now need a platform admin's approval."
            for user in _recipients(budget.team):
                notify(user, subject, body, link="/usage/")
        sent.append((budget.team.slug, level))
    return sent
