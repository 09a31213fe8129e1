"""How many replicas an endpoint runs over time (``WorkloadScale``), recorded by the reconcile.

An autoscaled endpoint holds quota for ``max_replicas`` (plus a canary's replicas): admission
reserves that so scaling up is never refused by quota. What it is *charged* for is what runs
(``usage.spend``), so the reconcile records the count of predictor pods holding GPUs
(``jobs.kube.status.gpu_replicas``) each time it changes, as intervals: a row says "from
``started_at`` on, this many", until the next row.

Writes happen only on a change: the latest row of every endpoint is read in one query per
tick (``latest``), and a tick that sees the same count writes nothing, so a retried or
repeated tick is harmless. Should two ticks race and both record the same count, spend takes
the largest count of each minute, so the duplicate charges nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime

from jobs.models import Kind, State, Workload, WorkloadScale


def reserved_replicas(workload: Workload) -> int:
    """Replicas quota holds for an endpoint: its maximum, plus a canary's while it lasts."""
    return workload.max_replicas + workload.canary_replicas


def latest(workload_ids: Iterable[int]) -> dict[int, int]:
    """The last recorded count of each workload that has one (one query)."""
    ids = list(workload_ids)
    if not ids:
        return {}
    rows = (
        WorkloadScale.objects.filter(workload_id__in=ids)
        .order_by("workload_id", "-started_at", "-id")
        .distinct("workload_id")
        .values_list("workload_id", "replicas")
    )
    return dict(rows)


def record(workload: Workload, observed: int, now: datetime, last: int | None) -> bool:
    """Record that ``workload`` runs ``observed`` replicas from ``now`` on, if that is news.

    ``last``: the latest recorded count (``latest``), None when there is none. The count is
    capped at what quota reserved (``reserved_replicas``): a rolling update's surge pods are
    not the team's doing. True when a row was written.
    """
    replicas = max(0, min(observed, reserved_replicas(workload)))
    if replicas == last:
        return False
    WorkloadScale.objects.create(workload=workload, started_at=now, replicas=replicas)
    return True


def current(workload: Workload) -> int | None:
    """The count the reconcile last recorded for this endpoint, None before the first."""
    return workload.scales.order_by("-started_at", "-id").values_list("replicas", flat=True).first()


@dataclass(frozen=True)
class EndpointCharge:
    """What an endpoint holds of quota and what it is charged for now, in offering units.

    ``reserved_*``: quota's reservation, ``max_replicas`` plus a canary's replicas (admission
    holds them so scaling up is never refused). ``charged_*``: the replicas running now,
    which spend charges (0 unless running; ``min_replicas`` while no count was recorded yet,
    ``observed`` False then).
    """

    reserved_replicas: int
    reserved_units: int
    charged_replicas: int
    charged_units: int
    observed: bool

    def as_dict(self) -> dict:
        return asdict(self)


def endpoint_charge(workload: Workload) -> EndpointCharge | None:
    """The reservation and the charge of an endpoint (one query); None for other kinds."""
    if workload.kind != Kind.ENDPOINT:
        return None
    reserved = reserved_replicas(workload)
    if workload.state == State.RUNNING:
        last = current(workload)
        charged = workload.replicas if last is None else last
    else:
        last, charged = None, 0
    return EndpointCharge(
        reserved_replicas=reserved,
        reserved_units=reserved * workload.gpus_per_replica,
        charged_replicas=charged,
        charged_units=charged * workload.gpus_per_replica,
        observed=last is not None,
    )
