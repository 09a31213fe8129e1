"""The Kubeflow Notebook controller, without the StatefulSet in between.

Like the upstream controller, each Notebook gets one pod ``<name>-0`` built from
``spec.template.spec`` with the labels ``statefulset`` and ``notebook-name``, every
label of the Notebook (upstream copies them so PodDefaults apply) and of the pod
template metadata when present, and the Notebook's annotations except those whose
key mentions "kubectl" or "notebook". ``NB_PREFIX`` and the 8888 port are added to
the first container. While the annotation ``kubeflow-resource-stopped`` is set the
pod is deleted (replicas 0). A changed pod template replaces the pod, as a
StatefulSet rollout would. Status mirrors upstream: ``readyReplicas``,
``containerState`` of the notebook container, and the pod's conditions.

Like upstream's culling controller (``culling_controller.go``), it keeps the annotations
``notebooks.kubeflow.org/last-activity`` and ``…/last_activity_check_timestamp`` (RFC
3339): both set to now once the pod exists, checked once a minute (the last-activity
moved to now when the kernels are busy), and removed while the Notebook is stopped or has
no pod. "Busy" is the notebook's own simulated activity (``sandbox.metrics.own_activity``,
so ``sandbox.local/activity`` pins it too), never its GPU's: a neighbour on a time-sliced
GPU does not make it active. The keys mention "notebook", so they are not copied to the pod.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sandbox.clock import iso, parse_iso
from sandbox.controllers.base import PODS, Ctx
from sandbox.errors import ApiError
from sandbox.metrics import own_activity
from sandbox.patches import clone
from sandbox.podutil import owner_reference

NOTEBOOKS = "kubeflow.org/notebooks"
MANAGER = "notebook-controller"
STOP_ANNOTATION = "kubeflow-resource-stopped"
REVISION_LABEL = "controller-revision-hash"
LAST_ACTIVITY = "notebooks.kubeflow.org/last-activity"
LAST_CHECK = "notebooks.kubeflow.org/last_activity_check_timestamp"
ACTIVITY_CHECK_SECONDS = 60.0  # upstream's IDLENESS_CHECK_PERIOD default: one minute
KERNEL_BUSY = 0.1  # own activity at or above this is a kernel executing


def build_pod(nb: dict[str, Any]) -> dict[str, Any]:
    meta = nb["metadata"]
    name, ns = meta["name"], meta["namespace"]
    template = (nb.get("spec") or {}).get("template") or {}
    spec = clone(template.get("spec") or {})
    labels = {
        **(meta.get("labels") or {}),
        **((template.get("metadata") or {}).get("labels") or {}),
        "statefulset": name,
        "notebook-name": name,
        "statefulset.kubernetes.io/pod-name": f"{name}-0",
    }
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if "kubectl" not in k and "notebook" not in k and k != STOP_ANNOTATION
    }
    annotations.update((template.get("metadata") or {}).get("annotations") or {})
    containers = spec.get("containers") or []
    if containers:
        first = containers[0]
        env = first.setdefault("env", [])
        if not any(e.get("name") == "NB_PREFIX" for e in env):
            env.append({"name": "NB_PREFIX", "value": f"/notebook/{ns}/{name}"})
        ports = first.setdefault("ports", [])
        if not ports:
            ports.append({"containerPort": 8888, "name": "notebook-port", "protocol": "TCP"})
        first.setdefault("workingDir", "/home/jovyan")
    spec.setdefault("securityContext", {}).setdefault("fsGroup", 100)
    spec["hostname"] = f"{name}-0"
    spec["subdomain"] = name
    revision = hashlib.sha256(json.dumps([spec, labels, annotations], sort_keys=True).encode()).hexdigest()[:10]
    labels[REVISION_LABEL] = f"{name}-{revision}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-0",
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(nb)],
        },
        "spec": spec,
    }


def _status(nb: dict[str, Any], pod: dict[str, Any] | None) -> dict[str, Any]:
    if pod is None:
        return {"readyReplicas": 0, "containerState": {}, "conditions": []}
    status = pod.get("status") or {}
    ready = status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    statuses = status.get("containerStatuses") or []
    mine = next((cs for cs in statuses if cs.get("name") == nb["metadata"]["name"]), statuses[0] if statuses else {})
    state = mine.get("state") or (
        {"waiting": {"reason": "ContainerCreating"}}
        if pod["spec"].get("nodeName")
        else {"waiting": {"reason": "PodPending"}}
    )
    conditions = [
        {
            k: c[k]
            for k in ("type", "status", "lastProbeTime", "lastTransitionTime", "reason", "message")
            if c.get(k) is not None
        }
        for c in status.get("conditions") or []
    ]
    return {"readyReplicas": 1 if ready else 0, "containerState": state, "conditions": conditions}


def reconcile(ctx: Ctx) -> None:
    for nb in ctx.items(NOTEBOOKS):
        meta = nb["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        ns, name = meta["namespace"], meta["name"]
        pod = ctx.get(PODS, ns, f"{name}-0")
        owned = pod is not None and any(
            r.get("uid") == meta["uid"] for r in pod["metadata"].get("ownerReferences") or []
        )
        if STOP_ANNOTATION in (meta.get("annotations") or {}):
            if owned:
                ctx.delete(PODS, ns, pod["metadata"]["name"])
                pod = None
        else:
            desired = build_pod(nb)
            stale = (
                owned
                and (pod["metadata"].get("labels") or {}).get(REVISION_LABEL)
                != desired["metadata"]["labels"][REVISION_LABEL]
            )
            finished = owned and pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if stale or finished:  # a StatefulSet replaces a pod of an old revision, or one that ended
                ctx.delete(PODS, ns, pod["metadata"]["name"])
                pod = None
            if pod is None:
                try:
                    pod = ctx.create(PODS, desired, "statefulset-controller")
                    ctx.event(
                        nb,
                        "Normal",
                        "SuccessfulCreate",
                        f"create Pod {name}-0 in StatefulSet {name} successful",
                        "statefulset-controller",
                    )
                except ApiError as exc:
                    ctx.warn(
                        nb,
                        "FailedCreate",
                        f"create Pod {name}-0 in StatefulSet {name} failed error: {exc.message}",
                        "statefulset-controller",
                    )
            elif not owned:
                pod = None
        nb = _track_activity(ctx, nb, pod)
        ctx.set_status(NOTEBOOKS, nb, _status(nb, pod), MANAGER)


def _track_activity(ctx: Ctx, nb: dict[str, Any], pod: dict[str, Any] | None) -> dict[str, Any]:
    """Keep the culling annotations as upstream's culler does; returns the Notebook as stored."""
    annotations = dict(nb["metadata"].get("annotations") or {})
    now = iso(ctx.now)
    if pod is None or STOP_ANNOTATION in annotations:
        annotations.pop(LAST_ACTIVITY, None)
        annotations.pop(LAST_CHECK, None)
    elif LAST_ACTIVITY not in annotations or LAST_CHECK not in annotations:
        annotations[LAST_ACTIVITY] = annotations[LAST_CHECK] = now
    elif ctx.now >= (parse_iso(annotations[LAST_CHECK]) or 0.0) + ACTIVITY_CHECK_SECONDS:
        annotations[LAST_CHECK] = now
        if pod.get("status", {}).get("phase") == "Running":
            assignment = ctx.memo("assignments").get(pod["metadata"]["uid"]) or {}
            if own_activity(ctx.world, assignment.get("devices", []), pod, ctx.seed, ctx.now) >= KERNEL_BUSY:
                annotations[LAST_ACTIVITY] = now
    if annotations == (nb["metadata"].get("annotations") or {}):
        return nb
    updated = clone(nb)
    updated["metadata"]["annotations"] = annotations
    return ctx.replace(NOTEBOOKS, updated, MANAGER)
