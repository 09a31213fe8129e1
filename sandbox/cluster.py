"""The sandbox as a whole: wires the store, API, world, controllers, clock and server.

``Sandbox`` owns everything one emulated cluster needs. It can run a controller pass
on demand (``settle``/``advance``, which tests use so they never sleep) or in a
background loop that follows wall time (the CLI), persist its state atomically and
serve HTTP on a port of its own.
"""

from __future__ import annotations

import base64
import logging
import random
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from portal.cluster_profile import ClusterProfile, load_profile
from sandbox import metrics, podsecurity, setup_objects
from sandbox.api import Api
from sandbox.clock import Clock, iso
from sandbox.controllers import inference, kueue, run_pass
from sandbox.controllers.base import Ctx
from sandbox.controllers.kubelet import on_pod_deleted
from sandbox.controllers.quotas import admit
from sandbox.faults import Faults
from sandbox.kinds import Kind, Registry
from sandbox.schemas import SHIPPED_CRD_DIR, Catalog, catalog_for
from sandbox.server import SandboxHTTPServer
from sandbox.store import Store
from sandbox.tls import self_signed
from sandbox.world import World

log = logging.getLogger("sandbox")
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease", "volcano-system")
MAX_PASSES = 50
SAVE_EVERY_SECONDS = 5.0
_warned_no_crds = False

DEVICE_CLASSES = (
    ("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    ("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"),
)


def _admit(store: Store, obj: dict[str, Any], kind: Kind) -> None:
    """Validating admission, in the API server's order: PodSecurity, then ResourceQuota."""
    if kind.key == "/pods":
        podsecurity.admit(store, obj, kind)
    admit(store, obj, kind)


def _admit_with_kueue(store: Store, obj: dict[str, Any], kind: Kind) -> None:
    """Kueue's mutating pod webhook first (it gates the pods it queues), then validation."""
    kueue.gate_pod(store, obj, kind)
    _admit(store, obj, kind)


class Sandbox:
    def __init__(
        self,
        profile: str | Path | ClusterProfile,
        crd_dir: str | Path | None = None,
        seed: int = 0,
        state_path: str | Path | None = None,
        reset: bool = False,
        realtime: bool = True,
        start_time: float | None = None,
        watch_window: int = 20000,
    ):
        global _warned_no_crds
        self.registry = Registry()
        self.profile = profile if isinstance(profile, ClusterProfile) else load_profile(profile)
        self.profile_path = None if isinstance(profile, ClusterProfile) else str(profile)
        self.seed = seed
        self.rng = random.Random(seed)
        self.store = Store(self.registry, watch_window)
        self.clock = Clock(start_time, realtime)
        self.world = World(self.profile, seed)
        self.faults = Faults()
        # No folder given: the schemas shipped in sandbox/crds/, so validation is on by default.
        crd_dir = crd_dir or SHIPPED_CRD_DIR
        self.crd_dir = str(crd_dir)
        self.catalog: Catalog | None = catalog_for(crd_dir)
        if self.catalog is None and not _warned_no_crds:
            _warned_no_crds = True
            log.warning(
                "sandbox: no CRD folder (--crd-dir %s); custom resources are served WITHOUT schema validation",
                crd_dir or "not given",
            )
        admission = _admit_with_kueue if kueue.enabled(self) else _admit
        self.api = Api(self.registry, self.store, self.clock, self.catalog, self.rng, admission)
        self.api.on_deleted = self._on_deleted
        self.api.webhook = inference.webhook
        self.state_path = Path(state_path) if state_path else None
        self.token = secrets.token_hex(24)
        self.controller_errors: list[str] = []
        self.reconcile_lock = threading.RLock()
        self._saved_rv = -1
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.httpd: SandboxHTTPServer | None = None
        self.ca_pem: bytes | None = None  # set when serving TLS
        if self.state_path and self.state_path.exists() and not reset:
            self._load()
        elif self.state_path and reset and self.state_path.exists():
            self.state_path.unlink()
        self.store.internal.setdefault("boot", self.clock.now())
        self._bootstrap()

    # state ----------------------------------------------------------------------------------------

    def _load(self) -> None:
        assert self.state_path is not None
        state = self.store.load(self.state_path)
        self.clock.set(float(state.get("clock", self.clock.now())))
        self.token = state.get("token") or self.token
        # a fresh stream of random names and uids that cannot repeat earlier ones
        self.rng.seed(f"{self.seed}-{self.store.rv}")
        self._saved_rv = self.store.rv
        log.info("sandbox: loaded %s (resourceVersion %s)", self.state_path, self.store.rv)

    def save(self) -> None:
        if self.state_path is None:
            return
        with self.store.lock:
            rv = self.store.rv
            extra = {"clock": self.clock.now(), "token": self.token, "seed": self.seed, "profile": self.profile.name}
        self.store.save(self.state_path, extra)
        self._saved_rv = rv

    def _bootstrap(self) -> None:
        """Create what a fresh cluster has, and bring nodes in line with the profile."""
        api, store = self.api, self.store
        now = self.clock.iso()
        with store.lock:
            for name in SYSTEM_NAMESPACES:
                if store.get("/namespaces", "", name) is None:
                    api.create(
                        self.registry.by_key("/namespaces"),
                        None,
                        {"metadata": {"name": name}},
                        manager="sandbox",
                        internal=True,
                    )
            node_kind = self.registry.by_key("/nodes")
            for spec in self.world.nodes.values():
                desired = self.world.node_object(spec, now)
                existing = store.get("/nodes", "", spec.name)
                if existing is None:
                    api.create(node_kind, None, desired, manager="sandbox", internal=True)
                elif (
                    existing["metadata"].get("labels") != desired["metadata"]["labels"]
                    or existing["status"].get("allocatable") != desired["status"]["allocatable"]
                ):
                    desired["spec"]["unschedulable"] = existing.get("spec", {}).get("unschedulable", False)
                    api.update(
                        node_kind,
                        "",
                        spec.name,
                        {**desired, "metadata": {**existing["metadata"], "labels": desired["metadata"]["labels"]}},
                        manager="sandbox",
                        internal=True,
                    )
                    api.update(
                        node_kind,
                        "",
                        spec.name,
                        {**store.get("/nodes", "", spec.name), "status": desired["status"]},
                        manager="sandbox",
                        subresource="status",
                        internal=True,
                    )
            for node in list(store.items("/nodes")):
                simulated = (node["metadata"].get("annotations") or {}).get("sandbox.local/simulated")
                if simulated and node["metadata"]["name"] not in self.world.nodes:
                    store.remove("/nodes", node)
            dc_kind = self.registry.by_key("resource.k8s.io/deviceclasses")
            for name, expression in DEVICE_CLASSES:
                if store.get(dc_kind.key, "", name) is None:
                    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
                    if name == "gpu.nvidia.com":
                        spec["extendedResourceName"] = "nvidia.com/gpu"
                    api.create(
                        dc_kind, None, {"metadata": {"name": name}, "spec": spec}, manager="sandbox", internal=True
                    )
            slice_kind = self.registry.by_key("resource.k8s.io/resourceslices")
            for node in self.world.dra_devices:
                obj = self.world.resource_slice(node)
                if store.get(slice_kind.key, "", obj["metadata"]["name"]) is None:
                    api.create(slice_kind, None, obj, manager="sandbox", internal=True)
            queue_kind = self.registry.by_key("scheduling.volcano.sh/queues")
            if store.get(queue_kind.key, "", "default") is None:
                api.create(
                    queue_kind,
                    None,
                    {
                        "metadata": {"name": "default"},
                        "spec": {"weight": 1, "reclaimable": True},
                        "status": {"state": "Open"},
                    },
                    manager="sandbox",
                    internal=True,
                )

            setup_objects.seed(self)

    # controllers ----------------------------------------------------------------------------------

    def settle(self, max_passes: int = MAX_PASSES) -> int:
        """Run controller passes until one changes nothing; returns the number of passes."""
        with self.reconcile_lock, self.store.lock:
            for n in range(1, max_passes + 1):
                before = self.store.rv
                run_pass(self)
                if self.store.rv == before:
                    return n
            log.warning("sandbox: controllers did not settle within %d passes", max_passes)
            return max_passes

    def advance(self, seconds: float) -> int:
        """Move the simulated clock forward and run the controllers to convergence."""
        self.clock.advance(seconds)
        return self.settle()

    def _on_deleted(self, kind: Kind, obj: dict[str, Any]) -> None:
        if kind.key == "/pods":
            on_pod_deleted(Ctx(self), obj)

    # serving --------------------------------------------------------------------------------------

    def serve(
        self, host: str = "127.0.0.1", port: int = 0, tick_interval: float | None = 0.5, tls: bool = False
    ) -> str:
        """Start HTTP(S) (and, with ``tick_interval``, the background controller loop)."""
        self.httpd = SandboxHTTPServer((host, port), self)
        if tls:
            context, self.ca_pem = self_signed(host)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        t = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="sandbox-http", daemon=True
        )
        t.start()
        self._threads.append(t)
        if tick_interval:
            loop = threading.Thread(target=self._loop, args=(tick_interval,), name="sandbox-controllers", daemon=True)
            loop.start()
            self._threads.append(loop)
        return self.url

    @property
    def url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"{'https' if self.ca_pem else 'http'}://{host}:{port}"

    def _loop(self, interval: float) -> None:
        last_save = time.monotonic()
        while not self._stop.wait(interval):
            try:
                self.settle()
                if self.state_path and time.monotonic() - last_save >= SAVE_EVERY_SECONDS:
                    if self.store.rv != self._saved_rv or self.clock.realtime:
                        self.save()
                    last_save = time.monotonic()
            except Exception:  # noqa: BLE001 - keep the loop alive; the error is logged
                log.exception("sandbox: controller loop failed")

    def close(self) -> None:
        self._stop.set()
        self.store.close()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.close_connections()
            self.httpd.server_close()
        for t in self._threads:
            t.join(timeout=5)
        self._threads.clear()
        self.save()

    def write_kubeconfig(self, path: str | Path, context: str = "gpu-sandbox") -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        cluster: dict[str, str] = {"server": self.url}
        if self.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": f"{context}-admin", "user": {"token": self.token}}],
            "contexts": [
                {"name": context, "context": {"cluster": context, "user": f"{context}-admin", "namespace": "default"}}
            ],
            "current-context": context,
            "preferences": {},
        }
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(
            "# Sandbox cluster (a simulator, not a real cluster). Regenerated at each start.\n"
            + yaml.safe_dump(config, sort_keys=False)
        )
        tmp.chmod(0o600)
        tmp.replace(path)
        return path

    # reports --------------------------------------------------------------------------------------

    def version(self) -> dict[str, str]:
        return {
            "major": "1",
            "minor": "34",
            "gitVersion": "v1.34.0-sandbox",
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2025-08-27T00:00:00Z",
            "goVersion": "go1.24.6",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    def metrics_text(self) -> str:
        return metrics.render(self)

    def info(self) -> dict[str, Any]:
        with self.store.lock:
            counts = {k: len(v) for k, v in self.store.objects.items() if v}
            rv = self.store.rv
        return {
            "simulator": "gpu-portal sandbox cluster (NOT a real cluster)",
            "url": self.url if self.httpd else None,
            "profile": self.profile.name,
            "profilePath": self.profile_path,
            "seed": self.seed,
            "now": iso(self.clock.now()),
            "nowEpoch": self.clock.now(),
            "realtime": self.clock.realtime,
            "resourceVersion": str(rv),
            "objects": counts,
            "nodes": sorted(self.world.nodes),
            "crdDir": self.crd_dir,
            "schemaValidation": self.catalog is not None and not self.catalog.error,
            "faults": self.faults.pending(),
            "statePath": str(self.state_path) if self.state_path else None,
            "controllerErrors": self.controller_errors[-20:],
        }
