"""What every controller gets: a context with the store, the API and helpers.

Controllers run inside one pass that holds the store lock, write through ``Api``
with ``internal=True`` (so they skip validation but not admission) and only write
when something changed, so a pass that finds nothing to do makes no writes. That is
how ``settle()`` knows the world has converged.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from sandbox.clock import iso
from sandbox.errors import ApiError
from sandbox.kinds import Kind

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

PODS = "/pods"
EVENTS = "/events"


class Ctx:
    def __init__(self, sandbox: Sandbox):
        self.sandbox = sandbox
        self.api = sandbox.api
        self.store = sandbox.store
        self.registry = sandbox.registry
        self.world = sandbox.world
        self.rng: random.Random = sandbox.rng
        self.seed = sandbox.seed
        self.now = sandbox.clock.now()
        self.now_iso = iso(self.now)

    def kind(self, key: str) -> Kind:
        return self.registry.by_key(key)

    def items(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.items(key, namespace)

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(key, namespace, name)

    def memo(self, section: str) -> dict[str, Any]:
        return self.store.internal.setdefault(section, {})

    # writes -------------------------------------------------------------------------------------

    def create(self, key: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        kind = self.kind(key)
        ns = obj.get("metadata", {}).get("namespace") if kind.namespaced else None
        return self.api.create(kind, ns, obj, manager=manager, internal=True)

    def replace(self, key: str, obj: dict[str, Any], manager: str) -> dict[str, Any]:
        kind = self.kind(key)
        meta = obj["metadata"]
        return self.api.update(kind, meta.get("namespace", ""), meta["name"], obj, manager=manager, internal=True)

    def set_status(self, key: str, obj: dict[str, Any], status: dict[str, Any], manager: str) -> dict[str, Any]:
        """Write ``status`` if it differs from the object's (through /status when the kind has it)."""
        if obj.get("status") == status:
            return obj
        kind = self.kind(key)
        meta = obj["metadata"]
        return self.api.update(
            kind,
            meta.get("namespace", ""),
            meta["name"],
            {**obj, "status": status},
            manager=manager,
            subresource="status" if kind.status else "",
            internal=True,
        )

    def delete(self, key: str, namespace: str, name: str, propagation: str = "Background") -> None:
        try:
            self.api.delete(self.kind(key), namespace, name, propagation=propagation)
        except ApiError as exc:
            if exc.code != 404:
                raise

    # events -------------------------------------------------------------------------------------

    def event(
        self,
        involved: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str = "",
        aggregate: bool = False,
    ) -> None:
        """Record a v1 Event; repeats bump count/lastTimestamp instead of adding objects.

        ``aggregate``: one event per (object, reason) whose message is replaced, as the
        scheduler's FailedScheduling events behave; otherwise one per exact message.
        """
        try:
            self._event(involved, type_, reason, message, component, host, aggregate)
        except ApiError:
            pass  # e.g. the namespace is being deleted; events are best effort, as in Kubernetes

    def warn(self, involved: dict[str, Any], reason: str, message: str, component: str, every: float = 60.0) -> None:
        """A Warning event for a condition that persists (e.g. FailedCreate), written at most
        once per ``every`` simulated seconds per (object, reason), so that a controller retrying
        each pass does not write each pass (messages may differ, e.g. in generated pod names)."""
        memo = self.memo("warnings")
        key = f"{involved['metadata']['uid']}|{reason}"
        last = memo.get(key)
        if last and self.now - last.get("at", 0.0) < every:
            return
        memo[key] = {"message": message, "at": self.now}
        self.event(involved, "Warning", reason, message, component, aggregate=True)

    def _event(
        self,
        involved: dict[str, Any],
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str,
        aggregate: bool,
    ) -> None:
        meta = involved["metadata"]
        namespace = meta.get("namespace") or "default"
        memo = self.memo("events")
        key = "|".join([meta["uid"], reason, component] + ([] if aggregate else [message]))
        existing_name = memo.get(key)
        existing = self.store.get(EVENTS, namespace, existing_name) if existing_name else None
        if existing is not None:
            updated = {
                **existing,
                "message": message,
                "count": int(existing.get("count", 1)) + 1,
                "lastTimestamp": self.now_iso,
            }
            self.replace(EVENTS, updated, component)
            return
        name = f"{meta['name']}.{self.rng.getrandbits(64):016x}"
        memo[key] = name
        source = {"component": component, **({"host": host} if host else {})}
        self.create(
            EVENTS,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": {
                    "apiVersion": involved.get("apiVersion"),
                    "kind": involved.get("kind"),
                    "name": meta["name"],
                    **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
                    "uid": meta["uid"],
                    "resourceVersion": meta.get("resourceVersion"),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": self.now_iso,
                "lastTimestamp": self.now_iso,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": host or component,
            },
            component,
        )


def set_condition(
    conditions: list[dict[str, Any]] | None,
    type_: str,
    status: str,
    reason: str,
    message: str,
    now_iso: str,
    **extra: Any,
) -> list[dict[str, Any]]:
    """Upsert a condition, keeping lastTransitionTime while the status does not change."""
    out = []
    found = False
    for c in conditions or []:
        if c.get("type") == type_:
            found = True
            changed = c.get("status") != status
            new = {**c, "status": status, "reason": reason, "message": message, **extra}
            new["lastTransitionTime"] = now_iso if changed else c.get("lastTransitionTime", now_iso)
            out.append(new)
        else:
            out.append(c)
    if not found:
        out.append(
            {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": now_iso,
                **extra,
            }
        )
    return out


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None
