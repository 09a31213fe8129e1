"""The built-in table of kinds the sandbox serves.

One row per resource: group, served versions (the first is the storage version),
plural, kind, scope and whether it has a status subresource. Discovery documents,
URL routing and schema validation are all driven by this table, so adding a kind
is one line here (plus a controller if it should do something).
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class Kind:
    group: str  # "" for the core group
    versions: tuple[str, ...]  # served versions; versions[0] is stored
    plural: str
    kind: str
    namespaced: bool
    status: bool = False  # has a status subresource
    short_names: tuple[str, ...] = ()
    custom: bool = False  # a custom resource: validated against its CRD schema when available
    extra_subresources: tuple[str, ...] = ()  # e.g. ("log",) for pods
    categories: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Store key; independent of the version a client uses."""
        return f"{self.group}/{self.plural}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def storage_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        version = version or self.storage_version
        return f"{self.group}/{version}" if self.group else version

    @property
    def resource_group(self) -> str:
        """How error messages name the resource: ``pods`` or ``notebooks.kubeflow.org``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def kind_group(self) -> str:
        """How Invalid messages name the kind: ``Pod`` or ``Notebook.kubeflow.org``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


def _k(group, versions, plural, kind, namespaced, **kw) -> Kind:
    return Kind(group, tuple(versions), plural, kind, namespaced, **kw)


KINDS: tuple[Kind, ...] = (
    # core/v1
    _k("", ["v1"], "namespaces", "Namespace", False, status=True, short_names=("ns",)),
    _k("", ["v1"], "nodes", "Node", False, status=True, short_names=("no",)),
    _k(
        "",
        ["v1"],
        "pods",
        "Pod",
        True,
        status=True,
        short_names=("po",),
        extra_subresources=("log",),
        categories=("all",),
    ),
    _k("", ["v1"], "events", "Event", True, short_names=("ev",)),
    _k("", ["v1"], "resourcequotas", "ResourceQuota", True, status=True, short_names=("quota",)),
    _k("", ["v1"], "serviceaccounts", "ServiceAccount", True, short_names=("sa",)),
    _k("", ["v1"], "services", "Service", True, status=True, short_names=("svc",), categories=("all",)),
    _k("", ["v1"], "configmaps", "ConfigMap", True, short_names=("cm",)),
    _k("", ["v1"], "secrets", "Secret", True),
    _k("", ["v1"], "persistentvolumeclaims", "PersistentVolumeClaim", True, status=True, short_names=("pvc",)),
    _k("", ["v1"], "limitranges", "LimitRange", True, short_names=("limits",)),
    # built-in groups
    _k("apps", ["v1"], "statefulsets", "StatefulSet", True, status=True, short_names=("sts",), categories=("all",)),
    _k("apps", ["v1"], "daemonsets", "DaemonSet", True, status=True, short_names=("ds",), categories=("all",)),
    _k("scheduling.k8s.io", ["v1"], "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    _k("networking.k8s.io", ["v1"], "networkpolicies", "NetworkPolicy", True, short_names=("netpol",)),
    _k("resource.k8s.io", ["v1"], "deviceclasses", "DeviceClass", False),
    _k("resource.k8s.io", ["v1"], "resourceclaims", "ResourceClaim", True, status=True),
    _k("resource.k8s.io", ["v1"], "resourceclaimtemplates", "ResourceClaimTemplate", True),
    _k("resource.k8s.io", ["v1"], "resourceslices", "ResourceSlice", False),
    # Kubeflow notebooks: v1 stored, v1beta1 and v1alpha1 served with trivial conversion
    # (upstream installs the CRD with conversion strategy None).
    _k("kubeflow.org", ["v1", "v1beta1", "v1alpha1"], "notebooks", "Notebook", True, status=True, custom=True),
    # Kubeflow Trainer v2
    _k("trainer.kubeflow.org", ["v1alpha1"], "trainjobs", "TrainJob", True, status=True, custom=True),
    _k("trainer.kubeflow.org", ["v1alpha1"], "trainingruntimes", "TrainingRuntime", True, custom=True),
    _k("trainer.kubeflow.org", ["v1alpha1"], "clustertrainingruntimes", "ClusterTrainingRuntime", False, custom=True),
    # KServe
    _k(
        "serving.kserve.io",
        ["v1beta1"],
        "inferenceservices",
        "InferenceService",
        True,
        status=True,
        short_names=("isvc",),
        custom=True,
    ),
    _k("serving.kserve.io", ["v1alpha1"], "servingruntimes", "ServingRuntime", True, custom=True),
    _k("serving.kserve.io", ["v1alpha1"], "clusterservingruntimes", "ClusterServingRuntime", False, custom=True),
    _k("serving.kserve.io", ["v1alpha1"], "clusterstoragecontainers", "ClusterStorageContainer", False, custom=True),
    # Volcano (PodGroup has no status subresource in the upstream CRD)
    _k("batch.volcano.sh", ["v1alpha1"], "jobs", "Job", True, status=True, short_names=("vcjob", "vj"), custom=True),
    _k("scheduling.volcano.sh", ["v1beta1"], "queues", "Queue", False, status=True, short_names=("q",), custom=True),
    _k("scheduling.volcano.sh", ["v1beta1"], "podgroups", "PodGroup", True, short_names=("pg",), custom=True),
    # JobSet (Trainer v2 runs on it; the portal's Kueue profile uses it directly). No CRD
    # in the reference data, so it is served without schema validation.
    _k("jobset.x-k8s.io", ["v1alpha2"], "jobsets", "JobSet", True, status=True, short_names=("js",), custom=True),
    # Kueue: served and validated; controllers/kueue.py plays Kueue when the profile says so
    _k("kueue.x-k8s.io", ["v1beta2"], "resourceflavors", "ResourceFlavor", False, short_names=("rf",), custom=True),
    _k(
        "kueue.x-k8s.io",
        ["v1beta2"],
        "clusterqueues",
        "ClusterQueue",
        False,
        status=True,
        short_names=("cq",),
        custom=True,
    ),
    _k("kueue.x-k8s.io", ["v1beta2"], "localqueues", "LocalQueue", True, status=True, short_names=("lq",), custom=True),
    _k("kueue.x-k8s.io", ["v1beta2"], "workloads", "Workload", True, status=True, short_names=("wl",), custom=True),
)


class Registry:
    """Look kinds up by URL parts, by apiVersion+kind, or loosely for fault matching."""

    def __init__(self, kinds: tuple[Kind, ...] = KINDS):
        self.kinds = kinds
        self._by_path = {(k.group, v, k.plural): k for k in kinds for v in k.versions}
        self._by_kind = {(k.group, k.kind): k for k in kinds}
        self._by_key = {k.key: k for k in kinds}

    def by_path(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def by_key(self, key: str) -> Kind:
        return self._by_key[key]

    def by_api_version(self, api_version: str, kind: str) -> Kind | None:
        group = api_version.rpartition("/")[0]
        return self._by_kind.get((group, kind))

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Served versions per group, in table order (the core group is keyed "")."""
        out: dict[str, list[str]] = {}
        for k in self.kinds:
            versions = out.setdefault(k.group, [])
            for v in k.versions:
                if v not in versions:
                    versions.append(v)
        return {g: tuple(vs) for g, vs in out.items()}

    def in_group_version(self, group: str, version: str) -> list[Kind]:
        return [k for k in self.kinds if k.group == group and version in k.versions]


def matches_kind_filter(kind: Kind, wanted: str | None) -> bool:
    """A fault's ``kind`` filter: plural, singular, Kind, short name or plural.group."""
    if not wanted:
        return True
    w = wanted.lower()
    return w in (kind.plural, kind.singular, kind.kind.lower(), kind.resource_group) or w in kind.short_names
