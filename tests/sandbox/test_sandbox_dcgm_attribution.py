"""dcgm-exporter's pod attribution follows the settings of its DaemonSet, as upstream's pod mapper does.

``cluster_setup: recommended`` (the demo profile) turns on ``KUBERNETES_VIRTUAL_GPUS`` and
``KUBERNETES_ENABLE_DRA``; ``stock`` keeps upstream's defaults (false), under which a
time-sliced GPU is one series labelled with one of its pods and DRA-claimed GPUs carry no
pod labels.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from sandbox.gpu_operator import ExporterConfig, config_of, exporter_daemonsets
from sandbox.testing import running_sandbox
from tests.sandbox.conftest import GPU_TOLERATION, PROFILE, START
from tests.sandbox.test_sandbox_workloads import H100_SELECTOR, raw

ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


@pytest.fixture
def stock_sandbox(tmp_path: Path):
    data = yaml.safe_load(PROFILE.read_text())
    data["cluster_setup"] = "stock"
    path = tmp_path / "stock.yaml"
    path.write_text(yaml.safe_dump(data))
    with running_sandbox(path, start_time=START) as handle:
        yield handle


def engine(text: str) -> list:
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == ENGINE]


def env_of(sandbox, name: str = "nvidia-dcgm-exporter") -> dict[str, str]:
    ds = client.AppsV1Api(sandbox.api_client()).read_namespaced_daemon_set(name, "gpu-operator")
    return {e.name: e.value for e in ds.spec.template.spec.containers[0].env}


def share_l4(sandbox, count: int = 5) -> None:
    """``count`` pods on l4-shared-0's time-sliced GPUs: five on four GPUs put two on one."""
    core = client.CoreV1Api(sandbox.api_client())
    for i in range(count):
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": f"slice-{i}"},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "tolerations": [GPU_TOLERATION],
                    "containers": [
                        {"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}
                    ],
                },
            },
        )
    sandbox.settle()


def claim_h100(sandbox) -> None:
    api = sandbox.api_client()
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-h100", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": H100_SELECTOR}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    assert raw(api, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)[0] == 201
    client.CoreV1Api(api).create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "dra-pod"},
            "spec": {
                "tolerations": [GPU_TOLERATION],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-h100"}],
                "containers": [{"name": "cuda", "image": "x:1", "resources": {"claims": [{"name": "gpu"}]}}],
            },
        },
    )
    sandbox.settle()


def by_uuid(samples: list, host: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in samples:
        if s.labels["Hostname"] == host:
            out.setdefault(s.labels["UUID"], []).append(s)
    return out


def test_the_recommended_setup_seeds_an_exporter_daemonset_with_attribution_turned_on(sandbox):
    env = env_of(sandbox)
    assert env["DCGM_EXPORTER_KUBERNETES"] == "true"
    assert env["KUBERNETES_VIRTUAL_GPUS"] == "true"
    assert env["KUBERNETES_ENABLE_DRA"] == "true"


def test_the_stock_setup_seeds_the_upstream_defaults(stock_sandbox):
    env = env_of(stock_sandbox)
    assert (env["KUBERNETES_VIRTUAL_GPUS"], env["KUBERNETES_ENABLE_DRA"]) == ("false", "false")
    apps = client.AppsV1Api(stock_sandbox.api_client())
    assert [d.metadata.name for d in apps.list_namespaced_daemon_set("gpu-operator").items] == ["nvidia-dcgm-exporter"]


def test_with_virtual_gpus_every_pod_sharing_a_gpu_has_its_own_series_with_gpu_level_readings(sandbox):
    share_l4(sandbox)
    shared = [ss for ss in by_uuid(engine(sandbox.metrics()), "l4-shared-0").values() if len(ss) > 1]
    assert len(shared) == 1
    [pair] = shared
    assert {s.labels["pod"] for s in pair} == {"slice-0", "slice-4"}
    assert {s.labels["vgpu"] for s in pair} == {"0", "1"}
    assert len({s.value for s in pair}) == 1  # the GPU's activity, repeated per pod


def test_without_virtual_gpus_a_shared_gpu_is_one_series_labelled_with_its_last_pod(stock_sandbox):
    share_l4(stock_sandbox)
    gpus = by_uuid(engine(stock_sandbox.metrics()), "l4-shared-0")
    assert all(len(ss) == 1 for ss in gpus.values()) and len(gpus) == 4
    pods = sorted(ss[0].labels["pod"] for ss in gpus.values())
    # slice-0 and slice-4 share a GPU; upstream keeps the last one listed for the whole GPU.
    assert pods == ["slice-1", "slice-2", "slice-3", "slice-4"]
    assert all("vgpu" not in ss[0].labels for ss in gpus.values())


def test_with_virtual_gpus_unheld_gpus_of_a_node_with_pods_are_not_reported(sandbox):
    share_l4(sandbox, count=1)
    samples = engine(sandbox.metrics())
    assert [s.labels["pod"] for s in samples if s.labels["Hostname"] == "l4-shared-0"] == ["slice-0"]
    # a node where nobody holds a GPU keeps its series, unlabelled
    assert len([s for s in samples if s.labels["Hostname"] == "l4-shared-1" and s.labels["pod"] == ""]) == 4


def test_with_dra_enabled_a_claimed_gpu_carries_the_pod_and_the_claim(sandbox):
    claim_h100(sandbox)
    [held] = [s for s in engine(sandbox.metrics()) if s.labels["pod"] == "dra-pod"]
    assert held.labels["Hostname"] == "h100-dra-0" and held.labels["container"] == "cuda"
    assert held.labels["dra_claim_name"].startswith("dra-pod-gpu-")
    assert held.labels["dra_claim_namespace"] == "default"
    assert held.labels["dra_driver_name"] == "gpu.nvidia.com" and held.labels["dra_pool_name"] == "h100-dra-0"
    assert held.labels["dra_device_name"] == f"gpu-{held.labels['gpu']}"


def test_without_dra_enabled_a_claimed_gpu_carries_no_pod_labels(stock_sandbox):
    claim_h100(stock_sandbox)
    samples = [s for s in engine(stock_sandbox.metrics()) if s.labels["Hostname"] == "h100-dra-0"]
    assert len(samples) == 8
    assert all(s.labels["pod"] == "" and "dra_claim_name" not in s.labels for s in samples)
    assert max(s.value for s in samples) > 0  # the GPU is busy, just not attributed


def test_editing_the_daemonset_changes_the_next_scrape(sandbox):
    share_l4(sandbox)
    apps = client.AppsV1Api(sandbox.api_client())
    ds = apps.read_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator")
    for e in ds.spec.template.spec.containers[0].env:
        if e.name == "DCGM_EXPORTER_KUBERNETES":
            e.value = "false"
    apps.replace_namespaced_daemon_set("nvidia-dcgm-exporter", "gpu-operator", ds)
    samples = [s for s in engine(sandbox.metrics()) if s.labels["Hostname"] == "l4-shared-0"]
    assert len(samples) == 4 and all("pod" not in s.labels for s in samples)


def test_a_node_no_exporter_daemonset_selects_reports_nothing(sandbox):
    client.AppsV1Api(sandbox.api_client()).delete_namespaced_daemon_set("nvidia-dcgm-exporter-dra", "gpu-operator")
    hosts = {s.labels["Hostname"] for s in engine(sandbox.metrics())}
    assert "h100-dra-0" not in hosts and "h100-0" in hosts


def test_exporter_settings_parse_booleans_like_go_and_default_to_false():
    def ds(**env: str) -> dict:
        containers = [{"name": "x", "env": [{"name": k, "value": v} for k, v in env.items()]}]
        return {"spec": {"template": {"spec": {"containers": containers}}}}

    assert config_of(ds()) == ExporterConfig(False, False, False)
    on = ds(DCGM_EXPORTER_KUBERNETES="1", KUBERNETES_VIRTUAL_GPUS="True", KUBERNETES_ENABLE_DRA="t")
    assert config_of(on) == ExporterConfig(True, True, True)
    assert config_of(ds(DCGM_EXPORTER_KUBERNETES="yes")) == ExporterConfig(False, False, False)


def test_recommended_gives_dra_nodes_an_exporter_without_virtual_gpus():
    from portal.cluster_profile import load_profile

    objs = {obj["metadata"]["name"]: obj for _, obj in exporter_daemonsets(load_profile(PROFILE))}
    assert config_of(objs["nvidia-dcgm-exporter-dra"]) == ExporterConfig(True, False, True)
    assert objs["nvidia-dcgm-exporter-dra"]["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/dra-driver-gpu": "true",
    }
