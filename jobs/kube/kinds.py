"""The Kubernetes kinds the portal manages, as a static table.

The client builds REST paths from this table instead of asking the API server's
discovery documents on every process start: the portal only ever touches these kinds,
their plurals and scopes are fixed by their APIs, and skipping discovery keeps the
reconcile tick at exactly one request per kind. Discovery is still used, once, by
``Cluster.check()`` to tell an operator which of the extension kinds are installed.

To manage a new kind, add a row here; the client refuses kinds it does not know so that
a typo in a builder fails in a test rather than as a 404 in production.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from urllib.parse import quote


class Need(Enum):
    """How much the portal depends on a kind being served by the cluster."""

    # Built into every Kubernetes version the portal supports; not checked.
    BUILTIN = "builtin"
    # An extension (CRD) the portal cannot run without; `cluster_check` fails without it.
    REQUIRED = "required"
    # Used only by some cluster profiles (gang scheduling PodGroups, DRA pools).
    OPTIONAL = "optional"
    # Required when the cluster profile queues with that backend (``queueing:``).
    VOLCANO = "volcano"
    KUEUE = "kueue"
    # Installed together with a required extension and checked through it: Kubeflow Trainer
    # v2 runs its TrainJobs on JobSet, so a cluster that serves TrainJobs serves JobSets.
    WITH_TRAINER = "with-trainer"


@dataclass(frozen=True)
class KindInfo:
    api_version: str
    kind: str
    plural: str
    namespaced: bool
    need: Need = Need.BUILTIN

    @property
    def group(self) -> str:
        """The API group; "" for the core group (apiVersion "v1")."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def group_version_path(self) -> str:
        """The discovery document of this kind's group version, e.g. ``/apis/kubeflow.org/v1``."""
        # The core group lives under /api, every named group under /apis.
        return f"/apis/{self.api_version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str | None = None) -> str:
        """The list/watch path: one namespace, or all namespaces when ``namespace`` is None."""
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped; it has no namespace (got {namespace!r})")
        if namespace is None:
            return f"{self.group_version_path}/{self.plural}"
        return f"{self.group_version_path}/namespaces/{_segment(namespace)}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        if not name:
            raise ValueError(f"a {self.kind} needs a name")
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} is namespaced; a namespace is required")
        return f"{self.collection_path(namespace)}/{_segment(name)}"


def _segment(value: str) -> str:
    # Names are DNS-safe by construction (jobs/kube/names.py); quoting anyway means a bad
    # name yields a 404/422 from the server instead of a request to a different path.
    return quote(value, safe="")


KINDS: tuple[KindInfo, ...] = (
    # Core: the team namespace and what it holds.
    KindInfo("v1", "Namespace", "namespaces", namespaced=False),
    KindInfo("v1", "ServiceAccount", "serviceaccounts", namespaced=True),
    KindInfo("v1", "ResourceQuota", "resourcequotas", namespaced=True),
    KindInfo("v1", "PersistentVolumeClaim", "persistentvolumeclaims", namespaced=True),
    KindInfo("v1", "Pod", "pods", namespaced=True),
    KindInfo("v1", "Event", "events", namespaced=True),
    KindInfo("v1", "Service", "services", namespaced=True),
    # Read only: GPU capacity per node (jobs/capacity.py).
    KindInfo("v1", "Node", "nodes", namespaced=False),
    # A notebook on a DRA offering runs as the StatefulSet Kubeflow's controller would make.
    KindInfo("apps/v1", "StatefulSet", "statefulsets", namespaced=True),
    KindInfo("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    KindInfo("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", namespaced=True),
    # Dynamic Resource Allocation: GA (v1) since Kubernetes 1.34; only DRA node pools need it.
    KindInfo("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates", True, Need.OPTIONAL),
    KindInfo("resource.k8s.io/v1", "ResourceClaim", "resourceclaims", True, Need.OPTIONAL),
    # The workloads users ask for.
    KindInfo("kubeflow.org/v1", "Notebook", "notebooks", True, Need.REQUIRED),
    KindInfo("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True, Need.REQUIRED),
    KindInfo(
        "trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False, Need.REQUIRED
    ),
    KindInfo("serving.kserve.io/v1beta1", "InferenceService", "inferenceservices", True, Need.REQUIRED),
    KindInfo("batch.volcano.sh/v1alpha1", "Job", "jobs", True, Need.VOLCANO),
    # On a Kueue cluster, training that is not a TrainJob runs as a JobSet (Trainer v2 runs
    # on JobSet, so every cluster with Trainer has it; only Kueue profiles use it directly).
    KindInfo("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True, Need.WITH_TRAINER),
    # Queueing: Volcano queues are required (the portal maps teams to them); PodGroups are
    # created by Volcano itself. Kueue is the alternative some clusters use (a cluster
    # profile with `queueing: kueue`): the portal writes ResourceFlavors, ClusterQueues and
    # LocalQueues, and reads the Workloads Kueue makes (for why work is still waiting).
    KindInfo("scheduling.volcano.sh/v1beta1", "Queue", "queues", False, Need.VOLCANO),
    KindInfo("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", True, Need.OPTIONAL),
    KindInfo("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "resourceflavors", False, Need.KUEUE),
    KindInfo("kueue.x-k8s.io/v1beta2", "ClusterQueue", "clusterqueues", False, Need.KUEUE),
    KindInfo("kueue.x-k8s.io/v1beta2", "LocalQueue", "localqueues", True, Need.KUEUE),
    KindInfo("kueue.x-k8s.io/v1beta2", "Workload", "workloads", True, Need.KUEUE),
)

_BY_KEY: dict[tuple[str, str], KindInfo] = {(k.api_version, k.kind): k for k in KINDS}


@dataclass(frozen=True)
class ConfigObjects:
    """Add-on configuration ``cluster_check`` reads by name (jobs/preflight.py): never listed,
    watched or written, and only these names, so the ClusterRole can grant ``get`` on them
    alone (a role that reads every ConfigMap in the cluster reads its secrets' neighbours)."""

    info: KindInfo
    names: tuple[str, ...]


CONFIG_OBJECTS: tuple[ConfigObjects, ...] = (
    ConfigObjects(
        KindInfo("v1", "ConfigMap", "configmaps", namespaced=True),
        # KServe, Knative Serving, Volcano's scheduler and Kueue's manager, as upstream names them.
        ("inferenceservice-config", "config-features", "volcano-scheduler-configmap", "kueue-manager-config"),
    ),
    # The GPU Operator's dcgm-exporter, the name of dcgm-exporter's own Helm chart, and the
    # second exporter DRA nodes need when shared GPUs exist too (jobs/preflight.py).
    ConfigObjects(
        KindInfo("apps/v1", "DaemonSet", "daemonsets", namespaced=True),
        ("nvidia-dcgm-exporter", "dcgm-exporter", "nvidia-dcgm-exporter-dra"),
    ),
    ConfigObjects(
        KindInfo("serving.kserve.io/v1alpha1", "ClusterStorageContainer", "clusterstoragecontainers", namespaced=False),
        ("default",),
    ),
)


def config_object_info(api_version: str, kind: str, name: str) -> KindInfo:
    """The kind of a configuration object ``cluster_check`` may read; refuses any other name."""
    for entry in CONFIG_OBJECTS:
        if (entry.info.api_version, entry.info.kind) == (api_version, kind):
            if name not in entry.names:
                raise UnknownKind(
                    f"{kind} {name!r} is not a configuration object the portal reads "
                    "(jobs/kube/kinds.py CONFIG_OBJECTS)"
                )
            return entry.info
    raise UnknownKind(f"{kind} ({api_version}) is not in jobs/kube/kinds.py CONFIG_OBJECTS")


class UnknownKind(LookupError):
    """A kind the portal does not manage: a programming error, not a cluster error."""


def kind_info(api_version: str, kind: str) -> KindInfo:
    try:
        return _BY_KEY[(api_version, kind)]
    except KeyError:
        raise UnknownKind(f"{kind} ({api_version}) is not in jobs/kube/kinds.py; add it there to manage it") from None


def checked_kinds() -> tuple[KindInfo, ...]:
    """The kinds `Cluster.check()` looks for in discovery: every extension that is not
    installed with another one."""
    return tuple(k for k in KINDS if k.need not in (Need.BUILTIN, Need.WITH_TRAINER))
