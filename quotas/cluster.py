"""A team's quota as the cluster enforces it: ResourceQuota and Volcano Queue amounts.

CPU and memory quotas (``quotas.compute``) become ``cpu`` and ``memory`` there as they are.

Quotas are kept per GPU class (a model or a MIG profile); the cluster counts extended
resources. Each active offering turns a class's GPUs into its own resource's units (an
A100 quota of 2 GPUs that counts slices allows 14 ``nvidia.com/mig-1g.10gb``), and
classes that share a resource add up.

The cluster's ceiling is the database's: ``limit + overage``. Overage is usage above the
limit allowed on purpose (an approved exception, a limit lowered under running work), so
the pods of an approved exception must not be refused by the namespace's ResourceQuota.

The objects themselves are built by ``jobs.kube.manifests.team_objects``; quotas may not
import jobs, so jobs registers that builder here at startup (``set_team_objects_builder``)
and the approvals console uses it to show what a decision changes in the cluster.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import ROUND_FLOOR, Decimal
from typing import Any

import yaml
from django.conf import settings

from portal.models import Offering
from quotas import compute
from quotas.gpu_classes import mig_class
from quotas.models import Quota

# Amounts are stored rounded down to six places (seven 1/7 slices are 0.999999 GPU), so a
# count of units within this distance of a whole number is that whole number.
UNIT_TOLERANCE = Decimal("0.001")
PREVIEW_KINDS = ("Queue", "ResourceQuota", "ClusterQueue")

TeamObjectsBuilder = Callable[[Any, Mapping[str, tuple[int, int]]], list[dict[str, Any]]]
_team_objects_builder: TeamObjectsBuilder | None = None


def set_team_objects_builder(builder: TeamObjectsBuilder | None) -> None:
    """Register ``builder(team, resource_quota) -> [objects]`` (jobs does, in its AppConfig.ready)."""
    global _team_objects_builder
    _team_objects_builder = builder


def team_objects_builder() -> TeamObjectsBuilder | None:
    return _team_objects_builder


def queueing_backend() -> str:
    """ "volcano" or "kueue", as the cluster profile says (read once per file version)."""
    from portal.cluster_profile import current_profile

    profile = current_profile(settings.CLUSTER_PROFILE)
    return profile.queueing if profile else "volcano"


@dataclass(frozen=True)
class ClassQuota:
    """What the cluster should let a team hold of one GPU class, in the class's units."""

    gpu_class: str
    guaranteed: Decimal
    ceiling: Decimal  # limit + overage
    count_mig_slices: bool = True


def class_quotas(team) -> dict[str, ClassQuota]:
    return {
        q.gpu_class: ClassQuota(q.gpu_class, q.guaranteed, q.limit + q.overage, q.count_mig_slices)
        for q in Quota.objects.filter(team=team)
    }


def draws_on(offering, quotas: Mapping[str, ClassQuota]) -> tuple[ClassQuota, Decimal] | None:
    """The class quota one unit of ``offering`` draws on and the GPUs (or slices) it counts.

    The same rule as ``quotas.gpu_classes.charge_for``: a MIG slice draws on its profile's
    quota when there is one (a unit counts 1), else on its model's quota as its share of
    a GPU, unless that quota does not count slices. Shared GPUs count their share.
    """
    if offering.kind == "cpu":
        return None
    if offering.kind == "mig":
        profile = quotas.get(mig_class(offering.gpu_model, offering.mig_profile))
        if profile is not None:
            return profile, Decimal(1)
    quota = quotas.get(offering.gpu_model)
    if quota is None:
        return None
    if offering.kind == "mig" and not quota.count_mig_slices:
        return None
    if offering.kind in ("mig", "shared"):
        return quota, Decimal(offering.share_numerator) / Decimal(offering.share_denominator)
    return quota, Decimal(1)


def units(amount: Decimal, per_unit: Decimal) -> int:
    """Whole units of a resource in ``amount`` GPUs: rounded down, but 6.999993 slices are 7."""
    exact = amount / per_unit
    nearest = exact.to_integral_value()
    if abs(exact - nearest) <= UNIT_TOLERANCE:
        return int(nearest)
    return int(exact.to_integral_value(rounding=ROUND_FLOOR))


def resource_amounts(quotas: Mapping[str, ClassQuota], offerings: Iterable) -> dict[str, tuple[Any, Any]]:
    """Resource name → (guaranteed, ceiling) in that resource's units. Pure.

    Extended resources in whole units; ``cpu`` in cores (a Fraction) and ``memory`` in
    bytes, for a team with a CPU or memory quota (``quotas.compute``).
    """
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    counted: set[tuple[str, str]] = set()  # two pools of one model share one resource
    for offering in offerings:
        if offering.kind == "cpu" or not offering.resource_name:
            continue
        drawn = draws_on(offering, quotas)
        if drawn is None:
            continue
        quota, per_unit = drawn
        if (offering.resource_name, quota.gpu_class) in counted:
            continue
        counted.add((offering.resource_name, quota.gpu_class))
        entry = totals[offering.resource_name]
        entry[0] += units(quota.guaranteed, per_unit)
        entry[1] += units(quota.ceiling, per_unit)
    amounts: dict[str, tuple[Any, Any]] = {name: (g, c) for name, (g, c) in totals.items()}
    for name in compute.CLASSES:
        if name in quotas:
            amounts[name] = compute.cluster_amounts(quotas[name].guaranteed, quotas[name].ceiling, name)
    return dict(sorted(amounts.items()))


def active_offerings() -> list[Offering]:
    """Active GPU offerings: device-plugin ones (an extended resource) and DRA ones (a DeviceClass)."""
    offerings = Offering.objects.filter(is_active=True).exclude(kind="cpu")
    return list(offerings.exclude(resource_name="", dra_device_class="").order_by("slug"))


def team_resource_quota(
    team, quotas: Mapping[str, ClassQuota] | None = None, offerings: Iterable | None = None
) -> dict[str, tuple[int, int]]:
    """Extended resource name → (guaranteed, limit + overage) in that resource's units."""
    return resource_amounts(
        class_quotas(team) if quotas is None else quotas,
        active_offerings() if offerings is None else offerings,
    )


# -- what a decision changes in the cluster ------------------------------------------------------


@dataclass(frozen=True)
class Preview:
    before: str  # YAML
    after: str
    diff: str  # unified diff of the two, empty when nothing changes
    note: str = ""  # why the preview is partial, if it is

    @property
    def changes(self) -> bool:
        return bool(self.diff)


def with_change(
    quotas: Mapping[str, ClassQuota],
    gpu_class: str,
    *,
    guaranteed: Decimal | None = None,
    limit: Decimal | None = None,
    used: Decimal | None = None,
    extra_overage: Decimal = Decimal(0),
) -> dict[str, ClassQuota]:
    """``quotas`` with one class changed as a decision would change it.

    A new limit sets the ceiling to ``max(limit, used)`` (``set_quota`` keeps running work
    as overage); an exception adds its amount above the limit.
    """
    out = dict(quotas)
    current = out.get(gpu_class) or ClassQuota(gpu_class, Decimal(0), Decimal(0))
    new = current
    if guaranteed is not None:
        new = replace(new, guaranteed=guaranteed)
    if limit is not None:
        new = replace(new, ceiling=max(limit, used or Decimal(0)))
    if extra_overage:
        new = replace(new, ceiling=max(new.ceiling, (used or Decimal(0)) + extra_overage))
    out[gpu_class] = new
    return out


def _objects(team, quotas: Mapping[str, ClassQuota], offerings, queueing: str) -> tuple[list[dict[str, Any]], str]:
    amounts = resource_amounts(quotas, offerings)
    if queueing == "kueue":
        from quotas import kueue

        return [kueue.team_cluster_queue(team, quotas, offerings)], ""
    builder = _team_objects_builder
    if builder is None:
        # Without the builder (jobs not loaded) the amounts are still worth showing.
        note = "The manifest builder is not registered; showing the resource amounts only."
        return [
            {"team": team.slug, "resources": {r: {"guaranteed": g, "limit": c} for r, (g, c) in amounts.items()}}
        ], note
    return [o for o in builder(team, amounts) if o.get("kind") in PREVIEW_KINDS], ""


def _yaml(objects: list[dict[str, Any]]) -> str:
    # Leaf maps in flow style ("capability: {nvidia.com/gpu: '8'}"): each changed line names its field.
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=None, width=1000)


def preview(team, after: Mapping[str, ClassQuota], *, queueing: str = "volcano", offerings=None) -> Preview:
    """The team's Queue and ResourceQuotas (or Kueue ClusterQueue) now and after, as a YAML diff."""
    offerings = active_offerings() if offerings is None else list(offerings)
    before_objects, note = _objects(team, class_quotas(team), offerings, queueing)
    after_objects, _ = _objects(team, after, offerings, queueing)
    before, after_text = _yaml(before_objects), _yaml(after_objects)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after_text.splitlines(keepends=True),
            fromfile=f"{team.slug} now",
            tofile=f"{team.slug} after the decision",
        )
    )
    return Preview(before, after_text, diff, note)


def preview_request(request, *, queueing: str = "volcano", offerings=None) -> Preview:
    quota = Quota.objects.filter(team=request.team, gpu_class=request.gpu_class).first()
    after = with_change(
        class_quotas(request.team),
        request.gpu_class,
        guaranteed=request.guaranteed,
        limit=request.limit,
        used=quota.used if quota else Decimal(0),
    )
    return preview(request.team, after, queueing=queueing, offerings=offerings)


def preview_exception(exception, *, queueing: str = "volcano", offerings=None) -> Preview:
    quota = Quota.objects.filter(team=exception.team, gpu_class=exception.gpu_class).first()
    current = class_quotas(exception.team)
    after = with_change(
        current,
        exception.gpu_class,
        used=quota.used if quota else Decimal(0),
        extra_overage=exception.amount,
    )
    return preview(exception.team, after, queueing=queueing, offerings=offerings)
