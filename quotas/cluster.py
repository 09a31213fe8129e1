"""A team's quota as the cluster enforces it: ResourceQuota and Volcano Queue amounts.

Quotas are kept per GPU class (a model or a MIG profile); the cluster counts extended
resources. Each active offering turns a class's GPUs into its own resource's units (an
A100 quota of 2 GPUs that counts slices allows 14 ``nvidia.com/mig-1g.10gb``), and
classes that share a resource add up.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_FLOOR, Decimal

from portal.models import Offering
from quotas.gpu_classes import mig_class
from quotas.models import Quota


def _units(amount: Decimal, per_unit: Decimal) -> int:
    return int((amount / per_unit).to_integral_value(rounding=ROUND_FLOOR))


def team_resource_quota(team) -> dict[str, tuple[int, int]]:
    """Extended resource name → (guaranteed, limit) in that resource's units."""
    quotas = {q.gpu_class: q for q in Quota.objects.filter(team=team)}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    counted: set[tuple[str, str]] = set()  # two pools of one model share one resource
    for offering in Offering.objects.filter(is_active=True).exclude(kind="cpu").exclude(resource_name=""):
        quota = None
        per_unit = Decimal(1)
        if offering.kind == "mig":
            quota = quotas.get(mig_class(offering.gpu_model, offering.mig_profile))
        if quota is None and offering.kind in ("mig", "shared"):
            quota = quotas.get(offering.gpu_model)
            if quota and offering.kind == "mig" and not quota.count_mig_slices:
                quota = None
            per_unit = Decimal(offering.share_numerator) / Decimal(offering.share_denominator)
        elif quota is None:
            quota = quotas.get(offering.gpu_model)
        if quota is None or (offering.resource_name, quota.gpu_class) in counted:
            continue
        counted.add((offering.resource_name, quota.gpu_class))
        entry = totals[offering.resource_name]
        entry[0] += _units(quota.guaranteed, per_unit)
        entry[1] += _units(quota.limit, per_unit)
    return {name: (g, lim) for name, (g, lim) in sorted(totals.items())}
