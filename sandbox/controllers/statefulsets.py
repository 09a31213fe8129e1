"""The StatefulSet controller (apps/v1), enough for notebooks run as plain StatefulSets.

Pods ``<name>-<ordinal>`` for ordinals below ``spec.replicas`` (default 1), owned by
the StatefulSet, with its template's labels plus ``statefulset.kubernetes.io/pod-name``,
``apps.kubernetes.io/pod-index`` and ``controller-revision-hash``. Scaling down deletes
the highest ordinals; a changed template replaces pods; finished pods are replaced.
Status: replicas, readyReplicas, currentReplicas, updatedReplicas, availableReplicas,
revisions and observedGeneration (zero counts omitted, as the API server does).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sandbox.controllers.base import PODS, Ctx
from sandbox.errors import ApiError
from sandbox.patches import clone
from sandbox.podutil import owner_reference

STATEFULSETS = "apps/statefulsets"
MANAGER = "statefulset-controller"
REVISION_LABEL = "controller-revision-hash"


def _revision(sts: dict[str, Any]) -> str:
    template = (sts.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
    return f"{sts['metadata']['name']}-{digest}"


def _pod(sts: dict[str, Any], ordinal: int, revision: str) -> dict[str, Any]:
    meta, spec = sts["metadata"], sts.get("spec") or {}
    template = clone(spec.get("template") or {})
    pod_meta = template.get("metadata") or {}
    name = f"{meta['name']}-{ordinal}"
    labels = {
        **(pod_meta.get("labels") or {}),
        REVISION_LABEL: revision,
        "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": str(ordinal),
    }
    pod_spec = template.get("spec") or {}
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": dict(pod_meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(sts)],
        },
        "spec": pod_spec,
    }


def reconcile(ctx: Ctx) -> None:
    for sts in ctx.items(STATEFULSETS):
        meta, spec = sts["metadata"], sts.get("spec") or {}
        if meta.get("deletionTimestamp"):
            continue
        ns, name = meta["namespace"], meta["name"]
        replicas = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        revision = _revision(sts)
        owned = {}
        for pod in ctx.items(PODS, ns):
            if any(r.get("uid") == meta["uid"] for r in pod["metadata"].get("ownerReferences") or []):
                owned[pod["metadata"]["name"]] = pod
        for pod_name, pod in sorted(owned.items(), reverse=True):
            ordinal = pod_name.rsplit("-", 1)[-1]
            stale = (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision
            finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if not ordinal.isdigit() or int(ordinal) >= replicas or stale or finished:
                ctx.delete(PODS, ns, pod_name)
                ctx.event(
                    sts,
                    "Normal",
                    "SuccessfulDelete",
                    f"delete Pod {pod_name} in StatefulSet {name} successful",
                    MANAGER,
                )
                del owned[pod_name]
        for ordinal in range(replicas):
            pod_name = f"{name}-{ordinal}"
            if pod_name in owned or ctx.get(PODS, ns, pod_name) is not None:
                continue
            try:
                owned[pod_name] = ctx.create(PODS, _pod(sts, ordinal, revision), MANAGER)
            except ApiError as exc:
                ctx.warn(
                    sts,
                    "FailedCreate",
                    f"create Pod {pod_name} in StatefulSet {name} failed error: {exc.message}",
                    MANAGER,
                )
                break
            ctx.event(
                sts, "Normal", "SuccessfulCreate", f"create Pod {pod_name} in StatefulSet {name} successful", MANAGER
            )
        pods = list(owned.values())
        ready = sum(
            1
            for p in pods
            if p.get("status", {}).get("phase") == "Running"
            and any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions") or [])
        )
        status: dict[str, Any] = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(pods),
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        for key, value in (
            ("readyReplicas", ready),
            ("currentReplicas", len(pods)),
            ("updatedReplicas", len(pods)),
            ("availableReplicas", ready),
        ):
            if value:
                status[key] = value
        ctx.set_status(STATEFULSETS, sts, status, MANAGER)
