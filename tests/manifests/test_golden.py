"""Golden tests: the exact objects of four representative workloads, written out by hand.

A change here is a change to what runs on the cluster: read the diff as a platform
engineer would before updating an expected dict. The repeated security contexts are
spelled out once as literals below; nothing is imported from the builders.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.kube.manifests import notebook_start_patch, notebook_stop_patch, workload_objects
from jobs.kube.names import PRIORITY_GUARANTEED
from tests.manifests.conftest import spec

POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 100,
    "fsGroup": 100,
    "fsGroupChangePolicy": "OnRootMismatch",
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
GPU_TOLERATIONS = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
SHM_VOLUME = {"name": "dshm", "emptyDir": {"medium": "Memory"}}
SHM_MOUNT = {"name": "dshm", "mountPath": "/dev/shm"}


def test_a_notebook_on_a_mig_slice_with_a_workspace():
    s = spec(
        "notebook",
        name="retina-explore",
        workload_id=101,
        offering="a100-80gb-1g.10gb",
        workspace_gib=20,
        labels={"project": "retina"},
        env={"HF_HOME": "/home/jovyan/.cache"},
        cpu="4",
        memory="16Gi",
    )
    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "101",
        "gpu-portal.io/kind": "notebook",
    }
    assert workload_objects(s) == [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "retina-explore-workspace", "namespace": "team-vision", "labels": labels},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "20Gi"}},
            },
        },
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "Notebook",
            "metadata": {
                "name": "retina-explore",
                "namespace": "team-vision",
                "labels": {"project": "retina", **labels},
                "annotations": {"scheduling.volcano.sh/queue-name": "team-vision"},
            },
            "spec": {
                "template": {
                    "spec": {
                        "schedulerName": "volcano",
                        "priorityClassName": "gpu-portal-preemptible",
                        "serviceAccountName": "gpu-portal-workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": POD_SECURITY,
                        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                        "tolerations": GPU_TOLERATIONS,
                        "containers": [
                            {
                                "name": "retina-explore",
                                "image": "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-07",
                                # Not a Kubeflow image: started under the prefix the controller sets.
                                "args": [
                                    "jupyter",
                                    "lab",
                                    "--ip=0.0.0.0",
                                    "--port=8888",
                                    "--no-browser",
                                    "--ServerApp.base_url=$(NB_PREFIX)",
                                    "--ServerApp.token=",
                                    "--ServerApp.password=",
                                    "--ServerApp.allow_origin=*",
                                    "--ServerApp.allow_remote_access=True",
                                ],
                                "env": [{"name": "HF_HOME", "value": "/home/jovyan/.cache"}],
                                "resources": {
                                    "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/mig-1g.10gb": "1"},
                                    "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/mig-1g.10gb": "1"},
                                },
                                "securityContext": CONTAINER_SECURITY,
                                "volumeMounts": [SHM_MOUNT, {"name": "workspace", "mountPath": "/home/jovyan"}],
                                # Ready when the URL the user opens answers (Jupyter's API under the prefix).
                                "readinessProbe": {
                                    "httpGet": {"path": "/notebook/team-vision/retina-explore/api", "port": 8888},
                                    "periodSeconds": 10,
                                },
                            }
                        ],
                        "volumes": [
                            SHM_VOLUME,
                            {"name": "workspace", "persistentVolumeClaim": {"claimName": "retina-explore-workspace"}},
                        ],
                    }
                }
            },
        },
    ]


def test_a_two_node_torch_trainjob_on_h100s_at_the_guaranteed_priority():
    s = replace(
        spec(
            "training",
            name="llm-finetune",
            workload_id=102,
            offering="h100-80gb",
            gpus_per_replica=8,
            replicas=2,
            cpu="64",
            memory="512Gi",
            args=["--epochs", "3"],
            max_runtime_seconds=86400,
        ),
        priority_class=PRIORITY_GUARANTEED,
    )
    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "102",
        "gpu-portal.io/kind": "training",
    }
    per_node = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}
    assert workload_objects(s) == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {
                "name": "llm-finetune",
                "namespace": "team-vision",
                "labels": labels,
                "annotations": {"scheduling.volcano.sh/queue-name": "team-vision"},
            },
            "spec": {
                "runtimeRef": {
                    "apiGroup": "trainer.kubeflow.org",
                    "kind": "ClusterTrainingRuntime",
                    "name": "gpu-portal-torch-distributed-guaranteed",
                },
                "trainer": {
                    "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                    "command": ["torchrun", "train.py"],
                    "args": ["--epochs", "3"],
                    "numNodes": 2,
                    "numProcPerNode": 8,
                    "resourcesPerNode": {"requests": per_node, "limits": per_node},
                },
                "runtimePatches": [
                    {
                        "manager": "gpu-portal.io/manager",
                        "trainingRuntimeSpec": {
                            "template": {
                                "metadata": {
                                    "labels": labels,
                                    "annotations": {"scheduling.volcano.sh/queue-name": "team-vision"},
                                },
                                "spec": {
                                    "replicatedJobs": [
                                        {
                                            "name": "node",
                                            "template": {
                                                "spec": {
                                                    "template": {
                                                        "metadata": {"labels": labels},
                                                        "spec": {
                                                            "serviceAccountName": "gpu-portal-workload",
                                                            "securityContext": POD_SECURITY,
                                                            "nodeSelector": {
                                                                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"
                                                            },
                                                            "tolerations": GPU_TOLERATIONS,
                                                            "containers": [
                                                                {"name": "node", "securityContext": CONTAINER_SECURITY}
                                                            ],
                                                        },
                                                    }
                                                }
                                            },
                                        }
                                    ]
                                },
                            }
                        },
                    }
                ],
                "activeDeadlineSeconds": 86400,
            },
        }
    ]


def test_an_endpoint_serving_a_model_on_a_shared_l4():
    s = spec(
        "endpoint",
        name="iris",
        workload_id=103,
        offering="l4-shared",
        min_replicas=1,
        max_replicas=3,
        annotations={"description": "iris classifier"},
    )
    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "103",
        "gpu-portal.io/kind": "endpoint",
    }
    resources = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu.shared": "1"}
    assert workload_objects(s) == [
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {
                "name": "iris",
                "namespace": "team-vision",
                "labels": labels,
                # KServe's install default is Knative: the portal always names the mode it built for.
                "annotations": {"description": "iris classifier", "serving.kserve.io/deploymentMode": "Standard"},
            },
            "spec": {
                "predictor": {
                    "minReplicas": 1,
                    "maxReplicas": 3,
                    "labels": labels,
                    "annotations": {"scheduling.volcano.sh/queue-name": "team-vision"},
                    "schedulerName": "volcano",
                    "priorityClassName": "gpu-portal-preemptible",
                    "serviceAccountName": "gpu-portal-workload",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": POD_SECURITY,
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "tolerations": GPU_TOLERATIONS,
                    "volumes": [SHM_VOLUME],
                    "model": {
                        "modelFormat": {"name": "sklearn"},
                        "storageUri": "s3://models/iris/v1",
                        "resources": {"requests": resources, "limits": resources},
                        "securityContext": CONTAINER_SECURITY,
                        "volumeMounts": [SHM_MOUNT],
                    },
                }
            },
        }
    ]


def test_a_notebook_on_a_dra_gpu_gets_a_claim_template_and_runs_as_a_statefulset():
    # A Kubeflow notebook image serves under NB_PREFIX by itself: no start arguments.
    s = spec(
        "notebook",
        name="dra-explore",
        workload_id=104,
        offering="h100-80gb-dra",
        image="ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0",
    )
    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "104",
        "gpu-portal.io/kind": "notebook",
    }
    assert workload_objects(s) == [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "dra-explore-gpu", "namespace": "team-vision", "labels": labels},
            "spec": {
                "metadata": {"labels": labels},
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {
                                    "deviceClassName": "gpu.nvidia.com",
                                    "allocationMode": "ExactCount",
                                    "count": 1,
                                    "selectors": [
                                        {
                                            "cel": {
                                                "expression": "device.attributes['gpu.nvidia.com'].productName"
                                                " == 'NVIDIA H100 80GB HBM3'"
                                            }
                                        }
                                    ],
                                },
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "dra-explore", "namespace": "team-vision", "labels": labels},
            "spec": {
                "type": "ClusterIP",
                "selector": {"statefulset": "dra-explore"},
                "ports": [{"name": "http-dra-explore", "port": 80, "targetPort": 8888, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "dra-explore", "namespace": "team-vision", "labels": labels},
            "spec": {
                "replicas": 1,
                "serviceName": "dra-explore",
                "selector": {"matchLabels": {"statefulset": "dra-explore"}},
                "template": {
                    "metadata": {
                        "labels": {**labels, "statefulset": "dra-explore", "notebook-name": "dra-explore"},
                        "annotations": {"scheduling.volcano.sh/queue-name": "team-vision"},
                    },
                    "spec": {
                        "schedulerName": "volcano",
                        "priorityClassName": "gpu-portal-preemptible",
                        "serviceAccountName": "gpu-portal-workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": POD_SECURITY,
                        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                        "tolerations": GPU_TOLERATIONS,
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "dra-explore-gpu"}],
                        "containers": [
                            {
                                "name": "dra-explore",
                                "image": "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-pytorch-cuda-full:v1.10.0",
                                "env": [{"name": "NB_PREFIX", "value": "/notebook/team-vision/dra-explore"}],
                                "resources": {
                                    "requests": {"cpu": "2", "memory": "8Gi"},
                                    "limits": {"cpu": "2", "memory": "8Gi"},
                                    "claims": [{"name": "gpu"}],
                                },
                                "securityContext": CONTAINER_SECURITY,
                                "volumeMounts": [SHM_MOUNT],
                                "ports": [{"name": "notebook-port", "containerPort": 8888, "protocol": "TCP"}],
                                "workingDir": "/home/jovyan",
                                "readinessProbe": {
                                    "httpGet": {"path": "/notebook/team-vision/dra-explore/api", "port": 8888},
                                    "periodSeconds": 10,
                                },
                            }
                        ],
                        "volumes": [SHM_VOLUME],
                    },
                },
            },
        },
    ]


def test_stopping_and_starting_a_notebook_are_merge_patches_on_its_main_object():
    assert notebook_stop_patch() == {"metadata": {"annotations": {"kubeflow-resource-stopped": "true"}}}
    assert notebook_start_patch() == {"metadata": {"annotations": {"kubeflow-resource-stopped": None}}}
    dra = spec("notebook", offering="h100-80gb-dra")
    assert notebook_stop_patch(dra) == {"spec": {"replicas": 0}}
    assert notebook_start_patch(dra) == {"spec": {"replicas": 1}}


def test_a_stopped_notebook_is_built_stopped():
    (nb,) = workload_objects(spec("notebook", stopped=True))
    assert nb["metadata"]["annotations"]["kubeflow-resource-stopped"] == "true"
    *_, sts = workload_objects(spec("notebook", offering="h100-80gb-dra", stopped=True))
    assert sts["spec"]["replicas"] == 0
