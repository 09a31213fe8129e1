"""The REST semantics of the emulated API server, independent of HTTP.

Every verb (get, list, create, update, patch, apply, delete) is a method here; the
HTTP layer (``server.py``) and the controllers both call them, so an object written
by a controller goes through the same bookkeeping (resourceVersion, generation,
managedFields, events for watches) as one written by a client. Controllers pass
``internal=True`` to skip validation of what they write, never admission.

Write pipeline, in order: normalise apiVersion/kind/namespace -> system metadata ->
defaulting (built-in kinds and CRD defaults) -> validation (-> 422) -> admission
(namespace lifecycle, PriorityClass, ResourceQuota -> 403/404) -> managedFields ->
commit (unless dry-run). Updates that change nothing are not written, as on a real
server, which is also what lets the controller loop detect convergence.
"""

from __future__ import annotations

import base64
import json
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import yaml

from sandbox import errors
from sandbox.apply import apply as apply_fields
from sandbox.apply import parse_entries, record_write, render_entries
from sandbox.clock import Clock
from sandbox.errors import ApiError, cause
from sandbox.kinds import Kind, Registry
from sandbox.patches import clone, json_patch, merge_patch, strategic_merge_patch
from sandbox.schemas import Catalog
from sandbox.selectors import make_filter
from sandbox.store import Store
from sandbox.validation import default_pod, normalize_quantities, validate

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_SYSTEM_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generation",
)

Admission = Callable[[Store, dict[str, Any], Kind], None]


def present(kind: Kind, obj: dict[str, Any], version: str | None) -> dict[str, Any]:
    """The object as a client of ``version`` sees it (trivial conversion)."""
    if version and version != kind.storage_version:
        return {**obj, "apiVersion": kind.api_version(version)}
    return obj


def _scope(kind: Kind, subresource: str) -> str:
    if subresource == "status":
        return "status"
    return "main" if kind.status else "all"


def _content(kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    skip = ("metadata", "status", "apiVersion", "kind") if kind.status else ("metadata", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    fields = [{k: v for k, v in m.items() if k != "time"} for m in obj["metadata"].get("managedFields") or []]
    return {**obj, "metadata": meta, "_fields": fields}


def _default_service(svc: dict[str, Any]) -> None:
    """What the API server fills in on a Service: type, a cluster IP (stable per uid), port defaults."""
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        if not spec.get("clusterIP"):
            digest = uuid.UUID(svc["metadata"]["uid"]).bytes
            spec["clusterIP"] = f"10.96.{digest[0]}.{1 + digest[1] % 254}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    svc.setdefault("status", {"loadBalancer": {}})


class Api:
    def __init__(
        self,
        registry: Registry,
        store: Store,
        clock: Clock,
        catalog: Catalog | None,
        rng: random.Random,
        admission: Admission | None = None,
    ):
        self.registry = registry
        self.store = store
        self.clock = clock
        self.catalog = catalog
        self.rng = rng
        self.admission = admission
        # Add-ons' validating webhooks (KServe, Knative): (store, new, old or None, kind) -> raise
        # ApiError; run on every client create and update, after the built-in validation.
        self.webhook: Callable[[Store, dict[str, Any], dict[str, Any] | None, Kind], None] | None = None
        self._local = threading.local()
        # called (under the store lock) after an object is gone; the sandbox records Killing events
        self.on_deleted: Callable[[Kind, dict[str, Any]], None] | None = None

    # helpers ------------------------------------------------------------------------------------

    def now(self) -> str:
        return self.clock.iso()

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def random_suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(_NAME_CHARS) for _ in range(n))

    def _check_type(self, kind: Kind, obj: dict[str, Any]) -> None:
        api_version, k = obj.get("apiVersion"), obj.get("kind")
        if k and k != kind.kind:
            raise errors.bad_request(f"the kind in the data ({k}) does not match the expected kind ({kind.kind})")
        if api_version and api_version not in {kind.api_version(v) for v in kind.versions}:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({kind.api_version()})"
            )
        obj["apiVersion"], obj["kind"] = kind.api_version(), kind.kind

    def _schema(self, kind: Kind, version: str | None):
        if not kind.custom or self.catalog is None:
            return None
        return self.catalog.schema_for(kind, version or kind.storage_version)

    def _default(self, kind: Kind, obj: dict[str, Any], version: str | None) -> None:
        schema = self._schema(kind, version)
        if schema is not None:
            schema.default(obj)
        if kind.key == "/services":
            _default_service(obj)
        if kind.key == "/namespaces":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
            obj.setdefault("status", {}).setdefault("phase", "Active")

    @contextmanager
    def request_options(self, field_validation: str | None = None) -> Iterator[list[str]]:
        """Per-request options set by the HTTP layer; yields the list that collects warnings.

        ``fieldValidation``: Strict (the sandbox's default) rejects unknown fields of custom
        resources with 422; Warn drops them and warns (the real server's default when the
        parameter is absent); Ignore drops them silently.
        """
        self._local.field_validation = field_validation or "Strict"
        self._local.warnings = []
        try:
            yield self._local.warnings
        finally:
            self._local.field_validation = "Strict"

    def _validate(self, kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None, version: str | None) -> None:
        causes = validate(kind, obj, old)
        schema = self._schema(kind, version)
        if schema is not None:
            mode = getattr(self._local, "field_validation", "Strict")
            if mode in ("Warn", "Ignore"):
                dropped = schema.prune_unknown(obj)
                if mode == "Warn":
                    getattr(self._local, "warnings", []).extend(f'unknown field "{f}"' for f in dropped)
            causes += schema.validate(present(kind, obj, version))
        if causes:
            raise errors.invalid(kind, obj["metadata"].get("name", ""), causes)

    def _namespace_ready(self, namespace: str) -> None:
        ns = self.store.get("/namespaces", "", namespace)
        if ns is None:
            raise errors.namespace_not_found(namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                details={"name": namespace, "kind": "namespaces"},
            )

    # reads ----------------------------------------------------------------------------------------

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.get(kind.key, namespace if kind.namespaced else "", name)
        if obj is None:
            raise errors.not_found(kind, name)
        return obj

    def list(
        self,
        kind: Kind,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        cont: str | None = None,
    ) -> tuple[list[dict[str, Any]], str, str | None, int | None]:
        """(items, resourceVersion, continue token, remainingItemCount)."""
        accept = make_filter(label_selector, field_selector, kind)
        start = None
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                start = (str(token["start"][0]), str(token["start"][1]))
            except (ValueError, KeyError, TypeError, IndexError):
                raise errors.bad_request("continue key is not valid: illegal base64 data") from None
        with self.store.lock:
            items = self.store.sorted_items(kind.key, namespace if kind.namespaced else None, after=start)
            rv = str(self.store.rv) if start is None else str(token["rv"])
        if accept is not None:
            items = [o for o in items if accept(o)]
        if limit and limit > 0 and len(items) > limit:
            last = items[limit - 1]["metadata"]
            token = {"start": [last.get("namespace", ""), last["name"]], "rv": rv}
            encoded = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
            return items[:limit], rv, encoded, len(items) - limit
        return items, rv, None, None

    # writes ---------------------------------------------------------------------------------------

    def create(
        self,
        kind: Kind,
        namespace: str | None,
        body: Any,
        *,
        manager: str,
        version: str | None = None,
        dry_run: bool = False,
        internal: bool = False,
        entries: list | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj = clone(body)
        self._check_type(kind, obj)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if kind.namespaced:
            if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            namespace = namespace or meta.get("namespace") or "default"
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
            namespace = ""
        with self.store.lock:
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise errors.invalid(
                        kind,
                        "",
                        [
                            cause(
                                "metadata.name",
                                "Required value: name or generateName is required",
                                "FieldValueRequired",
                            )
                        ],
                    )
                for _ in range(20):
                    meta["name"] = meta["generateName"] + self.random_suffix()
                    if self.store.get(kind.key, namespace, meta["name"]) is None:
                        break
            name = meta["name"]
            if kind.namespaced:
                self._namespace_ready(namespace)
            if self.store.get(kind.key, namespace, name) is not None:
                raise errors.already_exists(kind, name)
            for key in _SYSTEM_META:
                meta.pop(key, None)
            meta["uid"] = self.new_uid()
            meta["creationTimestamp"] = self.now()
            meta["generation"] = 1
            if kind.status and not internal:
                obj.pop("status", None)
            if kind.key == "/pods":
                default_pod(obj, self._pod_priority(obj, kind))
            self._default(kind, obj, version)
            if not kind.custom:
                normalize_quantities(kind, obj)
            if not internal:
                self._validate(kind, obj, None, version)
                if self.webhook is not None:
                    self.webhook(self.store, obj, None, kind)
            if self.admission is not None and kind.namespaced:
                self.admission(self.store, obj, kind)
            if entries is None:
                entries = record_write([], None, obj, manager, _scope(kind, ""), kind.api_version(version), self.now())
            meta["managedFields"] = render_entries(entries)
            if dry_run:
                return obj
            return self.store.commit(kind.key, obj, None)

    def _pod_priority(self, pod: dict[str, Any], kind: Kind) -> int | None:
        spec = pod.get("spec") or {}
        name = spec.get("priorityClassName")
        classes = self.store.items("scheduling.k8s.io/priorityclasses")
        if name:
            for pc in classes:
                if pc["metadata"]["name"] == name:
                    return int(pc.get("value", 0))
            raise errors.forbidden(
                kind, pod["metadata"].get("name", ""), f"no PriorityClass with name {name} was found"
            )
        for pc in classes:
            if pc.get("globalDefault"):
                spec["priorityClassName"] = pc["metadata"]["name"]
                return int(pc.get("value", 0))
        return None

    def update(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        *,
        manager: str,
        subresource: str = "",
        version: str | None = None,
        dry_run: bool = False,
        internal: bool = False,
    ) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        new = clone(body)
        self._check_type(kind, new)
        meta = new.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        with self.store.lock:
            old = self.get(kind, namespace, name)
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
                raise errors.conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {meta['uid']}, UID in "
                    f"object meta: {old['metadata']['uid']}",
                )
            return self._replace(kind, old, new, subresource, manager, version, dry_run, internal, None)

    def _replace(
        self,
        kind: Kind,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str,
        manager: str,
        version: str | None,
        dry_run: bool,
        internal: bool,
        entries: list | None,
    ) -> dict[str, Any]:
        old_meta = old["metadata"]
        # Stored objects are shared with readers and never mutated: copy what we carry over
        # from ``old`` because defaulting below may write into nested maps.
        if subresource == "status":
            merged = clone({k: v for k, v in old.items() if k != "status"})
            if new.get("status") is not None:
                merged["status"] = new["status"]
            new = merged
        else:
            meta = dict(new.get("metadata") or {})
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "namespace",
                "name",
                "generation",
                "managedFields",
            ):
                if key in old_meta:
                    meta[key] = old_meta[key]
                else:
                    meta.pop(key, None)
            new["metadata"] = meta
            if kind.status:
                if old.get("status") is not None:
                    new["status"] = clone(old["status"])
                else:
                    new.pop("status", None)
        new["apiVersion"], new["kind"] = kind.api_version(), kind.kind
        if kind.key == "/pods" and subresource != "status":
            default_pod(new, new.get("spec", {}).get("priority"))
        self._default(kind, new, version)
        if not kind.custom:
            normalize_quantities(kind, new)
        if _content(kind, old) != _content(kind, new):
            new["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        if not internal:
            self._validate(kind, new, old, version)
            if self.webhook is not None and subresource != "status":
                self.webhook(self.store, new, old, kind)
        if entries is None:
            entries = record_write(
                parse_entries(old),
                old,
                new,
                manager,
                _scope(kind, subresource),
                kind.api_version(version),
                self.now(),
                subresource,
            )
        new["metadata"]["managedFields"] = render_entries(entries)
        if _comparable(new) == _comparable(old):
            return old
        if dry_run:
            return new
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return self._remove(kind, new)  # the last finalizer is gone: the delete completes
        return self.store.commit(kind.key, new, old)

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch_type: str,
        body: Any,
        *,
        manager: str,
        subresource: str = "",
        version: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        internal: bool = False,
    ) -> dict[str, Any]:
        if patch_type == APPLY_PATCH:
            return self.apply(
                kind,
                namespace,
                name,
                body,
                manager=manager,
                subresource=subresource,
                version=version,
                force=force,
                dry_run=dry_run,
            )
        with self.store.lock:
            old = self.get(kind, namespace, name)
            base = clone(old)
            if patch_type == JSON_PATCH:
                new = json_patch(base, body)
            elif patch_type == MERGE_PATCH:
                new = merge_patch(base, body)
            elif patch_type == STRATEGIC_PATCH:
                new = strategic_merge_patch(base, body)
            else:
                raise ApiError(
                    415,
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}, {STRATEGIC_PATCH}",
                )
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise errors.bad_request("the patch produced an object without metadata")
            rv = new["metadata"].get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            if new["metadata"].get("name") != name:
                raise errors.bad_request("metadata.name cannot be changed by a patch")
            self._check_type(kind, new)
            return self._replace(kind, old, new, subresource, manager, version, dry_run, internal, None)

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: Any,
        *,
        manager: str,
        subresource: str = "",
        version: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not manager:
            raise ApiError(
                422,
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
                "Invalid",
                details={
                    "kind": "PatchOptions",
                    "group": "meta.k8s.io",
                    "causes": [
                        cause("fieldManager", "Required value: is required for apply patch", "FieldValueRequired")
                    ],
                },
            )
        config = body
        if isinstance(body, (bytes, str)):
            try:
                config = json.loads(body)  # clients send JSON, which is also YAML
            except ValueError:
                try:
                    config = yaml.load(body, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
                except yaml.YAMLError as exc:
                    raise errors.bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(config, dict):
            raise errors.bad_request("apply configuration must be an object")
        if not config.get("apiVersion") or not config.get("kind"):
            raise errors.bad_request("invalid object type: apply configuration must set apiVersion and kind")
        self._check_type(kind, config)
        meta = config.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        if kind.namespaced and meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        scope = _scope(kind, subresource)
        api_version = kind.api_version(version)
        with self.store.lock:
            old = self.store.get(kind.key, namespace if kind.namespaced else "", name)
            if old is None:
                if subresource:
                    raise errors.not_found(kind, name)
                result, entries = apply_fields({}, config, manager, force, scope, api_version, self.now())
                result["metadata"] = {
                    **result.get("metadata", {}),
                    "name": name,
                    **({"namespace": namespace} if kind.namespaced else {}),
                }
                return self.create(
                    kind, namespace, result, manager=manager, version=version, dry_run=dry_run, entries=entries
                )
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            result, entries = apply_fields(old, config, manager, force, scope, api_version, self.now(), subresource)
            return self._replace(kind, old, result, subresource, manager, version, dry_run, False, entries)

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        propagation: str | None = None,
        preconditions: dict[str, Any] | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """Delete (or start deleting) an object; returns its last state."""
        with self.store.lock:
            obj = self.get(kind, namespace, name)
            meta = obj["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise errors.conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta['uid']}",
                )
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(
                    kind,
                    name,
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                    f"{meta['resourceVersion']}",
                )
            if dry_run:
                return obj
            if propagation not in (None, "Background", "Foreground", "Orphan"):
                raise errors.bad_request(f"unsupported propagationPolicy {propagation!r}")
            if kind.key == "/namespaces":
                if meta.get("deletionTimestamp"):
                    return obj
                terminating = {
                    **obj,
                    "metadata": {**meta, "deletionTimestamp": self.now(), "deletionGracePeriodSeconds": 0},
                    "status": {**obj.get("status", {}), "phase": "Terminating"},
                }
                return self.store.commit(kind.key, terminating, obj)
            if propagation == "Orphan":
                self._orphan_dependents(meta["uid"])
            elif propagation == "Foreground":
                self._delete_dependents(meta["uid"])
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return obj
                marked = {**obj, "metadata": {**meta, "deletionTimestamp": self.now(), "deletionGracePeriodSeconds": 0}}
                return self.store.commit(kind.key, marked, obj)
            return self._remove(kind, obj)

    def _remove(self, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
        gone = self.store.remove(kind.key, obj)
        if self.on_deleted is not None:
            self.on_deleted(kind, obj)
        return gone

    def dependents(self, uid: str) -> list[tuple[Kind, dict[str, Any]]]:
        out = []
        for kind in self.registry.kinds:
            for obj in self.store.items(kind.key):
                refs = obj["metadata"].get("ownerReferences")
                if refs and any(r.get("uid") == uid for r in refs):
                    out.append((kind, obj))
        return out

    def _orphan_dependents(self, uid: str) -> None:
        for kind, dep in self.dependents(uid):
            refs = [r for r in dep["metadata"]["ownerReferences"] if r.get("uid") != uid]
            meta = {**dep["metadata"], "ownerReferences": refs}
            if not refs:
                meta.pop("ownerReferences")
            self.store.commit(kind.key, {**dep, "metadata": meta}, dep)

    def _delete_dependents(self, uid: str) -> None:
        for kind, dep in self.dependents(uid):
            if self.store.get(kind.key, dep["metadata"].get("namespace", ""), dep["metadata"]["name"]) is not None:
                self.delete(
                    kind, dep["metadata"].get("namespace", ""), dep["metadata"]["name"], propagation="Foreground"
                )

    def delete_collection(
        self,
        kind: Kind,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        propagation: str | None = None,
    ) -> list[dict[str, Any]]:
        with self.store.lock:
            items, _, _, _ = self.list(kind, namespace, label_selector, field_selector)
            return [
                self.delete(kind, o["metadata"].get("namespace", ""), o["metadata"]["name"], propagation=propagation)
                for o in items
            ]
