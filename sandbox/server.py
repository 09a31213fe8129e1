"""HTTP: routing, authentication, discovery documents, watch streams and control endpoints.

A stdlib ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive (the official
client pools connections). Paths follow the Kubernetes layout:

    /api/v1/<plural>[/<name>[/<sub>]]                       core, cluster-wide or cluster-scoped
    /api/v1/namespaces/<ns>/<plural>[/<name>[/<sub>]]       core, namespaced
    /apis/<group>/<version>/...                             the same for named groups

Everything except ``/version``, ``/healthz``-style probes and ``/metrics`` needs the
bearer token from the kubeconfig (401 otherwise, so a misconfigured client fails
loudly). Watches stream newline-delimited JSON events over chunked encoding.
Control endpoints live under ``/sandbox/v1/``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from sandbox import errors
from sandbox.api import APPLY_PATCH, MERGE_PATCH, present
from sandbox.errors import ApiError
from sandbox.faults import fault_error
from sandbox.kinds import Kind
from sandbox.logs import pod_log
from sandbox.selectors import labels_match, make_filter, parse_label_selector

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

log = logging.getLogger("sandbox.server")
PUBLIC = ("/version", "/healthz", "/livez", "/readyz", "/metrics")
BOOKMARK_SECONDS = 30.0
MAX_BODY = 64 * 1024 * 1024


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _truthy(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1", "yes")


class SandboxHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sandbox: Sandbox):
        super().__init__(address, Handler)
        self.sandbox = sandbox
        self.connections: set[socket.socket] = set()
        self._conn_lock = threading.Lock()

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self.connections.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self._conn_lock:
                self.connections.discard(request)

    def close_connections(self) -> None:
        with self._conn_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SandboxHTTPServer
    timeout = 120  # idle keep-alive connections close after this

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # plumbing -------------------------------------------------------------------------------------

    @property
    def sandbox(self) -> Sandbox:
        return self.server.sandbox

    def setup(self) -> None:
        super().setup()
        # small responses must not wait for the client's delayed ACK (Nagle): ~40 ms per request otherwise
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send(
        self,
        code: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | list[tuple[str, str]] | None = None,
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items() if isinstance(headers, dict) else headers or []:
            self.send_header(k, v)
        self._headers_buffer.append(b"\r\n")
        self.wfile.write(b"".join(self._headers_buffer) + body)  # one write: headers and body together
        self._headers_buffer = []

    def _send_json(self, code: int, obj: Any) -> None:
        self._send(code, _dumps(obj))

    def _send_error(self, err: ApiError) -> None:
        self._send(err.code, _dumps(err.status()), headers=err.headers)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise errors.ApiError(413, "Request entity too large")
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes) -> Any:
        if not raw:
            raise errors.bad_request("the request body is empty")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None

    def _handle(self, method: str) -> None:
        started = time.perf_counter()
        try:
            raw = self._read_body()
            parsed = urlsplit(self.path)
            path = parsed.path.rstrip("/") or "/"
            query = {k: v[-1] for k, v in parse_qs(parsed.query, keep_blank_values=True).items()}
            if path not in PUBLIC and not self._authorized():
                raise errors.unauthorized()
            self._route(method, path, query, raw)
        except ApiError as err:
            self._safe_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a bug must surface as a 500 Status, not a dropped socket
            log.exception("sandbox: %s %s failed", method, self.path)
            self._safe_error(errors.internal(f"sandbox bug: {type(exc).__name__}: {exc}"))
        finally:
            log.debug("%s %s took %.1f ms", method, self.path, (time.perf_counter() - started) * 1000)

    def _safe_error(self, err: ApiError) -> None:
        try:
            self._send_error(err)
        except OSError:
            self.close_connection = True

    def _authorized(self) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), self.sandbox.token)

    # routing ----------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, query: dict[str, str], raw: bytes) -> None:
        sb = self.sandbox
        if path == "/version":
            return self._send_json(200, sb.version())
        if path in ("/healthz", "/livez", "/readyz"):
            return self._send(200, b"ok", "text/plain")
        if path == "/metrics":
            return self._send(200, sb.metrics_text().encode(), "text/plain; version=0.0.4; charset=utf-8")
        if path.startswith("/sandbox/v1/"):
            return self._control(method, path[len("/sandbox/v1/") :], raw)
        parts = path.strip("/").split("/")
        if parts == ["api"]:
            return self._send_json(200, discovery_api_versions(self.headers.get("Host", "")))
        if parts == ["apis"]:
            return self._send_json(200, discovery_groups(sb))
        if parts[0] == "api" and len(parts) == 2:
            return self._send_json(200, discovery_resources(sb, "", parts[1]))
        if parts[0] == "apis" and len(parts) == 2:
            group = next((g for g in discovery_groups(sb)["groups"] if g["name"] == parts[1]), None)
            if group is None:
                raise ApiError(404, "the server could not find the requested resource")
            return self._send_json(200, {"kind": "APIGroup", "apiVersion": "v1", **group})
        if parts[0] == "apis" and len(parts) == 3:
            return self._send_json(200, discovery_resources(sb, parts[1], parts[2]))
        if parts[0] in ("api", "apis"):
            return self._resource(method, parts, query, raw)
        raise ApiError(404, "the server could not find the requested resource")

    def _resource(self, method: str, parts: list[str], query: dict[str, str], raw: bytes) -> None:
        sb = self.sandbox
        if parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        else:
            group, version, rest = parts[1], parts[2], parts[3:]
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        kind = sb.registry.by_path(group, version, rest[0])
        if kind is None:
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if namespace is not None and not kind.namespaced:
            raise ApiError(404, "the server could not find the requested resource")
        if kind.namespaced and namespace is None and name is not None:
            raise ApiError(404, "the server could not find the requested resource")
        if sub and not ((sub == "status" and kind.status) or sub in kind.extra_subresources):
            raise ApiError(404, "the server could not find the requested resource")

        content_type = (self.headers.get("Content-Type") or MERGE_PATCH).split(";")[0].strip()
        verb = self._verb(method, name, query, watch_path, content_type)
        fault = sb.faults.take(verb, kind)
        if fault is not None:
            if fault.hang_seconds:
                time.sleep(fault.hang_seconds)
            if fault.code is not None:
                raise fault_error(fault, kind, name or "")
        ns = namespace or ""
        manager = query.get("fieldManager") or self.headers.get("User-Agent", "unknown").split("/")[0]
        dry_run = query.get("dryRun") == "All"
        api = sb.api

        if verb == "list":
            return self._list(kind, namespace, version, query)
        if verb == "watch":
            return self._watch(kind, namespace, version, query)
        assert name is not None or verb in ("create", "deletecollection")
        if verb == "get":
            if sub == "log":
                return self._log(ns, name, query)
            return self._send_json(200, present(kind, api.get(kind, ns, name), version))
        if verb in ("create", "update", "patch", "apply"):
            if verb == "create" and kind.namespaced and namespace is None:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            with api.request_options(query.get("fieldValidation")) as warnings:
                code, obj = self._write(verb, kind, ns, name, sub, version, query, raw, manager, dry_run, content_type)
            headers = [("Warning", '299 - "' + w.replace('"', '\\"') + '"') for w in warnings]
            return self._send(code, _dumps(present(kind, obj, version)), headers=headers)
        if verb in ("delete", "deletecollection"):
            options = self._json_body(raw) if raw.strip() else {}
            if not isinstance(options, dict):
                raise errors.bad_request("DeleteOptions must be a JSON object")
            propagation = query.get("propagationPolicy") or options.get("propagationPolicy")
            if _truthy(query.get("orphanDependents")) or options.get("orphanDependents") is True:
                propagation = "Orphan"
            if verb == "deletecollection":
                api.delete_collection(
                    kind, namespace, query.get("labelSelector"), query.get("fieldSelector"), propagation
                )
                return self._send_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
            obj = api.delete(
                kind, ns, name, propagation=propagation, preconditions=options.get("preconditions"), dry_run=dry_run
            )
            still_there = sb.store.get(kind.key, ns if kind.namespaced else "", name) is not None
            if still_there or kind.key == "/pods":
                return self._send_json(200, present(kind, obj, version))
            details = {"name": name, "kind": kind.plural, "uid": obj["metadata"].get("uid")}
            if kind.group:
                details["group"] = kind.group
            return self._send_json(
                200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
            )
        raise errors.method_not_allowed()

    def _write(
        self,
        verb: str,
        kind: Kind,
        ns: str,
        name: str | None,
        sub: str,
        version: str,
        query: dict[str, str],
        raw: bytes,
        manager: str,
        dry_run: bool,
        content_type: str,
    ) -> tuple[int, dict[str, Any]]:
        api = self.sandbox.api
        if verb == "create":
            return 201, api.create(kind, ns, self._json_body(raw), manager=manager, version=version, dry_run=dry_run)
        assert name is not None
        if verb == "update":
            body = self._json_body(raw)
            return 200, api.update(
                kind, ns, name, body, manager=manager, subresource=sub, version=version, dry_run=dry_run
            )
        if verb == "apply":
            existed = self.sandbox.store.get(kind.key, ns if kind.namespaced else "", name) is not None
            obj = api.apply(
                kind,
                ns,
                name,
                raw,
                manager=query.get("fieldManager", ""),
                subresource=sub,
                version=version,
                force=_truthy(query.get("force")),
                dry_run=dry_run,
            )
            return (200 if existed else 201), obj
        body = self._json_body(raw)
        return 200, api.patch(
            kind, ns, name, content_type, body, manager=manager, subresource=sub, version=version, dry_run=dry_run
        )

    @staticmethod
    def _verb(method: str, name: str | None, query: dict[str, str], watch_path: bool, content_type: str) -> str:
        if method == "GET":
            if name is None:
                return "watch" if watch_path or _truthy(query.get("watch")) else "list"
            return "get"
        if method == "POST" and name is None:
            return "create"
        if method == "PUT" and name is not None:
            return "update"
        if method == "PATCH" and name is not None:
            return "apply" if content_type in (APPLY_PATCH, "application/apply-patch+json") else "patch"
        if method == "DELETE":
            return "delete" if name is not None else "deletecollection"
        raise errors.method_not_allowed()

    # verbs with special responses -----------------------------------------------------------------

    def _list(self, kind: Kind, namespace: str | None, version: str, query: dict[str, str]) -> None:
        limit = int(query["limit"]) if query.get("limit", "").isdigit() else None
        items, rv, token, remaining = self.sandbox.api.list(
            kind, namespace, query.get("labelSelector"), query.get("fieldSelector"), limit, query.get("continue")
        )
        meta: dict[str, Any] = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        if version != kind.storage_version:
            items = [present(kind, o, version) for o in items]
        body = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version(version), "metadata": meta, "items": items}
        self._send(200, _dumps(body))

    def _log(self, namespace: str, name: str, query: dict[str, str]) -> None:
        sb = self.sandbox
        pod = sb.api.get(sb.registry.by_key("/pods"), namespace, name)
        tail = int(query["tailLines"]) if query.get("tailLines", "").lstrip("-").isdigit() else None
        text = pod_log(pod, query.get("container"), sb.clock.now(), sb.seed, tail, _truthy(query.get("timestamps")))
        self._send(200, text.encode(), "text/plain")

    def _watch(self, kind: Kind, namespace: str | None, version: str, query: dict[str, str]) -> None:
        sb = self.sandbox
        store = sb.store
        selector = parse_label_selector(query.get("labelSelector"))
        accept = make_filter(None, query.get("fieldSelector"), kind)
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds", "").isdigit() else 1800.0
        deadline = time.monotonic() + timeout
        rv_param = query.get("resourceVersion") or ""
        ns_filter = namespace if kind.namespaced else None

        def visible(obj: dict[str, Any] | None) -> bool:
            if obj is None:
                return False
            if ns_filter is not None and obj["metadata"].get("namespace") != ns_filter:
                return False
            return labels_match(selector, obj["metadata"].get("labels")) and (accept is None or accept(obj))

        def emit(event_type: str, obj: dict[str, Any]) -> None:
            line = _dumps({"type": event_type, "object": obj}) + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        with store.lock:
            epoch = store.watch_epoch
            initial: list[dict[str, Any]] = []
            if rv_param in ("", "0"):
                initial = [o for o in store.sorted_items(kind.key, ns_filter) if visible(o)]
                last = store.rv
                too_old = False
            else:
                last = int(rv_param) if rv_param.isdigit() else 0
                too_old = store.changes_after(last) is None
        # Headers only after the epoch is read: a client that saw them and then cut the
        # watches must see this stream end (reading it later could miss that cut).
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            if too_old:
                emit("ERROR", _gone(rv_param))
                return
            for obj in initial:
                emit("ADDED", present(kind, obj, version))
            last_bookmark = time.monotonic()
            while True:
                with store.changed:
                    while True:
                        if store.closed or epoch != store.watch_epoch:
                            self.close_connection = True
                            return
                        changes = store.changes_after(last)
                        if changes is None:
                            expired = True
                            break
                        expired = False
                        if changes:
                            last = changes[-1].rv
                            relevant = [c for c in changes if c.key == kind.key]
                            if relevant:
                                break
                        now = time.monotonic()
                        if now >= deadline:
                            return
                        if bookmarks and now - last_bookmark >= BOOKMARK_SECONDS:
                            relevant = []
                            break
                        store.changed.wait(min(deadline - now, BOOKMARK_SECONDS, 1.0))
                if expired:
                    emit("ERROR", _gone(str(last)))
                    return
                for change in relevant:
                    was, now_visible = visible(change.old), visible(change.obj)
                    if change.type == "DELETED":
                        if was:
                            emit("DELETED", present(kind, change.obj, version))
                    elif now_visible:
                        emit("MODIFIED" if was else "ADDED", present(kind, change.obj, version))
                    elif was:
                        emit("DELETED", present(kind, change.obj, version))
                if bookmarks and time.monotonic() - last_bookmark >= BOOKMARK_SECONDS:
                    emit(
                        "BOOKMARK",
                        {
                            "kind": kind.kind,
                            "apiVersion": kind.api_version(version),
                            "metadata": {"resourceVersion": str(last)},
                        },
                    )
                    last_bookmark = time.monotonic()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                self.close_connection = True

    # control endpoints ------------------------------------------------------------------------------

    def _control(self, method: str, what: str, raw: bytes) -> None:
        sb = self.sandbox
        body = self._json_body(raw) if raw.strip() else {}
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        if what == "info" and method == "GET":
            return self._send_json(200, sb.info())
        if what == "advance" and method == "POST":
            try:
                seconds = float(body.get("seconds", 0))
            except (TypeError, ValueError):
                raise errors.bad_request("seconds must be a number") from None
            if seconds < 0:
                raise errors.bad_request("seconds must not be negative")
            passes = sb.advance(seconds)
            return self._send_json(200, {"now": sb.clock.iso(), "passes": passes})
        if what == "settle" and method == "POST":
            return self._send_json(200, {"now": sb.clock.iso(), "passes": sb.settle()})
        if what == "faults" and method == "POST":
            if body.get("cut_watches") or body.get("cutWatches"):
                sb.store.cut_watches()
                return self._send_json(200, {"cut": True})
            try:
                fault = sb.faults.inject(
                    code=body.get("code"),
                    count=int(body.get("count", 1)),
                    verb=body.get("verb"),
                    kind=body.get("kind"),
                    retry_after=body.get("retry_after", body.get("retryAfter")),
                    hang_seconds=body.get("hang_seconds", body.get("hangSeconds")),
                )
            except (TypeError, ValueError) as exc:
                raise errors.bad_request(str(exc)) from None
            return self._send_json(201, {"fault": fault.__dict__, "pending": sb.faults.pending()})
        if what == "faults" and method == "DELETE":
            sb.faults.clear()
            return self._send_json(200, {"pending": []})
        if what == "faults" and method == "GET":
            return self._send_json(200, {"pending": sb.faults.pending()})
        if what == "cut-watches" and method == "POST":
            sb.store.cut_watches()
            return self._send_json(200, {"cut": True})
        if what == "compact" and method == "POST":
            sb.store.compact()
            return self._send_json(200, {"compactedResourceVersion": str(sb.store.compacted_rv)})
        if what == "save" and method == "POST":
            sb.save()
            return self._send_json(200, {"saved": str(sb.state_path) if sb.state_path else None})
        raise ApiError(404, f"no sandbox control endpoint {method} /sandbox/v1/{what}")


def _gone(rv: str) -> dict[str, Any]:
    return errors.gone(f"too old resource version: {rv}").status()


# discovery ---------------------------------------------------------------------------------------


def discovery_api_versions(host: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def discovery_groups(sb: Sandbox) -> dict[str, Any]:
    groups = []
    for group, versions in sb.registry.groups().items():
        if not group:
            continue
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def discovery_resources(sb: Sandbox, group: str, version: str) -> dict[str, Any]:
    kinds = sb.registry.in_group_version(group, version)
    if not kinds:
        raise ApiError(404, "the server could not find the requested resource")
    resources = []
    for k in kinds:
        entry: dict[str, Any] = {
            "name": k.plural,
            "singularName": k.singular,
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": list(("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")),
            "storageVersionHash": hashlib.sha256(k.key.encode()).hexdigest()[:11],
        }
        if k.short_names:
            entry["shortNames"] = list(k.short_names)
        if k.categories:
            entry["categories"] = list(k.categories)
        resources.append(entry)
        if k.status:
            resources.append(
                {
                    "name": f"{k.plural}/status",
                    "singularName": "",
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        for sub in k.extra_subresources:
            resources.append(
                {
                    "name": f"{k.plural}/{sub}",
                    "singularName": "",
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": ["get"],
                }
            )
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
