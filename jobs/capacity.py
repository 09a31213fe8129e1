"""How many units of each offering the cluster has, and how many are free right now.

``free_units`` is a pure function of listed objects (nodes, pods, DRA claims), so it is
tested on hand-made dicts; ``refresh_capacity`` is the periodic task's body: one list per
kind, one bulk update. The numbers are a snapshot for people choosing an offering ("3 of
56 free"), not an admission decision: the scheduler and quota admission decide, and a
unit shown as free may be taken by the time a request arrives.

What counts, per request mode:

* device plugin (full GPUs, MIG slices, shared GPUs): on every node that is Ready,
  schedulable for the offering (not cordoned, every NoSchedule/NoExecute taint tolerated)
  and matches the offering's node selector, the node's allocatable amount of the
  offering's extended resource, minus the requests for it of the pods bound to the node
  that have not terminated. A time-sliced GPU advertises one unit per replica, a MIG
  node one unit per slice, so units are the offering's units in every case.
* DRA: the device plugin does not run on those nodes, so nothing is advertised in
  ``allocatable``. Total: the GPU count GPU Feature Discovery puts in the node's labels
  (``nvidia.com/gpu.count``, or ``nvidia.com/mig-<profile>.count`` for a slice). Used:
  the devices allocated to ResourceClaims of the offering's device class on those nodes.
  Claims are counted rather than pods because an allocated claim holds its device even
  while its pod is pending or gone.
* CPU only: (None, None); there are no units to count.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Protocol

from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)

DRA_DRIVER = "gpu.nvidia.com"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
# Labels that say a node's GPUs are handed out by the DRA driver, not the device plugin:
# the GPU operator's switch that keeps the device plugin off the node, and the DRA
# driver's own node label.
DRA_NODE_LABELS = {"nvidia.com/gpu.deploy.device-plugin": "false", "nvidia.com/dra-driver-gpu": "true"}
TERMINATED_PHASES = ("Succeeded", "Failed")
BLOCKING_TAINT_EFFECTS = ("NoSchedule", "NoExecute")


class OfferingLike(Protocol):
    kind: str
    request_mode: str
    resource_name: str
    dra_device_class: str
    mig_profile: str

    @property
    def node_selector(self) -> Mapping[str, str]: ...
    @property
    def tolerations(self) -> Sequence[Mapping[str, Any]]: ...


def free_units(
    offering: OfferingLike,
    nodes: Iterable[Mapping],
    pods: Iterable[Mapping],
    claims: Iterable[Mapping] | None = (),
) -> tuple[int | None, int | None]:
    """(total, free) units of ``offering`` in the listed cluster; (None, None) when not countable.

    ``claims`` are ResourceClaims (all namespaces); pass None when they could not be
    listed, and a DRA offering's free count is then None (unknown) rather than a guess.
    """
    if offering.kind == "cpu" or offering.request_mode == "none":
        return None, None
    eligible = [n for n in nodes if _serves(offering, n)]
    if offering.request_mode == "dra":
        return _dra_units(offering, eligible, claims)
    if not offering.resource_name:
        return None, None
    used_by_node = _requests_by_node(pods, offering.resource_name)
    total = free = 0
    for node in eligible:
        allocatable = _amount(((node.get("status") or {}).get("allocatable") or {}).get(offering.resource_name))
        if allocatable <= 0:
            continue
        total += allocatable
        free += max(allocatable - used_by_node.get(_name(node), 0), 0)
    return total, free


def node_capacities(offering: OfferingLike, nodes: Iterable[Mapping]) -> list[int] | None:
    """Units of ``offering`` each node can hold at most, largest first; None when not countable.

    The inventory ``jobs.fit`` checks requests against: what a node has in all, not what
    is free. Unlike ``free_units`` it counts nodes that are not Ready or are cordoned:
    a node drained for maintenance comes back, and refusing work because of it would be
    wrong for good. Taints still exclude a node: a taint the offering does not tolerate
    is how a node is kept for something else for as long as it stands. A DRA node
    without its GPU count label makes the whole inventory unknown (None), never 0.
    """
    if offering.kind == "cpu" or offering.request_mode == "none":
        return None
    eligible = [n for n in nodes if _could_serve(offering, n)]
    units: list[int] = []
    for node in eligible:
        if offering.request_mode == "dra":
            count = _dra_total(offering, node)
            if count is None:
                return None
        elif offering.resource_name:
            count = _amount(((node.get("status") or {}).get("allocatable") or {}).get(offering.resource_name))
        else:
            return None
        if count > 0:
            units.append(count)
    return sorted(units, reverse=True)


def refresh_capacity(cluster) -> int:
    """List Nodes, Pods and ResourceClaims once each and store every active offering's capacity.

    Returns how many offerings were updated. Cluster errors propagate (the periodic task
    runs again soon; the stored numbers keep their ``capacity_observed_at``).
    """
    from jobs.kube.errors import NotFound
    from portal.models import Offering

    offerings = list(Offering.objects.filter(is_active=True))
    nodes = cluster.list("v1", "Node", label_selector="")
    pods = cluster.list("v1", "Pod", label_selector="")
    claims: list | None = []
    if any(o.request_mode == "dra" for o in offerings):
        try:
            claims = cluster.list("resource.k8s.io/v1", "ResourceClaim", label_selector="")
        except NotFound:
            # The cluster does not serve the DRA API: nothing can be allocated, but a DRA
            # offering's free count is unknown rather than "all of them".
            claims = None
    now = timezone.now()
    for offering in offerings:
        offering.total_units, offering.free_units = free_units(offering, nodes, pods, claims)
        offering.node_units = node_capacities(offering, nodes)
        offering.capacity_observed_at = now
    with transaction.atomic():
        Offering.objects.bulk_update(offerings, ["total_units", "free_units", "node_units", "capacity_observed_at"])
    return len(offerings)


# -- nodes ------------------------------------------------------------------------------


def _name(obj: Mapping) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: Mapping) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _is_ready(node: Mapping) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """Kubernetes' toleration matching: same key (or an empty key with Exists), value, effect."""
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        operator = t.get("operator") or "Equal"
        if not t.get("key"):
            if operator == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _is_dra_node(node: Mapping) -> bool:
    labels = _labels(node)
    return any(labels.get(key) == value for key, value in DRA_NODE_LABELS.items())


def _serves(offering: OfferingLike, node: Mapping) -> bool:
    """Could a pod of this offering be placed on the node now (ignoring what is used)?"""
    spec = node.get("spec") or {}
    if spec.get("unschedulable") or not _is_ready(node):
        return False
    return _could_serve(offering, node)


def _could_serve(offering: OfferingLike, node: Mapping) -> bool:
    """Is the node one of the offering's, whether or not it is Ready and schedulable now?"""
    spec = node.get("spec") or {}
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (offering.node_selector or {}).items()):
        return False
    tolerations = list(offering.tolerations or [])
    for taint in spec.get("taints") or []:
        if taint.get("effect") in BLOCKING_TAINT_EFFECTS and not _tolerates(tolerations, taint):
            return False
    # Device-plugin nodes and DRA nodes of one GPU model carry the same product label.
    return _is_dra_node(node) == (offering.request_mode == "dra")


# -- pods -------------------------------------------------------------------------------


def _amount(value: Any) -> int:
    """A whole-unit quantity ("8", 8); anything else counts as 0 (extended resources are integers)."""
    if value is None:
        return 0
    try:
        return int(Decimal(str(value)))
    except ArithmeticError:
        return 0


def _container_request(container: Mapping, resource: str) -> int:
    resources = container.get("resources") or {}
    # An extended resource's request defaults to its limit (they must be equal when both are set).
    value = (resources.get("requests") or {}).get(resource, (resources.get("limits") or {}).get(resource))
    return _amount(value)


def _pod_request(pod: Mapping, resource: str) -> int:
    """The pod's effective request, as the scheduler computes it.

    The larger of (app containers + sidecars) and the largest ordinary init container:
    init containers run one at a time before the app, sidecars (restartPolicy Always)
    keep running beside it.
    """
    spec = pod.get("spec") or {}
    running = sum(_container_request(c, resource) for c in spec.get("containers") or [])
    init_peak = 0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            running += _container_request(c, resource)
        else:
            init_peak = max(init_peak, _container_request(c, resource))
    return max(running, init_peak)


def _requests_by_node(pods: Iterable[Mapping], resource: str) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in TERMINATED_PHASES:
            continue
        amount = _pod_request(pod, resource)
        if amount:
            used[node] = used.get(node, 0) + amount
    return used


# -- DRA --------------------------------------------------------------------------------


def _dra_total(offering: OfferingLike, node: Mapping) -> int | None:
    labels = _labels(node)
    if offering.kind == "mig":
        value = labels.get(f"nvidia.com/mig-{offering.mig_profile}.count")
    else:
        value = labels.get(GPU_COUNT_LABEL)
    return None if value is None else _amount(value)


def _claim_node(claim: Mapping, result: Mapping) -> str:
    """The node an allocated device is on: the allocation's node selector, else the pool name.

    NVIDIA's DRA driver publishes one pool per node, named after the node.
    """
    allocation = (claim.get("status") or {}).get("allocation") or {}
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and field.get("values"):
                return str(field["values"][0])
    return str(result.get("pool") or "")


def _request_classes(claim: Mapping) -> dict[str, str]:
    """Request name → device class of a claim (``exactly`` in resource.k8s.io/v1, flat before)."""
    classes = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        exactly = request.get("exactly") or request
        classes[str(request.get("name"))] = str(exactly.get("deviceClassName") or "")
    return classes


def _allocated_on(offering: OfferingLike, claims: Iterable[Mapping], node_names: set[str]) -> dict[str, int]:
    used: dict[str, int] = {}
    for claim in claims:
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        classes = _request_classes(claim)
        for result in results:
            if result.get("driver") != DRA_DRIVER:
                continue
            # A request name may be "<request>/<subrequest>" for prioritized lists.
            request_name = str(result.get("request") or "").split("/")[0]
            if classes.get(request_name) != offering.dra_device_class:
                continue
            node = _claim_node(claim, result)
            if node in node_names:
                used[node] = used.get(node, 0) + 1
    return used


def _dra_units(
    offering: OfferingLike, nodes: list[Mapping], claims: Iterable[Mapping] | None
) -> tuple[int | None, int | None]:
    totals: dict[str, int] = {}
    for node in nodes:
        count = _dra_total(offering, node)
        if count is None:
            # Without the label we cannot tell what the node has; say "unknown", not 0.
            return None, None
        totals[_name(node)] = count
    if claims is None:
        return sum(totals.values()), None
    used = _allocated_on(offering, claims, set(totals))
    free = sum(max(total - used.get(name, 0), 0) for name, total in totals.items())
    return sum(totals.values()), free
