"""Small pure helpers about pods shared by the scheduler, kubelet, quotas and metrics."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sandbox import quantity

TERMINAL_PHASES = ("Succeeded", "Failed")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # Volcano's pod -> PodGroup link
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


def is_terminal(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") in TERMINAL_PHASES


def holds_resources(pod: dict[str, Any]) -> bool:
    """Bound and not finished: its requests count against its node."""
    return bool(pod.get("spec", {}).get("nodeName")) and not is_terminal(pod)


def _sum(target: dict[str, Fraction], section: dict[str, Any] | None) -> None:
    for name, value in (section or {}).items():
        try:
            target[name] = target.get(name, Fraction(0)) + quantity.parse(value)
        except quantity.QuantityError:
            continue


def container_requests(container: dict[str, Any]) -> dict[str, Fraction]:
    res = container.get("resources") or {}
    out: dict[str, Fraction] = {}
    _sum(out, res.get("limits"))  # requests default to limits
    requests: dict[str, Fraction] = {}
    _sum(requests, res.get("requests"))
    out.update(requests)
    return out


def pod_requests(pod: dict[str, Any]) -> dict[str, Fraction]:
    """Effective requests: sum over containers, at least the largest init container."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for k, v in container_requests(c).items():
            total[k] = total.get(k, Fraction(0)) + v
    for c in spec.get("initContainers") or []:
        for k, v in container_requests(c).items():
            total[k] = max(total.get(k, Fraction(0)), v)
    return total


def pod_limits(pod: dict[str, Any]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        _sum(total, (c.get("resources") or {}).get("limits"))
    return total


def controller_of(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return refs[0] if refs else None


def owner_reference(owner: dict[str, Any], block: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


def tolerates(tolerations: list[dict[str, Any]] | None, taint: dict[str, Any]) -> bool:
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator", "Equal")
        if op == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _expression_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and values:
        try:
            a, b = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_matches(pod: dict[str, Any], node_name: str, labels: dict[str, str]) -> bool:
    spec = pod.get("spec") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    for term in required.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_expression_matches(e, labels) for e in exprs) and all(
            _expression_matches(f, {"metadata.name": node_name}) for f in fields
        ):
            return True
    return False


def workload_of(pod: dict[str, Any]) -> str:
    """What kind of workload runs in a pod: trainjob, vcjob, notebook, inference or ''."""
    labels = pod.get("metadata", {}).get("labels") or {}
    ref = controller_of(pod) or {}
    kind = ref.get("kind", "")
    if kind == "TrainJob" or "jobset.sigs.k8s.io/jobset-name" in labels:
        return "trainjob"
    if kind == "Job" and ref.get("apiVersion", "").startswith("batch.volcano.sh") or "volcano.sh/job-name" in labels:
        return "vcjob"
    if kind == "Notebook" or "notebook-name" in labels:
        return "notebook"
    if kind == "InferenceService" or "serving.kserve.io/inferenceservice" in labels:
        return "inference"
    return ""
