"""A minimal Kueue: Workloads, quota admission in a cohort, and the gate on plain pods.

Active only when the sandbox's cluster profile says ``queueing: kueue``. It plays the
integrations the portal expects (``quotas.kueue`` documents that configuration):
``trainer.kubeflow.org/trainjob``, ``jobset.x-k8s.io/jobset`` and ``pod``, with
``labelKeysToCopy`` holding the portal's labels, so that Workloads can be listed and grouped
like everything else. It follows the manager configuration in the cluster's ConfigMap
(``sandbox.kueue_config``): ``resources.excludeResourcePrefixes`` (the portal's: cpu and
memory, since its ClusterQueues hold GPUs only) and ``resources.deviceClassMappings``.

1. Webhook (``gate_pod``, called from the sandbox's admission): a new pod with the label
   ``kueue.x-k8s.io/queue-name`` that no queued job owns gets the scheduling gate
   ``kueue.x-k8s.io/admission``; the scheduler leaves gated pods alone.
2. A Workload for every queued job: a TrainJob or JobSet with the queue label (pod sets as
   its controller would make the pods: the TrainJob's replicated job ``node``, one per
   replicated job of a JobSet) and every gated pod (pod set ``main``), named
   ``<kind>-<name>-<hash>``, owned by it (so it goes when the job or pod goes).
3. Admission, per ClusterQueue in priority then creation order (BestEffortFIFO: what
   does not fit does not block what comes after). For each pod set and each resource
   it asks for (cpu, memory and ephemeral storage are excluded), the ClusterQueue's
   resource group that covers it is searched flavor by flavor: the ResourceFlavor must
   exist and its node labels must agree with the pod's nodeSelector, and the request must
   fit (Kueue's words when it does not):

   - ``request > maximum capacity``: more than nominalQuota + borrowingLimit, and than the
     cohort's nominal quota (without a cohort: than nominalQuota);
   - ``N more needed``: more than is unused now, in the queue (nominal + borrowing limit
     - usage) and in the cohort (nominal quotas - usages of all its queues).

   DRA: each pod's ResourceClaimTemplates are read; every device request counts
   ``count`` (default 1) of the resource its DeviceClass is mapped to. A class without a
   mapping makes the Workload inadmissible ("DeviceClass X is not mapped in DRA
   configuration for podset Y"), as do claims Kueue cannot count (``allocationMode: All``,
   ``firstAvailable``, ``adminAccess``) and, with the ``KueueDRAIntegration`` gate off, any
   DRA use. Claims named directly (``resourceClaimName``) are not counted, as in Kueue.

   An admitted Workload gets ``status.admission`` (flavor and usage per pod set) and
   ``QuotaReserved``/``Admitted`` True; then the TrainJob or JobSet is resumed
   (``spec.suspend: false``) or the pod's gate removed. One that does not fit keeps
   ``QuotaReserved`` False, reason Pending, with "couldn't assign flavors to pod set
   <name>: <reasons>".

   Preemption, as the ClusterQueue's ``spec.preemption`` allows: a Workload that does not
   fit may evict admitted Workloads of other ClusterQueues in its cohort that borrow
   (``reclaimWithinCohort``: Any, or LowerPriority), but only if it then stays within its
   own nominal quota, and lower-priority Workloads of its own ClusterQueue
   (``withinClusterQueue: LowerPriority``). Candidates go other queues first, lower
   priority first, most recently admitted first, until the Workload fits; those it turns
   out not to need are kept. An evicted Workload gets ``Evicted``/``Preempted`` with
   Kueue's message and loses its quota; its job is suspended (its pod deleted), and it
   waits again. The preemptor is admitted in the same pass.
4. A job or pod that finished makes its Workload ``Finished``; it no longer counts.
5. Status: each ClusterQueue's admitted/reserving/pending counts and ``flavorsUsage``
   (``flavorsReservation`` too), each LocalQueue's counts and usage.
"""

from __future__ import annotations

import copy
import hashlib
from fractions import Fraction
from typing import Any

from sandbox import kueue_config, quantity
from sandbox.controllers.base import PODS, Ctx, condition, set_condition
from sandbox.controllers.jobsets import JOBSETS, _job_pods
from sandbox.controllers.trainjobs import TRAINJOBS, _resolve_runtime, _trainer_job, build_pod
from sandbox.kinds import Kind
from sandbox.podutil import controller_of, owner_reference, pod_requests
from sandbox.store import Store

API = "kueue.x-k8s.io/v1beta2"
WORKLOADS = "kueue.x-k8s.io/workloads"
CLUSTER_QUEUES = "kueue.x-k8s.io/clusterqueues"
LOCAL_QUEUES = "kueue.x-k8s.io/localqueues"
FLAVORS = "kueue.x-k8s.io/resourceflavors"
PRIORITY_CLASSES = "scheduling.k8s.io/priorityclasses"
MANAGER = "kueue-controller-manager"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
GATE = "kueue.x-k8s.io/admission"
CLAIM_TEMPLATES = "resource.k8s.io/resourceclaimtemplates"
# The Kueue configuration's integrations.labelKeysToCopy the portal relies on.
LABEL_KEYS_TO_COPY = (
    "app.kubernetes.io/managed-by",
    "gpu-portal.io/team",
    "gpu-portal.io/workload-id",
    "gpu-portal.io/kind",
)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
QUEUED_OWNERS = ("TrainJob", "JobSet")


def enabled(sandbox: Any) -> bool:
    return getattr(sandbox.profile, "queueing", "volcano") == "kueue"


# -- 1. the pod webhook ----------------------------------------------------------------------


def gate_pod(store: Store, obj: dict[str, Any], kind: Kind) -> None:
    """Mutating admission of new pods: gate the plain pods Kueue queues."""
    if kind.key != PODS:
        return
    meta = obj.get("metadata") or {}
    if not (meta.get("labels") or {}).get(QUEUE_LABEL):
        return
    owner = controller_of(obj)
    if owner and owner.get("kind") in QUEUED_OWNERS:
        return  # its TrainJob or JobSet is the queued job
    gates = obj.setdefault("spec", {}).setdefault("schedulingGates", [])
    if not any(g.get("name") == GATE for g in gates):
        gates.append({"name": GATE})


# -- helpers ---------------------------------------------------------------------------------


def _counted(requests: dict[str, Fraction], conf: kueue_config.KueueConf) -> dict[str, Fraction]:
    return {r: v for r, v in requests.items() if v and not conf.excluded(r)}


def dra_requests(
    ctx: Ctx, conf: kueue_config.KueueConf, namespace: str, podsets: list[dict[str, Any]]
) -> tuple[dict[str, dict[str, Fraction]], str]:
    """Pod set name -> DRA resource -> devices for all its pods, or Kueue's reason it cannot count them."""
    out: dict[str, dict[str, Fraction]] = {}
    for ps in podsets:
        name, count = ps.get("name", "main"), int(ps.get("count") or 1)
        spec = (ps.get("template") or {}).get("spec") or {}
        for rc in spec.get("resourceClaims") or []:
            template_name = rc.get("resourceClaimTemplateName")
            if not template_name:
                continue  # a claim named directly is shared, not per pod: Kueue does not count it
            if not conf.dra:
                return {}, "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
            template = ctx.get(CLAIM_TEMPLATES, namespace, template_name)
            if template is None:
                return {}, f'failed to get ResourceClaimTemplate "{template_name}" for podset {name}'
            devices = (((template.get("spec") or {}).get("spec") or {}).get("devices")) or {}
            for request in devices.get("requests") or []:
                if request.get("firstAvailable"):
                    return {}, f"FirstAvailable is not supported in DRA requests for podset {name}"
                body = request.get("exactly") or {}
                if body.get("adminAccess"):
                    return {}, f"AdminAccess is not supported in DRA requests for podset {name}"
                if body.get("allocationMode") == "All":
                    return {}, f"AllocationMode 'All' is not supported in DRA requests for podset {name}"
                device_class = body.get("deviceClassName", "")
                resource = conf.device_classes.get(device_class)
                if resource is None:
                    return {}, f"DeviceClass {device_class} is not mapped in DRA configuration for podset {name}"
                amount = Fraction(int(body.get("count") or 1) * count)
                bucket = out.setdefault(name, {})
                bucket[resource] = bucket.get(resource, Fraction(0)) + amount
    return out, ""


def _workload_name(kind: str, name: str, uid: str) -> str:
    digest = hashlib.sha256(uid.encode()).hexdigest()[:5]
    return f"{kind.lower()}-{name}"[:247].rstrip("-") + f"-{digest}"


def _fmt(value: Fraction, resource: str) -> str:
    return quantity.format_quantity(value, resource)


def _priority(ctx: Ctx, pod_spec: dict[str, Any]) -> tuple[int, str]:
    name = pod_spec.get("priorityClassName") or ""
    if name:
        pc = ctx.get(PRIORITY_CLASSES, "", name)
        if pc is not None:
            return int(pc.get("value") or 0), name
    return int(pod_spec.get("priority") or 0), ""


def _podset(name: str, count: int, template: dict[str, Any]) -> dict[str, Any]:
    meta = template.get("metadata") or {}
    out_meta = {k: dict(meta[k]) for k in ("labels", "annotations") if meta.get(k)}
    return {"name": name, "count": count, "template": {"metadata": out_meta, "spec": template.get("spec") or {}}}


def _queued_jobs(ctx: Ctx) -> list[tuple[dict[str, Any], str, list[dict[str, Any]]]]:
    """(owner, queue name, pod sets) for every job or pod Kueue queues."""
    out = []
    for tj in ctx.items(TRAINJOBS):
        queue = (tj["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        if not queue or tj["metadata"].get("deletionTimestamp"):
            continue
        runtime, _ = _resolve_runtime(ctx, tj)
        if runtime is None:
            continue  # Trainer cannot build it either; Kueue waits with it
        spec = tj.get("spec") or {}
        nodes = int(
            (spec.get("trainer") or {}).get("numNodes")
            or ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes")
            or 1
        )
        pod = build_pod(tj, runtime, 0, nodes, False, "x")
        rj_name = _trainer_job(runtime).get("name", "node")
        out.append((tj, queue, [_podset(rj_name, nodes, pod)]))
    for js in ctx.items(JOBSETS):
        queue = (js["metadata"].get("labels") or {}).get(QUEUE_LABEL)
        if not queue or js["metadata"].get("deletionTimestamp"):
            continue
        podsets = []
        for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
            jobs, per_job, template = _job_pods(rj)
            podsets.append(_podset(rj.get("name") or "main", jobs * per_job, template))
        out.append((js, queue, podsets))
    for pod in ctx.items(PODS):
        meta = pod["metadata"]
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        if not queue or meta.get("deletionTimestamp"):
            continue
        owner = controller_of(pod)
        if owner and owner.get("kind") in QUEUED_OWNERS:
            continue
        if any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or []):
            spec = {k: v for k, v in pod["spec"].items() if k != "schedulingGates"}
            out.append((pod, queue, [_podset("main", 1, {"metadata": meta, "spec": spec})]))
    return out


def _new_workload(ctx: Ctx, owner: dict[str, Any], queue: str, podsets: list[dict[str, Any]]) -> dict[str, Any]:
    meta = owner["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in LABEL_KEYS_TO_COPY}
    labels[JOB_UID_LABEL] = meta["uid"]
    first = podsets[0]["template"]["spec"] if podsets else {}
    priority, class_name = _priority(ctx, first)
    spec: dict[str, Any] = {"active": True, "queueName": queue, "podSets": podsets, "priority": priority}
    if class_name:
        spec["priorityClassRef"] = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": class_name}
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": _workload_name(owner["kind"], meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": spec,
    }


def _finished(owner: dict[str, Any]) -> str | None:
    """ "Succeeded"/"Failed" once the job or pod is done, else None."""
    kind = owner.get("kind")
    if kind == "Pod":
        phase = (owner.get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None
    done = "Complete" if kind == "TrainJob" else "Completed"
    if (condition(owner, done) or {}).get("status") == "True":
        return "Succeeded"
    if (condition(owner, "Failed") or {}).get("status") == "True":
        return "Failed"
    return None


def _admitted(wl: dict[str, Any]) -> bool:
    return (condition(wl, "QuotaReserved") or {}).get("status") == "True"


def _is_finished(wl: dict[str, Any]) -> bool:
    return (condition(wl, "Finished") or {}).get("status") == "True"


def _owner(ctx: Ctx, wl: dict[str, Any]) -> dict[str, Any] | None:
    for ref in wl["metadata"].get("ownerReferences") or []:
        obj = ctx.store.by_uid_get(ref.get("uid", ""))
        if obj is not None:
            return obj
    return None


def _quantity(raw: Any) -> Fraction:
    try:
        return quantity.parse(raw)
    except quantity.QuantityError:
        return Fraction(0)


# -- 3. quota ----------------------------------------------------------------------------------


class Quotas:
    """Nominal quota, borrowing limit and usage per ClusterQueue, flavor and resource."""

    def __init__(self, ctx: Ctx, workloads: list[dict[str, Any]]):
        self.queues = {cq["metadata"]["name"]: cq for cq in ctx.items(CLUSTER_QUEUES)}
        self.flavors = {rf["metadata"]["name"]: rf for rf in ctx.items(FLAVORS)}
        self.usage: dict[str, dict[tuple[str, str], Fraction]] = {name: {} for name in self.queues}
        for wl in workloads:
            if not _admitted(wl) or _is_finished(wl):
                continue
            admission = (wl.get("status") or {}).get("admission") or {}
            self.add(admission.get("clusterQueue", ""), self.assignment_usage(admission))

    @staticmethod
    def assignment_usage(admission: dict[str, Any]) -> dict[tuple[str, str], Fraction]:
        out: dict[tuple[str, str], Fraction] = {}
        for psa in admission.get("podSetAssignments") or []:
            for resource, flavor in (psa.get("flavors") or {}).items():
                amount = _quantity((psa.get("resourceUsage") or {}).get(resource, "0"))
                out[(flavor, resource)] = out.get((flavor, resource), Fraction(0)) + amount
        return out

    def add(self, queue: str, usage: dict[tuple[str, str], Fraction]) -> None:
        bucket = self.usage.setdefault(queue, {})
        for key, amount in usage.items():
            bucket[key] = bucket.get(key, Fraction(0)) + amount

    def quota(self, queue: str, flavor: str, resource: str) -> tuple[Fraction, Fraction | None]:
        """(nominalQuota, borrowingLimit or None when unlimited) of one queue."""
        for group in (self.queues[queue].get("spec") or {}).get("resourceGroups") or []:
            for f in group.get("flavors") or []:
                if f.get("name") != flavor:
                    continue
                for r in f.get("resources") or []:
                    if r.get("name") == resource:
                        limit = r.get("borrowingLimit")
                        return _quantity(r.get("nominalQuota", "0")), None if limit is None else _quantity(limit)
        return Fraction(0), Fraction(0)

    def cohort(self, queue: str) -> list[str]:
        name = (self.queues[queue].get("spec") or {}).get("cohortName")
        if not name:
            return [queue]
        return [q for q, cq in self.queues.items() if (cq.get("spec") or {}).get("cohortName") == name]

    def capacity(self, queue: str, flavor: str, resource: str) -> tuple[Fraction, Fraction]:
        """(most the queue could ever get, what it can get now) of one flavor's resource."""
        nominal, limit = self.quota(queue, flavor, resource)
        used = self.usage.get(queue, {}).get((flavor, resource), Fraction(0))
        if not (self.queues[queue].get("spec") or {}).get("cohortName"):
            return nominal, nominal - used
        members = self.cohort(queue)
        pool = sum((self.quota(q, flavor, resource)[0] for q in members), Fraction(0))
        pool_used = sum((self.usage.get(q, {}).get((flavor, resource), Fraction(0)) for q in members), Fraction(0))
        most = pool if limit is None else min(nominal + limit, pool)
        now = pool - pool_used if limit is None else min(nominal + limit - used, pool - pool_used)
        return most, now


def _group_for(cq: dict[str, Any], resource: str) -> dict[str, Any] | None:
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        if resource in (group.get("coveredResources") or []):
            return group
    return None


def _selector_agrees(flavor: dict[str, Any], pod_spec: dict[str, Any]) -> bool:
    selector = pod_spec.get("nodeSelector") or {}
    labels = (flavor.get("spec") or {}).get("nodeLabels") or {}
    return all(selector.get(k, v) == v for k, v in labels.items())


def assign(
    quotas: Quotas,
    queue: str,
    podsets: list[dict[str, Any]],
    conf: kueue_config.KueueConf | None = None,
    dra: dict[str, dict[str, Fraction]] | None = None,
) -> tuple[list[dict[str, Any]] | None, dict[tuple[str, str], Fraction], str]:
    """Flavors for every pod set, or None and Kueue's message; also the usage it would add.

    ``dra``: the devices each pod set claims, by counted resource (``dra_requests``)."""
    conf = conf or kueue_config.parse(kueue_config.STOCK_CONF)
    cq = quotas.queues[queue]
    assignments, added = [], {}
    for ps in podsets:
        count = int(ps.get("count") or 1)
        spec = (ps.get("template") or {}).get("spec") or {}
        requests = {r: v * count for r, v in _counted(pod_requests({"spec": spec}), conf).items()}
        for resource, amount in ((dra or {}).get(ps.get("name", "main")) or {}).items():
            requests[resource] = requests.get(resource, Fraction(0)) + amount
        flavors_of: dict[str, str] = {}
        reasons: list[str] = []
        for resource in sorted(requests):
            if resource in flavors_of:
                continue
            group = _group_for(cq, resource)
            if group is None:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                continue
            wanted = [r for r in sorted(requests) if r in (group.get("coveredResources") or [])]
            chosen = None
            for flavor in group.get("flavors") or []:
                fname = flavor.get("name", "")
                rf = quotas.flavors.get(fname)
                if rf is None:
                    reasons.append(f"flavor {fname} not found")
                    continue
                if not _selector_agrees(rf, spec):
                    reasons.append(f"flavor {fname} doesn't match node affinity")
                    continue
                problems = []
                for r in wanted:
                    val = requests[r] + added.get((fname, r), Fraction(0))
                    most, now = quotas.capacity(queue, fname, r)
                    if val > most:
                        problems.append(
                            f"insufficient quota for {r} in flavor {fname}, request > maximum capacity "
                            f"({_fmt(val, r)} > {_fmt(most, r)})"
                        )
                    elif val > now:
                        problems.append(
                            f"insufficient unused quota for {r} in flavor {fname}, {_fmt(val - now, r)} more needed"
                        )
                if problems:
                    reasons.extend(problems)
                    continue
                chosen = fname
                break
            if chosen is None:
                continue
            for r in wanted:
                flavors_of[r] = chosen
        if len(flavors_of) < len(requests):
            return None, {}, f"couldn't assign flavors to pod set {ps.get('name', 'main')}: " + "; ".join(reasons)
        for r, fname in flavors_of.items():
            added[(fname, r)] = added.get((fname, r), Fraction(0)) + requests[r]
        assignments.append(
            {
                "name": ps.get("name", "main"),
                "flavors": dict(sorted(flavors_of.items())),
                "resourceUsage": {r: _fmt(v, r) for r, v in sorted(requests.items())},
                "count": count,
            }
        )
    return assignments, added, ""


# -- the controller ----------------------------------------------------------------------------


def reconcile(ctx: Ctx) -> None:
    if not enabled(ctx.sandbox):
        return
    existing = {(wl["metadata"]["namespace"], wl["metadata"]["name"]) for wl in ctx.items(WORKLOADS)}
    for owner, queue, podsets in _queued_jobs(ctx):
        meta = owner["metadata"]
        if owner["kind"] == "Pod":
            _mark_gated(ctx, owner)
        wl = _new_workload(ctx, owner, queue, podsets)
        key = (meta["namespace"], wl["metadata"]["name"])
        if key not in existing:
            ctx.create(WORKLOADS, wl, MANAGER)
            existing.add(key)
            ctx.event(owner, "Normal", "CreatedWorkload", f"Created Workload: {key[0]}/{key[1]}", MANAGER)
    workloads = [wl for wl in ctx.items(WORKLOADS) if not wl["metadata"].get("deletionTimestamp")]
    for wl in workloads:
        _finish(ctx, wl)
    workloads = [wl for wl in ctx.items(WORKLOADS) if not wl["metadata"].get("deletionTimestamp")]
    quotas = Quotas(ctx, workloads)
    pending: list[tuple[tuple[int, str, str], dict[str, Any]]] = []
    for wl in workloads:
        if _is_finished(wl):
            continue
        if _admitted(wl):
            _start(ctx, wl)
            continue
        order = (
            -int((wl.get("spec") or {}).get("priority") or 0),
            wl["metadata"]["creationTimestamp"],
            wl["metadata"]["name"],
        )
        pending.append((order, wl))
    conf = kueue_config.read(ctx.store)
    for _, wl in sorted(pending, key=lambda item: item[0]):
        _admit(ctx, wl, quotas, conf)
    _queue_status(ctx)


def _mark_gated(ctx: Ctx, pod: dict[str, Any]) -> None:
    """What kube-scheduler reports for a pod that still has scheduling gates."""
    if not pod["spec"].get("schedulingGates") or pod.get("status", {}).get("phase") != "Pending":
        return
    conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
    scheduled = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates",
        "lastProbeTime": None,
    }
    old = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    scheduled["lastTransitionTime"] = (
        old.get("lastTransitionTime") if old.get("reason") == "SchedulingGated" else ctx.now_iso
    )
    ctx.set_status(PODS, pod, {**pod["status"], "conditions": [*conditions, scheduled]}, "default-scheduler")


def _admit(ctx: Ctx, wl: dict[str, Any], quotas: Quotas, conf: kueue_config.KueueConf) -> None:
    meta, spec = wl["metadata"], wl.get("spec") or {}
    status = dict(wl.get("status") or {})
    conditions = list(status.get("conditions") or [])
    local = ctx.get(LOCAL_QUEUES, meta["namespace"], spec.get("queueName", ""))
    message, reason = "", "Inadmissible"
    queue = ((local or {}).get("spec") or {}).get("clusterQueue", "")
    if local is None:
        message = f"LocalQueue {spec.get('queueName', '')} doesn't exist"
    elif queue not in quotas.queues:
        message = f"ClusterQueue {queue} doesn't exist"
    elif not _namespace_matches(ctx, quotas.queues[queue], meta["namespace"]):
        message = "Workload namespace doesn't match ClusterQueue selector"
    elif _missing_flavors(quotas, queue):
        message = f"ClusterQueue {queue} is inactive"
    else:
        podsets = spec.get("podSets") or []
        dra, problem = dra_requests(ctx, conf, meta["namespace"], podsets)
        assignments, added, why = (None, {}, "") if problem else assign(quotas, queue, podsets, conf, dra)
        if not problem and assignments is None and _preempt(ctx, wl, quotas, queue, conf, dra):
            assignments, added, why = assign(quotas, queue, podsets, conf, dra)
        if problem:
            message = problem  # Inadmissible: waiting for quota would not help
        elif assignments is None:
            message, reason = why, "Pending"
        else:
            quotas.add(queue, added)
            status["admission"] = {"clusterQueue": queue, "podSetAssignments": assignments}
            conditions = set_condition(
                conditions,
                "QuotaReserved",
                "True",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {queue}",
                ctx.now_iso,
            )
            conditions = set_condition(
                conditions, "Admitted", "True", "Admitted", "The workload is admitted", ctx.now_iso
            )
            wl = ctx.set_status(WORKLOADS, wl, {**status, "conditions": conditions}, MANAGER)
            ctx.event(wl, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {queue}", MANAGER)
            ctx.event(wl, "Normal", "Admitted", f"Admitted by ClusterQueue {queue}", MANAGER)
            _start(ctx, wl)
            return
    conditions = set_condition(conditions, "QuotaReserved", "False", reason, message, ctx.now_iso)
    if (condition(wl, "QuotaReserved") or {}).get("message") != message:
        ctx.event(wl, "Normal", "Pending", message, MANAGER, aggregate=True)
    ctx.set_status(WORKLOADS, wl, {**status, "conditions": conditions}, MANAGER)


def _preempt(
    ctx: Ctx,
    wl: dict[str, Any],
    quotas: Quotas,
    queue: str,
    conf: kueue_config.KueueConf,
    dra: dict[str, dict[str, Fraction]],
) -> bool:
    """Evict what ``wl`` needs gone to fit, as its ClusterQueue's preemption policy allows.

    1. Candidates: admitted Workloads of borrowing cohort peers (reclaimWithinCohort) and
       lower-priority ones of its own queue (withinClusterQueue).
    2. In order (other queues, lower priority, most recently admitted first), take each
       away from a copy of the usage, skipping peers that no longer borrow, until ``wl``
       fits; a fit that needed a peer's quota must leave ``wl``'s queue within its nominal.
    3. Give back, newest choice first, each victim the fit does not need.
    4. Evict the rest; their usage leaves ``quotas`` so the caller can admit ``wl``.
    """
    policy = (quotas.queues[queue].get("spec") or {}).get("preemption") or {}
    reclaim = policy.get("reclaimWithinCohort", "Never")
    within = policy.get("withinClusterQueue", "Never")
    priority = int((wl.get("spec") or {}).get("priority") or 0)
    peers = set(quotas.cohort(queue)) - {queue} if reclaim != "Never" else set()
    candidates = []
    for other in ctx.items(WORKLOADS):
        if other["metadata"]["uid"] == wl["metadata"]["uid"] or not _admitted(other) or _is_finished(other):
            continue
        other_queue = _admission_queue(other)
        other_priority = int((other.get("spec") or {}).get("priority") or 0)
        same_queue_lower = other_queue == queue and within == "LowerPriority" and other_priority < priority
        borrowing_peer = other_queue in peers and (reclaim == "Any" or other_priority < priority)
        if same_queue_lower or borrowing_peer:
            candidates.append(other)
    if not candidates:
        return False

    def admitted_at(c: dict[str, Any]) -> tuple[str, str]:
        reserved = (condition(c, "QuotaReserved") or {}).get("lastTransitionTime") or ""
        return reserved, c["metadata"]["creationTimestamp"]

    # Sorts are stable: the last one decides first.
    candidates.sort(key=admitted_at, reverse=True)
    candidates.sort(key=lambda c: int((c.get("spec") or {}).get("priority") or 0))
    candidates.sort(key=lambda c: _admission_queue(c) == queue)
    podsets = (wl.get("spec") or {}).get("podSets") or []
    trial = copy.copy(quotas)
    trial.usage = {q: dict(u) for q, u in quotas.usage.items()}
    chosen: list[dict[str, Any]] = []

    def fits() -> bool:
        assignments, added, _ = assign(trial, queue, podsets, conf, dra)
        if assignments is None:
            return False
        if any(_admission_queue(c) != queue for c in chosen):
            # Reclaiming from peers is only for a queue that stays within its nominal quota.
            own = trial.usage.get(queue, {})
            return all(own.get(key, Fraction(0)) + n <= trial.quota(queue, *key)[0] for key, n in added.items())
        return True

    for candidate in candidates:
        other_queue = _admission_queue(candidate)
        usage = Quotas.assignment_usage(candidate["status"]["admission"])
        if other_queue != queue and not any(
            trial.usage.get(other_queue, {}).get(key, Fraction(0)) > trial.quota(other_queue, *key)[0] for key in usage
        ):
            continue  # no longer borrowing: what it holds is its own quota
        trial.add(other_queue, {k: -v for k, v in usage.items()})
        chosen.append(candidate)
        if fits():
            break
    else:
        return False
    for candidate in list(reversed(chosen[:-1])):
        usage = Quotas.assignment_usage(candidate["status"]["admission"])
        trial.add(_admission_queue(candidate), usage)
        chosen.remove(candidate)
        if not fits():
            trial.add(_admission_queue(candidate), {k: -v for k, v in usage.items()})
            chosen.append(candidate)
    for victim in chosen:
        usage = Quotas.assignment_usage(victim["status"]["admission"])
        quotas.add(_admission_queue(victim), {k: -v for k, v in usage.items()})
        _evict(ctx, victim, wl, in_queue=_admission_queue(victim) == queue)
    return True


def _admission_queue(wl: dict[str, Any]) -> str:
    return ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")


def _evict(ctx: Ctx, victim: dict[str, Any], preemptor: dict[str, Any], *, in_queue: bool) -> None:
    """Kueue's eviction of a preempted Workload: conditions, no quota, its job stopped."""
    job_uid = (preemptor["metadata"].get("labels") or {}).get(JOB_UID_LABEL, "")
    why = "prioritization in the ClusterQueue" if in_queue else "reclamation within the cohort"
    message = (
        f"Preempted to accommodate a workload (UID: {preemptor['metadata']['uid']}, JobUID: {job_uid}) due to {why}"
    )
    status = {k: v for k, v in (victim.get("status") or {}).items() if k != "admission"}
    conditions = status.get("conditions")
    conditions = set_condition(conditions, "Evicted", "True", "Preempted", message, ctx.now_iso)
    reason = "InClusterQueue" if in_queue else "InCohortReclamation"
    conditions = set_condition(conditions, "Preempted", "True", reason, message, ctx.now_iso)
    conditions = set_condition(conditions, "QuotaReserved", "False", "Pending", message, ctx.now_iso)
    conditions = set_condition(
        conditions, "Admitted", "False", "NoReservation", "The workload has no reservation", ctx.now_iso
    )
    victim = ctx.set_status(WORKLOADS, victim, {**status, "conditions": conditions}, MANAGER)
    ctx.event(victim, "Normal", "Preempted", message, MANAGER)
    owner = _owner(ctx, victim)
    if owner is None:
        return
    if owner["kind"] == "Pod":
        ctx.delete(PODS, owner["metadata"]["namespace"], owner["metadata"]["name"])
    elif not (owner.get("spec") or {}).get("suspend"):
        key = TRAINJOBS if owner["kind"] == "TrainJob" else JOBSETS
        ctx.replace(key, {**owner, "spec": {**owner["spec"], "suspend": True}}, MANAGER)
        ctx.event(owner, "Normal", "Stopped", message, MANAGER)


def _namespace_matches(ctx: Ctx, cq: dict[str, Any], namespace: str) -> bool:
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if selector is None:
        return False  # Kueue: a nil selector matches nothing
    ns = ctx.get("/namespaces", "", namespace) or {}
    labels = {**((ns.get("metadata") or {}).get("labels") or {}), NAMESPACE_NAME_LABEL: namespace}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and labels.get(key) in values)
            or (op == "Exists" and key not in labels)
            or (op == "DoesNotExist" and key in labels)
        ):
            return False
    return True


def _missing_flavors(quotas: Quotas, queue: str) -> list[str]:
    named = [
        f.get("name", "")
        for group in (quotas.queues[queue].get("spec") or {}).get("resourceGroups") or []
        for f in group.get("flavors") or []
    ]
    return [f for f in named if f not in quotas.flavors]


def _start(ctx: Ctx, wl: dict[str, Any]) -> None:
    """Let an admitted Workload's job run: resume it, or remove its pod's gate."""
    owner = _owner(ctx, wl)
    if owner is None:
        return
    queue = (((wl.get("status") or {}).get("admission")) or {}).get("clusterQueue", "")
    if owner["kind"] == "Pod":
        gates = owner["spec"].get("schedulingGates") or []
        if any(g.get("name") == GATE for g in gates):
            rest = [g for g in gates if g.get("name") != GATE]
            spec = {k: v for k, v in owner["spec"].items() if k != "schedulingGates"}
            if rest:
                spec["schedulingGates"] = rest
            ctx.replace(PODS, {**owner, "spec": spec}, MANAGER)
        return
    if (owner.get("spec") or {}).get("suspend"):
        key = TRAINJOBS if owner["kind"] == "TrainJob" else JOBSETS
        ctx.replace(key, {**owner, "spec": {**owner["spec"], "suspend": False}}, MANAGER)
        ctx.event(owner, "Normal", "Started", f"Admitted by clusterQueue {queue}", MANAGER)


def _finish(ctx: Ctx, wl: dict[str, Any]) -> None:
    if _is_finished(wl):
        return
    owner = _owner(ctx, wl)
    outcome = _finished(owner) if owner is not None else None
    if outcome is None:
        return
    message = "Job finished successfully" if outcome == "Succeeded" else "Job failed"
    status = dict(wl.get("status") or {})
    conditions = set_condition(status.get("conditions"), "Finished", "True", outcome, message, ctx.now_iso)
    ctx.set_status(WORKLOADS, wl, {**status, "conditions": conditions}, MANAGER)


# -- 5. queue status ---------------------------------------------------------------------------


def _usage_status(cq: dict[str, Any], usage: dict[tuple[str, str], Fraction], borrowed: bool) -> list[dict[str, Any]]:
    out = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            resources = []
            for r in flavor.get("resources") or []:
                name = r.get("name", "")
                total = usage.get((flavor.get("name", ""), name), Fraction(0))
                item: dict[str, Any] = {"name": name, "total": _fmt(total, name)}
                if borrowed:
                    over = max(total - _quantity(r.get("nominalQuota", "0")), Fraction(0))
                    item["borrowed"] = _fmt(over, name)
                resources.append(item)
            out.append({"name": flavor.get("name", ""), "resources": resources})
    return out


def _queue_status(ctx: Ctx) -> None:
    workloads = [wl for wl in ctx.items(WORKLOADS) if not _is_finished(wl)]
    quotas = Quotas(ctx, workloads)
    by_cq: dict[str, dict[str, int]] = {}
    by_lq: dict[tuple[str, str], dict[str, Any]] = {}
    for wl in workloads:
        admitted = _admitted(wl)
        admission = (wl.get("status") or {}).get("admission") or {}
        ns, lq = wl["metadata"]["namespace"], (wl.get("spec") or {}).get("queueName", "")
        local = ctx.get(LOCAL_QUEUES, ns, lq)
        cq = admission.get("clusterQueue") if admitted else ((local or {}).get("spec") or {}).get("clusterQueue")
        counts = by_cq.setdefault(cq or "", {"admitted": 0, "pending": 0})
        lq_counts = by_lq.setdefault((ns, lq), {"admitted": 0, "pending": 0, "usage": {}})
        which = "admitted" if admitted else "pending"
        counts[which] += 1
        lq_counts[which] += 1
        if admitted:
            for key, amount in Quotas.assignment_usage(admission).items():
                lq_counts["usage"][key] = lq_counts["usage"].get(key, Fraction(0)) + amount
    for name, cq in quotas.queues.items():
        counts = by_cq.get(name, {"admitted": 0, "pending": 0})
        missing = _missing_flavors(quotas, name)
        usage = _usage_status(cq, quotas.usage.get(name, {}), True)
        active = (
            {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
            if not missing
            else {
                "type": "Active",
                "status": "False",
                "reason": "FlavorNotFound",
                "message": f"Can't admit new workloads: references missing ResourceFlavor(s): {', '.join(missing)}.",
            }
        )
        old = cq.get("status") or {}
        conditions = set_condition(
            old.get("conditions"), "Active", active["status"], active["reason"], active["message"], ctx.now_iso
        )
        status = {
            **old,
            "admittedWorkloads": counts["admitted"],
            "reservingWorkloads": counts["admitted"],
            "pendingWorkloads": counts["pending"],
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "conditions": conditions,
        }
        ctx.set_status(CLUSTER_QUEUES, cq, status, MANAGER)
    for lq in ctx.items(LOCAL_QUEUES):
        ns, name = lq["metadata"]["namespace"], lq["metadata"]["name"]
        counts = by_lq.get((ns, name), {"admitted": 0, "pending": 0, "usage": {}})
        cq = quotas.queues.get(((lq.get("spec") or {}).get("clusterQueue")) or "")
        usage = _usage_status(cq, counts["usage"], False) if cq is not None else []
        old = lq.get("status") or {}
        ready = cq is not None
        conditions = set_condition(
            old.get("conditions"),
            "Active",
            "True" if ready else "False",
            "Ready" if ready else "ClusterQueueDoesNotExist",
            "Can submit new workloads to localQueue" if ready else "Can't submit new workloads to clusterQueue",
            ctx.now_iso,
        )
        status = {
            **old,
            "admittedWorkloads": counts["admitted"],
            "reservingWorkloads": counts["admitted"],
            "pendingWorkloads": counts["pending"],
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "conditions": conditions,
        }
        ctx.set_status(LOCAL_QUEUES, lq, status, MANAGER)
