"""Value sets for rendering the chart in tests, and helpers to find objects in the result."""

from __future__ import annotations

from typing import Any

from deploy.render_chart import render
from tests.conftest import DEMO_PROFILE

KUBERNETES_VERSION = "1.34.0"
HOST = "gpu.example.com"
SECRET_KEY = "chart-test-key-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEFGH"

# values.yaml plus only what it cannot default.
MINIMAL: dict[str, Any] = {
    "ingress": {"host": HOST},
    "clusterProfile": DEMO_PROFILE.read_text(),
    "externalDatabase": {"url": "postgres://portal:db-password@postgres.example.com:5432/portal"},
    "externalRedis": {"url": "redis://:redis-password@redis.example.com:6379/0"},
    "secretKey": {"value": SECRET_KEY},
}

# What a production install looks like: TLS, Secrets of the operator's own, SSO, more
# web replicas, GPU-free nodes for the portal and an extra setting.
PRODUCTION: dict[str, Any] = {
    "image": {"repository": "registry.example.com/ml/gpu-portal", "tag": "1.4.2"},
    "ingress": {
        "host": HOST,
        "className": "nginx",
        "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
        "tls": {"enabled": True, "secretName": "gpu-portal-tls"},
    },
    "clusterProfile": DEMO_PROFILE.read_text(),
    "externalDatabase": {"existingSecret": "portal-db-app", "existingSecretKey": "uri"},
    "externalRedis": {"existingSecret": "portal-env"},
    "secretKey": {"existingSecret": "portal-env"},
    "config": {"apiRate": "1200/min", "env": {"PORTAL_ALLOWED_REGISTRIES": "nvcr.io,registry.example.com/ml"}},
    "sso": {
        "issuer": "https://login.example.com/realms/ml",
        "clientId": "gpu-portal",
        "clientSecretSecret": "portal-oidc",
        "teamGroupPattern": "gpu-{team}-{role}",
        "groupMap": {"ml-leads": ["nlp", "team_admin"]},
        "adminGroup": "gpu-platform-admins",
    },
    "web": {"replicas": 3},
    "worker": {"replicas": 2, "concurrency": 4},
    "nodeSelector": {"node-role.example.com/platform": "true"},
    "tolerations": [{"key": "platform", "operator": "Exists", "effect": "NoSchedule"}],
    "imagePullSecrets": [{"name": "registry-credentials"}],
}


def documents(values: dict[str, Any], **kwargs: Any) -> list[dict]:
    return render(values, **kwargs).documents


def find(docs: list[dict], kind: str, name_suffix: str = "") -> dict:
    matches = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(matches) == 1, f"{len(matches)} {kind} named *{name_suffix}"
    return matches[0]


def pod_templates(docs: list[dict]) -> dict[str, dict]:
    """Name -> pod template of every Deployment and Job."""
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] in ("Deployment", "Job")}


def containers(pod_spec: dict) -> list[dict]:
    return [*pod_spec.get("initContainers", []), *pod_spec["containers"]]


def env_of(container: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
