"""The kubelet and the ResourceClaim controller.

Kubelet: a bound pod starts at once (``Running``, Ready conditions, container
statuses, pod IP, Pulled/Created/Started events). ``fail_pod`` ends a pod the way the
kubelet reports an OOM kill, an error exit or a preemption (``sandbox.local/outcome``). A pod bound by its author
(``spec.nodeName`` set at create) is admitted here and gets its devices, or fails
with ``UnexpectedAdmissionError`` when they are gone. A pod without a controller and
with the annotation ``sandbox.local/duration-seconds`` finishes after that
many simulated seconds. Workload controllers finish their own pods with
``terminate_pod``.

ResourceClaim controller: for each pod claim that names a ResourceClaimTemplate it
creates ``<pod>-<claim>-<random>`` owned by the pod and records it in
``status.resourceClaimStatuses``; claims whose consumers are gone are deallocated.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sandbox import jupyter
from sandbox.clock import parse_iso
from sandbox.controllers.base import PODS, Ctx
from sandbox.errors import ApiError
from sandbox.podutil import container_requests, controller_of, holds_resources, owner_reference
from sandbox.scheduler import CLAIMS, pod_condition

MANAGER = "kubelet"
DURATION_ANNOTATION = "sandbox.local/duration-seconds"
OUTCOME_ANNOTATION = "sandbox.local/outcome"
CLAIM_TEMPLATES = "resource.k8s.io/resourceclaimtemplates"
DEFAULT_DURATION = 600.0


def _hex(*parts: object, n: int = 64) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:n]


def duration_of(obj: dict[str, Any], default: float = DEFAULT_DURATION) -> float:
    raw = (obj["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
    try:
        return max(0.0, float(raw)) if raw is not None else default
    except ValueError:
        return default


# ``sandbox.local/outcome`` values and how the failing pod ends ("failed" is the old word for "error").
OUTCOMES = {"failed": "error", "error": "error", "oom": "oom", "preempted": "preempted"}
OOM_EXIT = 137  # 128 + SIGKILL: the kernel's OOM killer
SIGTERM_EXIT = 143  # 128 + SIGTERM: stopped by the kubelet (preemption, or the controller ending the run)


def outcome_of(obj: dict[str, Any]) -> str:
    """The failure the workload is told to end with: "", "error", "oom" or "preempted"."""
    raw = (obj["metadata"].get("annotations") or {}).get(OUTCOME_ANNOTATION, "")
    return OUTCOMES.get(raw.strip().lower(), "")


def fail_pod(ctx: Ctx, pod: dict[str, Any], how: str) -> dict[str, Any]:
    """End a running pod the way the kubelet reports each kind of failure.

    * "oom": the container is OOMKilled, exit code 137.
    * "error": the process exits 1 (reason Error).
    * "preempted": the scheduler marks the pod DisruptionTarget=True (PreemptionByScheduler,
      worded as kube-scheduler words it) and the kubelet stops it (SIGTERM, exit 143).
    * "stopped": the pod's controller stops it because another pod of the run failed
      (SIGTERM, exit 143, no condition).
    """
    if how == "oom":
        return terminate_pod(ctx, pod, False, exit_code=OOM_EXIT, container_reason="OOMKilled")
    if how == "preempted":
        scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
        conditions = pod_condition(
            (pod.get("status") or {}).get("conditions"),
            "DisruptionTarget",
            "True",
            ctx.now_iso,
            "PreemptionByScheduler",
            f"{scheduler}: preempting to accommodate a higher priority pod",
        )
        pod = ctx.set_status(PODS, pod, {**(pod.get("status") or {}), "conditions": conditions}, "volcano-scheduler")
        return terminate_pod(ctx, pod, False, exit_code=SIGTERM_EXIT)
    if how == "stopped":
        return terminate_pod(ctx, pod, False, exit_code=SIGTERM_EXIT)
    return terminate_pod(ctx, pod, False)


def _image_id(image: str) -> str:
    base = image.split("@")[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return f"{base if '/' in base else 'docker.io/library/' + base}@sha256:{_hex(image)}"


def start_pod(ctx: Ctx, pod: dict[str, Any]) -> dict[str, Any]:
    node_name = pod["spec"]["nodeName"]
    node = ctx.get("/nodes", "", node_name) or {}
    addresses = (node.get("status") or {}).get("addresses") or []
    host_ip = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), "10.0.0.1")
    uid = pod["metadata"]["uid"]
    octets = bytes.fromhex(_hex(ctx.seed, uid, n=4))
    pod_ip = f"10.244.{sum(node_name.encode()) % 250}.{2 + octets[0] % 250}"
    now = ctx.now_iso
    # Notebook containers are ready only where Jupyter answers their readiness probe (sandbox.jupyter).
    unready = {
        str(c.get("name")): failure
        for c in pod["spec"].get("containers") or []
        if (failure := jupyter.readiness_failure(pod, c))
    }
    statuses = []
    for c in pod["spec"].get("containers") or []:
        statuses.append(
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": _image_id(str(c.get("image", ""))),
                "containerID": f"containerd://{_hex(uid, c.get('name'))}",
                "ready": str(c.get("name")) not in unready,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "lastState": {},
            }
        )
    init_statuses = []
    for c in pod["spec"].get("initContainers") or []:
        init_statuses.append(
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": _image_id(str(c.get("image", ""))),
                "containerID": f"containerd://{_hex(uid, c.get('name'))}",
                "ready": True,
                "started": False,
                "restartCount": 0,
                "lastState": {},
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": now,
                        "finishedAt": now,
                        "containerID": f"containerd://{_hex(uid, c.get('name'))}",
                    }
                },
            }
        )
    conditions = (pod.get("status") or {}).get("conditions")
    for type_ in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
        if unready and type_ in ("Ready", "ContainersReady"):
            message = f"containers with unready status: [{' '.join(sorted(unready))}]"
            conditions = pod_condition(conditions, type_, "False", now, "ContainersNotReady", message)
        else:
            conditions = pod_condition(conditions, type_, "True", now)
    status = {
        **(pod.get("status") or {}),
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "containerStatuses": statuses,
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    pod = ctx.set_status(PODS, pod, status, MANAGER)
    for c in (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or []):
        ctx.event(
            pod,
            "Normal",
            "Pulled",
            f'Container image "{c.get("image")}" already present on machine',
            MANAGER,
            node_name,
        )
        ctx.event(pod, "Normal", "Created", f"Created container: {c.get('name')}", MANAGER, node_name)
        ctx.event(pod, "Normal", "Started", f"Started container {c.get('name')}", MANAGER, node_name)
    for failure in unready.values():
        ctx.event(pod, "Warning", "Unhealthy", f"Readiness probe failed: {failure}", MANAGER, node_name)
    return pod


def terminate_pod(
    ctx: Ctx,
    pod: dict[str, Any],
    succeeded: bool,
    reason: str = "",
    message: str = "",
    *,
    exit_code: int | None = None,
    container_reason: str = "",
    container_message: str = "",
) -> dict[str, Any]:
    """End a pod: Succeeded (exit 0, Completed) or Failed (``exit_code``, default 1, with
    ``container_reason``, default Error). ``reason``/``message`` are the pod's own (as for
    DeadlineExceeded); ``container_message`` is the container's termination message."""
    now = ctx.now_iso
    code = 0 if succeeded else (1 if exit_code is None else exit_code)
    statuses = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        started = (cs.get("state") or {}).get("running", {}).get("startedAt", now)
        terminated = {
            "exitCode": code,
            "reason": "Completed" if succeeded else (container_reason or "Error"),
            "startedAt": started,
            "finishedAt": now,
            "containerID": cs.get("containerID", ""),
        }
        if container_message:
            terminated["message"] = container_message
        statuses.append({**cs, "ready": False, "started": False, "state": {"terminated": terminated}})
    conditions = (pod.get("status") or {}).get("conditions")
    done = "PodCompleted" if succeeded else "PodFailed"
    for type_ in ("Ready", "ContainersReady"):
        conditions = pod_condition(conditions, type_, "False", now, done)
    conditions = pod_condition(conditions, "PodReadyToStartContainers", "False", now)
    status = {
        **(pod.get("status") or {}),
        "phase": "Succeeded" if succeeded else "Failed",
        "conditions": conditions,
        "containerStatuses": statuses,
    }
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return ctx.set_status(PODS, pod, status, MANAGER)


def _admit_bound_pod(ctx: Ctx, pod: dict[str, Any], assignments: dict[str, Any]) -> bool:
    """Give a pod its author bound to a node the devices it asks for; False if it failed."""
    node = pod["spec"]["nodeName"]
    taken = {d for uid, a in assignments.items() if a.get("node") == node for d in a.get("devices", [])}
    device_ids, containers = [], {}
    for c in pod["spec"].get("containers") or []:
        for resource, amount in container_requests(c).items():
            devices = ctx.world.by_resource.get((node, resource))
            if devices is None:
                continue
            free = [d for d in devices if d.id not in taken and d.id not in device_ids]
            if len(free) < int(amount):
                terminate_pod(
                    ctx,
                    pod,
                    False,
                    "UnexpectedAdmissionError",
                    f"Allocate failed due to requested number of devices unavailable for {resource}. "
                    f"Requested: {int(amount)}, Available: {len(free)}, which is unexpected",
                )
                return False
            for d in free[: int(amount)]:
                device_ids.append(d.id)
                containers[d.id] = c.get("name", "")
    assignments[pod["metadata"]["uid"]] = {
        "node": node,
        "devices": device_ids,
        "containers": containers,
        "pod": f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
    }
    return True


def reconcile(ctx: Ctx) -> None:
    assignments = ctx.memo("assignments")
    nodes = {n["metadata"]["name"] for n in ctx.items("/nodes")}
    for pod in ctx.items(PODS):
        spec, status = pod["spec"], pod.get("status") or {}
        if pod["metadata"].get("deletionTimestamp") or not spec.get("nodeName") or spec["nodeName"] not in nodes:
            continue
        phase = status.get("phase")
        if phase == "Pending":
            if pod["metadata"]["uid"] not in assignments and not _admit_bound_pod(ctx, pod, assignments):
                continue
            start_pod(ctx, pod)
        elif phase == "Running" and controller_of(pod) is None:
            annotations = pod["metadata"].get("annotations") or {}
            started = parse_iso(status.get("startTime"))
            if DURATION_ANNOTATION in annotations and started is not None and ctx.now >= started + duration_of(pod):
                how = outcome_of(pod)
                if how:
                    fail_pod(ctx, pod, how)
                else:
                    terminate_pod(ctx, pod, True)
    live = {p["metadata"]["uid"] for p in ctx.items(PODS) if holds_resources(p)}
    for uid in [u for u in assignments if u not in live]:
        del assignments[uid]


def on_pod_deleted(ctx: Ctx, pod: dict[str, Any]) -> None:
    if pod.get("status", {}).get("phase") == "Running":
        for c in pod["spec"].get("containers") or []:
            ctx.event(
                pod,
                "Normal",
                "Killing",
                f"Stopping container {c.get('name')}",
                MANAGER,
                pod["spec"].get("nodeName", ""),
            )


def reconcile_claims(ctx: Ctx) -> None:
    """Create claims from templates for pending pods; deallocate claims nobody uses."""
    for pod in ctx.items(PODS):
        spec = pod["spec"]
        if not spec.get("resourceClaims") or spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        ns = pod["metadata"]["namespace"]
        statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        known = {s.get("name") for s in statuses}
        changed = False
        for rc in spec["resourceClaims"]:
            template_name = rc.get("resourceClaimTemplateName")
            if not template_name or rc.get("name") in known:
                continue
            template = ctx.get(CLAIM_TEMPLATES, ns, template_name)
            if template is None:
                ctx.warn(
                    pod,
                    "FailedResourceClaimCreation",
                    f'PodResourceClaim {rc.get("name")}: resource claim template "{template_name}": '
                    f'resourceclaimtemplates.resource.k8s.io "{template_name}" not found',
                    "resource_claim",
                )
                continue
            tmeta = (template.get("spec") or {}).get("metadata") or {}
            claim = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "name": f"{pod['metadata']['name']}-{rc.get('name')}-{ctx.api.random_suffix()}",
                    "namespace": ns,
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": {
                        **(tmeta.get("annotations") or {}),
                        "resource.kubernetes.io/pod-claim-name": rc.get("name"),
                    },
                    "ownerReferences": [owner_reference(pod)],
                },
                "spec": dict((template.get("spec") or {}).get("spec") or {}),
            }
            try:
                created = ctx.create(CLAIMS, claim, "resource_claim")
            except ApiError as exc:
                ctx.warn(pod, "FailedResourceClaimCreation", exc.message, "resource_claim")
                continue
            statuses.append({"name": rc.get("name"), "resourceClaimName": created["metadata"]["name"]})
            changed = True
        if changed:
            ctx.set_status(
                PODS, pod, {**(pod.get("status") or {}), "resourceClaimStatuses": statuses}, "resource_claim"
            )
    for claim in ctx.items(CLAIMS):
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        if not status.get("allocation") and not reserved:
            continue
        keep = []
        for r in reserved:
            pod = ctx.store.by_uid_get(r.get("uid", ""))
            if (
                pod is not None
                and pod.get("kind") == "Pod"
                and not pod["metadata"].get("deletionTimestamp")
                and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")
            ):
                keep.append(r)
        if keep != reserved or (not keep and status.get("allocation")):
            new_status = {k: v for k, v in status.items() if k not in ("reservedFor", "allocation")}
            if keep:
                new_status["reservedFor"] = keep
                new_status["allocation"] = status["allocation"]
            ctx.set_status(CLAIMS, claim, new_status, "resource_claim")
