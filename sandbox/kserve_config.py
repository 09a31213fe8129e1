"""The ConfigMaps of KServe and Knative Serving that the sandbox's KServe controller follows.

* ``kserve/inferenceservice-config``: as KServe v0.20.0 ships it (``deploy`` says
  "Serverless", so an InferenceService without the mode annotation becomes a Knative
  Service; ``storageInitializer`` gives the init container's image and resources).
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


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": component, "sandbox.local/seeded": "true"}


def seed(profile: ClusterProfile) -> list[tuple[str, dict[str, Any]]]:
    features: dict[str, str] = {}
    if profile.cluster_setup == "recommended":
        features = dict.fromkeys(PORTAL_KNATIVE_FLAGS, "enabled")
    return [
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
