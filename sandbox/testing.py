"""Run a sandbox cluster inside a test.

    from sandbox.testing import running_sandbox

    with running_sandbox("deploy/cluster-profiles/demo.yaml") as sandbox:
        core = kubernetes.client.CoreV1Api(sandbox.api_client())
        ...                      # create objects through the official client
        sandbox.settle()         # controllers run to convergence; no sleeping
        sandbox.advance(600)     # simulated time jumps; controllers run again

The server listens on a free port of 127.0.0.1 in a background thread and writes a
kubeconfig the official client loads. By default (``tick_interval=None``) nothing
happens behind the test's back: the simulated clock stands still and controllers
run only in ``settle()``/``advance()``, so tests are deterministic. Pass a
``tick_interval`` (seconds) to get a live cluster whose clock follows wall time.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sandbox.cluster import Sandbox

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo.yaml"
DEFAULT_CRD_DIR = REPO_ROOT.parent / "shared" / "reference"


class SandboxHandle:
    """What a test holds while the sandbox runs."""

    def __init__(self, sandbox: Sandbox, kubeconfig_path: Path):
        self.sandbox = sandbox
        self.kubeconfig_path = kubeconfig_path

    @property
    def url(self) -> str:
        return self.sandbox.url

    @property
    def token(self) -> str:
        return self.sandbox.token

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` configured from the kubeconfig."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig_path), client_configuration=configuration)
        return client.ApiClient(configuration)

    def dynamic_client(self) -> Any:
        from kubernetes.dynamic import DynamicClient

        return DynamicClient(self.api_client())

    def inject_fault(
        self,
        code: int | None = None,
        count: int = 1,
        verb: str | None = None,
        kind: str | None = None,
        retry_after: int | None = None,
        hang_seconds: float | None = None,
    ) -> None:
        """Make the next ``count`` matching API calls fail with ``code`` and/or hang."""
        self.sandbox.faults.inject(code, count, verb, kind, retry_after, hang_seconds)

    def clear_faults(self) -> None:
        self.sandbox.faults.clear()

    def cut_watches(self) -> None:
        """End every open watch stream (clients see the stream close and re-watch)."""
        self.sandbox.store.cut_watches()

    def compact(self) -> None:
        """Drop the watch event log, so watching from an older resourceVersion gets 410 Gone."""
        self.sandbox.store.compact()

    def settle(self) -> int:
        return self.sandbox.settle()

    def advance(self, seconds: float) -> int:
        return self.sandbox.advance(seconds)

    def now(self) -> float:
        """Simulated time, seconds since the epoch."""
        return self.sandbox.clock.now()

    def metrics(self) -> str:
        """The DCGM-style ``/metrics`` text, fetched over HTTP like Prometheus would."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            return response.read().decode()

    def control(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call a ``/sandbox/v1/`` control endpoint over HTTP (as an out-of-process client would)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/sandbox/v1/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def info(self) -> dict[str, Any]:
        return self.sandbox.info()

    def stop(self) -> None:
        self.sandbox.close()


@contextmanager
def running_sandbox(
    profile_path: str | Path = DEFAULT_PROFILE,
    crd_dir: str | Path | None = None,
    seed: int = 0,
    state_path: str | Path | None = None,
    tick_interval: float | None = None,
    *,
    reset: bool = False,
    start_time: float | None = None,
    kubeconfig_path: str | Path | None = None,
    watch_window: int = 20000,
    tls: bool = False,
) -> Iterator[SandboxHandle]:
    """Start a sandbox on a free port; yield a ``SandboxHandle``; stop it (and save state) on exit.

    ``start_time`` pins the simulated clock's start (epoch seconds), which with a fixed
    ``seed`` makes metrics and generated names reproducible across runs.
    """
    tmp = None
    if kubeconfig_path is None:
        tmp = Path(tempfile.mkdtemp(prefix="gpu-sandbox-"))
        kubeconfig_path = tmp / "kubeconfig"
    sandbox = Sandbox(
        profile_path,
        crd_dir=crd_dir,
        seed=seed,
        state_path=state_path,
        reset=reset,
        realtime=tick_interval is not None,
        start_time=start_time,
        watch_window=watch_window,
    )
    try:
        sandbox.serve("127.0.0.1", 0, tick_interval, tls=tls)
        path = sandbox.write_kubeconfig(kubeconfig_path)
        sandbox.settle()
        yield SandboxHandle(sandbox, path)
    finally:
        sandbox.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
