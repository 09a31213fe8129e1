"""The scheduler configuration the portal needs on the cluster: Volcano's and Kueue's.

Pure functions (no Django, no I/O): the README prints what they render, the sandbox seeds
its ConfigMaps from them (``cluster_setup: recommended``), and ``cluster_check`` can
compare a cluster against them, so the docs, the sandbox and a real cluster agree. They
live in ``portal/`` beside the cluster profile because the sandbox runs from ``sandbox/``
and ``portal/`` alone; ``quotas.kueue`` and ``jobs.kube.manifests`` build to match them.

**Volcano** (``volcano-system/volcano-scheduler-configmap``, key ``volcano-scheduler.conf``).
Upstream's shipped default has the actions ``enqueue, allocate, backfill`` and the
``proportion`` plugin. That does not give what the portal promises:

* without the ``reclaim`` action nothing is ever taken back: a team that borrowed idle GPUs
  above its guarantee keeps them until its pods finish, and the owner of the guarantee
  waits. ``reclaim`` evicts borrowed pods of other queues for a queue below its deserved;
* ``proportion`` never reads ``Queue.spec.deserved``: it divides the cluster by ``weight``
  (equal weights: equal shares, whatever the team's guarantee). ``capacity`` reads
  ``deserved`` per resource, the shape of the portal's quotas (a guarantee per GPU class).
  The two plugins cannot be enabled together;
* ``preempt`` lets a team's guaranteed-priority work evict its own preemptible work in
  the same queue (``reclaim`` acts only between queues);
* ``predicates`` must enable DRA (``predicate.DynamicResourceAllocationEnable``) or Volcano
  ignores the ResourceClaims of the portal's DRA offerings.

So a team's Queue (``jobs.kube.manifests.team_objects``) carries exactly what ``capacity``
reads: ``deserved`` = the guaranteed amounts (lent when idle, reclaimed when the team
needs them) and ``capability`` = limit + overage (never exceeded). It sets no
``guarantee``: ``capacity`` keeps a queue's guarantee out of every other queue's reach
even while the team leaves it idle, which would waste the GPUs that ``reclaim`` can
return anyway. ``weight`` is not set either (only ``proportion`` reads it).

**Kueue** (``kueue-system/kueue-manager-config``, key ``controller_manager_config.yaml``):
upstream's default plus what ``quotas.kueue`` documents (integrations, label keys to copy,
cpu and memory excluded) and ``resources.deviceClassMappings``: Kueue marks a workload
whose ResourceClaimTemplate names an unmapped DeviceClass inadmissible, so the portal's DRA
classes are mapped to ``dra_resource_name(class)``, which the ClusterQueues cover.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

# -- Volcano ------------------------------------------------------------------------------------

VOLCANO_NAMESPACE = "volcano-system"
VOLCANO_CONFIGMAP = "volcano-scheduler-configmap"
VOLCANO_CONF_KEY = "volcano-scheduler.conf"

# Order matters: Volcano runs the actions in this order in every scheduling cycle.
VOLCANO_ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")

# Per tier, the plugins and their settings. Tier 1 decides first (priority order, gang,
# system pods protected); capacity replaces upstream's proportion (and overcommit, which
# only matters for proportion's weight-based enqueue).
VOLCANO_TIERS: tuple[tuple[dict[str, Any], ...], ...] = (
    (
        {"name": "priority"},
        {"name": "gang", "enablePreemptable": False},
        {"name": "conformance"},
    ),
    (
        {"name": "drf", "enablePreemptable": False},
        {"name": "predicates", "arguments": {"predicate.DynamicResourceAllocationEnable": True}},
        {"name": "capacity"},
        {"name": "nodeorder"},
        {"name": "binpack"},
    ),
)

# Which Queue fields the portal sets, and the plugin that reads them (the README's table).
QUEUE_FIELDS = {
    "deserved": "the team's guaranteed GPUs: lent to other teams while idle, reclaimed when the team needs them",
    "capability": "limit + approved overage: the queue never holds more",
    "reclaimable": "true: other teams may reclaim what this team borrowed above its deserved",
}


def volcano_scheduler_config() -> dict[str, Any]:
    """The scheduler configuration as data: ``{"actions": "...", "tiers": [...]}``."""
    return {
        "actions": ", ".join(VOLCANO_ACTIONS),
        "tiers": [{"plugins": [copy.deepcopy(p) for p in tier]} for tier in VOLCANO_TIERS],
    }


def volcano_scheduler_conf() -> str:
    """The text of ``volcano-scheduler.conf`` the portal needs (YAML, as upstream writes it)."""
    return yaml.safe_dump(volcano_scheduler_config(), sort_keys=False, default_flow_style=False)


def volcano_scheduler_configmap(conf: str | None = None) -> dict[str, Any]:
    """The ConfigMap Volcano's scheduler reads, holding ``conf`` (default: the portal's)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": VOLCANO_CONFIGMAP, "namespace": VOLCANO_NAMESPACE},
        "data": {VOLCANO_CONF_KEY: volcano_scheduler_conf() if conf is None else conf},
    }


# -- Kueue --------------------------------------------------------------------------------------

KUEUE_NAMESPACE = "kueue-system"
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONF_KEY = "controller_manager_config.yaml"

# The DRA DeviceClasses the portal's offerings name (portal.cluster_profile.Offering.dra_device_class).
DRA_DEVICE_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")

KUEUE_FRAMEWORKS = (
    "trainer.kubeflow.org/trainjob",  # torch training
    "jobset.x-k8s.io/jobset",  # every other training
    "pod",  # notebook and endpoint pods, gated one by one
    "statefulset",  # DRA notebooks (built as a StatefulSet)
)
KUEUE_LABEL_KEYS_TO_COPY = (
    "app.kubernetes.io/managed-by",
    "gpu-portal.io/team",
    "gpu-portal.io/workload-id",
    "gpu-portal.io/kind",
)
KUEUE_EXCLUDED_PREFIXES = ("cpu", "memory")


def dra_resource_name(device_class: str) -> str:
    """The resource Kueue counts a DeviceClass's devices as (a ClusterQueue covers it).

    The class's own name (``gpu.nvidia.com``): a valid resource name that cannot be taken
    for a device-plugin resource (``nvidia.com/gpu``), and what ``cluster_check`` suggests.
    """
    return device_class


def kueue_device_class_mappings(device_classes: tuple[str, ...] = DRA_DEVICE_CLASSES) -> list[dict[str, Any]]:
    """One mapping per DeviceClass: a device is charged as one unit of its class's resource."""
    return [{"name": dra_resource_name(c), "deviceClassNames": [c]} for c in device_classes]


# Upstream's enabled integrations (v0.19.2 default); the portal's four are among them.
KUEUE_UPSTREAM_FRAMEWORKS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "jobset.x-k8s.io/jobset",
    "workload.codeflare.dev/appwrapper",
    "trainer.kubeflow.org/trainjob",
    "pod",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
)


def kueue_required_settings() -> dict[str, Any]:
    """The part of Kueue's ``Configuration`` the portal depends on (what the README shows)."""
    return {
        "manageJobsWithoutQueueName": False,
        "integrations": {
            "frameworks": list(dict.fromkeys((*KUEUE_UPSTREAM_FRAMEWORKS, *KUEUE_FRAMEWORKS))),
            "labelKeysToCopy": list(KUEUE_LABEL_KEYS_TO_COPY),
        },
        "resources": {
            "excludeResourcePrefixes": list(KUEUE_EXCLUDED_PREFIXES),
            "deviceClassMappings": kueue_device_class_mappings(),
        },
    }


def kueue_manager_config_snippet() -> str:
    return yaml.safe_dump(kueue_required_settings(), sort_keys=False, default_flow_style=False)


def kueue_manager_configuration() -> dict[str, Any]:
    """Kueue's whole ``Configuration`` (config.kueue.x-k8s.io/v1beta2): upstream's default
    (v0.19.2 ``controller_manager_config.yaml``) with ``kueue_required_settings`` set."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        **kueue_required_settings(),
    }


def kueue_manager_config() -> str:
    """The text of ``controller_manager_config.yaml`` the portal needs."""
    return yaml.safe_dump(kueue_manager_configuration(), sort_keys=False, default_flow_style=False)


def kueue_manager_configmap(conf: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": KUEUE_CONFIGMAP, "namespace": KUEUE_NAMESPACE},
        "data": {KUEUE_CONF_KEY: kueue_manager_config() if conf is None else conf},
    }
