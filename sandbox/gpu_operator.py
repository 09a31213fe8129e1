"""The GPU Operator's dcgm-exporter DaemonSets, and the exporter settings they give each node.

dcgm-exporter's pod attribution is configured by environment variables of its container
(``pkg/cmd/app.go`` upstream; see ``../shared/reference/dcgm-exporter/labels.yaml``):

- ``DCGM_EXPORTER_KUBERNETES``: add ``pod``/``namespace``/``container`` from the kubelet's
  pod-resources API. The binary defaults to false; the Helm chart and the GPU Operator set
  true, so both setups here carry true.
- ``KUBERNETES_VIRTUAL_GPUS``: one series per pod holding a time-slicing/MPS replica (with
  a ``vgpu`` label). Default false: a shared GPU is then one series, labelled with the
  last of its pods in the kubelet's list.
- ``KUBERNETES_ENABLE_DRA``: label GPUs allocated through DRA ResourceClaims. Default
  false: DRA-claimed GPUs carry no pod labels.

``cluster_setup: stock`` seeds one DaemonSet with the upstream defaults for the last two;
``recommended`` turns both on. Upstream's virtual-GPU path returns before its DRA pass
(``PodMapper.Process``), so one exporter cannot do both: the recommended setup gives DRA
nodes an exporter DaemonSet of their own (``nvidia-dcgm-exporter-dra``, virtual GPUs off),
as an operator would with two node-selected DaemonSets. ``sandbox.metrics`` reads the
DaemonSets at every scrape, so editing one through the API changes what the next scrape
says, and a node no DaemonSet selects has no exporter and no metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from portal.cluster_profile import ClusterProfile
from sandbox.podutil import node_matches

NAMESPACE = "gpu-operator"
NAME = "nvidia-dcgm-exporter"
DRA_NAME = "nvidia-dcgm-exporter-dra"
DAEMONSETS = "apps/daemonsets"
APP_LABEL = "app"
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-ubuntu22.04"
GPU_NODE_LABEL = "nvidia.com/gpu.present"
DRA_NODE_LABEL = "nvidia.com/dra-driver-gpu"

KUBERNETES = "DCGM_EXPORTER_KUBERNETES"
VIRTUAL_GPUS = "KUBERNETES_VIRTUAL_GPUS"
ENABLE_DRA = "KUBERNETES_ENABLE_DRA"

# Go's strconv.ParseBool, which the exporter's flag library uses for boolean env vars.
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}


@dataclass(frozen=True)
class ExporterConfig:
    kubernetes: bool = False
    virtual_gpus: bool = False
    enable_dra: bool = False


def _daemonset(name: str, env: dict[str, str], node_selector: dict[str, str], affinity: dict | None) -> dict:
    pod_spec: dict[str, Any] = {
        "serviceAccountName": NAME,
        "nodeSelector": node_selector,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {
                "name": NAME,
                "image": IMAGE,
                "env": [
                    {"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"},
                    {"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/dcp-metrics-included.csv"},
                    *({"name": k, "value": v} for k, v in env.items()),
                ],
                "ports": [{"name": "gpu-metrics", "containerPort": 9400, "protocol": "TCP"}],
            }
        ],
    }
    if affinity:
        pod_spec["affinity"] = affinity
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {APP_LABEL: NAME}},
        "spec": {
            "selector": {"matchLabels": {APP_LABEL: name}},
            "template": {"metadata": {"labels": {APP_LABEL: name}}, "spec": pod_spec},
        },
    }


def exporter_daemonsets(profile: ClusterProfile) -> list[tuple[str, dict[str, Any]]]:
    """Seeder: the dcgm-exporter DaemonSet(s) the profile's ``cluster_setup`` calls for."""
    gpu_nodes = {GPU_NODE_LABEL: "true"}
    if profile.cluster_setup != "recommended":
        env = {KUBERNETES: "true", VIRTUAL_GPUS: "false", ENABLE_DRA: "false"}
        return [(DAEMONSETS, _daemonset(NAME, env, gpu_nodes, None))]
    not_dra = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": DRA_NODE_LABEL, "operator": "DoesNotExist"}]}]
            }
        }
    }
    shared = {KUBERNETES: "true", VIRTUAL_GPUS: "true", ENABLE_DRA: "true"}
    dra = {KUBERNETES: "true", VIRTUAL_GPUS: "false", ENABLE_DRA: "true"}
    return [
        (DAEMONSETS, _daemonset(NAME, shared, gpu_nodes, not_dra)),
        (DAEMONSETS, _daemonset(DRA_NAME, dra, {**gpu_nodes, DRA_NODE_LABEL: "true"}, None)),
    ]


def config_of(daemonset: dict[str, Any]) -> ExporterConfig:
    """The exporter settings of a DaemonSet's first container (unset or unparsable: false)."""
    containers = (((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    env = {e.get("name"): e.get("value", "") for e in (containers[0].get("env") or [])} if containers else {}
    return ExporterConfig(
        kubernetes=env.get(KUBERNETES) in _TRUE,
        virtual_gpus=env.get(VIRTUAL_GPUS) in _TRUE,
        enable_dra=env.get(ENABLE_DRA) in _TRUE,
    )


def node_configs(daemonsets: list[dict[str, Any]], nodes: dict[str, dict[str, str]]) -> dict[str, ExporterConfig]:
    """Node name → the settings of the exporter running there (the first DaemonSet by name
    whose pod template the node admits); nodes without an exporter are left out."""
    exporters = sorted(
        (ds for ds in daemonsets if ds["metadata"].get("namespace") == NAMESPACE),
        key=lambda ds: ds["metadata"]["name"],
    )
    out = {}
    for node, labels in nodes.items():
        for ds in exporters:
            template = (ds.get("spec") or {}).get("template") or {}
            if node_matches(template, node, labels):
                out[node] = config_of(ds)
                break
    return out
