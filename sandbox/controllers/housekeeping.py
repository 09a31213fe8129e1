"""Cluster chores: owner garbage collection, namespace deletion, default service
accounts, PVC binding and event expiry."""

from __future__ import annotations

from sandbox.clock import parse_iso
from sandbox.controllers.base import EVENTS, Ctx

EVENT_TTL_SECONDS = 3600.0


def collect_garbage(ctx: Ctx) -> None:
    """Delete objects all of whose owners are gone (the Background policy's second half)."""
    live = ctx.store.by_uid
    for kind in ctx.registry.kinds:
        for obj in ctx.items(kind.key):
            refs = obj["metadata"].get("ownerReferences")
            if refs and not obj["metadata"].get("deletionTimestamp") and all(r.get("uid") not in live for r in refs):
                ctx.delete(kind.key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def finish_namespaces(ctx: Ctx) -> None:
    for ns in ctx.items("/namespaces"):
        if not ns["metadata"].get("deletionTimestamp"):
            continue
        name = ns["metadata"]["name"]
        namespaced = [k for k in ctx.registry.kinds if k.namespaced]
        for kind in namespaced:
            for obj in ctx.items(kind.key, name):
                if not obj["metadata"].get("deletionTimestamp"):
                    ctx.delete(kind.key, name, obj["metadata"]["name"])
        if not any(ctx.items(k.key, name) for k in namespaced):
            current = ctx.get("/namespaces", "", name)
            if current is not None:
                ctx.store.remove("/namespaces", current)


def default_service_accounts(ctx: Ctx) -> None:
    for ns in ctx.items("/namespaces"):
        name = ns["metadata"]["name"]
        if ns["metadata"].get("deletionTimestamp") or ctx.get("/serviceaccounts", name, "default") is not None:
            continue
        ctx.create(
            "/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}},
            "service-account-controller",
        )


def bind_claims(ctx: Ctx) -> None:
    for pvc in ctx.items("/persistentvolumeclaims"):
        if (pvc.get("status") or {}).get("phase") == "Bound":
            continue
        spec = pvc.get("spec") or {}
        if not spec.get("volumeName"):
            pvc = ctx.replace(
                "/persistentvolumeclaims",
                {
                    **pvc,
                    "spec": {
                        **spec,
                        "volumeName": f"pvc-{pvc['metadata']['uid']}",
                        "storageClassName": spec.get("storageClassName") or "standard",
                    },
                },
                "persistentvolume-binder",
            )
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        ctx.set_status(
            "/persistentvolumeclaims",
            pvc,
            {
                "phase": "Bound",
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "capacity": {"storage": storage},
            },
            "persistentvolume-binder",
        )


def expire_events(ctx: Ctx) -> None:
    for event in ctx.items(EVENTS):
        last = parse_iso(event.get("lastTimestamp") or event["metadata"].get("creationTimestamp"))
        if last is not None and ctx.now - last > EVENT_TTL_SECONDS:
            ctx.delete(EVENTS, event["metadata"]["namespace"], event["metadata"]["name"])


def prune_memos(ctx: Ctx) -> None:
    """Forget controller memory about objects that are gone, so long runs do not grow without bound."""
    live = ctx.store.by_uid
    for section in ("runs", "inference", "scheduling", "gangs", "warnings", "events"):
        memo = ctx.store.internal.get(section)
        if not memo:
            continue
        for key in [k for k in memo if k.split("|", 1)[0] not in live]:
            del memo[key]


def reconcile(ctx: Ctx) -> None:
    finish_namespaces(ctx)
    collect_garbage(ctx)
    default_service_accounts(ctx)
    bind_claims(ctx)
    expire_events(ctx)
    prune_memos(ctx)
