"""The simulated world: scheduling on GPU nodes and the workload controllers."""

from __future__ import annotations

import json
import re

import pytest
from kubernetes.client.exceptions import ApiException

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
H100_SELECTOR = "device.attributes['gpu.nvidia.com'].productName == \"NVIDIA H100 80GB HBM3\""
UNSUPPORTED_SELECTOR = "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('h100')"
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
VOLCANO_SCHED = ("scheduling.volcano.sh", "v1beta1")


def test_a_notebook_reaches_a_running_pod_on_a_mig_node(sandbox, core, custom, make_notebook, events):
    nb = make_notebook("mig-nb", {"nvidia.com/mig-1g.10gb": 1, "cpu": "2", "memory": "8Gi"})
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", nb)
    sandbox.settle()
    pod = core.read_namespaced_pod("mig-nb-0", "default")
    assert pod.status.phase == "Running" and pod.spec.node_name == "a100-mig-0"
    assert pod.metadata.labels["notebook-name"] == "mig-nb" and pod.metadata.labels["statefulset"] == "mig-nb"
    assert pod.metadata.labels["app.kubernetes.io/managed-by"] == "tests"
    assert pod.metadata.owner_references[0].kind == "Notebook"
    assert {"name": "NB_PREFIX", "value": "/notebook/default/mig-nb"} in [
        {"name": e.name, "value": e.value} for e in pod.spec.containers[0].env
    ]
    status = custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", "mig-nb")["status"]
    assert status["readyReplicas"] == 1 and "running" in status["containerState"]
    assert {c["type"] for c in status["conditions"]} >= {"Ready", "PodScheduled"}
    reasons = {e.reason for e in events("mig-nb-0")}
    assert {"Scheduled", "Pulled", "Created", "Started"} <= reasons


def test_a_too_large_notebook_stays_pending_with_a_kube_scheduler_style_event(
    sandbox, core, custom, make_notebook, events
):
    nb = make_notebook("huge", {"nvidia.com/gpu": 99}, product="NVIDIA-H100-80GB-HBM3")
    custom.create_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", nb)
    sandbox.settle()
    sandbox.settle()
    pod = core.read_namespaced_pod("huge-0", "default")
    assert pod.status.phase == "Pending" and pod.spec.node_name is None
    scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    [event] = events("huge-0", reason="FailedScheduling")
    assert event.type == "Warning" and event.source.component == "default-scheduler"
    # the DRA node carries the H100 product label too but advertises no nvidia.com/gpu
    assert event.message == (
        "0/8 nodes are available: 3 Insufficient nvidia.com/gpu, 5 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/8 nodes are available: 3 No preemption victims found for incoming "
        "pod, 5 Preemption is not helpful for scheduling."
    )
    assert re.match(r"^0/\d+ nodes are available: (\d+ [^,]+, )*\d+ [^,]+\. preemption: ", event.message)
    sandbox.advance(120)
    [again] = events("huge-0", reason="FailedScheduling")
    assert again.count == 2


def test_a_pod_without_tolerations_reports_the_gpu_taint(sandbox, core, events):
    pod = {
        "metadata": {"name": "no-tol"},
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
            "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu.shared": "1"}}}],
        },
    }
    core.create_namespaced_pod("default", pod)
    sandbox.settle()
    [event] = events("no-tol", reason="FailedScheduling")
    assert event.message.startswith(
        "0/8 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
        "6 node(s) had untolerated taint {nvidia.com/gpu: present}."
    )


def test_bin_packing_fills_the_busiest_fitting_node_first(sandbox, core):
    def gpu_pod(name: str, gpus: int) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "tolerations": [GPU_TOLERATION],
                "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            },
        }

    core.create_namespaced_pod("default", gpu_pod("first", 2))
    sandbox.settle()
    core.create_namespaced_pod("default", gpu_pod("second", 2))
    sandbox.settle()
    nodes = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("default").items}
    assert nodes["first"] == nodes["second"]


def _runtime(name: str = "torch-volcano") -> dict:
    trainer_pod = {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"}]}}
    node_job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": trainer_pod},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"volcano": {}},
            "template": {"spec": {"replicatedJobs": [node_job]}},
        },
    }


def _trainjob(name: str, queue: str, gpus: int, nodes: int = 2, duration: int = 600) -> dict:
    pod_patch = {
        "metadata": {"labels": {"portal.example.com/workload": name}},
        "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "tolerations": [GPU_TOLERATION]},
    }
    patch = {
        "manager": "portal",
        "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_patch}}}]}}
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "scheduling.volcano.sh/queue-name": queue,
                "sandbox.local/duration-seconds": str(duration),
            },
        },
        "spec": {
            "runtimeRef": {"name": "torch-volcano"},
            "trainer": {
                "numNodes": nodes,
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": gpus}},
            },
            "runtimePatches": [patch],
        },
    }


def test_a_gang_trainjob_waits_for_queue_capacity_then_runs_together_and_succeeds(sandbox, core, custom):
    custom.create_cluster_custom_object(
        *VOLCANO_SCHED,
        "queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "team-a"},
            "spec": {"weight": 1, "capability": {"nvidia.com/gpu": 8}},
        },
    )
    custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", _runtime())
    blocker = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "blocker", "namespace": "default"},
        "spec": {
            "queue": "team-a",
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "tolerations": [GPU_TOLERATION],
                            "containers": [
                                {"name": "w", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": 8}}}
                            ],
                        }
                    },
                }
            ],
        },
    }
    custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "default", "jobs", blocker)
    sandbox.settle()
    assert core.read_namespaced_pod("blocker-worker-0", "default").status.phase == "Running"

    custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", _trainjob("gang", "team-a", gpus=4))
    sandbox.settle()
    pods = core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=gang").items
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Pending"}
    assert all(p.spec.scheduler_name == "volcano" for p in pods)
    assert pods[0].metadata.labels["portal.example.com/workload"] == "gang"
    pg = custom.get_namespaced_custom_object(*VOLCANO_SCHED, "default", "podgroups", "gang")
    assert pg["spec"]["minMember"] == 2 and pg["spec"]["queue"] == "team-a" and pg["status"]["phase"] == "Pending"
    assert "queue resource quota insufficient" in pg["status"]["conditions"][0]["message"]

    custom.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", "default", "jobs", "blocker")
    sandbox.settle()
    pods = core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=gang").items
    assert {p.status.phase for p in pods} == {"Running"} and len(pods) == 2
    assert len({p.spec.node_name for p in pods}) == 1  # bin-packed: 2 x 4 GPUs on one H100 node
    queue = custom.get_cluster_custom_object(*VOLCANO_SCHED, "queues", "team-a")
    assert queue["status"]["allocated"]["nvidia.com/gpu"] == "8" and queue["status"]["running"] == 1
    tj = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "gang")
    assert {c["type"]: c["status"] for c in tj["status"]["conditions"]} == {"Created": "True"}

    sandbox.advance(599)
    assert {
        p.status.phase
        for p in core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=gang").items
    } == {"Running"}
    sandbox.advance(1)
    pods = core.list_namespaced_pod("default", label_selector="jobset.sigs.k8s.io/jobset-name=gang").items
    assert {p.status.phase for p in pods} == {"Succeeded"}
    tj = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "gang")
    complete = next(c for c in tj["status"]["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "True"
    assert tj["status"]["jobsStatus"][0]["succeeded"] == 1


def test_a_trainjob_with_a_missing_runtime_says_so_and_creates_nothing(sandbox, core, custom):
    body = _trainjob("orphan", "default", gpus=1)
    body["spec"]["runtimeRef"]["name"] = "does-not-exist"
    custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
    sandbox.settle()
    tj = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "orphan")
    [created] = tj["status"]["conditions"]
    assert (created["type"], created["status"], created["reason"]) == ("Created", "False", "JobsBuildFailed")
    assert "does-not-exist" in created["message"]
    assert core.list_namespaced_pod("default").items == []


def test_a_suspended_trainjob_has_no_pods(sandbox, core, custom):
    custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", _runtime())
    body = _trainjob("paused", "default", gpus=1)
    body["spec"]["suspend"] = True
    custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
    sandbox.settle()
    assert core.list_namespaced_pod("default").items == []
    custom.patch_namespaced_custom_object(*TRAINER, "default", "trainjobs", "paused", {"spec": {"suspend": False}})
    sandbox.settle()
    assert len(core.list_namespaced_pod("default").items) == 2


def test_the_stopped_annotation_removes_the_notebook_pod_and_removing_it_restarts(
    sandbox, core, custom, make_notebook, events
):
    custom.create_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "default",
        "notebooks",
        make_notebook("sleepy", {"cpu": "1", "memory": "1Gi"}, product=None),
    )
    sandbox.settle()
    assert core.read_namespaced_pod("sleepy-0", "default").status.phase == "Running"
    custom.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "default",
        "notebooks",
        "sleepy",
        {"metadata": {"annotations": {"kubeflow-resource-stopped": "2026-01-01T00:00:00Z"}}},
    )
    sandbox.settle()
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("sleepy-0", "default")
    assert err.value.status == 404
    status = custom.get_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", "sleepy")["status"]
    assert status["readyReplicas"] == 0
    assert "Killing" in [e.reason for e in events("sleepy-0")]
    custom.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "default",
        "notebooks",
        "sleepy",
        {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}},
    )
    sandbox.settle()
    assert core.read_namespaced_pod("sleepy-0", "default").status.phase == "Running"


def test_deleting_a_notebook_collects_its_pod(sandbox, core, custom, make_notebook):
    custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "notebooks", make_notebook("brief", {"cpu": "1"}, product=None)
    )
    sandbox.settle()
    custom.delete_namespaced_custom_object("kubeflow.org", "v1", "default", "notebooks", "brief")
    sandbox.settle()
    assert core.list_namespaced_pod("default").items == []


def _isvc(name: str, **predictor) -> dict:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "predictor": {
                "model": {
                    "modelFormat": {"name": "sklearn"},
                    "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model",
                },
                **predictor,
            }
        },
    }


def test_an_inference_service_becomes_ready_with_a_url(sandbox, core, custom):
    custom.create_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", "default", "inferenceservices", _isvc("iris", minReplicas=2)
    )
    sandbox.settle()
    isvc = custom.get_namespaced_custom_object("serving.kserve.io", "v1beta1", "default", "inferenceservices", "iris")
    status = isvc["status"]
    assert status["url"] == "http://iris.default.example.com"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "IngressReady": "True",
        "PredictorReady": "True",
        "Ready": "True",
    }
    assert status["components"]["predictor"]["latestReadyRevision"] == "iris-predictor-00001"
    assert status["components"]["predictor"]["traffic"] == [
        {"revisionName": "iris-predictor-00001", "percent": 100, "latestRevision": True}
    ]
    pods = core.list_namespaced_pod("default", label_selector="serving.kserve.io/inferenceservice=iris").items
    assert len(pods) == 2 and all(re.match(r"^iris-predictor-[0-9a-f]{10}-[a-z0-9]{5}$", p.metadata.name) for p in pods)
    assert pods[0].spec.containers[0].name == "kserve-container"


def test_a_canary_rollout_keeps_the_previous_revision_and_splits_traffic(sandbox, core, custom):
    group = ("serving.kserve.io", "v1beta1", "default", "inferenceservices")
    custom.create_namespaced_custom_object(*group, _isvc("canary"))
    sandbox.settle()
    new_model = {
        "spec": {
            "predictor": {
                "canaryTrafficPercent": 10,
                "model": {"storageUri": "gs://kfserving-examples/models/sklearn/2.0/model"},
            }
        }
    }
    custom.patch_namespaced_custom_object(*group[:3], "inferenceservices", "canary", new_model)
    sandbox.settle()
    status = custom.get_namespaced_custom_object(*group, "canary")["status"]
    assert status["components"]["predictor"]["traffic"] == [
        {"revisionName": "canary-predictor-00002", "percent": 10, "latestRevision": True, "tag": "latest"},
        {"revisionName": "canary-predictor-00001", "percent": 90, "latestRevision": False, "tag": "prev"},
    ]
    assert len(core.list_namespaced_pod("default").items) == 2
    custom.patch_namespaced_custom_object(
        *group[:3], "inferenceservices", "canary", {"spec": {"predictor": {"canaryTrafficPercent": 100}}}
    )
    sandbox.settle()
    status = custom.get_namespaced_custom_object(*group, "canary")["status"]
    predictor = status["components"]["predictor"]
    assert predictor["traffic"][0]["revisionName"] == "canary-predictor-00002"
    assert predictor["previousRolledoutRevision"] == "canary-predictor-00001"
    assert len(core.list_namespaced_pod("default").items) == 1


def raw(api, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """A request the typed client has no method for (resource.k8s.io/v1), through the same ApiClient."""
    response = api.call_api(
        *api.param_serialize(
            method, path, body=body, auth_settings=["BearerToken"], header_params={"Content-Type": "application/json"}
        )
    )
    return response.status, json.loads(response.read())


def test_a_dra_claim_is_allocated_a_gpu_on_the_dra_node(sandbox, core, api):
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
    pod = {
        "metadata": {"name": "dra-pod"},
        "spec": {
            "tolerations": [GPU_TOLERATION],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-h100"}],
            "containers": [
                {
                    "name": "cuda",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
    core.create_namespaced_pod("default", pod)
    sandbox.settle()
    running = core.read_namespaced_pod("dra-pod", "default")
    assert running.status.phase == "Running" and running.spec.node_name == "h100-dra-0"
    claim_name = running.status.resource_claim_statuses[0].resource_claim_name
    assert claim_name.startswith("dra-pod-gpu-")
    _, claim = raw(api, "GET", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{claim_name}")
    [result] = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["request"]) == ("gpu.nvidia.com", "h100-dra-0", "gpu")
    assert result["device"].startswith("gpu-")
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "dra-pod", "uid": running.metadata.uid}]


def test_an_unsupported_cel_selector_is_rejected_with_a_clear_message(sandbox, api):
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "fancy", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": UNSUPPORTED_SELECTOR}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    code, status = raw(api, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates", template)
    assert code == 422
    [cause] = status["details"]["causes"]
    assert cause["field"] == "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert "the sandbox cannot evaluate CEL term" in cause["message"]


def test_resource_quota_tracks_usage_and_rejects_an_over_quota_pod(sandbox, core):
    core.create_namespace({"metadata": {"name": "team-q"}})
    core.create_namespaced_resource_quota(
        "team-q", {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2", "pods": "10"}}}
    )

    def gpu_pod(name: str, gpus: int) -> dict:
        return {
            "metadata": {"name": name},
            "spec": {
                "tolerations": [GPU_TOLERATION],
                "containers": [{"name": "c", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            },
        }

    core.create_namespaced_pod("team-q", gpu_pod("one", 1))
    sandbox.settle()
    quota = core.read_namespaced_resource_quota("gpus", "team-q")
    assert quota.status.hard == {"pods": "10", "requests.nvidia.com/gpu": "2"}
    assert quota.status.used == {"pods": "1", "requests.nvidia.com/gpu": "1"}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("team-q", gpu_pod("two", 2))
    assert err.value.status == 403
    assert json.loads(err.value.body)["message"] == (
        'pods "two" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, '
        "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2"
    )


def test_a_notebook_over_quota_gets_a_failed_create_event_once(sandbox, core, custom, make_notebook, events):
    core.create_namespace({"metadata": {"name": "team-tight"}})
    core.create_namespaced_resource_quota(
        "team-tight", {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "0"}}}
    )
    custom.create_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        "team-tight",
        "notebooks",
        make_notebook("denied", {"nvidia.com/gpu": 1}, product="NVIDIA-H100-80GB-HBM3", namespace="team-tight"),
    )
    sandbox.settle()
    sandbox.settle()
    [event] = events("denied", namespace="team-tight", reason="FailedCreate")
    assert "exceeded quota: q" in event.message and event.count == 1


def test_time_sliced_gpus_are_shared_by_several_pods(sandbox, core):
    for i in range(5):
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
    pods = core.list_namespaced_pod("default").items
    assert {p.status.phase for p in pods} == {"Running"}
    assert {p.spec.node_name for p in pods} == {"l4-shared-0"}


RESTRICTED_SC = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


def test_a_restricted_namespace_rejects_pods_that_break_the_pod_security_standard(core):
    core.create_namespace(
        {"metadata": {"name": "locked", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    )
    loose = {"metadata": {"name": "loose"}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("locked", loose)
    assert err.value.status == 403
    message = json.loads(err.value.body)["message"]
    assert message.startswith('pods "loose" is forbidden: violates PodSecurity "restricted:latest": ')
    assert 'allowPrivilegeEscalation != false (container "c" must set' in message
    assert 'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])' in message
    tight = {
        "metadata": {"name": "tight"},
        "spec": {"containers": [{"name": "c", "image": "x:1", "securityContext": RESTRICTED_SC}]},
    }
    assert core.create_namespaced_pod("locked", tight).metadata.name == "tight"


def test_a_statefulset_runs_its_pods_and_scales_to_zero(sandbox, core, api):
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "dra-nb", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "serviceName": "dra-nb",
            "selector": {"matchLabels": {"statefulset": "dra-nb"}},
            "template": {
                "metadata": {"labels": {"statefulset": "dra-nb", "notebook-name": "dra-nb"}},
                "spec": {"containers": [{"name": "dra-nb", "image": "x:1", "resources": {"limits": {"cpu": 1}}}]},
            },
        },
    }
    assert raw(api, "POST", "/apis/apps/v1/namespaces/default/statefulsets", sts)[0] == 201
    sandbox.settle()
    pod = core.read_namespaced_pod("dra-nb-0", "default")
    assert pod.status.phase == "Running" and pod.metadata.owner_references[0].kind == "StatefulSet"
    assert pod.spec.containers[0].resources.limits == {"cpu": "1"}
    _, status = raw(api, "GET", "/apis/apps/v1/namespaces/default/statefulsets/dra-nb")
    assert status["status"]["readyReplicas"] == 1
    scaled = {**status, "spec": {**status["spec"], "replicas": 0}}
    assert raw(api, "PUT", "/apis/apps/v1/namespaces/default/statefulsets/dra-nb", scaled)[0] == 200
    sandbox.settle()
    assert core.list_namespaced_pod("default").items == []


def test_a_trainjob_past_its_active_deadline_fails(sandbox, core, custom):
    custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", _runtime())
    body = _trainjob("slowpoke", "default", gpus=1, duration=3600)
    body["spec"]["activeDeadlineSeconds"] = 300
    custom.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", body)
    sandbox.settle()
    sandbox.advance(300)
    tj = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "slowpoke")
    failed = next(c for c in tj["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "DeadlineExceeded")
    assert {p.status.phase for p in core.list_namespaced_pod("default").items} == {"Failed"}


def test_services_get_a_cluster_ip_and_port_defaults(core):
    svc = core.create_namespaced_service(
        "default", {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    )
    assert svc.spec.type == "ClusterIP" and svc.spec.cluster_ip.startswith("10.96.")
    assert (svc.spec.ports[0].protocol, svc.spec.ports[0].target_port) == ("TCP", 80)
