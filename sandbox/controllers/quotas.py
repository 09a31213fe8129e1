"""ResourceQuota: admission of new objects and ``status.used``.

Admission works like the real ResourceQuota plugin: an object that would push any
constrained key over ``spec.hard`` is rejected with 403 ``exceeded quota: ...``, and
a quota on cpu or memory requires every container to state that resource. Usage is
computed live from the namespace, so two pods created in a row are both counted
even before the status is refreshed.

Keys understood: ``pods``, ``cpu``/``memory``, ``requests.<resource>`` (including
extended resources such as ``requests.nvidia.com/gpu``), ``limits.<resource>``,
``<class>.deviceclass.resource.k8s.io/devices`` (DRA devices requested by
ResourceClaims), ``count/<resource>[.<group>]`` and the legacy object counts
(``configmaps``, ``secrets``, ``services``, ``persistentvolumeclaims``). Quota scopes
(``spec.scopes`` and ``spec.scopeSelector``: PriorityClass, BestEffort, NotBestEffort,
Terminating, NotTerminating) select the pods a quota tracks; a scoped quota tracks
pods only.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sandbox import errors, quantity
from sandbox.controllers.base import Ctx
from sandbox.kinds import Kind
from sandbox.podutil import container_requests, is_terminal, pod_limits, pod_requests
from sandbox.store import Store
from sandbox.validation import qos_class

QUOTAS = "/resourcequotas"
CLAIMS = "resource.k8s.io/resourceclaims"
_NATIVE = ("cpu", "memory", "ephemeral-storage")
_LEGACY_COUNTS = {
    "/configmaps": "configmaps",
    "/secrets": "secrets",
    "/services": "services",
    "/persistentvolumeclaims": "persistentvolumeclaims",
}
DRA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def pod_usage(pod: dict[str, Any]) -> dict[str, Fraction]:
    usage: dict[str, Fraction] = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for name, value in pod_requests(pod).items():
        usage[f"requests.{name}"] = value
        if name in _NATIVE:
            usage[name] = value
    for name, value in pod_limits(pod).items():
        usage[f"limits.{name}"] = value
    return usage


def claim_usage(claim: dict[str, Any]) -> dict[str, Fraction]:
    usage: dict[str, Fraction] = {"count/resourceclaims.resource.k8s.io": Fraction(1)}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        body = request.get("exactly") or request
        key = f"{body.get('deviceClassName', '')}{DRA_SUFFIX}"
        usage[key] = usage.get(key, Fraction(0)) + int(body.get("count") or 1)
    return usage


def object_usage(kind: Kind, obj: dict[str, Any]) -> dict[str, Fraction]:
    if kind.key == "/pods":
        return pod_usage(obj)
    usage = {f"count/{kind.resource_group}": Fraction(1)}
    if kind.key in _LEGACY_COUNTS:
        usage[_LEGACY_COUNTS[kind.key]] = Fraction(1)
    if kind.key == CLAIMS:
        usage.update(claim_usage(obj))
    if kind.key == "/persistentvolumeclaims":
        storage = (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        if storage is not None:
            usage["requests.storage"] = quantity.parse(storage)
    return usage


def _scoped(quota: dict[str, Any]) -> bool:
    spec = quota.get("spec") or {}
    return bool(spec.get("scopes") or (spec.get("scopeSelector") or {}).get("matchExpressions"))


def _scope_matches(scope: str, operator: str, values: list[str], pod: dict[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    if scope == "PriorityClass":
        name = spec.get("priorityClassName")
        if operator == "In":
            return name in values
        if operator == "NotIn":
            return name not in values
        return bool(name) if operator == "Exists" else not name
    if scope in ("BestEffort", "NotBestEffort"):
        best = qos_class(pod) == "BestEffort"
        hit = best if scope == "BestEffort" else not best
    elif scope in ("Terminating", "NotTerminating"):
        terminating = spec.get("activeDeadlineSeconds") is not None
        hit = terminating if scope == "Terminating" else not terminating
    else:
        return False
    return hit if operator in ("Exists", "In") else not hit


def tracks(quota: dict[str, Any], kind: Kind, obj: dict[str, Any]) -> bool:
    if not _scoped(quota):
        return True
    if kind.key != "/pods":
        return False
    spec = quota.get("spec") or {}
    for scope in spec.get("scopes") or []:
        if not _scope_matches(scope, "Exists", [], obj):
            return False
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        if not _scope_matches(expr.get("scopeName", ""), expr.get("operator", "In"), expr.get("values") or [], obj):
            return False
    return True


def _kinds_counted(store: Store) -> list[Kind]:
    return [k for k in store.registry.kinds if k.namespaced]


def used(store: Store, quota: dict[str, Any]) -> dict[str, Fraction]:
    namespace = quota["metadata"]["namespace"]
    hard = set((quota.get("spec") or {}).get("hard") or {})
    total: dict[str, Fraction] = {}
    kinds = [store.registry.by_key("/pods"), store.registry.by_key(CLAIMS)]
    kinds += [
        k
        for k in _kinds_counted(store)
        if f"count/{k.resource_group}" in hard
        or _LEGACY_COUNTS.get(k.key) in hard
        or (k.key == "/persistentvolumeclaims" and "requests.storage" in hard)
    ]
    for kind in {k.key: k for k in kinds}.values():
        for obj in store.items(kind.key, namespace):
            if kind.key == "/pods" and is_terminal(obj):
                continue
            if not tracks(quota, kind, obj):
                continue
            for k, v in object_usage(kind, obj).items():
                total[k] = total.get(k, Fraction(0)) + v
    return total


def _hard(quota: dict[str, Any]) -> dict[str, Fraction]:
    out = {}
    for k, v in ((quota.get("spec") or {}).get("hard") or {}).items():
        try:
            out[k] = quantity.parse(v)
        except quantity.QuantityError:
            continue
    return out


def _missing_resources(pod: dict[str, Any], hard: dict[str, Fraction]) -> list[str]:
    containers = pod.get("spec", {}).get("containers") or []
    missing = []
    for key in sorted(hard):
        if key.startswith(("requests.", "limits.")):
            section, _, resource = key.partition(".")
        else:
            section, resource = "requests", key
        if resource not in ("cpu", "memory"):
            continue
        lacking = [
            c.get("name", "")
            for c in containers
            if resource not in ((c.get("resources") or {}).get(section) or {})
            and not (section == "requests" and resource in container_requests(c))
        ]
        if lacking:
            missing.append(f"{section}.{resource} for: {','.join(lacking)}")
    return missing


def admit(store: Store, obj: dict[str, Any], kind: Kind) -> None:
    """Reject the creation of ``obj`` if it would exceed a ResourceQuota of its namespace."""
    namespace = obj["metadata"].get("namespace")
    if not namespace:
        return
    quotas = sorted(store.items(QUOTAS, namespace), key=lambda q: q["metadata"]["name"])
    if not quotas:
        return
    usage = object_usage(kind, obj)
    name = obj["metadata"].get("name", "")
    for quota in quotas:
        if not tracks(quota, kind, obj):
            continue
        hard = _hard(quota)
        qname = quota["metadata"]["name"]
        if kind.key == "/pods":
            missing = _missing_resources(obj, hard)
            if missing:
                raise errors.forbidden(kind, name, f"failed quota: {qname}: must specify {'; '.join(missing)}")
        exceeded = [k for k in sorted(hard) if usage.get(k)]
        if not exceeded:
            continue
        current = used(store, quota)
        exceeded = [k for k in exceeded if current.get(k, Fraction(0)) + usage[k] > hard[k]]
        if exceeded:

            def fmt(values: dict[str, Fraction], keys: list[str] = exceeded) -> str:
                return ",".join(f"{k}={quantity.format_quantity(values.get(k, Fraction(0)), k)}" for k in keys)

            limited = ",".join(f"{k}={quota['spec']['hard'][k]}" for k in exceeded)
            raise errors.forbidden(
                kind,
                name,
                f"exceeded quota: {qname}, requested: {fmt(usage)}, used: {fmt(current)}, limited: {limited}",
            )


def reconcile(ctx: Ctx) -> None:
    for quota in ctx.items(QUOTAS):
        hard = dict((quota.get("spec") or {}).get("hard") or {})
        current = used(ctx.store, quota)
        status = {
            "hard": hard,
            "used": {k: quantity.format_quantity(current.get(k, Fraction(0)), k) for k in sorted(hard)},
        }
        ctx.set_status(QUOTAS, quota, status, "resourcequota-controller")
