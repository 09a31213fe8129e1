"""Pure builders: a validated ``WorkloadSpec`` (or a team) in, plain Kubernetes objects out.

No settings, no clock, no I/O: the same input always gives the same dicts, which the
cluster client applies with server-side apply in list order (an object before the objects
that refer to it). Tests pin the output as literal dicts and validate every object against
the upstream CRD schemas and the restricted Pod Security Standard.

What the cluster is assumed to run, and why each workload looks the way it does:

* Every pod is scheduled by Volcano (``schedulerName: volcano``) in its team's queue, so
  the queue's capability caps a team's GPUs across notebooks, training and endpoints alike,
  and no second scheduler races Volcano for the same GPUs. Volcano Jobs name the queue in
  ``spec.queue``; Notebook and InferenceService pods carry the
  ``scheduling.volcano.sh/queue-name`` annotation, from which Volcano's PodGroup controller
  files them; TrainJobs carry it on the JobSet template (``runtimePatches``), where
  Trainer's Volcano plugin reads it for the PodGroup it creates.
* The GPU request comes from the offering, never from the user: a device-plugin offering
  puts ``gpus_per_replica`` of its extended resource into requests and limits (they must
  be equal); a DRA offering gets a ``ResourceClaimTemplate`` ``<name>-gpu`` and each pod a
  claim made from it; a CPU offering gets no GPU and the node affinity that keeps it off
  GPU nodes.
* Torch training uses Kubeflow Trainer v2.3.0 (``TrainJob`` -> the portal's
  ``ClusterTrainingRuntime``). v2.3.0's ``runtimePatches`` can set placement, service
  account and security context but neither ``resourceClaims`` nor ``priorityClassName``,
  so (a) there is one runtime per priority class, and (b) torch training on a DRA offering
  runs as a Volcano Job instead. MPI and custom training are Volcano Jobs too.
* Torch training gets torchrun's ``PET_*`` variables on every backend (PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT=29500), exactly as
  Trainer's torch plugin sets them on a TrainJob, so the same ``torchrun train.py`` runs
  distributed whether the run is a TrainJob, a Volcano Job or a JobSet. (Volcano's
  ``pytorch`` plugin sets MASTER_ADDR and RANK instead, which torchrun ignores.) The node
  rank is a fieldRef to the pod's index annotation: the Job controller's completion index
  on a JobSet (as Trainer does), Volcano's task index on a Volcano Job.
* Kubeflow's Notebook v1.11 has no ``resourceClaims`` either, so a notebook on a DRA
  offering is built as the StatefulSet and Service its controller would make (see
  ``_notebook_statefulset``); ``main_object_type`` tells the observer which to watch.
* CPU and memory requests equal their limits, as GPU requests must: the pods are in the
  Guaranteed QoS class (whole cores can be pinned) and quota can count requests alone.
* Every pod meets the restricted Pod Security Standard (non-root uid 1000, gid and fsGroup
  100 as in the Jupyter images, RuntimeDefault seccomp, no privilege escalation, all
  capabilities dropped), gets no service-account token, and has a memory-backed
  ``/dev/shm`` (PyTorch data loaders and NCCL need more than the runtime's 64 MiB).

Everything above describes a Volcano cluster (the default). A cluster profile with
``queueing: kueue`` reaches the builders as ``spec.queueing`` (set by
``jobs.lifecycle.spec_of``; the builders never read settings) and changes only how work
is queued:

* No pod names a scheduler (the cluster's default scheduler places them) and nothing
  carries Volcano's queue annotation. Kueue admits work against the team's ClusterQueue
  (``quotas.kueue``), found through the LocalQueue ``gpu-portal`` named by the label
  ``kueue.x-k8s.io/queue-name``:

  - TrainJobs carry it and are created ``suspend: true`` (Kueue's TrainJob integration
    resumes them when admitted); they use the ``...-kueue-<tier>`` runtimes, which have
    no ``podGroupPolicy``;
  - Notebook, InferenceService and DRA-notebook pods carry it on their pod template (the
    notebook controller copies the Notebook's labels onto its pod, KServe the predictor's):
    Kueue's ``pod`` integration gates each pod (``kueue.x-k8s.io/admission``) until its
    Workload is admitted; the DRA notebook's StatefulSet carries it too, for Kueue's
    ``statefulset`` integration.

* Kueue has no Volcano Job integration, so training that is not a TrainJob (torch on a
  DRA offering, MPI and custom programs) is a JobSet (``jobset.x-k8s.io/v1alpha2``: Trainer
  v2 runs on JobSet, so every cluster with Trainer has its controller), created
  ``suspend: true`` with the queue label; Kueue's JobSet integration admits it as one
  Workload (every pod's GPUs at once). Its replicated jobs mirror the Volcano Job's tasks,
  each an Indexed Job, and JobSet's headless Service ``<name>`` gives pod ``i`` of
  replicated job ``r`` the host name ``<name>-<r>-0-<i>.<name>``. The pods learn ``i``
  from JOB_COMPLETION_INDEX (set by Kubernetes); what Volcano's plugins set, the portal
  sets itself:

  - torch: job ``node`` of ``replicas`` pods with the PET_* variables (see above);
  - mpi: job ``launcher`` (the user's command, no GPU, retried in place until the workers
    answer) and job ``worker`` (``replicas`` pods running the image's entrypoint); the
    launcher gets MPI_HOST (the workers' host names) as from Volcano's mpi plugin and
    Open MPI's ssh arguments (``-p 2222``), and the JobSet succeeds when the launcher
    does. Nothing on a Kueue cluster distributes SSH keys as Volcano's ssh plugin does:
    the image must bring its own;
  - custom: job ``worker`` of ``replicas`` pods.

  A failed pod fails its Job and with it the JobSet (``backoffLimit: 0``, ``maxRestarts:
  0``); pods lost to preemption or a drain do not count (DisruptionTarget), as in the
  TrainJob runtime. MPI's pods restart in place instead (OnFailure, as on Volcano), up to
  Kubernetes' default of 6 times. There is no gang scheduling on nodes:
  Kueue admits quota for all pods at once, and its ``waitForPodsReady`` gives
  all-or-nothing starts where the cluster enables it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from typing import Any

from jobs.kube.labels import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    KUEUE_QUEUE_LABEL,
    NOTEBOOK_STOPPED_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
    cluster_labels,
    merge_labels,
    team_labels,
    workload_labels,
)
from jobs.kube.names import (
    KUEUE_LOCAL_QUEUE,
    NETWORK_POLICY_NAME,
    PRIORITY_CLASSES,
    PRIORITY_GUARANTEED,
    PRIORITY_PREEMPTIBLE,
    RESOURCE_QUOTA_NAME,
    WORKLOAD_SERVICE_ACCOUNT,
    gpu_claim_template_name,
    team_queue_name,
    torch_runtime_name,
    workload_name,
    workspace_pvc_name,
)
from jobs.specs import TeamQuota, TeamRef, WorkloadSpec

__all__ = [
    "PRIORITY_GUARANTEED",
    "PRIORITY_PREEMPTIBLE",
    "cluster_objects",
    "cluster_training_runtime",
    "cluster_training_runtimes",
    "container_security_context",
    "dra_quota_key",
    "format_quantity",
    "main_object_type",
    "notebook_start_patch",
    "notebook_stop_patch",
    "pod_security_context",
    "priority_classes",
    "team_objects",
    "training_backend",
    "workload_objects",
]

NOTEBOOK_API = "kubeflow.org/v1"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
VOLCANO_JOB_API = "batch.volcano.sh/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
KSERVE_API = "serving.kserve.io/v1beta1"
KSERVE_DEPLOYMENT_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
KSERVE_STANDARD = "Standard"  # KServe v0.20's name for RawDeployment: a Deployment, Service and HPA
KSERVE_KNATIVE = "Knative"  # v0.20's name for Serverless: a Knative Service with revisions
CANARY_PREDICTOR = "canary"  # spec.canary[].predictor.name: its Deployment is <name>-canary-predictor
DRA_API = "resource.k8s.io/v1"

SCHEDULER_NAME = "volcano"
RUN_AS_USER = 1000  # jovyan in the Jupyter Docker Stacks images
RUN_AS_GROUP = 100  # users
FS_GROUP = 100  # makes the workspace volume writable for the user
WORKSPACE_MOUNT_PATH = "/home/jovyan"
SHM_VOLUME = "dshm"
WORKSPACE_VOLUME = "workspace"
GPU_CLAIM = "gpu"  # the pod's claim name and the device request name in the template
NOTEBOOK_PORT = 8888  # the notebook controller's default container port
STOPPED_VALUE = "true"  # the notebook controller checks presence only; we write no clock into builders

TRAINER_CONTAINER = "node"  # Trainer applies resourcesPerNode to the container named "node"
TRAINER_REPLICATED_JOB = "node"
TORCH_RUNTIME_IMAGE = "docker.io/pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"  # overridden by every TrainJob
RUNTIME_PATCH_MANAGER = "gpu-portal.io/manager"

VOLCANO_MAX_RETRY = 3
# torchrun's rendezvous port on node 0: Trainer's torch plugin uses 29500
# (constants.ContainerTrainerPort), and so does every other backend, so one command
# (``torchrun train.py``) reads the same PET_* variables wherever it runs.
TORCH_MASTER_PORT = 29500
TORCH_NODE_JOB = "node"  # the Volcano task / JobSet replicated job of torch nodes, as in Trainer
# Volcano writes a pod's index within its task here (the env plugin's VC_TASK_INDEX is the
# same number, but it is appended after the template's env, so no variable can refer to it).
VOLCANO_TASK_INDEX_ANNOTATION = "volcano.sh/task-index"
MPI_SSH_PORT = 2222  # non-root sshd cannot bind 22
# Volcano's ssh plugin mounts the key pair and its ssh config here (its default, /root/.ssh,
# is not the home of uid 1000); fsGroup makes the files readable for the user.
MPI_SSH_KEY_PATH = "/etc/volcano/.ssh"
MPI_LAUNCHER_RESOURCES = {"cpu": "1", "memory": "2Gi"}
# Kueue clusters: in-place restarts of the MPI launcher (and workers) before the JobSet fails;
# Kubernetes' default backoffLimit, so a launcher started before the workers' sshd can retry.
MPI_BACKOFF_LIMIT = 6

# Cloud instance-metadata endpoints (AWS, GCP and Azure share the IPv4 one; AWS's IPv6 one).
# Only these: NodeLocal DNSCache listens on 169.254.20.10, so all of 169.254/16 must stay open.
METADATA_CIDRS_V4 = ("169.254.169.254/32",)
METADATA_CIDRS_V6 = ("fd00:ec2::254/128",)
# Namespaces whose pods may reach a team's pods: Istio's gateway (Kubeflow notebooks,
# KServe), Knative's activator (scale from zero) and Kubeflow's own components.
DEFAULT_INGRESS_NAMESPACES = ("istio-system", "knative-serving", "kubeflow")

_RESTART_GANG_ON_EVICTION = [
    # Preemption or a node drain evicts one pod; a distributed run cannot go on without it,
    # so the whole gang restarts (up to maxRetry) once the queue has room again.
    {"event": "PodEvicted", "action": "RestartJob"},
    # A crash ends the run: GPU hours are dear and a deterministic failure would repeat.
    {"event": "PodFailed", "action": "TerminateJob"},
]
_COMPLETE_WHEN_DONE = [{"event": "TaskCompleted", "action": "CompleteJob"}]
# A failed pod ends the run (backoffLimit 0), but a pod that preemption or a node drain
# took away does not count as a failure.
_IGNORE_DISRUPTIONS = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
}


# -- entry points ------------------------------------------------------------------------


def workload_objects(spec: WorkloadSpec) -> list[dict[str, Any]]:
    """All objects of one workload, in apply order (claim template and volume first)."""
    objects: list[dict[str, Any]] = []
    if _uses_dra(spec):
        objects.append(_gpu_claim_template(spec))
    if spec.kind == "notebook":
        if spec.workspace_gib:
            objects.append(_workspace_pvc(spec))
        if _uses_dra(spec):
            objects.extend(_notebook_statefulset(spec))
        else:
            objects.append(_notebook(spec))
    elif spec.kind == "training":
        backend = training_backend(spec)
        if backend == "trainjob":
            objects.append(_train_job(spec))
        elif backend == "jobset":
            objects.append(_jobset(spec))
        else:
            objects.append(_volcano_job(spec))
    elif spec.kind == "endpoint":
        objects.append(_inference_service(spec))
    else:
        raise ValueError(f"unknown workload kind {spec.kind!r}")
    return objects


def training_backend(spec: WorkloadSpec) -> str:
    """ "trainjob" for torch on device-plugin and CPU offerings; everything else is a Volcano
    Job ("volcano"), or on a Kueue cluster a JobSet ("jobset")."""
    if spec.framework == "torch" and not _uses_dra(spec):
        return "trainjob"
    return "jobset" if _kueue(spec) else "volcano"


def main_object_type(spec: WorkloadSpec) -> tuple[str, str]:
    """(apiVersion, kind) of the object whose status tells the workload's phase."""
    if spec.kind == "notebook":
        return ("apps/v1", "StatefulSet") if _uses_dra(spec) else (NOTEBOOK_API, "Notebook")
    if spec.kind == "endpoint":
        return KSERVE_API, "InferenceService"
    backend = training_backend(spec)
    if backend == "trainjob":
        return TRAINER_API, "TrainJob"
    if backend == "jobset":
        return JOBSET_API, "JobSet"
    return VOLCANO_JOB_API, "Job"


def notebook_stop_patch(spec: WorkloadSpec | None = None) -> dict[str, Any]:
    """Merge patch for the main object (``main_object_type``) that stops a notebook.

    A Kubeflow Notebook gets the stop annotation (its StatefulSet goes to 0 replicas; the
    workspace stays); the StatefulSet of a DRA notebook goes to 0 replicas directly.
    Re-applying ``workload_objects(replace(spec, stopped=True))`` has the same effect.
    """
    if spec is not None and _uses_dra(spec):
        return {"spec": {"replicas": 0}}
    return {"metadata": {"annotations": {NOTEBOOK_STOPPED_ANNOTATION: STOPPED_VALUE}}}


def notebook_start_patch(spec: WorkloadSpec | None = None) -> dict[str, Any]:
    """Merge patch that starts a stopped notebook again (null deletes the annotation)."""
    if spec is not None and _uses_dra(spec):
        return {"spec": {"replicas": 1}}
    return {"metadata": {"annotations": {NOTEBOOK_STOPPED_ANNOTATION: None}}}


def team_objects(
    team: TeamRef,
    quota: Mapping[str, tuple[int | Fraction, int | Fraction]],
    *,
    ingress_namespaces: Sequence[str] = DEFAULT_INGRESS_NAMESPACES,
    guaranteed_priority_class: str = PRIORITY_GUARANTEED,
) -> list[dict[str, Any]]:
    """A team's namespace and everything in it that is not a workload, in apply order.

    ``quota`` maps a resource name to (guaranteed, limit): ``cpu``, ``memory`` (bytes),
    extended resources such as ``nvidia.com/gpu`` or ``nvidia.com/mig-1g.10gb``, and DRA
    devices as ``dra_quota_key(device_class)``. A ``jobs.specs.TeamQuota`` with
    ``queueing="kueue"`` replaces step 2 by its ``queue_objects`` (the team's Kueue
    ClusterQueue and LocalQueue, and the ResourceFlavors they name).

    1. The Namespace, enforcing the restricted Pod Security Standard.
    2. The Volcano Queue, in the fields Volcano's ``capacity`` plugin reads (the scheduler
       configuration the portal needs, ``portal.scheduler_config``): deserved = guaranteed,
       capability = limit; reclaimable, so others may borrow what the team leaves idle and
       the ``reclaim`` action gives it back. No ``guarantee``: capacity would keep it idle
       for the team, out of every other queue's reach; no ``weight``: only proportion reads it.
    3. ResourceQuota ``gpu-quota``: a hard stop at the limit for every pod, whatever its
       scheduler. Extended resources can only be quota'd as ``requests.<name>``.
    4. ResourceQuota ``gpu-quota-guaranteed``: pods of the guaranteed priority class stay
       within the guaranteed amounts, so borrowing always runs at the preemptible class.
    5. The workload ServiceAccount, without an API token.
    6. The NetworkPolicy.
    """
    labels = team_labels(team.slug)
    guaranteed = {r: g for r, (g, _) in quota.items()}
    limits = {r: lim for r, (_, lim) in quota.items()}
    queue_resources = [r for r in quota if not _is_dra_quota_key(r)]
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": team.namespace,
            "labels": {
                **labels,
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
                "pod-security.kubernetes.io/audit": "restricted",
                "pod-security.kubernetes.io/audit-version": "latest",
                "pod-security.kubernetes.io/warn": "restricted",
                "pod-security.kubernetes.io/warn-version": "latest",
            },
        },
    }
    queue = {
        "apiVersion": VOLCANO_QUEUE_API,
        "kind": "Queue",
        "metadata": {"name": team.queue_name, "labels": dict(labels)},
        "spec": {
            "reclaimable": True,
            "capability": {r: format_quantity(limits[r], r) for r in queue_resources},
            "deserved": {r: format_quantity(guaranteed[r], r) for r in queue_resources},
        },
    }
    if isinstance(quota, TeamQuota) and quota.queueing == "kueue":
        objects = [namespace, *(copy.deepcopy(dict(o)) for o in quota.queue_objects)]
    else:
        objects = [namespace, queue]
    if quota:
        objects.append(_resource_quota(team, RESOURCE_QUOTA_NAME, limits))
        scoped = _resource_quota(team, RESOURCE_QUOTA_NAME + "-guaranteed", guaranteed)
        scoped["spec"]["scopeSelector"] = {
            "matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": [guaranteed_priority_class]}
            ]
        }
        objects.append(scoped)
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": WORKLOAD_SERVICE_ACCOUNT, "namespace": team.namespace, "labels": dict(labels)},
            "automountServiceAccountToken": False,
        }
    )
    objects.append(_network_policy(team, ingress_namespaces))
    return objects


def priority_classes() -> list[dict[str, Any]]:
    """The cluster-scoped PriorityClasses the portal assigns (``names.PRIORITY_CLASSES``).

    Guaranteed work may preempt preemptible work; preemptible work never preempts anything
    (``preemptionPolicy: Never``), it waits for room. Values stay far below the system
    classes (2e9) so cluster components always win.
    """
    return [
        _priority_class(
            PRIORITY_GUARANTEED,
            1000,
            "PreemptLowerPriority",
            "GPU portal: within the team's guaranteed quota; may preempt borrowed capacity.",
        ),
        _priority_class(
            PRIORITY_PREEMPTIBLE,
            100,
            "Never",
            "GPU portal: borrowed capacity above the team's guarantee; preemptible, never preempts.",
        ),
    ]


def cluster_training_runtime(priority_class: str, queueing: str = "volcano") -> dict[str, Any]:
    """The portal's torch ClusterTrainingRuntime for one priority class.

    Gang-scheduled by Volcano (``podGroupPolicy.volcano``), one replicated job ``node``
    whose Job does not retry a failed pod (``backoffLimit: 0``, like the Volcano path's
    TerminateJob) but does not count a pod lost to preemption or drain (DisruptionTarget).
    The pod template is already restricted; TrainJobs add placement and labels.

    For a Kueue cluster (``queueing="kueue"``) the runtime is ``...-kueue-<tier>``: the
    same pod for the default scheduler and no ``podGroupPolicy``, since Kueue admits the
    TrainJob as a whole before any pod exists.
    """
    pod: dict[str, Any] = {}
    if queueing != "kueue":
        pod["schedulerName"] = SCHEDULER_NAME
    pod.update(
        {
            "priorityClassName": priority_class,
            "serviceAccountName": WORKLOAD_SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "restartPolicy": "Never",
            "securityContext": pod_security_context(),
            "containers": [
                {
                    "name": TRAINER_CONTAINER,
                    "image": TORCH_RUNTIME_IMAGE,
                    "securityContext": container_security_context(),
                    "volumeMounts": [_shm_mount()],
                }
            ],
            "volumes": [_shm_volume()],
        }
    )
    spec: dict[str, Any] = {"mlPolicy": {"numNodes": 1, "torch": {}}}
    if queueing != "kueue":
        spec["podGroupPolicy"] = {"volcano": {}}
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": torch_runtime_name(priority_class, queueing),
            "labels": {**cluster_labels(), "trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            **spec,
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": TRAINER_REPLICATED_JOB,
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "podFailurePolicy": {
                                        "rules": [
                                            {
                                                "action": "Ignore",
                                                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                                            }
                                        ]
                                    },
                                    "template": {"spec": pod},
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def cluster_training_runtimes(queueing: str = "volcano") -> list[dict[str, Any]]:
    return [cluster_training_runtime(p, queueing) for p in PRIORITY_CLASSES]


def cluster_objects(queueing: str = "volcano") -> list[dict[str, Any]]:
    """Cluster-scoped objects an admin installs once: PriorityClasses, then the runtimes
    (those of the cluster's queueing backend)."""
    return [*priority_classes(), *cluster_training_runtimes(queueing)]


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_GROUP,
        "fsGroup": FS_GROUP,
        # Change volume ownership only when the root of the volume is wrong: a large
        # workspace would otherwise be walked file by file on every start.
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def dra_quota_key(device_class: str) -> str:
    """ResourceQuota key that counts the DRA devices of ``device_class`` a namespace claims."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


def format_quantity(value: int | Fraction | Decimal, resource: str = "") -> str:
    """A Kubernetes quantity string for an exact number of base units.

    Whole numbers print as they are; fractions of CPU print in millicores, rounded up
    (a quota may be a little generous, never short). Every other resource is counted in
    whole units (the API refuses fractional extended-resource quotas), so a fraction there
    is a caller's bug.
    """
    if isinstance(value, bool) or not isinstance(value, int | Fraction | Decimal):
        raise TypeError(f"quantity of {resource or 'a resource'} must be a number, not {value!r}")
    if value < 0:
        raise ValueError(f"quantity of {resource or 'a resource'} must not be negative")
    exact = Fraction(value)
    if exact.denominator == 1:
        return str(exact.numerator)
    if resource != "cpu":
        raise ValueError(f"quantity of {resource or 'a resource'} must be a whole number, not {value}")
    millis = (Decimal(exact.numerator) * 1000 / Decimal(exact.denominator)).to_integral_value(ROUND_CEILING)
    return f"{millis}m"


# -- workloads ---------------------------------------------------------------------------


def _uses_dra(spec: WorkloadSpec) -> bool:
    return spec.offering.request_mode == "dra" and spec.gpus_per_replica > 0


def _kueue(spec: WorkloadSpec) -> bool:
    return spec.queueing == "kueue"


def _labels(spec: WorkloadSpec) -> dict[str, str]:
    return workload_labels(spec.team.slug, spec.id, spec.kind)


def _metadata(
    spec: WorkloadSpec,
    name: str,
    *,
    annotations: Mapping[str, str] | None = None,
    queued: bool = False,
) -> dict[str, Any]:
    """Object metadata; ``queued``: the object is what Kueue queues (it gets the queue label)."""
    portal = {**_labels(spec), **(_queue_labels(spec) if queued else {})}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": spec.team.namespace,
        "labels": merge_labels(dict(spec.labels), portal),
    }
    merged = merge_labels(dict(spec.annotations), annotations or {})
    if merged:
        meta["annotations"] = merged
    return meta


def _pod_labels(spec: WorkloadSpec, *, queued: bool = False) -> dict[str, str]:
    """Pod template labels; ``queued``: Kueue's pod integration queues the pod itself."""
    return merge_labels(dict(spec.labels), {**_labels(spec), **(_queue_labels(spec) if queued else {})})


def _queue_annotation(spec: WorkloadSpec) -> dict[str, str]:
    """Volcano's queue annotation; nothing on a Kueue cluster."""
    if _kueue(spec):
        return {}
    return {VOLCANO_QUEUE_ANNOTATION: team_queue_name(spec.team.slug)}


def _queue_labels(spec: WorkloadSpec) -> dict[str, str]:
    """Kueue's queue label naming the team namespace's LocalQueue; nothing on a Volcano cluster."""
    return {KUEUE_QUEUE_LABEL: KUEUE_LOCAL_QUEUE} if _kueue(spec) else {}


def _resources(spec: WorkloadSpec) -> dict[str, Any]:
    amounts = {"cpu": spec.cpu, "memory": spec.memory}
    offering = spec.offering
    if spec.gpus_per_replica and offering.request_mode == "device-plugin":
        if not offering.resource_name:
            raise ValueError(f"offering {offering.slug!r} uses the device plugin but names no resource")
        amounts[offering.resource_name] = str(spec.gpus_per_replica)
    resources: dict[str, Any] = {"requests": dict(amounts), "limits": dict(amounts)}
    if _uses_dra(spec):
        resources["claims"] = [{"name": GPU_CLAIM}]
    return resources


def _placement(spec: WorkloadSpec) -> dict[str, Any]:
    """Where the offering's pods may run; copies, so a manifest never aliases the offering."""
    offering = spec.offering
    placement: dict[str, Any] = {}
    if offering.node_selector:
        placement["nodeSelector"] = dict(offering.node_selector)
    if offering.node_affinity:
        placement["affinity"] = {"nodeAffinity": copy.deepcopy(dict(offering.node_affinity))}
    if offering.tolerations:
        placement["tolerations"] = [dict(t) for t in offering.tolerations]
    return placement


def _shm_volume() -> dict[str, Any]:
    # No sizeLimit: a memory-backed emptyDir counts against the container's memory limit.
    return {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}


def _shm_mount() -> dict[str, Any]:
    return {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def _env(spec: WorkloadSpec, extra: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in (*spec.env, *(extra or {}).items())]


def _container(
    spec: WorkloadSpec,
    name: str,
    *,
    image: str | None = None,
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    resources: Mapping[str, Any] | None = None,
    mounts: Sequence[Mapping[str, Any]] = (),
    extra_env: Mapping[str, str] | None = None,
    env_entries: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": image if image is not None else spec.image}
    command = spec.command if command is None else command
    args = spec.args if args is None else args
    if command:
        container["command"] = list(command)
    if args:
        container["args"] = list(args)
    env: list[dict[str, Any]] = [*_env(spec, extra_env), *(copy.deepcopy(dict(e)) for e in env_entries)]
    if env:
        container["env"] = env
    container["resources"] = dict(resources) if resources is not None else _resources(spec)
    container["securityContext"] = container_security_context()
    container["volumeMounts"] = [_shm_mount(), *mounts]
    return container


def _pod_spec(
    spec: WorkloadSpec,
    containers: list[dict[str, Any]],
    *,
    volumes: Sequence[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
    gpu_claim: bool = True,
) -> dict[str, Any]:
    pod: dict[str, Any] = {}
    if not _kueue(spec):
        pod["schedulerName"] = SCHEDULER_NAME  # on a Kueue cluster the default scheduler places pods
    pod.update(
        {
            "priorityClassName": spec.priority_class,
            "serviceAccountName": WORKLOAD_SERVICE_ACCOUNT,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
        }
    )
    if restart_policy:
        pod["restartPolicy"] = restart_policy
    if spec.kind == "training" and spec.max_runtime_seconds:
        pod["activeDeadlineSeconds"] = spec.max_runtime_seconds
    pod["securityContext"] = pod_security_context()
    pod.update(_placement(spec))
    if gpu_claim and _uses_dra(spec):
        pod["resourceClaims"] = [{"name": GPU_CLAIM, "resourceClaimTemplateName": gpu_claim_template_name(spec.name)}]
    pod["containers"] = containers
    pod["volumes"] = [_shm_volume(), *volumes]
    return pod


def _gpu_claim_template(spec: WorkloadSpec) -> dict[str, Any]:
    offering = spec.offering
    exactly: dict[str, Any] = {
        "deviceClassName": offering.dra_device_class,
        "allocationMode": "ExactCount",
        "count": spec.gpus_per_replica,
    }
    if offering.dra_selector:
        exactly["selectors"] = [{"cel": {"expression": offering.dra_selector}}]
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": gpu_claim_template_name(spec.name),
            "namespace": spec.team.namespace,
            "labels": _labels(spec),
        },
        "spec": {
            # Claims made from the template carry the workload's labels, so they can be
            # listed with the rest of the workload.
            "metadata": {"labels": _labels(spec)},
            "spec": {"devices": {"requests": [{"name": GPU_CLAIM, "exactly": exactly}]}},
        },
    }


def _workspace_pvc(spec: WorkloadSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": workspace_pvc_name(spec.name),
            "namespace": spec.team.namespace,
            "labels": _labels(spec),
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": f"{spec.workspace_gib}Gi"}},
        },
    }


# Kubeflow's notebook-server images start Jupyter under NB_PREFIX by themselves (their init
# runs `jupyter lab --ServerApp.base_url=${NB_PREFIX} ...`), which the Notebook's URL
# /notebook/<namespace>/<name>/ needs. Image references are fully qualified (jobs.specs).
KUBEFLOW_NOTEBOOK_IMAGES = (
    "ghcr.io/kubeflow/kubeflow/notebook-servers/",
    "docker.io/kubeflownotebookswg/",
    "public.ecr.aws/j1r0q0g6/notebooks/notebook-servers/",
)
# Any other Jupyter image is started the way Kubeflow's are (as the args after the image's
# entrypoint), unless the user gave a command or arguments: then starting Jupyter under
# $(NB_PREFIX) is theirs to do. No token or password: like Kubeflow's images, the
# notebook is reached only through the cluster's authenticated notebook route.
JUPYTER_UNDER_NB_PREFIX = (
    "jupyter",
    "lab",
    "--ip=0.0.0.0",
    f"--port={NOTEBOOK_PORT}",
    "--no-browser",
    "--ServerApp.base_url=$(NB_PREFIX)",
    "--ServerApp.token=",
    "--ServerApp.password=",
    "--ServerApp.allow_origin=*",
    "--ServerApp.allow_remote_access=True",
)


def serves_under_nb_prefix(image: str) -> bool:
    """Whether the image's own start serves Jupyter under ``NB_PREFIX`` (Kubeflow's images)."""
    return image.startswith(KUBEFLOW_NOTEBOOK_IMAGES)


def notebook_prefix(spec: WorkloadSpec) -> str:
    """The path the notebook controller gives the notebook (``NB_PREFIX``), and its URL's path."""
    return f"/notebook/{spec.team.namespace}/{workload_name(spec.name)}"


def _notebook_container(spec: WorkloadSpec, name: str, **kwargs: Any) -> dict[str, Any]:
    """The notebook's container: Jupyter under NB_PREFIX, and ready only once it answers there.

    The readiness probe asks Jupyter's unauthenticated ``<prefix>/api`` on the notebook
    port, so the pod (and the portal's "Open notebook") is ready exactly when the URL
    the user opens answers, not merely when the process runs.
    """
    start = None
    if not spec.command and not spec.args and not serves_under_nb_prefix(spec.image):
        start = list(JUPYTER_UNDER_NB_PREFIX)
    container = _container(spec, name, args=start, **kwargs)
    container["readinessProbe"] = {
        "httpGet": {"path": f"{notebook_prefix(spec)}/api", "port": NOTEBOOK_PORT},
        "periodSeconds": 10,
    }
    return container


def _notebook(spec: WorkloadSpec) -> dict[str, Any]:
    name = workload_name(spec.name)
    mounts, volumes = [], []
    if spec.workspace_gib:
        mounts.append({"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE_MOUNT_PATH})
        volumes.append(
            {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": workspace_pvc_name(spec.name)}}
        )
    # The notebook controller copies the Notebook's labels and annotations onto the pod
    # (a Notebook's template has no metadata of its own), which is how the pod gets the
    # portal's labels and Volcano's queue annotation (or Kueue's queue label).
    annotations = _queue_annotation(spec)
    if spec.stopped:
        annotations[NOTEBOOK_STOPPED_ANNOTATION] = STOPPED_VALUE
    # The controller reports the state of the container named like the Notebook.
    container = _notebook_container(spec, name, mounts=mounts)
    return {
        "apiVersion": NOTEBOOK_API,
        "kind": "Notebook",
        "metadata": _metadata(spec, name, annotations=annotations, queued=True),
        "spec": {"template": {"spec": _pod_spec(spec, [container], volumes=volumes)}},
    }


def _notebook_statefulset(spec: WorkloadSpec) -> list[dict[str, Any]]:
    """A DRA notebook: the Service and StatefulSet the notebook controller would have made.

    Kubeflow's Notebook v1.11 schema (and controller) predate DRA: the pod template has no
    ``resourceClaims`` and containers no ``resources.claims``, so the API server would prune
    the claim and the notebook would start without its GPU. For DRA offerings the portal
    therefore builds the controller's output itself: a StatefulSet with the same pod (plus
    what the controller adds: port 8888, working directory, ``NB_PREFIX``) and the ClusterIP
    Service ``<name>`` on port 80. Stopping sets replicas to 0. Kubeflow's Istio
    VirtualService is not created: the portal's own route to notebooks must cover these.
    """
    name = workload_name(spec.name)
    mounts, volumes = [], []
    if spec.workspace_gib:
        mounts.append({"name": WORKSPACE_VOLUME, "mountPath": WORKSPACE_MOUNT_PATH})
        volumes.append(
            {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": workspace_pvc_name(spec.name)}}
        )
    container = _notebook_container(spec, name, mounts=mounts, extra_env={"NB_PREFIX": notebook_prefix(spec)})
    container["ports"] = [{"name": "notebook-port", "containerPort": NOTEBOOK_PORT, "protocol": "TCP"}]
    container["workingDir"] = WORKSPACE_MOUNT_PATH
    selector = {"statefulset": name}
    pod_metadata = {
        "labels": {**_pod_labels(spec, queued=True), **selector, "notebook-name": name},
        "annotations": merge_labels(dict(spec.annotations), _queue_annotation(spec)),
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec, name),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(selector),
            "ports": [{"name": f"http-{name}", "port": 80, "targetPort": NOTEBOOK_PORT, "protocol": "TCP"}],
        },
    }
    service["metadata"].pop("annotations", None)
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(spec, name, queued=True),
        "spec": {
            "replicas": 0 if spec.stopped else 1,
            "serviceName": name,
            "selector": {"matchLabels": dict(selector)},
            "template": {"metadata": pod_metadata, "spec": _pod_spec(spec, [container], volumes=volumes)},
        },
    }
    return [service, statefulset]


def _train_job(spec: WorkloadSpec) -> dict[str, Any]:
    trainer: dict[str, Any] = {"image": spec.image}
    if spec.command:
        trainer["command"] = list(spec.command)
    if spec.args:
        trainer["args"] = list(spec.args)
    if spec.env:
        trainer["env"] = _env(spec)
    trainer["numNodes"] = spec.replicas
    # torchrun's "auto" starts one process per GPU, but per CPU core on a CPU-only node.
    trainer["numProcPerNode"] = max(spec.gpus_per_replica, 1)
    trainer["resourcesPerNode"] = _resources(spec)
    pod_patch: dict[str, Any] = {
        "serviceAccountName": WORKLOAD_SERVICE_ACCOUNT,
        "securityContext": pod_security_context(),
        **_placement(spec),
        "containers": [{"name": TRAINER_CONTAINER, "securityContext": container_security_context()}],
    }
    # Trainer's Volcano plugin takes the PodGroup's queue from the JobSet template's
    # annotations, which runtimePatches may set. Kueue reads the TrainJob's own label.
    jobset_metadata: dict[str, Any] = {"labels": _labels(spec)}
    if _queue_annotation(spec):
        jobset_metadata["annotations"] = _queue_annotation(spec)
    patch = {
        "manager": RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {
            "template": {
                "metadata": jobset_metadata,
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": TRAINER_REPLICATED_JOB,
                            "template": {
                                "spec": {"template": {"metadata": {"labels": _pod_labels(spec)}, "spec": pod_patch}}
                            },
                        }
                    ]
                },
            }
        },
    }
    job_spec: dict[str, Any] = {
        "runtimeRef": {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
            "name": torch_runtime_name(spec.priority_class, spec.queueing),
        },
    }
    if _kueue(spec):
        job_spec["suspend"] = True  # Kueue's TrainJob integration resumes it once admitted
    job_spec["trainer"] = trainer
    job_spec["runtimePatches"] = [patch]
    if spec.max_runtime_seconds:
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": _metadata(spec, workload_name(spec.name), annotations=_queue_annotation(spec), queued=True),
        "spec": job_spec,
    }


def _task(
    spec: WorkloadSpec,
    name: str,
    replicas: int,
    pod: dict[str, Any],
    policies: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {"metadata": {"labels": _pod_labels(spec)}, "spec": pod},
    }
    if policies:
        task["policies"] = copy.deepcopy(policies)
    return task


def _torch_env(spec: WorkloadSpec, master_addr: str, rank_annotation: str) -> list[dict[str, Any]]:
    """torchrun's PET_* variables, as Trainer's torch plugin sets them on a TrainJob's nodes.

    The node rank is read from the pod's own index annotation (Kubernetes resolves the
    fieldRef when the container starts), so one pod template serves every node.
    """
    return [
        {"name": "PET_NNODES", "value": str(spec.replicas)},
        # As the TrainJob's numProcPerNode: one process per GPU, one on a CPU-only node.
        {"name": "PET_NPROC_PER_NODE", "value": str(max(spec.gpus_per_replica, 1))},
        {
            "name": "PET_NODE_RANK",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{rank_annotation}']"}},
        },
        {"name": "PET_MASTER_ADDR", "value": master_addr},
        {"name": "PET_MASTER_PORT", "value": str(TORCH_MASTER_PORT)},
    ]


def _mpi_ssh_env(ssh_args: str) -> dict[str, str]:
    """How mpirun reaches the workers' sshd: Open MPI 4 reads OMPI_MCA_plm_rsh_args, Open
    MPI 5 (PRRTE) PRTE_MCA_plm_ssh_args. Neither Volcano's ssh config nor a stock image
    names the non-root sshd's port, so without ``-p`` mpirun would knock on port 22."""
    return {"OMPI_MCA_plm_rsh_args": ssh_args, "PRTE_MCA_plm_ssh_args": ssh_args}


def _volcano_job(spec: WorkloadSpec) -> dict[str, Any]:
    """A gang-scheduled Volcano Job: torch (on DRA), MPI or a custom distributed program.

    * torch: task ``node`` of n pods with torchrun's PET_* variables (``_torch_env``); the
      rank is Volcano's task index, node 0 is ``<job>-node-0.<job>`` (``svc`` gives pods
      stable host names), ``env`` also sets VC_TASK_INDEX.
    * mpi: task ``launcher`` (runs the user's command, e.g. mpirun; no GPU) and ``worker``
      (n pods running the image's default entrypoint, which must start sshd as the
      non-root user on port 2222). ``ssh`` distributes a key pair and an ssh config under
      ``MPI_SSH_KEY_PATH`` (it has no port option), ``mpi`` sets MPI_HOST and opens port
      2222; the launcher's Open MPI ssh arguments name that port, key and config.
    * custom: task ``worker`` with n pods; ``env`` sets VC_TASK_INDEX, ``svc`` the host list.
    """
    n = spec.replicas
    name = workload_name(spec.name)
    if spec.framework == "torch":
        plugins: dict[str, list[str]] = {"env": [], "svc": []}
        # Volcano's svc plugin names pod i of task t "<job>-<t>-<i>" in the subdomain "<job>".
        master = f"{name}-{TORCH_NODE_JOB}-0.{name}"
        container = _container(
            spec, TORCH_NODE_JOB, env_entries=_torch_env(spec, master, VOLCANO_TASK_INDEX_ANNOTATION)
        )
        tasks = [_task(spec, TORCH_NODE_JOB, n, _pod_spec(spec, [container], restart_policy="Never"))]
    elif spec.framework == "mpi":
        plugins = {
            "mpi": ["--master=launcher", "--worker=worker", f"--port={MPI_SSH_PORT}"],
            "ssh": [f"--ssh-key-file-path={MPI_SSH_KEY_PATH}"],
            "svc": [],
        }
        launcher_resources = {"requests": dict(MPI_LAUNCHER_RESOURCES), "limits": dict(MPI_LAUNCHER_RESOURCES)}
        ssh_args = f"-p {MPI_SSH_PORT} -i {MPI_SSH_KEY_PATH}/id_rsa -F {MPI_SSH_KEY_PATH}/config"
        # The launcher retries in place until the workers' sshd answers. It needs no GPU,
        # but it keeps the offering's placement: next to its workers, and off GPU nodes
        # when the offering is CPU-only.
        launcher = _pod_spec(
            spec,
            [_container(spec, "launcher", resources=launcher_resources, extra_env=_mpi_ssh_env(ssh_args))],
            restart_policy="OnFailure",
            gpu_claim=False,
        )
        worker = _pod_spec(spec, [_container(spec, "worker", command=(), args=())], restart_policy="OnFailure")
        tasks = [_task(spec, "launcher", 1, launcher, _COMPLETE_WHEN_DONE), _task(spec, "worker", n, worker)]
    else:
        plugins = {"env": [], "svc": []}
        tasks = [_task(spec, "worker", n, _pod_spec(spec, [_container(spec, "worker")], restart_policy="Never"))]
    return {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "metadata": _metadata(spec, name),
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "queue": team_queue_name(spec.team.slug),
            "priorityClassName": spec.priority_class,
            "minAvailable": sum(t["replicas"] for t in tasks),  # gang: all pods or none
            "maxRetry": VOLCANO_MAX_RETRY,
            "policies": copy.deepcopy(_RESTART_GANG_ON_EVICTION),
            "plugins": plugins,
            "tasks": tasks,
        },
    }


def _indexed_job(
    spec: WorkloadSpec, name: str, pods: int, pod: dict[str, Any], *, backoff_limit: int = 0
) -> dict[str, Any]:
    """A replicated job of a JobSet: one Indexed Job of ``pods`` pods."""
    job: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": pods,
        "parallelism": pods,
        "backoffLimit": backoff_limit,
    }
    if pod.get("restartPolicy") == "Never":  # a pod failure policy needs restartPolicy Never
        job["podFailurePolicy"] = copy.deepcopy(_IGNORE_DISRUPTIONS)
    job["template"] = {"metadata": {"labels": _pod_labels(spec)}, "spec": pod}
    return {"name": name, "replicas": 1, "template": {"spec": job}}


def _jobset(spec: WorkloadSpec) -> dict[str, Any]:
    """Training on a Kueue cluster that is not a TrainJob: a suspended JobSet for Kueue to admit.

    The replicated jobs follow ``_volcano_job``'s tasks (see the module docstring):

    * torch: ``node``, ``replicas`` pods with the PET_* variables; PET_MASTER_ADDR is pod 0
      of ``node`` and PET_NODE_RANK is read from the index annotation Kubernetes writes on
      each pod (as Trainer does).
    * mpi: ``launcher`` (1 pod, the user's command, no GPU, OnFailure) and ``worker``
      (``replicas`` pods, the image's entrypoint, OnFailure); the JobSet succeeds when the
      launcher does, and the workers are then stopped.
    * custom: ``worker``, ``replicas`` pods.
    """
    name = workload_name(spec.name)
    n = spec.replicas

    def hosts(job: str, count: int) -> list[str]:
        # JobSet names pod i of job 0 of replicated job r "<jobset>-<r>-0-<i>" in the subdomain <jobset>.
        return [f"{name}-{job}-0-{i}.{name}" for i in range(count)]

    success: dict[str, Any] | None = None
    if spec.framework == "torch":
        env = _torch_env(spec, hosts(TORCH_NODE_JOB, 1)[0], JOB_COMPLETION_INDEX_ANNOTATION)
        container = _container(spec, TORCH_NODE_JOB, env_entries=env)
        jobs = [_indexed_job(spec, TORCH_NODE_JOB, n, _pod_spec(spec, [container], restart_policy="Never"))]
    elif spec.framework == "mpi":
        launcher_resources = {"requests": dict(MPI_LAUNCHER_RESOURCES), "limits": dict(MPI_LAUNCHER_RESOURCES)}
        # The image brings its keys (~/.ssh); the workers' host keys are new in every run.
        ssh_args = f"-p {MPI_SSH_PORT} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
        launcher_env = {"MPI_HOST": ",".join(hosts("worker", n)), **_mpi_ssh_env(ssh_args)}
        launcher = _pod_spec(
            spec,
            [_container(spec, "launcher", resources=launcher_resources, extra_env=launcher_env)],
            restart_policy="OnFailure",
            gpu_claim=False,
        )
        worker_container = _container(spec, "worker", command=(), args=())
        # Declared so that the port the launcher dials is written down next to the sshd.
        worker_container["ports"] = [{"name": "ssh", "containerPort": MPI_SSH_PORT, "protocol": "TCP"}]
        worker = _pod_spec(spec, [worker_container], restart_policy="OnFailure")
        jobs = [
            _indexed_job(spec, "launcher", 1, launcher, backoff_limit=MPI_BACKOFF_LIMIT),
            _indexed_job(spec, "worker", n, worker, backoff_limit=MPI_BACKOFF_LIMIT),
        ]
        success = {"operator": "Any", "targetReplicatedJobs": ["launcher"]}
    else:
        jobs = [_indexed_job(spec, "worker", n, _pod_spec(spec, [_container(spec, "worker")], restart_policy="Never"))]
    jobset_spec: dict[str, Any] = {
        "suspend": True,  # Kueue's JobSet integration resumes it once admitted
        "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
        "replicatedJobs": jobs,
        "failurePolicy": {"maxRestarts": 0},
    }
    if success:
        jobset_spec["successPolicy"] = success
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": _metadata(spec, name, queued=True),
        "spec": jobset_spec,
    }


def _inference_service(spec: WorkloadSpec) -> dict[str, Any]:
    """An InferenceService in the endpoint's KServe mode, named explicitly on the object.

    KServe's install default is Knative (the shipped ``inferenceservice-config`` says
    "Serverless"), so an unannotated endpoint would become a Knative Service whatever the
    portal meant. In Knative mode the predictor's pod fields become a Knative revision
    template, which Knative Serving validates against its field mask (see
    ``_knative_pod``); in Standard mode they become a plain Deployment's pod.
    """
    name = workload_name(spec.name)
    knative = spec.deployment_mode == KSERVE_KNATIVE
    if knative and _uses_dra(spec):
        # Knative Serving never allows resourceClaims; jobs.specs.endpoint_deployment_mode picks Standard.
        raise ValueError("an endpoint on a DRA offering must use KServe's Standard mode")
    canary = bool(spec.canary_storage_uri) and spec.canary_traffic_percent is not None
    if canary and not knative and not spec.model_format:
        raise ValueError("a Standard-mode canary needs a model endpoint (spec.canary merges over predictor.model)")
    # Knative keeps the previous revision for the rest of the traffic: the predictor is the canary.
    storage_uri = spec.canary_storage_uri if canary and knative else spec.storage_uri
    predictor: dict[str, Any] = {
        "minReplicas": spec.replicas,
        "maxReplicas": spec.max_replicas,
    }
    if canary and knative:
        predictor["canaryTrafficPercent"] = spec.canary_traffic_percent
    # The predictor's labels and annotations go onto its pods (Kueue's pod integration
    # queues each of them by its label).
    predictor["labels"] = _pod_labels(spec, queued=True)
    if _queue_annotation(spec):
        predictor["annotations"] = _queue_annotation(spec)
    pod = _pod_spec(spec, [])
    del pod["containers"]
    if knative:
        pod = _knative_pod(pod)
    predictor.update(pod)
    container_security = _knative_container_security_context() if knative else container_security_context()
    if spec.model_format:
        model: dict[str, Any] = {"modelFormat": {"name": spec.model_format}, "storageUri": storage_uri}
        if spec.image:
            model["image"] = spec.image  # a patched build of the runtime's server
        if spec.args:
            model["args"] = list(spec.args)
        if spec.env:
            model["env"] = _env(spec)
        model["resources"] = _resources(spec)
        model["securityContext"] = container_security
        model["volumeMounts"] = [_shm_mount()]
        predictor["model"] = model
    else:
        # KServe's storage initializer also serves custom containers that name STORAGE_URI.
        extra = {"STORAGE_URI": storage_uri} if storage_uri else None
        container = _container(spec, "kserve-container", extra_env=extra)
        container["securityContext"] = container_security
        predictor["containers"] = [container]
    return {
        "apiVersion": KSERVE_API,
        "kind": "InferenceService",
        "metadata": _metadata(
            spec, name, annotations={KSERVE_DEPLOYMENT_MODE_ANNOTATION: spec.deployment_mode or KSERVE_STANDARD}
        ),
        "spec": {"predictor": predictor, **({"canary": [_standard_canary(spec)]} if canary and not knative else {})},
    }


def _standard_canary(spec: WorkloadSpec) -> dict[str, Any]:
    """KServe v0.20's Standard-mode canary: a second Deployment of the predictor with another model.

    KServe merges ``predictor`` over the stable predictor, so only the model version changes;
    the canary may not set replicas or autoscaling of its own (it gets
    ``ceil(minReplicas * trafficPercent / 100)`` replicas, taken from the stable Deployment).
    KServe accepts ``spec.canary`` only with the Standard annotation set explicitly.
    """
    return {
        "predictor": {
            "name": CANARY_PREDICTOR,
            "model": {
                "name": "kserve-container",  # the schema requires it; KServe's name for the model container
                "modelFormat": {"name": spec.model_format},
                "storageUri": spec.canary_storage_uri,
            },
        },
        "trafficPercent": spec.canary_traffic_percent,
    }


def _knative_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """The predictor's pod fields as Knative Serving accepts them.

    Knative's field mask never allows ``securityContext.fsGroupChangePolicy`` and allows a
    pod-level ``securityContext`` only with the ``kubernetes.podspec-securitycontext`` flag,
    so the pod gets none: every container carries the restricted settings itself
    (``_knative_container_security_context``), which needs no flag. No endpoint mounts a
    writable volume, so nothing needs ``fsGroup``. What the portal's placement does need
    (``schedulerName``, ``priorityClassName``, ``nodeSelector``, ``affinity``,
    ``tolerations``) stays: the cluster must enable those flags in ConfigMap
    ``knative-serving/config-features`` (README, "KServe"), or Knative refuses the endpoint.
    """
    pod = {k: v for k, v in pod.items() if k != "securityContext"}
    return pod


def _knative_container_security_context() -> dict[str, Any]:
    return {**container_security_context(), "runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_GROUP}


# -- team and cluster objects -------------------------------------------------------------


def _is_dra_quota_key(resource: str) -> bool:
    return resource.endswith(".deviceclass.resource.k8s.io/devices")


def _resource_quota(team: TeamRef, name: str, amounts: Mapping[str, Any]) -> dict[str, Any]:
    hard = {}
    for resource, amount in amounts.items():
        key = resource if _is_dra_quota_key(resource) else f"requests.{resource}"
        hard[key] = format_quantity(amount, resource)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {"hard": hard},
    }


def _network_policy(team: TeamRef, ingress_namespaces: Sequence[str]) -> dict[str, Any]:
    """Ingress from the team's own pods and the ingress namespaces; egress anywhere but metadata.

    Egress also allows every pod in the cluster explicitly: some CNIs (Cilium) do not
    match pod IPs with ipBlock rules, and DNS lives in kube-system. Other teams' pods
    stay unreachable because their own policy admits only their namespace.
    """
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {}}]}]
    if ingress_namespaces:
        ingress.append(
            {
                "from": [
                    {
                        "namespaceSelector": {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/metadata.name",
                                    "operator": "In",
                                    "values": list(ingress_namespaces),
                                }
                            ]
                        }
                    }
                ]
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": NETWORK_POLICY_NAME, "namespace": team.namespace, "labels": team_labels(team.slug)},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": [
                {
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": list(METADATA_CIDRS_V4)}},
                        {"ipBlock": {"cidr": "::/0", "except": list(METADATA_CIDRS_V6)}},
                    ]
                },
                {"to": [{"namespaceSelector": {}}]},
            ],
        },
    }


def _priority_class(name: str, value: int, preemption: str, description: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": cluster_labels()},
        "value": value,
        "globalDefault": False,
        "preemptionPolicy": preemption,
        "description": description,
    }
