"""The notebook controller keeps Kubeflow's ``notebooks.kubeflow.org/last-activity`` annotation."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

LAST = "notebooks.kubeflow.org/last-activity"
L4 = {"nvidia.com/gpu.shared": "1"}


def annotations(custom, name: str) -> dict:
    return custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", name)["metadata"].get(
        "annotations", {}
    )


def create(custom, make_notebook, name: str, activity: str) -> None:
    nb = make_notebook(name, L4, product="NVIDIA-L4", **{"sandbox.local/activity": activity})
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", nb)


def test_last_activity_is_set_when_the_notebook_first_runs(sandbox, custom, make_notebook):
    create(custom, make_notebook, "quiet", "0.0")
    sandbox.settle()
    assert annotations(custom, "quiet")[LAST] == "2026-01-01T00:00:00Z"


def test_busy_kernels_move_last_activity_and_a_quiet_notebook_keeps_its_old_one(sandbox, custom, core, make_notebook):
    create(custom, make_notebook, "quiet", "0.0")
    create(custom, make_notebook, "busy", "0.8")
    sandbox.settle()
    sandbox.advance(600)
    sandbox.settle()
    assert annotations(custom, "busy")[LAST] == "2026-01-01T00:10:00Z"
    assert annotations(custom, "quiet")[LAST] == "2026-01-01T00:00:00Z"
    # the annotation is the controller's, not the pod template's: the pod is not replaced
    assert LAST not in (core.read_namespaced_pod("busy-0", "default").metadata.annotations or {})
    assert core.read_namespaced_pod("busy-0", "default").status.start_time.isoformat().startswith("2026-01-01T00:00")


def test_a_busy_neighbour_on_the_same_gpu_does_not_make_a_notebook_active(sandbox, custom, make_notebook):
    # Five notebooks on l4-shared-0's four GPUs: the fifth shares a GPU with the first.
    for i in range(4):
        create(custom, make_notebook, f"n{i}", "0.0" if i == 0 else "0.9")
    sandbox.settle()
    create(custom, make_notebook, "neighbour", "0.95")
    sandbox.settle()
    uuids = {
        s.labels["pod"]: s.labels["UUID"]
        for f in text_string_to_metric_families(sandbox.metrics())
        for s in f.samples
        if s.name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE" and s.labels.get("pod") in ("n0-0", "neighbour-0")
    }
    assert uuids["n0-0"] == uuids["neighbour-0"]
    sandbox.advance(600)
    sandbox.settle()
    assert annotations(custom, "n0")[LAST] == "2026-01-01T00:00:00Z"
    assert annotations(custom, "neighbour")[LAST] == "2026-01-01T00:10:00Z"


def test_stopping_a_notebook_removes_its_culling_annotations_and_a_restart_starts_afresh(
    sandbox, custom, make_notebook
):
    create(custom, make_notebook, "nb", "0.0")
    sandbox.settle()
    assert annotations(custom, "nb")["notebooks.kubeflow.org/last_activity_check_timestamp"] == "2026-01-01T00:00:00Z"
    patch = {"metadata": {"annotations": {"kubeflow-resource-stopped": "2026-01-01T00:05:00Z"}}}
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", "nb", patch)
    sandbox.settle()
    assert LAST not in annotations(custom, "nb")
    sandbox.advance(3600)
    custom.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "default",
        "notebooks",
        "nb",
        {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}},
    )
    sandbox.settle()
    assert annotations(custom, "nb")[LAST] == "2026-01-01T01:00:00Z"
