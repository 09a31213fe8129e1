"""The level-triggered reconcile: make the cluster and the database agree.

Runs every few seconds from Celery beat, so nothing is lost when Redis, a worker or
the cluster was down when a task should have run.

1. Observe: one label-selected list per kind the portal manages (never one GET per
   object), grouped by the workload-id label. On a Kueue cluster the kinds follow the
   builders (JobSets instead of Volcano Jobs), and Kueue's Workloads are listed too, for
   the reason work still waits (Kueue copies the portal's labels onto them, see
   ``quotas.kueue``); they are read, never written.
2. For each workload that should be in the cluster:
   - queued for longer than a task takes (its task was lost): submit it now;
   - submitted or running but its main object vanished: apply it again;
   - otherwise derive its phase from the objects (a pure function) and record it, and for
     an endpoint the replicas it runs when that count changed (``jobs.scale``);
   - running past its maximum runtime: stop it.
3. A stopped notebook whose object lost the stopped annotation gets it back.
4. Every object the portal owns with no workload that should have it is deleted.

A converged world makes no writes: applies and deletes happen only on drift, and the
database is written only when something changed.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from jobs import lifecycle, scale
from jobs.kube.labels import NOTEBOOK_STOPPED_ANNOTATION, WORKLOAD_ID_LABEL, managed_selector
from jobs.kube.manifests import JOBSET_API, cluster_objects
from jobs.kube.status import derive
from jobs.models import ACTIVE_STATES, Kind, State, Workload

log = logging.getLogger(__name__)

# Kinds whose objects belong to one workload, and the main kind of each workload type.
NOTEBOOK = ("kubeflow.org/v1", "Notebook")
STATEFULSET = ("apps/v1", "StatefulSet")  # notebooks on DRA offerings (see manifests.main_object_type)
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
VOLCANO_JOB = ("batch.volcano.sh/v1alpha1", "Job")
JOBSET = (JOBSET_API, "JobSet")  # training that is not a TrainJob, on a Kueue cluster
ISVC = ("serving.kserve.io/v1beta1", "InferenceService")
PVC = ("v1", "PersistentVolumeClaim")
SERVICE = ("v1", "Service")  # DRA notebooks get one, as Kubeflow's controller would make
CLAIM_TEMPLATE = ("resource.k8s.io/v1", "ResourceClaimTemplate")
POD = ("v1", "Pod")
WORKLOAD_KINDS = (NOTEBOOK, STATEFULSET, TRAINJOB, VOLCANO_JOB, ISVC, PVC, SERVICE, CLAIM_TEMPLATE)
KUEUE_WORKLOAD_KINDS = (NOTEBOOK, STATEFULSET, TRAINJOB, JOBSET, ISVC, PVC, SERVICE, CLAIM_TEMPLATE)
KUEUE_WORKLOAD = ("kueue.x-k8s.io/v1beta2", "Workload")  # Kueue's, read only


def workload_kinds(queueing: str) -> tuple[tuple[str, str], ...]:
    """The kinds listed each tick: a Kueue cluster may not serve Volcano's kinds at all."""
    return KUEUE_WORKLOAD_KINDS if queueing == "kueue" else WORKLOAD_KINDS


def main_kind(workload: Workload, queueing: str | None = None) -> tuple[str, str]:
    """The kind whose status tells the phase, from the row alone (no spec building per tick).

    Mirrors ``jobs.kube.manifests.main_object_type``; a test pins the two together.
    """
    dra = workload.offering.request_mode == "dra"
    if workload.kind == Kind.NOTEBOOK:
        return STATEFULSET if dra else NOTEBOOK
    if workload.kind == Kind.ENDPOINT:
        return ISVC
    if workload.framework == "torch" and not dra:
        return TRAINJOB
    return JOBSET if (queueing or lifecycle.queueing()) == "kueue" else VOLCANO_JOB


def expected_pods(workload: Workload) -> int:
    if workload.kind == Kind.NOTEBOOK:
        return 1
    if workload.kind == Kind.TRAINING and workload.framework == "mpi":
        return workload.replicas + 1  # the launcher runs beside the workers
    return workload.replicas


@dataclass
class Report:
    lists: int = 0
    applied: list[int] = field(default_factory=list)
    submitted: list[int] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    transitions: int = 0
    scales: int = 0  # endpoints whose replica count changed (a WorkloadScale row each)
    cluster_objects_applied: bool = False
    seconds: float = 0.0

    @property
    def writes(self) -> int:
        return len(self.applied) + len(self.submitted) + len(self.deleted) + int(self.cluster_objects_applied)


def _workload_id(obj: dict) -> int | None:
    raw = (obj["metadata"].get("labels") or {}).get(WORKLOAD_ID_LABEL)
    return int(raw) if raw and raw.isdigit() else None


def _stopped(main: dict) -> bool:
    if main.get("kind") == "StatefulSet":
        return (main.get("spec") or {}).get("replicas") == 0
    return NOTEBOOK_STOPPED_ANNOTATION in (main["metadata"].get("annotations") or {})


def observe_cluster(cluster, report: Report, queueing: str = "volcano") -> tuple[dict, dict]:
    """One list per kind: {kind: {workload id: [objects]}} and pods by workload id."""
    by_kind: dict[tuple[str, str], dict[int, list[dict]]] = {}
    for api_version, kind in workload_kinds(queueing):
        grouped: dict[int, list[dict]] = defaultdict(list)
        for obj in cluster.list(api_version, kind, label_selector=managed_selector()):
            wid = _workload_id(obj)
            if wid is not None:
                grouped[wid].append(obj)
        by_kind[(api_version, kind)] = grouped
        report.lists += 1
    pods: dict[int, list[dict]] = defaultdict(list)
    for pod in cluster.list(*POD, label_selector=managed_selector()):
        wid = _workload_id(pod)
        if wid is not None:
            pods[wid].append(pod)
    report.lists += 1
    return by_kind, pods


def observe_queue(cluster, report: Report) -> dict[int, list[dict]]:
    """Kueue's Workloads by workload id (one list): why admitted work has not started."""
    grouped: dict[int, list[dict]] = defaultdict(list)
    for obj in cluster.list(*KUEUE_WORKLOAD, label_selector=managed_selector()):
        wid = _workload_id(obj)
        if wid is not None:
            grouped[wid].append(obj)
    report.lists += 1
    return grouped


def ensure_cluster_objects(cluster, report: Report, queueing: str | None = None) -> None:
    """The PriorityClasses and ClusterTrainingRuntimes every workload relies on.

    On a Kueue cluster, the runtimes without Volcano's gang scheduling, and the Kueue
    objects no team owns: a ResourceFlavor per GPU class and the lending pool
    (``quotas.kueue.cluster_kueue_objects``).

    Level-triggered like the rest: listed each pass, applied only when one is missing or,
    for the Kueue objects (whose amounts follow the quotas and the observed capacity), no
    longer says what the database does.
    """
    queueing = queueing or lifecycle.queueing()
    objects = cluster_objects(queueing)
    if queueing == "kueue":
        from quotas.kueue import cluster_kueue_objects

        objects = [*objects, *cluster_kueue_objects()]
    wanted = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    present: dict[tuple[str, str], dict] = {}
    for api_version, kind in dict.fromkeys((o["apiVersion"], o["kind"]) for o in objects):
        for o in cluster.list(api_version, kind, label_selector=managed_selector()):
            present[(kind, o["metadata"]["name"])] = o
        report.lists += 1
    stale = [
        key
        for key, obj in wanted.items()
        if key not in present or (obj["apiVersion"].startswith("kueue.") and not _covers(present[key], obj))
    ]
    if stale:
        cluster.apply_all(objects)
        report.cluster_objects_applied = True


def _covers(present, wanted) -> bool:
    """Every field of ``wanted`` has its value in ``present`` (which may hold defaults too)."""
    if isinstance(wanted, dict):
        return isinstance(present, dict) and all(k in present and _covers(present[k], v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (
            isinstance(present, list)
            and len(present) == len(wanted)
            and all(_covers(p, w) for p, w in zip(present, wanted, strict=True))
        )
    return present == wanted


def reconcile(cluster, now=None) -> Report:
    started = time.monotonic()
    now = now or timezone.now()
    report = Report()
    queueing = lifecycle.queueing()
    ensure_cluster_objects(cluster, report, queueing)
    by_kind, pods = observe_cluster(cluster, report, queueing)
    queued = observe_queue(cluster, report) if queueing == "kueue" else {}
    retention = timedelta(seconds=settings.FINISHED_OBJECT_RETENTION_SECONDS)
    lost_after = timedelta(seconds=settings.LOST_TASK_AFTER_SECONDS)

    # Workloads that may own objects: active ones, stopped notebooks, and recently finished
    # ones (their objects stay a while so logs and events can still be read).
    keep = Workload.objects.filter(
        Q(state__in=ACTIVE_STATES) | Q(state=State.STOPPED, kind=Kind.NOTEBOOK) | Q(finished_at__gte=now - retention),
        deleted_at__isnull=True,
    ).select_related("team", "offering")
    keep = list(keep)
    # Endpoints: the replica count last recorded, so only a change is written (one query).
    scales = scale.latest(w.pk for w in keep if w.kind == Kind.ENDPOINT and w.state in (State.SUBMITTED, State.RUNNING))
    wanted: set[int] = set()
    for workload in keep:
        wanted.add(workload.pk)
        kind = main_kind(workload, queueing)
        main = (by_kind[kind].get(workload.pk) or [None])[0]
        if workload.state == State.QUEUED:
            if now - workload.updated_at > lost_after:
                log.warning("workload %s was queued for %s: submitting it", workload.pk, now - workload.updated_at)
                if lifecycle.submit(workload.pk, cluster):
                    report.submitted.append(workload.pk)
        elif workload.state in (State.SUBMITTED, State.RUNNING):
            if main is None:
                log.warning("workload %s lost its %s: applying it again", workload.pk, kind[1])
                lifecycle.reapply(workload, cluster)
                report.applied.append(workload.pk)
                continue
            seen = derive(
                kind[1], main, pods.get(workload.pk, []), expected_pods(workload), queued.get(workload.pk, ())
            )
            if seen.replicas is not None and scale.record(workload, seen.replicas, now, scales.get(workload.pk)):
                report.scales += 1
            if lifecycle.observe(workload, seen):
                report.transitions += 1
            if lifecycle.enforce_deadline(workload, now):
                report.transitions += 1
        elif workload.state == State.STOPPED and main is not None and not _stopped(main):
            lifecycle.teardown(workload.pk, cluster)
            report.applied.append(workload.pk)

    for (api_version, kind), grouped in by_kind.items():
        for wid, objects in grouped.items():
            if wid in wanted:
                continue
            for obj in objects:
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                cluster.delete(api_version, kind, meta["name"], meta.get("namespace"))
                report.deleted.append(f"{kind}/{meta.get('namespace', '')}/{meta['name']}")
    report.seconds = time.monotonic() - started
    return report
