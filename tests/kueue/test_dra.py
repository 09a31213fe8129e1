"""Kueue and DRA: the DeviceClasses of the portal's DRA offerings must be mapped in Kueue's
configuration (``resources.deviceClassMappings``) and the mapped resources covered by the
teams' ClusterQueues; the sandbox's Kueue reads its manager ConfigMap as Kueue does.
"""

from __future__ import annotations

import pytest
import yaml
from kubernetes import client

from jobs.kube.manifests import workload_objects
from portal import scheduler_config
from portal.scheduler_config import (
    KUEUE_CONF_KEY,
    dra_resource_name,
    kueue_manager_config,
    kueue_manager_config_snippet,
)
from sandbox.kueue_config import STOCK_CONF, parse
from tests.kueue.conftest import CRD_DIR, H100, KUEUE_PROFILE, REPO_ROOT, VISION, Kube, condition, kueue_spec

DRA_GPUS = dra_resource_name("gpu.nvidia.com")
CM = ("kueue-manager-config", "kueue-system")


def dra_training(name: str, workload_id: int, *, replicas: int = 1) -> list[dict]:
    return workload_objects(
        kueue_spec(
            "training",
            name=name,
            workload_id=workload_id,
            framework="custom",
            offering="h100-80gb-dra",
            replicas=replicas,
            gpus_per_replica=1,
            annotations={"sandbox.local/duration-seconds": "120"},
        )
    )


def set_config(handle, text: str) -> None:
    client.CoreV1Api(handle.api_client()).patch_namespaced_config_map(*CM, {"data": {KUEUE_CONF_KEY: text}})


def without_mappings() -> str:
    data = yaml.safe_load(kueue_manager_config())
    del data["resources"]["deviceClassMappings"]
    return yaml.safe_dump(data)


# -- the configuration -----------------------------------------------------------------------------


def test_the_portals_kueue_config_maps_every_dra_class_its_offerings_use():
    from portal.cluster_profile import load_profile

    conf = parse(kueue_manager_config())
    classes = {o.dra_device_class for o in load_profile(KUEUE_PROFILE).offerings.values() if o.dra_device_class}
    assert classes and classes <= set(conf.device_classes)
    assert conf.device_classes["gpu.nvidia.com"] == DRA_GPUS
    assert conf.excluded_prefixes == ("cpu", "memory")


def test_each_device_class_is_counted_under_its_own_name_apart_from_device_plugin_gpus():
    names = [m["name"] for m in scheduler_config.kueue_device_class_mappings()]
    assert names == list(scheduler_config.DRA_DEVICE_CLASSES) == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert "nvidia.com/gpu" not in names


def test_a_recommended_kueue_cluster_is_seeded_with_the_portals_manager_config(kueue_sandbox):
    cm = client.CoreV1Api(kueue_sandbox.api_client()).read_namespaced_config_map(*CM)
    assert cm.data[KUEUE_CONF_KEY] == kueue_manager_config()


def test_the_stock_kueue_config_is_upstreams_shipped_file_verbatim_and_maps_nothing():
    path = CRD_DIR / "kueue" / "controller_manager_config.yaml"
    if not path.is_file():
        pytest.skip(f"upstream reference {path} (../shared/reference from the repo root) is not present")
    assert path.read_text() == STOCK_CONF
    assert parse(STOCK_CONF).device_classes == {}


def test_a_device_class_in_two_mappings_is_refused():
    text = yaml.safe_dump(
        {
            "resources": {
                "deviceClassMappings": [
                    {"name": "a.example.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                    {"name": "b.example.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
                ]
            }
        }
    )
    with pytest.raises(ValueError, match=r"deviceClassMappings\[1\].*gpu.nvidia.com is already mapped"):
        parse(text)


def test_the_readme_shows_the_kueue_config_the_sandbox_seeds():
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"```yaml\n{kueue_manager_config_snippet()}```" in readme
    assert kueue_manager_config_snippet() in kueue_manager_config()


# -- the sandbox's Kueue -----------------------------------------------------------------------------


def test_a_dra_job_is_charged_its_devices_under_the_mapped_resource(k8s: Kube, kueue_sandbox):
    k8s.team(VISION, {H100.name: {DRA_GPUS: (2, 0)}})
    k8s.apply(*dra_training("first", 1, replicas=2))
    kueue_sandbox.settle()
    workload = k8s.workloads()["first"]
    assert condition(workload, "Admitted")["status"] == "True"
    [assignment] = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {DRA_GPUS: H100.name}
    assert assignment["resourceUsage"] == {DRA_GPUS: "2"}

    k8s.apply(*dra_training("second", 2))
    kueue_sandbox.settle()
    pending = condition(k8s.workloads()["second"], "QuotaReserved")
    assert (pending["status"], pending["reason"]) == ("False", "Pending")
    assert f"insufficient unused quota for {DRA_GPUS} in flavor {H100.name}, 1 more needed" in pending["message"]


def test_an_unmapped_device_class_makes_the_workload_inadmissible_until_the_config_maps_it(k8s: Kube, kueue_sandbox):
    set_config(kueue_sandbox, without_mappings())
    k8s.team(VISION, {H100.name: {DRA_GPUS: (2, 0)}})
    k8s.apply(*dra_training("unmapped", 1))
    kueue_sandbox.settle()
    workload = k8s.workloads()["unmapped"]
    reserved = condition(workload, "QuotaReserved")
    assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible")
    assert reserved["message"] == "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset worker"
    jobset = k8s.get("jobset.x-k8s.io/v1alpha2", "JobSet", "unmapped", "team-vision")
    assert jobset["spec"]["suspend"] is True

    set_config(kueue_sandbox, kueue_manager_config())
    kueue_sandbox.settle()
    assert condition(k8s.workloads()["unmapped"], "Admitted")["status"] == "True"


def test_with_kueues_dra_gate_off_a_dra_workload_is_inadmissible(k8s: Kube, kueue_sandbox):
    data = yaml.safe_load(kueue_manager_config())
    data["featureGates"] = {"KueueDRAIntegration": False}
    set_config(kueue_sandbox, yaml.safe_dump(data))
    k8s.team(VISION, {H100.name: {DRA_GPUS: (2, 0)}})
    k8s.apply(*dra_training("gated", 1))
    kueue_sandbox.settle()
    reserved = condition(k8s.workloads()["gated"], "QuotaReserved")
    assert reserved["message"] == (
        "Workload uses DRA resources but the KueueDRAIntegration feature gate is not enabled"
    )


def test_without_excluded_prefixes_cpu_is_counted_and_a_gpu_only_queue_admits_nothing(k8s: Kube, kueue_sandbox):
    data = yaml.safe_load(kueue_manager_config())
    del data["resources"]["excludeResourcePrefixes"]
    set_config(kueue_sandbox, yaml.safe_dump(data))
    k8s.team(VISION, {H100.name: {DRA_GPUS: (2, 0)}})
    k8s.apply(*dra_training("counted", 1))
    kueue_sandbox.settle()
    reserved = condition(k8s.workloads()["counted"], "QuotaReserved")
    assert reserved["status"] == "False" and "resource cpu unavailable in ClusterQueue" in reserved["message"]


def test_a_stock_kueue_cluster_is_seeded_with_upstreams_default(tmp_path):
    from sandbox.testing import running_sandbox

    data = yaml.safe_load(KUEUE_PROFILE.read_text())
    data["cluster_setup"] = "stock"
    profile = tmp_path / "demo-kueue-stock.yaml"
    profile.write_text(yaml.safe_dump(data))
    with running_sandbox(profile) as handle:
        cm = client.CoreV1Api(handle.api_client()).read_namespaced_config_map(*CM)
    assert cm.data[KUEUE_CONF_KEY] == STOCK_CONF
