"""What a team uses of its quota, as people read it (in GPUs, or slices)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Sum

from quotas.gpu_classes import charge_for
from quotas.models import Decision, Quota, QuotaException


@dataclass(frozen=True)
class QuotaRow:
    gpu_class: str
    used: Decimal
    guaranteed: Decimal
    limit: Decimal
    pending: Decimal  # asked for by workloads waiting for approval

    @property
    def free(self) -> Decimal:
        return max(self.limit - self.used, Decimal(0))

    @property
    def used_percent(self) -> int:
        return int(self.used * 100 / self.limit) if self.limit else (100 if self.used else 0)

    @property
    def guaranteed_percent(self) -> int:
        return int(self.guaranteed * 100 / self.limit) if self.limit else 0


def team_quota(team) -> list[QuotaRow]:
    pending = dict(
        QuotaException.objects.filter(team=team, decision=Decision.PENDING)
        .values_list("gpu_class")
        .annotate(total=Sum("amount"))
    )
    return [
        QuotaRow(q.gpu_class, q.used, q.guaranteed, q.limit, pending.get(q.gpu_class) or Decimal(0))
        for q in Quota.objects.filter(team=team).order_by("gpu_class")
    ]


def units_left(team, offering) -> int | None:
    """How many more units of ``offering`` the team's quota admits now; None without a GPU."""
    if offering.kind == "cpu":
        return None
    quotas = {q.gpu_class: q for q in Quota.objects.filter(team=team)}
    charge = charge_for(offering, 1, set(quotas))
    quota = quotas.get(charge.gpu_class)
    if quota is None or charge.amount <= 0:
        return 0
    if offering.kind == "mig" and charge.gpu_class == offering.gpu_model and not quota.count_mig_slices:
        return 0
    return int(max(quota.limit - quota.used, Decimal(0)) / charge.amount)
