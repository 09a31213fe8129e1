"""Kueue's manager configuration, as the sandbox's Kueue reads and follows it.

Real Kueue reads its ``Configuration`` from the ConfigMap ``kueue-system/kueue-manager-config``
(key ``controller_manager_config.yaml``). The sandbox reads the same object on every pass;
what it follows:

* ``resources.excludeResourcePrefixes``: requests Kueue does not count (without ``cpu`` and
  ``memory`` there, the portal's ClusterQueues, which cover GPUs only, admit nothing);
* ``resources.deviceClassMappings``: the resource a DRA DeviceClass's devices are counted
  as; a workload whose ResourceClaimTemplate names an unmapped class is inadmissible;
* ``featureGates.KueueDRAIntegration`` (on by default in v0.19): off, a workload that uses
  DRA is inadmissible.

A missing or unparsable ConfigMap reads as upstream's shipped default (``STOCK_CONF``).
``seed`` is the sandbox's seeder: ``cluster_setup: recommended`` gets what the portal needs
(``portal.scheduler_config.kueue_manager_config``), ``stock`` upstream's default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from portal.scheduler_config import KUEUE_CONF_KEY, KUEUE_CONFIGMAP, KUEUE_NAMESPACE, kueue_manager_configmap

CONFIGMAPS = "/configmaps"

# Kueue v0.19.2 config/components/manager/controller_manager_config.yaml, verbatim (a test
# compares it with ../shared/reference when present): no resources block at all.
STOCK_CONF = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
# enableClusterQueueResources: true
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Pod: 5
    Workload.kueue.x-k8s.io: 10
    LocalQueue.kueue.x-k8s.io: 5
    Cohort.kueue.x-k8s.io: 1
    ClusterQueue.kueue.x-k8s.io: 5
    ResourceFlavor.kueue.x-k8s.io: 1
clientConnection:
  qps: 300
  burst: 500
#pprofBindAddress: :8083
#waitForPodsReady:
#  timeout: 5m
#  recoveryTimeout: 3m
#  blockAdmission: false
#  requeuingStrategy:
#    timestamp: Eviction
#    backoffLimitCount: null # null indicates infinite requeuing
#    backoffBaseSeconds: 60
#    backoffMaxSeconds: 3600
#manageJobsWithoutQueueName: true
#managedJobsNamespaceSelector:
#  matchExpressions:
#    - key: kubernetes.io/metadata.name
#      operator: NotIn
#      values: [ kube-system, kueue-system ]
#internalCertManagement:
#  enable: false
#  webhookServiceName: ""
#  webhookSecretName: ""
integrations:
  frameworks:
  - "batch/job"
  - "kubeflow.org/mpijob"
  - "ray.io/rayjob"
  - "ray.io/raycluster"
  - "ray.io/rayservice"
  - "jobset.x-k8s.io/jobset"
  # - "kubeflow.org/paddlejob"
  # - "kubeflow.org/pytorchjob"
  # - "kubeflow.org/tfjob"
  # - "kubeflow.org/xgboostjob"
  # - "kubeflow.org/jaxjob"
  - "workload.codeflare.dev/appwrapper"
  - "trainer.kubeflow.org/trainjob"
  # - "sparkoperator.k8s.io/sparkapplication"
  - "pod"
  - "deployment"
  - "statefulset"
  - "leaderworkerset.x-k8s.io/leaderworkerset"
#  externalFrameworks:
#  - "Foo.v1.example.com"
#fairSharing:
#  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
#admissionFairSharing:
#  usageHalfLifeTime: "168h" # 7 days
#  usageSamplingInterval: "5m"
#  resourceWeights: # optional, defaults to 1 for all resources if not specified
#    cpu: 0    # if you want to completely ignore cpu usage
#    memory: 0 # ignore completely memory usage
#    example.com/gpu: 100 # and you care only about GPUs usage
#resources:
#  excludeResourcePrefixes: []
#  quotaCheckStrategy: "BlockUndeclared"
#  transformations:
#  - input: nvidia.com/mig-4g.5gb
#    strategy: Replace | Retain
#    outputs:
#      example.com/accelerator-memory: 5Gi
#      example.com/accelerator-gpc: 4
#objectRetentionPolicies:
#  workloads:
#    afterFinished: null # null indicates infinite retention, 0s means no retention at all
#    afterDeactivatedByKueue: null # null indicates infinite retention, 0s means no retention at all
"""


@dataclass(frozen=True)
class KueueConf:
    excluded_prefixes: tuple[str, ...] = ()
    device_classes: dict[str, str] = field(default_factory=dict)  # DeviceClass -> counted resource
    dra: bool = True  # the KueueDRAIntegration feature gate

    def excluded(self, resource: str) -> bool:
        return resource.startswith(self.excluded_prefixes) if self.excluded_prefixes else False


class ConfError(ValueError):
    """A configuration Kueue's manager would refuse to start with."""


def parse(text: str) -> KueueConf:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"{KUEUE_CONF_KEY}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfError(f"{KUEUE_CONF_KEY}: must be a mapping (a Configuration)")
    resources = data.get("resources") or {}
    if not isinstance(resources, dict):
        raise ConfError(f"{KUEUE_CONF_KEY}: resources must be a mapping")
    prefixes = resources.get("excludeResourcePrefixes") or []
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise ConfError(f"{KUEUE_CONF_KEY}: resources.excludeResourcePrefixes must be a list of strings")
    device_classes: dict[str, str] = {}
    mappings = resources.get("deviceClassMappings") or []
    if not isinstance(mappings, list):
        raise ConfError(f"{KUEUE_CONF_KEY}: resources.deviceClassMappings must be a list")
    for i, mapping in enumerate(mappings):
        where = f"{KUEUE_CONF_KEY}: resources.deviceClassMappings[{i}]"
        if not isinstance(mapping, dict) or not isinstance(mapping.get("name"), str):
            raise ConfError(f"{where}.name is required")
        classes = mapping.get("deviceClassNames")
        if not isinstance(classes, list) or not classes:
            raise ConfError(f"{where}.deviceClassNames must list at least one DeviceClass")
        for name in classes:
            if name in device_classes:
                # Kueue's validation: a class in one mapping only (counter sources aside).
                raise ConfError(f"{where}.deviceClassNames: {name} is already mapped")
            device_classes[name] = mapping["name"]
    gates = data.get("featureGates") or {}
    dra = gates.get("KueueDRAIntegration", True) if isinstance(gates, dict) else True
    return KueueConf(tuple(prefixes), device_classes, dra is not False)


_cache: dict[str, KueueConf] = {}


def read(store: Any) -> KueueConf:
    """The configuration in the cluster's ConfigMap, or upstream's default without one."""
    cm = store.get(CONFIGMAPS, KUEUE_NAMESPACE, KUEUE_CONFIGMAP)
    text = ((cm or {}).get("data") or {}).get(KUEUE_CONF_KEY)
    if not isinstance(text, str):
        text = STOCK_CONF
    if text not in _cache:
        try:
            _cache[text] = parse(text)
        except ConfError:
            _cache[text] = parse(STOCK_CONF)
    return _cache[text]


def seed(profile: Any) -> list[tuple[str, dict[str, Any]]]:
    """Seeder for ``sandbox.setup_objects``: the manager ConfigMap of a Kueue cluster."""
    if getattr(profile, "queueing", "volcano") != "kueue":
        return []
    stock = getattr(profile, "cluster_setup", "recommended") == "stock"
    return [(CONFIGMAPS, kueue_manager_configmap(STOCK_CONF if stock else None))]
