"""The ConfigMaps of KServe and Knative Serving that the sandbox's KServe controller follows.

* ``kserve/inferenceservice-config``: as KServe v0.20.0 ships it (``deploy`` says
  "Serverless", so an InferenceService without the mode annotation becomes a Knative
  Service; ``storageInitializer`` gives the init container's image and resources).
* ``ClusterStorageContainer`` ``default``: upstream's (no ``securityContext``, so in a
  namespace enforcing the restricted Pod Security Standard every model pod is refused); the
  ``recommended`` setup gives it a restricted ``securityContext``.
* ``knative-serving/config-features``: upstream ships no flags (only an ``_example``), so
  every flag has its default and Knative refuses ``nodeSelector``, ``tolerations``,
  ``affinity``, ``schedulerName`` and ``priorityClassName``. The ``recommended`` setup
  enables exactly those five, which the portal's endpoints need in Knative mode (README,
  "KServe"); ``stock`` keeps upstream's.
"""

from __future__ import annotations

import json
from typing import Any

from portal.cluster_profile import ClusterProfile

# What the portal's Knative-mode endpoints set (placement, Volcano, priority); README lists them.
PORTAL_KNATIVE_FLAGS = (
    "kubernetes.podspec-affinity",
    "kubernetes.podspec-nodeselector",
    "kubernetes.podspec-priorityclassname",
    "kubernetes.podspec-schedulername",
    "kubernetes.podspec-tolerations",
)
# ../shared/reference/kserve/inferenceservice-config.yaml (v0.20.0), the sections the sandbox reads.
UPSTREAM_STORAGE_INITIALIZER = {
    "image": "kserve/storage-initializer:latest",
    "memoryRequest": "100Mi",
    "memoryLimit": "1Gi",
    "cpuRequest": "100m",
    "cpuLimit": "1",
    "caBundleConfigMapName": "",
    "caBundleVolumeMountPath": "/etc/ssl/custom-certs",
    "enableModelcar": True,
    "cpuModelcar": "10m",
    "memoryModelcar": "15Mi",
    "uidModelcar": 1010,
}
UPSTREAM_DEPLOY = {"defaultDeploymentMode": "Serverless"}
# ../shared/reference/kserve/clusterstoragecontainer-default.yaml (the kustomize install's; its
# image placeholder is replaced at install time). No securityContext: KServe sets none either.
UPSTREAM_STORAGE_CONTAINER = {
    "name": "storage-initializer",
    "image": "kserve/storage-initializer:v0.20.0",
    "imagePullPolicy": "IfNotPresent",
    "resources": {"requests": {"memory": "100Mi", "cpu": "100m"}, "limits": {"memory": "1Gi", "cpu": "1"}},
}
SUPPORTED_URI_FORMATS = [
    {"prefix": "gs://"},
    {"prefix": "s3://"},
    {"prefix": "hdfs://"},
    {"prefix": "hf://"},
    {"prefix": "webhdfs://"},
    {"regex": "https://(.+?).blob.core.windows.net/(.+)"},
    {"regex": "https://(.+?).file.core.windows.net/(.+)"},
    {"regex": "https?://(.+)/(.+)"},
]
# What the portal needs (README, "KServe"): the restricted Pod Security Standard, as the portal's own
# containers meet it. The image runs as a non-root user; 1000 is the portal's workload uid.
RESTRICTED_STORAGE_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def storage_container(setup: str) -> dict[str, Any]:
    """The ClusterStorageContainer ``default``: upstream's, plus a restricted securityContext when
    the setup is ``recommended``."""
    container = dict(UPSTREAM_STORAGE_CONTAINER)
    if setup == "recommended":
        container["securityContext"] = dict(RESTRICTED_STORAGE_SECURITY)
    return {
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ClusterStorageContainer",
        "metadata": {"name": "default", "labels": _labels("kserve")},
        "spec": {
            "container": container,
            "supportedUriFormats": [dict(f) for f in SUPPORTED_URI_FORMATS],
            "workloadType": "initContainer",
            "supportsMultiModelDownload": True,
        },
    }


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": component, "sandbox.local/seeded": "true"}


def seed(profile: ClusterProfile) -> list[tuple[str, dict[str, Any]]]:
    features: dict[str, str] = {}
    if profile.cluster_setup == "recommended":
        features = dict.fromkeys(PORTAL_KNATIVE_FLAGS, "enabled")
    return [
        ("serving.kserve.io/clusterstoragecontainers", storage_container(profile.cluster_setup)),
        (
            "/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "inferenceservice-config", "namespace": "kserve", "labels": _labels("kserve")},
                "data": {
                    "deploy": json.dumps(UPSTREAM_DEPLOY, indent=2),
                    "storageInitializer": json.dumps(UPSTREAM_STORAGE_INITIALIZER, indent=2),
                },
            },
        ),
        (
            "/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "config-features",
                    "namespace": "knative-serving",
                    "labels": _labels("knative-serving"),
                },
                "data": features,
            },
        ),
    ]
