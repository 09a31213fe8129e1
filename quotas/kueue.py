"""Kueue as the queueing backend (a cluster profile with ``queueing: kueue``).

Pure builders first, then the two functions that read the database for them.

* One ``ResourceFlavor`` per GPU class, named after it (``gpu-h100-80gb``,
  ``gpu-a100-80gb-1g-10gb``), whose node labels are what the class's offerings select
  nodes by (``nvidia.com/gpu.product``).
* One ``ClusterQueue`` per team (``team-<slug>``), in the shared cohort ``gpu-portal``:
  per flavor and resource, ``nominalQuota`` = guaranteed and ``borrowingLimit`` =
  limit + overage - guaranteed, in the resource's units (``quotas.cluster.units``). It
  admits only LocalQueues of the team's namespace, and may reclaim its nominal quota
  from borrowers (``reclaimWithinCohort: Any``), as a Volcano queue's ``deserved`` is
  reclaimed (``portal.scheduler_config``).
* One ``LocalQueue`` ``gpu-portal`` in the team's namespace, pointing at it. Workloads
  name it with the label ``kueue.x-k8s.io/queue-name: gpu-portal``; the same name in
  every namespace, so the builders of workloads need no team lookup.
* ``lending_pool_queue``: Kueue lends only nominal quota, so GPUs that no team is
  guaranteed are held by a ClusterQueue that admits nothing and lends everything;
  without it, teams could borrow only each other's idle guarantees.

Kueue's rules the builders keep (its webhook refuses the ClusterQueue otherwise): a
resource and a flavor appear in one resource group only, and each flavor of a group
lists the group's covered resources in the same order. Classes that share a resource
(an A100 model quota counting slices, and a quota of the slice's own profile) therefore
share a group, and a flavor lists 0 for a resource it does not provide. A slice's
profile flavor comes before its model flavor, the order in which admission charges them.

What the portal expects of the cluster's Kueue ``Configuration`` (rendered by
``portal.scheduler_config.kueue_manager_config``, which the sandbox seeds and its Kueue,
``sandbox/controllers/kueue.py``, follows):

* ``integrations.frameworks``: ``trainer.kubeflow.org/trainjob`` (torch TrainJobs),
  ``jobset.x-k8s.io/jobset`` (all other training) and ``pod`` (notebook and endpoint pods,
  which Kueue gates one by one; ``statefulset`` may be on too, for DRA notebooks);
* ``resources.excludeResourcePrefixes: [cpu, memory]``: the ClusterQueues hold GPUs only
  (cpu and memory stay capped by the namespace's ResourceQuota), and Kueue admits nothing
  that asks for a resource its queue does not cover;
* ``integrations.labelKeysToCopy``: the portal's workload labels
  (``app.kubernetes.io/managed-by``, ``gpu-portal.io/team``, ``gpu-portal.io/workload-id``,
  ``gpu-portal.io/kind``), so that the reconcile lists Kueue's Workloads like everything
  else and shows why work waits;
* ``manageJobsWithoutQueueName: false`` (the default): only what names a LocalQueue waits;
* ``resources.deviceClassMappings``: each DRA DeviceClass of the offerings counted under
  its own name (``gpu.nvidia.com``), which the ClusterQueues cover in the model's flavor
  (``kueue_resource``); without a mapping Kueue marks DRA workloads inadmissible.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from portal.scheduler_config import dra_resource_name
from quotas.cluster import ClassQuota, active_offerings, class_quotas, draws_on, units
from quotas.gpu_classes import mig_class
from quotas.models import Quota

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE_NAME = "gpu-portal"
COHORT = "gpu-portal"
POOL_QUEUE_NAME = "gpu-portal-lending-pool"
# The same label set as jobs.kube.labels (a test pins that); quotas may not import jobs.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpu-portal"
TEAM_LABEL = "gpu-portal.io/team"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Amounts = Mapping[str, Mapping[str, tuple[int, int]]]  # flavor → resource → (nominal, borrowing)


def kueue_resource(offering) -> str:
    """The resource Kueue counts one unit of ``offering`` as: its extended resource, or for a
    DRA offering the resource its DeviceClass is mapped to in Kueue's configuration
    (``portal.scheduler_config.kueue_device_class_mappings``); '' for CPU."""
    if offering.kind == "cpu":
        return ""
    if offering.resource_name:
        return offering.resource_name
    if offering.dra_device_class:
        return dra_resource_name(offering.dra_device_class)
    return ""


def flavor_name(gpu_class: str) -> str:
    """``A100-80GB/1g.10gb`` → ``gpu-a100-80gb-1g-10gb``: a DNS label, one per class."""
    return "gpu-" + re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", gpu_class.lower())).strip("-")


def cluster_queue_name(team_slug: str) -> str:
    return f"team-{team_slug}"


def queue_labels() -> dict[str, str]:
    """The label a workload's main object (or pod template) carries to be queued by Kueue."""
    return {QUEUE_NAME_LABEL: LOCAL_QUEUE_NAME}


def _labels(team_slug: str = "") -> dict[str, str]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    if team_slug:
        labels[TEAM_LABEL] = team_slug
    return labels


@dataclass(frozen=True)
class Flavor:
    name: str
    gpu_class: str
    node_labels: Mapping[str, str]


def flavors(offerings: Iterable) -> list[Flavor]:
    """One flavor per GPU class the offerings can draw on; its labels are the ones they share.

    A model class (``A100-80GB``) and its MIG profile classes (``A100-80GB/1g.10gb``) get
    a flavor each. DRA offerings count in their model's flavor, under the resource their
    DeviceClass is mapped to (``kueue_resource``); CPU offerings have none.
    """
    selectors: dict[str, list[Mapping[str, str]]] = {}
    for offering in offerings:
        if not kueue_resource(offering):
            continue
        selectors.setdefault(offering.gpu_model, []).append(offering.node_selector or {})
        if offering.kind == "mig":
            selectors.setdefault(mig_class(offering.gpu_model, offering.mig_profile), []).append(
                offering.node_selector or {}
            )
    out = []
    for gpu_class, found in sorted(selectors.items()):
        shared = dict(found[0])
        for selector in found[1:]:
            shared = {k: v for k, v in shared.items() if selector.get(k) == v}
        out.append(Flavor(flavor_name(gpu_class), gpu_class, dict(sorted(shared.items()))))
    return out


def resource_flavor(flavor: Flavor) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(flavor.node_labels)
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": flavor.name,
            "labels": {**_labels(), "gpu-portal.io/gpu-class": flavor.name.removeprefix("gpu-")},
        },
        "spec": spec,
    }


def team_amounts(quotas: Mapping[str, ClassQuota], offerings: Iterable) -> dict[str, dict[str, tuple[int, int]]]:
    """Flavor → resource → (nominalQuota, borrowingLimit) for one team's class quotas. Pure."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for offering in offerings:
        resource = kueue_resource(offering)
        if not resource:
            continue
        drawn = draws_on(offering, quotas)
        if drawn is None:
            continue
        quota, per_unit = drawn
        nominal = units(quota.guaranteed, per_unit)
        ceiling = units(quota.ceiling, per_unit)
        out.setdefault(flavor_name(quota.gpu_class), {})[resource] = (nominal, max(ceiling - nominal, 0))
    return out


def _flavor_order(name: str, classes: Mapping[str, str]) -> tuple[int, str]:
    # A MIG profile's flavor before its model's: Kueue tries a group's flavors in order.
    return (0 if "/" in classes.get(name, "") else 1, name)


def resource_groups(
    amounts: Amounts, *, classes: Mapping[str, str] | None = None, borrowing: bool = True
) -> list[dict[str, Any]]:
    """Kueue resource groups: flavors that share a resource are grouped together.

    1. Join flavors into groups while they share a resource (union-find on resources).
    2. A group covers the union of its flavors' resources, sorted.
    3. Each flavor lists every covered resource in that order, 0 where it has none.
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for resources in amounts.values():
        names = list(resources)
        for other in names[1:]:
            parent[find(other)] = find(names[0])
    groups: dict[str, list[str]] = {}
    for flavor, resources in amounts.items():
        if resources:
            groups.setdefault(find(next(iter(resources))), []).append(flavor)
    out = []
    for members in groups.values():
        covered = sorted({r for f in members for r in amounts[f]})
        entries = []
        for flavor in sorted(members, key=lambda f: _flavor_order(f, classes or {})):
            resources = []
            for resource in covered:
                nominal, borrow = amounts[flavor].get(resource, (0, 0))
                item: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
                if borrowing:
                    item["borrowingLimit"] = str(borrow)
                resources.append(item)
            entries.append({"name": flavor, "resources": resources})
        out.append({"coveredResources": covered, "flavors": entries})
    out.sort(key=lambda g: g["coveredResources"])
    return out


def cluster_queue(
    team_slug: str,
    namespace: str,
    amounts: Amounts,
    *,
    classes: Mapping[str, str] | None = None,
    cpu_memory: Mapping[str, str] | None = None,
    cohort: str = COHORT,
) -> dict[str, Any]:
    """A team's ClusterQueue. ``cpu_memory`` ({"cpu": "64", "memory": "512Gi"}) adds a
    group for them under ``default_flavor()``; without it, Kueue must be told to ignore
    cpu and memory (``resources.excludeResourcePrefixes``), or it admits nothing."""
    groups = resource_groups(amounts, classes=classes)
    if cpu_memory:
        groups.insert(0, _cpu_memory_group(cpu_memory))
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(team_slug), "labels": _labels(team_slug)},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "Never"},
            },
            "resourceGroups": groups,
        },
    }


DEFAULT_FLAVOR = "gpu-portal-default"


def default_flavor() -> dict[str, Any]:
    """A flavor without node labels, for cpu and memory on any node."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": DEFAULT_FLAVOR, "labels": _labels()},
        "spec": {},
    }


def _cpu_memory_group(cpu_memory: Mapping[str, str]) -> dict[str, Any]:
    covered = sorted(cpu_memory)
    return {
        "coveredResources": covered,
        "flavors": [
            {"name": DEFAULT_FLAVOR, "resources": [{"name": r, "nominalQuota": str(cpu_memory[r])} for r in covered]}
        ],
    }


def local_queue(team_slug: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE_NAME, "namespace": namespace, "labels": _labels(team_slug)},
        "spec": {"clusterQueue": cluster_queue_name(team_slug)},
    }


def lending_pool_queue(unreserved: Amounts, *, cohort: str = COHORT) -> dict[str, Any]:
    """A ClusterQueue that admits no workload and lends ``unreserved`` GPUs to the cohort."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": POOL_QUEUE_NAME, "labels": _labels()},
        "spec": {
            "cohortName": cohort,
            # Matches no namespace: nothing is ever queued here.
            "namespaceSelector": {"matchLabels": {MANAGED_BY_LABEL: "no-namespace-is-queued-in-the-lending-pool"}},
            "resourceGroups": resource_groups(unreserved, borrowing=False),
        },
    }


def unreserved_amounts(
    capacity: Mapping[str, Mapping[str, int]], guaranteed: Sequence[Amounts], model_of: Mapping[str, str]
) -> dict[str, dict[str, tuple[int, int]]]:
    """Capacity per model flavor and resource minus every team's guarantee of it (at least 0).

    A MIG profile flavor's guarantee is taken from its model flavor (``model_of``): both
    count the same slices of the same GPUs, in the resource's own units.
    """
    taken: dict[tuple[str, str], int] = {}
    for team in guaranteed:
        for flavor, resources in team.items():
            for resource, (nominal, _) in resources.items():
                key = (model_of.get(flavor, flavor), resource)
                taken[key] = taken.get(key, 0) + nominal
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for flavor, resources in capacity.items():
        for resource, total in resources.items():
            out.setdefault(flavor, {})[resource] = (max(total - taken.get((flavor, resource), 0), 0), 0)
    return out


# -- reading the database -------------------------------------------------------------------


def _classes(offerings: Iterable) -> dict[str, str]:
    return {f.name: f.gpu_class for f in flavors(offerings)}


def team_cluster_queue(team, quotas: Mapping[str, ClassQuota] | None = None, offerings=None) -> dict[str, Any]:
    offerings = active_offerings() if offerings is None else list(offerings)
    amounts = team_amounts(class_quotas(team) if quotas is None else quotas, offerings)
    return cluster_queue(team.slug, team.namespace, amounts, classes=_classes(offerings))


def team_kueue_objects(team, *, with_flavors: bool = False) -> list[dict[str, Any]]:
    """The team's ClusterQueue, then its LocalQueue (which refers to it).

    ``with_flavors``: the ResourceFlavors the ClusterQueue names come first, so that a
    team's first workload does not wait for the reconcile to create them (Kueue keeps a
    ClusterQueue inactive while a flavor it names is missing). Applying them again is
    harmless: they are the same objects ``cluster_kueue_objects`` builds.
    """
    offerings = active_offerings()
    queue = team_cluster_queue(team, offerings=offerings)
    objects = [queue, local_queue(team.slug, team.namespace)]
    if with_flavors:
        named = {f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]}
        objects[:0] = [resource_flavor(f) for f in flavors(offerings) if f.name in named]
    return objects


def cluster_kueue_objects() -> list[dict[str, Any]]:
    """Every GPU class's ResourceFlavor and the lending pool, from the observed capacity.

    An offering's ``total_units`` (observed by jobs.capacity) is the capacity of its model
    flavor; capacity not yet observed counts as none, so nothing is lent that may not exist.
    """
    offerings = active_offerings()
    capacity: dict[str, dict[str, int]] = {}
    for offering in offerings:
        resource = kueue_resource(offering)
        if offering.total_units and resource:
            resources = capacity.setdefault(flavor_name(offering.gpu_model), {})
            resources[resource] = resources.get(resource, 0) + offering.total_units
    by_team: dict[int, dict[str, ClassQuota]] = {}
    for q in Quota.objects.all():
        by_team.setdefault(q.team_id, {})[q.gpu_class] = ClassQuota(
            q.gpu_class, q.guaranteed, q.limit + q.overage, q.count_mig_slices
        )
    teams = [team_amounts(quotas, offerings) for quotas in by_team.values()]
    all_flavors = flavors(offerings)
    model_of = {f.name: flavor_name(f.gpu_class.split("/")[0]) for f in all_flavors}
    objects = [resource_flavor(f) for f in all_flavors]
    pool = unreserved_amounts(capacity, teams, model_of)
    if any(n for resources in pool.values() for n, _ in resources.values()):
        objects.append(lending_pool_queue(pool))
    return objects
