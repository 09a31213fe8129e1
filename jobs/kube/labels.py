"""The portal's label set, its selectors, and the keys users may never set.

Every object the portal creates carries ``app.kubernetes.io/managed-by: gpu-portal`` and
the owning team; workload objects (and their pod templates, so that pods carry them too)
also carry the workload id and kind. The cluster client lists by these labels, one
label-selected list per kind, so they are the contract between the builders and the
observer: change them only together with a migration of the objects already running.

Plain Python: ``jobs.specs`` uses the reserved-key rules so that validation and the
builders agree on what belongs to the portal.
"""

from __future__ import annotations

from collections.abc import Mapping

PORTAL_DOMAIN = "gpu-portal.io"
PORTAL_LABEL_PREFIX = PORTAL_DOMAIN + "/"

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gpu-portal"
TEAM_LABEL = PORTAL_LABEL_PREFIX + "team"
WORKLOAD_ID_LABEL = PORTAL_LABEL_PREFIX + "workload-id"
KIND_LABEL = PORTAL_LABEL_PREFIX + "kind"

# Volcano reads the queue of a pod (or of the PodGroup Trainer builds) from this annotation.
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# Kueue reads the LocalQueue of a job (TrainJob, batch/v1 Job, StatefulSet) or of a plain
# pod from this label (quotas.kueue.QUEUE_NAME_LABEL; a test pins the two together).
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Kubernetes writes a pod's index in an Indexed Job here (and into JOB_COMPLETION_INDEX).
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Kubeflow's notebook controller scales a Notebook's StatefulSet to 0 while this annotation
# is present; it checks presence only (metav1.HasAnnotation), never the value.
NOTEBOOK_STOPPED_ANNOTATION = "kubeflow-resource-stopped"

# Label and annotation keys whose prefix (the part before "/") is one of these domains, or
# a subdomain of one, belong to the cluster's controllers or to the portal. A user key there
# could re-route a pod (Multus networks, mesh injection), change scheduling (Volcano, Kueue,
# Knative autoscaling bounds) or forge the portal's own bookkeeping, so validation refuses
# them. Notebook and InferenceService controllers copy the object's annotations onto pods,
# which is why annotations are held to the same rule as labels.
RESERVED_KEY_DOMAINS = (
    PORTAL_DOMAIN,
    "kubernetes.io",  # app.kubernetes.io, pod-security.kubernetes.io, node.kubernetes.io ...
    "k8s.io",  # jobset.sigs.k8s.io, cluster-autoscaler ...
    "x-k8s.io",  # kueue.x-k8s.io, jobset.x-k8s.io, scheduling.x-k8s.io ...
    "volcano.sh",  # scheduling.volcano.sh, batch.volcano.sh ...
    "kserve.io",
    "kubeflow.org",
    "knative.dev",
    "istio.io",
    "nvidia.com",
    "k8s.v1.cni.cncf.io",
    "cni.projectcalico.org",
    "cilium.io",
    "linkerd.io",
)
# Unprefixed keys that controllers set or read on the objects we build or on their pods.
RESERVED_KEYS = frozenset(
    {
        NOTEBOOK_STOPPED_ANNOTATION,
        "notebook-name",  # notebook controller pod label
        "statefulset",  # notebook controller selector label
        "app",  # Knative revision pod label
        "component",  # KServe component label
        "controller-uid",
        "job-name",
    }
)


def is_reserved_key(key: str) -> bool:
    """True when ``key`` is a label/annotation key that only the cluster or the portal may set."""
    if key in RESERVED_KEYS:
        return True
    prefix, slash, _ = key.rpartition("/")
    if not slash:
        return False
    prefix = prefix.lower()
    return any(prefix == d or prefix.endswith("." + d) for d in RESERVED_KEY_DOMAINS)


def team_labels(team_slug: str) -> dict[str, str]:
    """Labels of team-level objects (namespace, queue, quota, service account ...)."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, TEAM_LABEL: team_slug}


def workload_labels(team_slug: str, workload_id: int, kind: str) -> dict[str, str]:
    """Labels of every object of one workload and of its pods."""
    return {**team_labels(team_slug), WORKLOAD_ID_LABEL: str(workload_id), KIND_LABEL: kind}


def cluster_labels() -> dict[str, str]:
    """Labels of cluster-scoped objects the portal owns but no team does."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE}


def merge_labels(user: Mapping[str, str], portal: Mapping[str, str]) -> dict[str, str]:
    """User labels first, then the portal's: on a clash the portal's value wins.

    Validation already refuses reserved keys; this is the second guard, so that a bug in
    validation can never detach an object from the portal's selectors.
    """
    return {**user, **portal}


def _selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def managed_selector() -> str:
    """Label selector for everything the portal manages."""
    return _selector(cluster_labels())


def team_selector(team_slug: str) -> str:
    return _selector(team_labels(team_slug))


def workload_selector(workload_id: int) -> str:
    """Label selector for all objects (and pods) of one workload."""
    return _selector({MANAGED_BY_LABEL: MANAGED_BY_VALUE, WORKLOAD_ID_LABEL: str(workload_id)})
