"""The only module of the portal that talks to Kubernetes.

It speaks plain Kubernetes REST through the official client's ``ApiClient`` and does not
know whether the other end is a real cluster or the sandbox. Four decisions shape it:

- **Writes are idempotent.** ``apply`` is server-side apply with one fixed field manager
  and ``force=true`` (the portal owns what it creates), so sending the same desired
  state twice is a no-op and a task may re-run at any time. ``delete`` treats 404 as done.
- **Reads are one list per kind.** The reconcile observes with ``list(kind,
  label_selector=...)`` across namespaces, paginated, and can continue with ``watch``
  from the list's resourceVersion; there is no per-object GET loop.
- **Errors keep their meaning.** Every failure is a ``jobs.kube.errors.ClusterError``
  with the HTTP status, reason and message, the original exception as ``__cause__``
  and ``transient`` telling the caller whether to retry. The client retries only 409
  (re-read, then try again, a bounded number of times); it never sleeps, so a worker
  is never blocked by a 429 or a 5xx: the task re-queues itself with a countdown.
- **Paths come from a static table** (``jobs/kube/kinds.py``), not discovery, so each
  operation is exactly one request.

Pages read through ``shared_cluster()``: one client per process, built once (loading a
kubeconfig and opening a TLS connection per request costs more than the read), with
short timeouts, so a slow cluster costs a page a few seconds, not ten per panel.
Tasks keep ``Cluster.from_settings()`` and its longer timeout: a worker can afford to wait.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTClientObject, RESTResponse

from jobs.kube.errors import (
    TRANSPORT_ERRORS,
    ClusterError,
    Conflict,
    Expired,
    NotFound,
    Transient,
    WatchExpired,
    from_api_exception,
    from_transport_error,
)
from jobs.kube.kinds import KindInfo, Need, checked_kinds, config_object_info, kind_info

__all__ = [
    "FIELD_MANAGER",
    "Cluster",
    "ClusterCheck",
    "KindCheck",
    "ObjectList",
    "shared_cluster",
]

# One field manager for every write, so the portal's ownership of a field never depends
# on which process or code path wrote it.
FIELD_MANAGER = "gpu-portal"
# Objects per list page. Large enough that a normal tick is one request per kind, small
# enough that one response stays a few MB on a busy cluster.
PAGE_SIZE = 500
# Retries after the first attempt when the server answers 409 Conflict.
CONFLICT_RETRIES = 3

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"

Obj = dict[str, Any]
Objects = list[Obj]  # the method `Cluster.list` shadows the builtin inside the class
Selector = str | Mapping[str, str]
Query = list[tuple[str, str]]
Timeout = float | tuple[float, float]
T = TypeVar("T")


class ObjectList(Objects):
    """A list of objects that also carries the list's resourceVersion, where a watch can start."""

    def __init__(self, items: Iterable[Obj] = (), resource_version: str = "") -> None:
        super().__init__(items)
        self.resource_version = resource_version


@dataclass(frozen=True)
class KindCheck:
    info: KindInfo
    installed: bool
    queueing: str = "volcano"

    @property
    def required(self) -> bool:
        """Required everywhere, or by the cluster's queueing backend."""
        return self.info.need is Need.REQUIRED or self.info.need.value == self.queueing


@dataclass(frozen=True)
class ClusterCheck:
    url: str
    reachable: bool
    server_version: str | None
    kinds: tuple[KindCheck, ...] = ()
    # Why the cluster was unreachable, or which discovery documents could not be read.
    error: str | None = None

    @property
    def missing_required(self) -> list[KindInfo]:
        return [k.info for k in self.kinds if k.required and not k.installed]

    @property
    def missing_optional(self) -> list[KindInfo]:
        return [k.info for k in self.kinds if not k.required and not k.installed]

    @property
    def ok(self) -> bool:
        return self.reachable and self.error is None and not self.missing_required


class Cluster:
    """Kubernetes I/O for the portal. Construct with ``Cluster.from_settings()`` in the app.

    The class takes any configured ``ApiClient`` (tests pass one pointing at a local
    server or the sandbox) and switches off its urllib3 retries: they would re-send
    requests we want to see fail (a hung server would cost four timeouts instead of one,
    and 5xx answers would be hidden), and retrying is the calling task's job.
    """

    def __init__(
        self,
        api_client: ApiClient,
        *,
        request_timeout: Timeout = 10.0,
        page_size: int = PAGE_SIZE,
        conflict_retries: int = CONFLICT_RETRIES,
    ) -> None:
        self._api = api_client
        # One number for both, or (connect, read) seconds as urllib3 takes them.
        self._timeout: Timeout = (
            (float(request_timeout[0]), float(request_timeout[1]))
            if isinstance(request_timeout, tuple)
            else float(request_timeout)
        )
        # The process-wide client of shared_cluster(): `with` blocks must not close it.
        self._shared = False
        self._page_size = page_size
        self._conflict_retries = conflict_retries
        configuration = api_client.configuration
        if configuration.retries is not False or getattr(configuration, "client_go_retries", False):
            configuration.retries = False
            configuration.client_go_retries = False
            # The pool manager copies `retries` when it is built, so build it again.
            api_client.rest_client = RESTClientObject(configuration)

    @classmethod
    def from_settings(cls, *, request_timeout: Timeout | None = None) -> Cluster:
        """The cluster named by ``KUBE_CONFIG`` / ``KUBE_CONTEXT``; no global client config is touched.

        ``request_timeout`` defaults to ``KUBE_REQUEST_TIMEOUT`` (the tasks' patience).
        """
        source: str = settings.KUBE_CONFIG
        context: str | None = settings.KUBE_CONTEXT or None
        configuration = Configuration()
        configuration.retries = False
        try:
            if source == "in-cluster":
                kube_config.load_incluster_config(client_configuration=configuration)
                api_client = ApiClient(configuration)
            else:
                # persist_config=False: refreshed tokens are never written back to the file.
                api_client = kube_config.new_client_from_config(
                    config_file=source, context=context, persist_config=False, client_configuration=configuration
                )
        except Exception as exc:
            # The loaders raise ConfigException, OSError, YAML and key errors for a bad or
            # absent file; all of them mean the same to us: the setting is wrong.
            raise ImproperlyConfigured(f"cannot load the Kubernetes configuration {source!r}: {exc}") from exc
        timeout = settings.KUBE_REQUEST_TIMEOUT if request_timeout is None else request_timeout
        return cls(api_client, request_timeout=timeout)

    @property
    def url(self) -> str:
        return str(self._api.configuration.host)

    def close(self) -> None:
        if self._shared:
            return  # lives as long as the process; other requests are using it
        self._api.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writes ------------------------------------------------------------------------

    def apply(self, obj: Obj) -> Obj:
        """Create or update ``obj`` by server-side apply; returns the object as stored.

        Send the complete desired state: fields this manager applied before and leaves
        out now are removed by the server. For a one-field change to an object whose
        full state you do not hold, use ``merge_patch``.
        """
        info = kind_info(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        metadata = obj.get("metadata") or {}
        name, namespace = metadata.get("name", ""), metadata.get("namespace")
        path = info.object_path(name, namespace if info.namespaced else None)
        query = [("fieldManager", FIELD_MANAGER), ("force", "true"), ("fieldValidation", "Strict")]
        body = obj

        def send() -> Obj:
            return self._json("PATCH", path, query=query, body=body, content_type=APPLY_PATCH)

        def reread() -> None:
            nonlocal body
            live = self.get(info.api_version, info.kind, name, namespace)
            # A resourceVersion in the body is an optimistic lock; the portal owns the
            # object (that is what force=true says), so the retry locks on the fresh one.
            if live is not None and "resourceVersion" in metadata:
                fresh = live["metadata"]["resourceVersion"]
                body = {**obj, "metadata": {**metadata, "resourceVersion": fresh}}

        return self._retry_conflicts(send, reread)

    def apply_all(self, objs: Iterable[Obj]) -> Objects:
        """Apply in order (namespace before what it holds); stops at the first error.

        Stopping is safe because every apply is idempotent: the task retries the whole
        list and the objects already applied are no-ops.
        """
        return [self.apply(obj) for obj in objs]

    def merge_patch(self, api_version: str, kind: str, name: str, patch: Obj, namespace: str | None = None) -> Obj:
        """JSON merge patch (RFC 7386) for small changes, e.g. the notebook stop annotation.

        Why not apply: an apply of a partial object with our field manager would remove
        every other field we applied. A merge patch touches only the fields it names and
        records them under an Update entry of the same manager, so a later full apply
        does not undo it; set a key to None to remove it.
        """
        info = kind_info(api_version, kind)
        path = info.object_path(name, namespace)

        def send() -> Obj:
            query = [("fieldManager", FIELD_MANAGER)]
            return self._json("PATCH", path, query=query, body=patch, content_type=MERGE_PATCH)

        def reread() -> None:
            if self.get(api_version, kind, name, namespace) is None:
                raise NotFound(f'{info.plural} "{name}" not found', status=404, reason="NotFound")

        return self._retry_conflicts(send, reread)

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Ask for deletion with background propagation; False when it was already gone.

        Background: the owner goes at once and the garbage collector removes its pods
        afterwards, so a task never waits for a slow pod termination.
        """
        info = kind_info(api_version, kind)
        path = info.object_path(name, namespace)
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        gone = False

        def send() -> bool:
            if gone:
                return False
            try:
                self._json("DELETE", path, body=options, content_type="application/json")
            except NotFound:
                return False
            return True

        def reread() -> None:
            nonlocal gone
            gone = self.get(api_version, kind, name, namespace) is None

        return self._retry_conflicts(send, reread)

    # -- reads -------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        info = kind_info(api_version, kind)
        try:
            return self._with_type(info, self._json("GET", info.object_path(name, namespace)))
        except NotFound:
            return None

    def require(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        """Like ``get``, for callers to whom absence is an error: raises ``NotFound``."""
        info = kind_info(api_version, kind)
        return self._with_type(info, self._json("GET", info.object_path(name, namespace)))

    def read_config(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """One add-on configuration object (``CONFIG_OBJECTS``: the ClusterRole grants ``get``
        on those names only), or None when it does not exist."""
        info = config_object_info(api_version, kind, name)
        try:
            return self._with_type(info, self._json("GET", info.object_path(name, namespace)))
        except NotFound:
            return None

    def list(
        self, api_version: str, kind: str, *, label_selector: Selector, namespace: str | None = None
    ) -> ObjectList:
        """Every object of a kind matching the selector, across all namespaces unless one is given.

        Pages with ``limit``/``continue``; the result's ``resource_version`` is the
        snapshot's, from which ``watch`` continues without missing a change.
        """
        info = kind_info(api_version, kind)
        return self._list_all(info, info.collection_path(namespace), [("labelSelector", _selector(label_selector))])

    def pods_for(self, namespace: str, label_selector: Selector) -> ObjectList:
        return self.list("v1", "Pod", label_selector=label_selector, namespace=namespace)

    def events_for(self, namespace: str, involved_name: str) -> Objects:
        """Events about any object named ``involved_name`` in the namespace, oldest first."""
        info = kind_info("v1", "Event")
        events = self._list_all(
            info, info.collection_path(namespace), [("fieldSelector", f"involvedObject.name={involved_name}")]
        )
        return sorted(events, key=_event_order)

    def pod_logs(self, namespace: str, pod: str, tail_lines: int = 200, container: str | None = None) -> str:
        """The last lines of a container's log. A container that has not started yet is a 400 (``Invalid``)."""
        path = kind_info("v1", "Pod").object_path(pod, namespace) + "/log"
        query = [("tailLines", str(tail_lines))]
        if container:
            query.append(("container", container))
        response = self._send("GET", path, query=query, accept="text/plain, */*")
        return self._read(response).decode("utf-8", errors="replace")

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        label_selector: Selector,
        resource_version: str,
        timeout_seconds: int,
        namespace: str | None = None,
    ) -> Iterator[tuple[str, Obj]]:
        """Changes after ``resource_version`` as (type, object) pairs until the server ends the watch.

        Types are ADDED, MODIFIED, DELETED and BOOKMARK (a BOOKMARK object carries only
        ``metadata.resourceVersion``); track the last resourceVersion seen and watch again
        from it when the iterator ends. ``WatchExpired`` means that resourceVersion is too
        old: list again. A dropped connection raises ``Transient``.

        The request is sent by this call, so a 410 raises here; iterate the result or
        close it to free the connection.
        """
        info = kind_info(api_version, kind)
        query = [
            ("watch", "true"),
            ("labelSelector", _selector(label_selector)),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
            ("allowWatchBookmarks", "true"),
        ]
        # The read timeout covers the server's own timeout plus slack; beyond that the
        # stream is dead, not quiet.
        connect, slack = self._timeout if isinstance(self._timeout, tuple) else (self._timeout, self._timeout)
        timeout = (connect, timeout_seconds + slack)
        try:
            response = self._send("GET", info.collection_path(namespace), query=query, timeout=timeout)
        except Expired as exc:
            raise WatchExpired(exc.message, status=exc.status, reason=exc.reason) from exc.__cause__
        return self._events(info, response)

    # -- cluster check -----------------------------------------------------------------

    def ping(self) -> str:
        """The server's version (``GET /version``, readable by anyone): is the API answering at all?"""
        return str(self._json("GET", "/version").get("gitVersion") or "unknown")

    def check(self, queueing: str = "volcano") -> ClusterCheck:
        """Is the API reachable, which version is it, and which extension kinds does it serve?

        ``queueing`` is the cluster profile's backend: its kinds are required, the other's not.

        1. GET /version; any failure means unreachable, with the error kept.
        2. GET each group version's discovery document once; a 404 means the whole group
           version is absent, otherwise a kind is installed when its plural is listed.
        """
        try:
            version = self._json("GET", "/version")
        except ClusterError as exc:
            return ClusterCheck(url=self.url, reachable=False, server_version=None, error=str(exc))
        served: dict[str, set[str]] = {}
        problems: list[str] = []
        for info in checked_kinds():
            path = info.group_version_path
            if path in served:
                continue
            try:
                document = self._json("GET", path)
            except NotFound:
                served[path] = set()
                continue
            except ClusterError as exc:
                served[path] = set()
                problems.append(f"{info.api_version}: {exc}")
                continue
            served[path] = {str(r.get("name")) for r in document.get("resources") or [] if isinstance(r, dict)}
        kinds = tuple(
            KindCheck(info, info.plural in served[info.group_version_path], queueing) for info in checked_kinds()
        )
        return ClusterCheck(
            url=self.url,
            reachable=True,
            server_version=str(version.get("gitVersion") or "unknown"),
            kinds=kinds,
            error="; ".join(problems) or None,
        )

    # -- transport ---------------------------------------------------------------------

    def _retry_conflicts(self, send: Callable[[], T], reread: Callable[[], None]) -> T:
        """Send; on 409 re-read the object and send again, at most ``conflict_retries`` times.

        No sleep between attempts: a conflict is resolved by fresh state, not by time.
        """
        for attempt in range(self._conflict_retries + 1):
            try:
                return send()
            except Conflict:
                if attempt == self._conflict_retries:
                    raise
                reread()
        raise AssertionError("unreachable: the loop returns or raises")

    def _list_all(self, info: KindInfo, path: str, query: Query) -> ObjectList:
        items: Objects = []
        resource_version = ""
        token: str | None = None
        restarted = False
        while True:
            page_query = [*query, ("limit", str(self._page_size))]
            if token:
                page_query.append(("continue", token))
            try:
                page = self._json("GET", path, query=page_query)
            except Expired:
                # The continue token outlived etcd's compaction window (a very slow
                # paginated list). Start again once for a consistent snapshot.
                if token is None or restarted:
                    raise
                restarted, items, resource_version, token = True, [], "", None
                continue
            metadata = page.get("metadata") or {}
            # Every page of one list shares the first page's snapshot resourceVersion.
            resource_version = resource_version or str(metadata.get("resourceVersion") or "")
            items.extend(self._with_type(info, item) for item in page.get("items") or [])
            token = metadata.get("continue") or None
            if token is None:
                return ObjectList(items, resource_version)

    def _events(self, info: KindInfo, response: RESTResponse) -> Iterator[tuple[str, Obj]]:
        raw = response.response
        try:
            for line in _lines(raw):
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise ClusterError(
                        "a watch event is not JSON", status=response.status, reason="BadResponse"
                    ) from exc
                kind, obj = str(event.get("type")), event.get("object") or {}
                if kind == "ERROR":
                    raise _watch_error(obj)
                yield kind, (obj if kind == "BOOKMARK" else self._with_type(info, obj))
        except TRANSPORT_ERRORS as exc:
            raise from_transport_error(exc) from exc
        finally:
            # close() before release_conn(): an unfinished stream must not go back to the pool.
            raw.close()
            raw.release_conn()

    def _json(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: object = None,
        content_type: str | None = None,
    ) -> Obj:
        response = self._send(method, path, query=query, body=body, content_type=content_type)
        data = self._read(response)
        try:
            parsed = json.loads(data) if data else {}
        except ValueError as exc:
            raise ClusterError(
                f"{method} {path}: the response is not JSON", status=response.status, reason="BadResponse"
            ) from exc
        if not isinstance(parsed, dict):
            raise ClusterError(f"{method} {path}: expected a JSON object", status=response.status, reason="BadResponse")
        return parsed

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: object = None,
        content_type: str | None = None,
        accept: str = "application/json",
        timeout: Timeout | None = None,
    ) -> RESTResponse:
        """One HTTP request; returns the unread 2xx response or raises a ``ClusterError``."""
        headers = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        try:
            request = self._api.param_serialize(
                method=method,
                resource_path=path,
                query_params=list(query or []),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            response: RESTResponse = self._api.call_api(*request, _request_timeout=timeout or self._timeout)
        except ApiException as exc:
            # The REST layer raises ApiException(status=0) itself for TLS failures.
            raise from_api_exception(exc) from exc
        except TRANSPORT_ERRORS as exc:
            raise from_transport_error(exc) from exc
        if not 200 <= response.status <= 299:
            text = self._read(response).decode("utf-8", errors="replace")
            try:
                # from_response raises the status's own ApiException subclass
                # (ConflictException, UnprocessableEntityException, ...), kept as __cause__.
                raise ApiException.from_response(http_resp=response, body=text, data=None)
            except ApiException as exc:
                raise from_api_exception(exc) from exc
        return response

    @staticmethod
    def _read(response: RESTResponse) -> bytes:
        try:
            return bytes(response.read() or b"")
        except TRANSPORT_ERRORS as exc:
            raise from_transport_error(exc) from exc
        finally:
            response.response.release_conn()

    @staticmethod
    def _with_type(info: KindInfo, obj: Obj) -> Obj:
        # Lists of built-in kinds omit apiVersion/kind on their items; fill them in so
        # every consumer can dispatch on them.
        obj.setdefault("apiVersion", info.api_version)
        obj.setdefault("kind", info.kind)
        return obj


_shared_lock = threading.Lock()
_shared_clients: dict[tuple, Cluster] = {}


def shared_cluster() -> Cluster:
    """The process's client for page reads, built on first use, with the page timeouts.

    Keyed by process id (a forked worker must not share its parent's sockets) and by the
    settings it was built from, so a changed kubeconfig gets a new client. Closing it is
    a no-op. Raises ``ImproperlyConfigured`` like ``from_settings`` (not cached: the next
    request tries again, and a missing file is cheap to find missing).
    """
    timeout = (float(settings.KUBE_CONNECT_TIMEOUT), float(settings.KUBE_READ_TIMEOUT))
    key = (os.getpid(), settings.KUBE_CONFIG, settings.KUBE_CONTEXT or "", timeout)
    with _shared_lock:
        cluster = _shared_clients.get(key)
        if cluster is None:
            cluster = Cluster.from_settings(request_timeout=timeout)
            cluster._shared = True
            # One client per process: the one built for settings now gone is dropped.
            for old in _shared_clients.values():
                old._api.close()
            _shared_clients.clear()
            _shared_clients[key] = cluster
    return cluster


def _selector(selector: Selector) -> str:
    if isinstance(selector, str):
        return selector
    return ",".join(f"{key}={value}" for key, value in sorted(selector.items()))


def _lines(response: Any) -> Iterator[bytes]:
    """Newline-delimited JSON from a chunked stream, one event per line, as chunks arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        # The API server ends every event with a newline; a tail without one is half an
        # event from a stream that was cut. Watching again from the last resourceVersion
        # loses nothing, so say "transient" rather than guess at the half.
        raise Transient(f"the watch stream ended inside an event ({len(buffer)} bytes)", reason="ConnectionError")


def _watch_error(status: Obj) -> ClusterError:
    """The Status inside a watch ERROR event, mapped like an HTTP error; 410 means re-list."""
    code = status.get("code")
    exc = ApiException(status=code, reason=status.get("reason"), body=json.dumps(status))
    error = from_api_exception(exc)
    if code == 410:
        error = WatchExpired(error.message, status=410, reason=error.reason)
    error.__cause__ = exc
    return error


def _event_order(event: Obj) -> tuple[datetime, int]:
    """When an event last happened; the resourceVersion breaks ties within one second.

    resourceVersions are opaque to clients in general, but etcd assigns them in write
    order, and a display order is all this decides.
    """
    metadata = event.get("metadata") or {}
    raw = event.get("lastTimestamp") or event.get("eventTime") or metadata.get("creationTimestamp") or ""
    try:
        when = datetime.fromisoformat(str(raw))
    except ValueError:
        when = _EPOCH
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    version = str(metadata.get("resourceVersion") or "")
    return when, int(version) if version.isdigit() else 0


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
