"""Fixtures of the usage tests: workloads with given run times, the sandbox cluster
with pods holding GPUs at pinned activity, and a real Prometheus scraping it."""

from __future__ import annotations

import itertools
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import UTC, datetime

import pytest

from tests.conftest import DEMO_PROFILE

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the sandbox's simulated clock starts here
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PRODUCTS = {
    "h100-80gb": ("nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3"),
    "a100-80gb-1g.10gb": ("nvidia.com/mig-1g.10gb", "NVIDIA-A100-SXM4-80GB"),
    "l4-shared": ("nvidia.com/gpu.shared", "NVIDIA-L4"),
}
_names = itertools.count(1)


def at(text: str) -> datetime:
    """'2026-01-31 23:59:30' → an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


DEMO_NODES = {  # the demo profile's GPU nodes, as the sandbox names them, and a device class of each
    "h100-0": "H100-80GB",
    "h100-1": "H100-80GB",
    "a100-mig-0": "A100-80GB/1g.10gb",
    "l4-shared-0": "L4",
    "l4-shared-1": "L4",
    "h100-dra-0": "H100-80GB",
}


def nodes_seen_since(when: str | datetime, nodes: dict[str, str] = DEMO_NODES) -> None:
    """Record the nodes as sampled from ``when`` on (the cluster's cost starts at a node's first sample)."""
    from usage.models import NodeSeen

    first = at(when) if isinstance(when, str) else when
    for hostname, gpu_class in nodes.items():
        NodeSeen.objects.create(hostname=hostname, gpu_class=gpu_class, first_sample_at=first)


@pytest.fixture
def make_workload(cast, catalog):
    """Create a workload row directly, as if it had run from started_at to finished_at."""
    from jobs.models import Kind, State, Workload

    def make(
        offering="h100-80gb",
        team=None,
        user=None,
        started=None,
        finished=None,
        units=1,
        kind=Kind.TRAINING,
        state=None,
        name=None,
        replicas=1,
    ):
        started_at = at(started) if isinstance(started, str) else started
        finished_at = at(finished) if isinstance(finished, str) else finished
        if state is None:
            state = State.SUCCEEDED if finished_at else (State.RUNNING if started_at else State.QUEUED)
        return Workload.objects.create(
            team=team or cast.vision,
            created_by=user or cast.alice,
            kind=kind,
            name=name or f"w{next(_names)}",
            offering=catalog[offering],
            gpus_per_replica=units,
            replicas=replicas,
            max_replicas=replicas,
            state=state,
            started_at=started_at,
            finished_at=finished_at,
            created_at=started_at or datetime.now(UTC),
        )

    return make


@pytest.fixture
def sandbox():
    from sandbox.testing import running_sandbox

    with running_sandbox(DEMO_PROFILE, start_time=START) as handle:
        yield handle


@pytest.fixture
def gpu_pod(sandbox):
    """Create a bare pod holding one unit of an offering, labelled as a portal workload's pod."""
    from kubernetes import client

    core = client.CoreV1Api(sandbox.api_client())
    namespaces = set()

    def make(name, offering, namespace, workload_id=None, activity=None):
        if namespace not in namespaces:
            try:
                core.create_namespace({"metadata": {"name": namespace}})
            except client.exceptions.ApiException as exc:
                if exc.status != 409:
                    raise
            namespaces.add(namespace)
        resource, product = PRODUCTS[offering]
        labels = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/workload-id": str(workload_id)}
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {
                    "name": name,
                    "labels": labels if workload_id is not None else {"app": "someone-elses"},
                    "annotations": {"sandbox.local/activity": str(activity)} if activity is not None else {},
                },
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": product},
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                            "resources": {"limits": {resource: "1"}},
                        }
                    ],
                },
            },
        )

    return make


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(sandbox, tmp_path):
    """A real Prometheus (Debian's package) scraping the sandbox's /metrics every second."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("the prometheus binary is not installed (apt-get install -y prometheus)")
    port = _free_port()
    target = sandbox.url.split("://", 1)[1].rstrip("/")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: dcgm\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=2) as response:
                    targets = json.loads(response.read())["data"]["activeTargets"]
                if targets and all(t["health"] == "up" for t in targets):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not report the sandbox target up within 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
