"""Shared inputs of the manifest tests: the demo profile's offerings, a team, a request.

The cast of teams here: ``vision`` (namespace ``team-vision``) asks for everything; no
test in this folder needs users, because requests are validated for a team that the
portal has already resolved from the signed-in member.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.specs import TeamRef, WorkloadSpec, validate_request
from portal.cluster_profile import load_profile

DEMO_PROFILE = Path(__file__).resolve().parents[2] / "deploy" / "cluster-profiles" / "demo.yaml"
OFFERINGS = load_profile(DEMO_PROFILE).offerings
TEAM = TeamRef(slug="vision", namespace="team-vision")
REGISTRIES = ("nvcr.io", "docker.io", "ghcr.io/kubeflow", "quay.io/jupyter")

BASE_REQUESTS: dict[str, dict[str, Any]] = {
    "notebook": {
        "kind": "notebook",
        "name": "explore",
        "offering": "h100-80gb",
        "image": "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-07",
    },
    "training": {
        "kind": "training",
        "name": "finetune",
        "offering": "h100-80gb",
        "framework": "torch",
        "image": "nvcr.io/nvidia/pytorch:24.08-py3",
        "command": ["torchrun", "train.py"],
    },
    "endpoint": {
        "kind": "endpoint",
        "name": "classifier",
        "offering": "l4-shared",
        "model_format": "sklearn",
        "storage_uri": "s3://models/iris/v1",
    },
}


def request(kind: str, **fields: Any) -> dict[str, Any]:
    """A valid request of ``kind`` with ``fields`` changed (None removes a field)."""
    data = {**BASE_REQUESTS[kind], **fields}
    return {k: v for k, v in data.items() if v is not None}


def spec(kind: str, *, workload_id: int = 7, **fields: Any) -> WorkloadSpec:
    return validate_request(
        request(kind, **fields),
        team=TEAM,
        offerings=OFFERINGS,
        allowed_registries=REGISTRIES,
        workload_id=workload_id,
    )


@pytest.fixture
def offerings():
    return OFFERINGS
