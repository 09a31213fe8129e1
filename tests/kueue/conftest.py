"""Kueue as the queueing backend: the demo cluster with ``queueing: kueue``.

Three layers are tested here, each with its own fixtures:

* the pure builders in Kueue mode (``kueue_spec``: a validated request with
  ``queueing="kueue"``, as ``jobs.lifecycle.spec_of`` makes it on a Kueue cluster);
* the sandbox playing Kueue (``kueue_sandbox``, started with ``demo-kueue.yaml``; objects
  go in through the official client with server-side apply, as the portal sends them:
  ``k8s``);
* the portal end to end (``kueue_portal``: settings.CLUSTER_PROFILE and the kubeconfig
  point at that sandbox; ``kube`` is the portal's own cluster client).

The cast: the team ``vision`` (namespace ``team-vision``) runs everything; ``nlp`` only
lends its idle quota in the cohort tests.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from jobs.kube.manifests import cluster_objects, team_objects
from jobs.specs import TeamQuota, TeamRef, WorkloadSpec
from quotas import kueue
from sandbox.testing import running_sandbox
from tests.manifests.conftest import spec

REPO_ROOT = Path(__file__).resolve().parents[2]
KUEUE_PROFILE = REPO_ROOT / "deploy" / "cluster-profiles" / "demo-kueue.yaml"
CRD_DIR = REPO_ROOT.parent / "shared" / "reference"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z

VISION = TeamRef(slug="vision", namespace="team-vision")
NLP = TeamRef(slug="nlp", namespace="team-nlp")
H100 = kueue.Flavor("gpu-h100-80gb", "H100-80GB", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
A100 = kueue.Flavor("gpu-a100-80gb", "A100-80GB", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
A100_1G = kueue.Flavor(
    "gpu-a100-80gb-1g-10gb", "A100-80GB/1g.10gb", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
)
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"


def kueue_spec(kind: str, **fields: Any) -> WorkloadSpec:
    """A valid request built for a Kueue cluster (guaranteed priority, as admission gives it)."""
    return replace(spec(kind, **fields), queueing="kueue", priority_class="gpu-portal-guaranteed")


class Kube:
    """Server-side apply and reads through the official dynamic client, as a portal would."""

    def __init__(self, handle):
        self.handle = handle
        self.dynamic = handle.dynamic_client()

    def _resource(self, api_version: str, kind: str):
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def apply(self, *objects: dict[str, Any]) -> None:
        for obj in objects:
            meta = obj["metadata"]
            self._resource(obj["apiVersion"], obj["kind"]).server_side_apply(
                body=obj,
                name=meta["name"],
                namespace=meta.get("namespace"),
                field_manager="tests",
                force_conflicts=True,
            )

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        return self._resource(api_version, kind).get(name=name, namespace=namespace).to_dict()

    def items(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o.to_dict() for o in self._resource(api_version, kind).get(namespace=namespace).items]

    def pods(self, namespace: str = "team-vision") -> list[dict[str, Any]]:
        return self.items("v1", "Pod", namespace)

    def workloads(self, namespace: str = "team-vision") -> dict[str, dict[str, Any]]:
        """Kueue's Workloads by the name of the job (or pod) they queue."""
        return {w["metadata"]["ownerReferences"][0]["name"]: w for w in self.items(WORKLOAD_API, "Workload", namespace)}

    def cluster_queue(self, name: str = "team-vision") -> dict[str, Any]:
        return self.get(WORKLOAD_API, "ClusterQueue", name)

    def team(
        self,
        team: TeamRef,
        amounts: dict[str, dict[str, tuple[int, int]]],
        flavors: tuple[kueue.Flavor, ...] = (H100,),
    ) -> None:
        """A team with a ClusterQueue of ``amounts`` (flavor -> resource -> (nominal, borrowing))."""
        queue_objects = (
            *(kueue.resource_flavor(f) for f in flavors),
            kueue.cluster_queue(team.slug, team.namespace, amounts, classes={f.name: f.gpu_class for f in flavors}),
            kueue.local_queue(team.slug, team.namespace),
        )
        gpus = {r: (n, n + b) for resources in amounts.values() for r, (n, b) in resources.items()}
        self.apply(*team_objects(team, TeamQuota(gpus, "kueue", queue_objects)))


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


@pytest.fixture
def crd_dir() -> Path:
    if not CRD_DIR.is_dir():
        pytest.skip(f"upstream CRD folder {CRD_DIR} (../shared/reference from the repo root) is not present")
    return CRD_DIR


@pytest.fixture
def kueue_sandbox(crd_dir):
    """The demo cluster queued by Kueue, validating custom resources against their CRDs."""
    with running_sandbox(KUEUE_PROFILE, crd_dir=crd_dir, start_time=START) as handle:
        yield handle


@pytest.fixture
def k8s(kueue_sandbox) -> Kube:
    """The sandbox with the portal's cluster-wide objects for Kueue (priority classes, runtimes)."""
    k = Kube(kueue_sandbox)
    k.apply(*cluster_objects("kueue"))
    return k
