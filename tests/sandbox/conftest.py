"""Fixtures for the sandbox cluster tests: a fresh sandbox per test (it starts in
milliseconds), clients built from its kubeconfig, and manifests used across tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sandbox.testing import running_sandbox

REPO_ROOT = Path(__file__).resolve().parents[2]
PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo.yaml"
CRD_DIR = REPO_ROOT.parent / "shared" / "reference"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a pinned simulated clock makes runs reproducible

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def sandbox():
    with running_sandbox(PROFILE, start_time=START) as handle:
        yield handle


@pytest.fixture
def crd_dir() -> Path:
    if not CRD_DIR.is_dir():
        pytest.skip(f"upstream CRD folder {CRD_DIR} (../shared/reference from the repo root) is not present")
    return CRD_DIR


@pytest.fixture
def validating_sandbox(crd_dir):
    with running_sandbox(PROFILE, crd_dir=crd_dir, start_time=START) as handle:
        yield handle


@pytest.fixture
def api(sandbox):
    return sandbox.api_client()


@pytest.fixture
def core(api):
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api):
    return client.CustomObjectsApi(api)


def notebook(
    name: str,
    resources: dict[str, Any],
    product: str | None = "NVIDIA-A100-SXM4-80GB",
    namespace: str = "default",
    **annotations: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": name, "image": "kubeflownotebookswg/jupyter-scipy:v1.9.0", "resources": {"limits": resources}}
        ]
    }
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
        spec["tolerations"] = [GPU_TOLERATION]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "tests"},
            **({"annotations": annotations} if annotations else {}),
        },
        "spec": {"template": {"spec": spec}},
    }


def events_for(core, name: str, namespace: str = "default", reason: str | None = None) -> list:
    items = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e for e in items if reason is None or e.reason == reason]


@pytest.fixture
def make_notebook():
    return notebook


@pytest.fixture
def events(core):
    """events(name, namespace="default", reason=None) -> the v1 Events about that object."""
    return lambda name, namespace="default", reason=None: events_for(core, name, namespace, reason)
