"""The DCGM-exporter look-alike at /metrics."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from sandbox.testing import running_sandbox

PROFILE_START = 1_767_225_600.0


def samples(text: str, name: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def mig_notebook(make_notebook, name: str = "mig-nb", **annotations: str) -> dict:
    return make_notebook(name, {"nvidia.com/mig-1g.10gb": "1", "cpu": "1", "memory": "4Gi"}, **annotations)


def test_metrics_attribute_a_running_notebooks_mig_instance_to_its_pod(sandbox, custom, make_notebook):
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", mig_notebook(make_notebook))
    sandbox.settle()
    text = sandbox.metrics()
    assert "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge" in text
    [held] = [s for s in samples(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") if s.labels["pod"] == "mig-nb-0"]
    assert held.labels["namespace"] == "default" and held.labels["container"] == "mig-nb"
    assert held.labels["GPU_I_PROFILE"] == "1g.10gb" and held.labels["Hostname"] == "a100-mig-0"
    assert held.labels["modelName"] == "NVIDIA A100-SXM4-80GB"
    assert re.match(r"^GPU-[0-9a-f]{8}-", held.labels["UUID"]) and held.labels["device"].startswith("nvidia")
    assert 0.0 <= held.value < 1.0
    mig_utils = [s for s in samples(text, "DCGM_FI_DEV_GPU_UTIL") if "GPU_I_PROFILE" in s.labels]
    assert mig_utils == []  # real DCGM reports nothing useful there
    used = [s for s in samples(text, "DCGM_FI_DEV_FB_USED") if s.labels["pod"] == "mig-nb-0"][0]
    assert 0 < used.value < 10240


def test_metrics_cover_every_gpu_and_mig_instance_and_idle_devices_are_quiet(sandbox):
    text = sandbox.metrics()
    engine = samples(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    # 16 H100 + 8x7 A100 MIG instances + 8 L4 + 8 DRA H100
    assert len(engine) == 16 + 56 + 8 + 8
    assert all(s.value == 0.0 and s.labels["pod"] == "" for s in engine)
    assert {s.value for s in samples(text, "DCGM_FI_DEV_FB_USED")} == {0.0}
    assert len(samples(text, "DCGM_FI_DEV_GPU_UTIL")) == 16 + 8 + 8


def test_a_pinned_activity_annotation_sets_the_engine_activity(sandbox, custom, make_notebook):
    nb = mig_notebook(make_notebook, "pinned", **{"sandbox.local/activity": "0.75"})
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", nb)
    sandbox.settle()
    [held] = [s for s in samples(sandbox.metrics(), "DCGM_FI_PROF_GR_ENGINE_ACTIVE") if s.labels["pod"] == "pinned-0"]
    assert held.value == 0.75


def test_training_pods_are_busy_on_their_gpus(sandbox, core):
    pod = {
        "metadata": {"name": "trainer", "labels": {"jobset.sigs.k8s.io/jobset-name": "t"}},
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        },
    }
    core.create_namespaced_pod("default", pod)
    sandbox.settle()
    for _ in range(5):
        sandbox.advance(37)
        held = [s for s in samples(sandbox.metrics(), "DCGM_FI_DEV_GPU_UTIL") if s.labels["pod"] == "trainer"]
        assert len(held) == 2 and all(85 <= s.value <= 98 for s in held)


def test_metrics_are_a_deterministic_function_of_the_seed_and_the_clock(make_notebook):
    def scrape(seed: int) -> str:
        with running_sandbox(seed=seed, start_time=PROFILE_START) as sb:
            from kubernetes import client

            custom = client.CustomObjectsApi(sb.api_client())
            custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", "default", "notebooks", mig_notebook(make_notebook)
            )
            sb.settle()
            sb.advance(3600)
            return sb.metrics()

    first, again, other = scrape(7), scrape(7), scrape(8)
    assert first == again
    assert first != other
