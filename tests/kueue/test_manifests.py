"""The builders on a Kueue cluster: every workload on every demo offering, and two goldens.

The same matrix as tests/manifests/test_matrix.py with ``queueing="kueue"``: objects fit
their upstream CRDs (Kueue, Trainer, KServe, Notebook) or strict core Kubernetes, pods meet
the restricted Pod Security Standard, the object Kueue queues carries the LocalQueue label
(and is suspended where Kueue's integration resumes it), and nothing is left of Volcano.

JobSet's CRD is not in ../shared/reference: a JobSet's fields are checked against JobSet
v1alpha2's API as listed below, and each replicated job as the core batch/v1 Job it is.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest

from jobs.kube import labels, names
from jobs.kube.manifests import (
    cluster_objects,
    cluster_training_runtimes,
    main_object_type,
    team_objects,
    training_backend,
    workload_objects,
)
from jobs.specs import TeamQuota, WorkloadSpec
from quotas import kueue
from sandbox.controllers import kueue as sandbox_kueue
from tests.kube_schemas import is_core, requires_reference, validate_any, validate_core, validate_custom
from tests.kueue.conftest import H100, VISION, kueue_spec
from tests.manifests.conftest import OFFERINGS, spec
from tests.manifests.pods import pods_of
from tests.manifests.pss import assert_restricted
from tests.manifests.test_matrix import CASES, COMMON, GPUS

MATRIX = [(o, c) for o in GPUS for c in CASES]
ids = [f"{o}-{c}" for o, c in MATRIX]
QUEUE = {"kueue.x-k8s.io/queue-name": "gpu-portal"}

# JobSet v1alpha2 (sigs.k8s.io/jobset, api/jobset/v1alpha2/jobset_types.go): the fields the portal may set.
JOBSET_SPEC_FIELDS = {
    "replicatedJobs",
    "network",
    "successPolicy",
    "failurePolicy",
    "startupPolicy",
    "suspend",
    "coordinator",
    "managedBy",
    "ttlSecondsAfterFinished",
}
JOBSET_FIELDS = {
    "network": {"enableDNSHostnames", "subdomain", "publishNotReadyAddresses"},
    "successPolicy": {"operator", "targetReplicatedJobs"},
    "failurePolicy": {"maxRestarts", "restartStrategy", "rules"},
}
REPLICATED_JOB_FIELDS = {"name", "groupName", "template", "replicas", "dependsOn"}
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def build(offering: str, case: str) -> tuple[WorkloadSpec, list[dict[str, Any]]]:
    fields = {**COMMON, **CASES[case]}
    s = kueue_spec(
        fields.pop("kind"), offering=offering, gpus_per_replica=GPUS[offering], name=case, workload_id=42, **fields
    )
    return s, workload_objects(s)


def validate_jobset(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    assert set(spec) <= JOBSET_SPEC_FIELDS, set(spec) - JOBSET_SPEC_FIELDS
    for field, allowed in JOBSET_FIELDS.items():
        assert set(spec.get(field, {})) <= allowed, (field, spec[field])
    jobs = spec["replicatedJobs"]
    assert len({j["name"] for j in jobs}) == len(jobs)
    for job in jobs:
        assert set(job) <= REPLICATED_JOB_FIELDS
        assert _DNS_LABEL.fullmatch(job["name"]) and isinstance(job["replicas"], int) and job["replicas"] >= 1
        validate_core(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"{obj['metadata']['name']}-{job['name']}-0", "namespace": "ns"},
                "spec": job["template"]["spec"],
            }
        )
    success = spec.get("successPolicy")
    if success:
        assert success["operator"] in ("All", "Any")
        assert set(success["targetReplicatedJobs"]) <= {j["name"] for j in jobs}
    assert len(obj["metadata"]["name"]) <= 63 and _DNS_LABEL.fullmatch(spec["network"]["subdomain"])


def queued_pods(objects: list[dict[str, Any]]):
    """The pod templates Kueue's pod integration gates (the queue label is on the pod itself)."""
    return [p for o in objects for p in pods_of(o) if p.labels.get("kueue.x-k8s.io/queue-name")]


@requires_reference
@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_object_fits_its_upstream_schema_on_a_kueue_cluster(offering, case):
    _, objects = build(offering, case)
    for obj in objects:
        if obj["kind"] == "JobSet":
            validate_jobset(obj)
        else:
            validate_any(obj)


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_pod_is_restricted_a_valid_core_pod_and_left_to_the_default_scheduler(offering, case):
    s, objects = build(offering, case)
    pods = [p for obj in objects for p in pods_of(obj)]
    assert pods
    for pod in pods:
        assert_restricted(pod.spec, pod.annotations)
        validate_core(pod.as_object())
        assert "schedulerName" not in pod.spec
        assert pod.spec["priorityClassName"] == s.priority_class
        assert pod.spec["serviceAccountName"] == "gpu-portal-workload"


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_nothing_is_left_of_volcano(offering, case):
    _, objects = build(offering, case)
    assert "volcano" not in json.dumps(objects)


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_the_queued_object_names_the_local_queue_and_nothing_else_does(offering, case):
    s, objects = build(offering, case)
    main = objects[-1]
    others = objects[:-1]
    if main["kind"] in ("TrainJob", "JobSet"):
        # Kueue's job integrations queue the job; its pods must not be queued a second time.
        assert main["metadata"]["labels"].items() >= QUEUE.items()
        assert main["spec"]["suspend"] is True
        assert not queued_pods(objects)
    else:
        # Notebook, DRA notebook and endpoint pods go through Kueue's pod integration.
        assert len(queued_pods([main])) == 1
        if main["kind"] == "StatefulSet":
            assert main["metadata"]["labels"].items() >= QUEUE.items()
    for obj in others:
        assert "kueue.x-k8s.io/queue-name" not in obj["metadata"].get("labels", {}), obj["kind"]
        assert not queued_pods([obj])


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_the_gpu_request_still_comes_from_the_offering(offering, case):
    _, objects = build(offering, case)
    o = OFFERINGS[offering]
    for obj in objects:
        for pod in pods_of(obj):
            gpu_pod = "launcher" not in pod.where
            for c in pod.spec["containers"]:
                limits = c["resources"]["limits"]
                assert c["resources"]["requests"] == limits
                gpu_keys = {k for k in limits if k.startswith("nvidia.com/")}
                if o.request_mode == "device-plugin" and gpu_pod:
                    assert gpu_keys == {o.resource_name} and limits[o.resource_name] == str(GPUS[offering])
                else:
                    assert not gpu_keys
            claims = pod.spec.get("resourceClaims")
            assert bool(claims) == (o.request_mode == "dra" and gpu_pod)


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_objects_come_in_apply_order_with_the_main_object_last(offering, case):
    s, objects = build(offering, case)
    assert (objects[-1]["apiVersion"], objects[-1]["kind"]) == main_object_type(s)


def test_torch_off_dra_is_a_trainjob_and_all_other_training_a_jobset():
    backends = {(o, c): training_backend(build(o, c)[0]) for o in GPUS for c in CASES if CASES[c]["kind"] == "training"}
    for (offering, case), backend in backends.items():
        torch_trainjob = case.startswith("torch") and offering != "h100-80gb-dra"
        assert backend == ("trainjob" if torch_trainjob else "jobset"), (offering, case)
    assert main_object_type(build("cpu", "mpi-2-nodes")[0]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")


def test_the_volcano_default_is_what_a_spec_without_a_backend_builds():
    s = spec("training", framework="custom", replicas=3)
    assert s.queueing == "volcano"
    assert workload_objects(replace(s, queueing="volcano")) == workload_objects(s)
    assert workload_objects(s)[-1]["apiVersion"] == "batch.volcano.sh/v1alpha1"


def test_a_trainjob_is_suspended_in_the_local_queue_on_the_kueue_runtime_of_its_priority_class():
    s = kueue_spec(
        "training",
        name="finetune",
        workload_id=9,
        replicas=2,
        gpus_per_replica=4,
        max_runtime_seconds=3600,
        annotations={"example.com/run": "nightly"},
    )
    (job,) = workload_objects(s)
    assert job["metadata"] == {
        "name": "finetune",
        "namespace": "team-vision",
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "gpu-portal.io/team": "vision",
            "gpu-portal.io/workload-id": "9",
            "gpu-portal.io/kind": "training",
            "kueue.x-k8s.io/queue-name": "gpu-portal",
        },
        "annotations": {"example.com/run": "nightly"},
    }
    assert list(job["spec"]) == ["runtimeRef", "suspend", "trainer", "runtimePatches", "activeDeadlineSeconds"]
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "gpu-portal-torch-distributed-kueue-guaranteed",
    }
    assert job["spec"]["suspend"] is True
    template = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]
    assert template["metadata"] == {
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "gpu-portal.io/team": "vision",
            "gpu-portal.io/workload-id": "9",
            "gpu-portal.io/kind": "training",
        }
    }
    assert {r["metadata"]["name"] for r in cluster_training_runtimes("kueue")} >= {job["spec"]["runtimeRef"]["name"]}


def test_torch_on_a_dra_offering_is_a_jobset_with_torchruns_pet_variables_as_trainer_sets_them():
    s = kueue_spec(
        "training",
        name="dra-torch",
        workload_id=11,
        offering="h100-80gb-dra",
        gpus_per_replica=2,
        replicas=2,
        command=["python", "train.py"],
        cpu="8",
        memory="32Gi",
    )
    template, jobset = workload_objects(s)
    assert template["kind"] == "ResourceClaimTemplate"
    portal = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "gpu-portal.io/team": "vision",
        "gpu-portal.io/workload-id": "11",
        "gpu-portal.io/kind": "training",
    }
    resources = {"cpu": "8", "memory": "32Gi"}
    assert jobset == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "dra-torch",
            "namespace": "team-vision",
            "labels": {**portal, "kueue.x-k8s.io/queue-name": "gpu-portal"},
        },
        "spec": {
            "suspend": True,
            "network": {"enableDNSHostnames": True, "subdomain": "dra-torch", "publishNotReadyAddresses": True},
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": 2,
                            "parallelism": 2,
                            "backoffLimit": 0,
                            "podFailurePolicy": {
                                "rules": [
                                    {
                                        "action": "Ignore",
                                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                                    }
                                ]
                            },
                            "template": {
                                "metadata": {"labels": portal},
                                "spec": {
                                    "priorityClassName": "gpu-portal-guaranteed",
                                    "serviceAccountName": "gpu-portal-workload",
                                    "automountServiceAccountToken": False,
                                    "enableServiceLinks": False,
                                    "restartPolicy": "Never",
                                    "securityContext": {
                                        "runAsNonRoot": True,
                                        "runAsUser": 1000,
                                        "runAsGroup": 100,
                                        "fsGroup": 100,
                                        "fsGroupChangePolicy": "OnRootMismatch",
                                        "seccompProfile": {"type": "RuntimeDefault"},
                                    },
                                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                                    "tolerations": [
                                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                                    ],
                                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "dra-torch-gpu"}],
                                    "containers": [
                                        {
                                            "name": "node",
                                            "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                                            "command": ["python", "train.py"],
                                            "env": [
                                                {"name": "PET_NNODES", "value": "2"},
                                                {"name": "PET_NPROC_PER_NODE", "value": "2"},
                                                {
                                                    "name": "PET_NODE_RANK",
                                                    "valueFrom": {
                                                        "fieldRef": {
                                                            "fieldPath": "metadata.annotations"
                                                            "['batch.kubernetes.io/job-completion-index']"
                                                        }
                                                    },
                                                },
                                                {"name": "PET_MASTER_ADDR", "value": "dra-torch-node-0-0.dra-torch"},
                                                {"name": "PET_MASTER_PORT", "value": "29500"},
                                            ],
                                            "resources": {
                                                "requests": resources,
                                                "limits": resources,
                                                "claims": [{"name": "gpu"}],
                                            },
                                            "securityContext": {
                                                "allowPrivilegeEscalation": False,
                                                "capabilities": {"drop": ["ALL"]},
                                                "runAsNonRoot": True,
                                                "seccompProfile": {"type": "RuntimeDefault"},
                                            },
                                            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                                        }
                                    ],
                                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                                },
                            },
                        }
                    },
                }
            ],
            "failurePolicy": {"maxRestarts": 0},
        },
    }


def test_mpi_has_a_launcher_that_knows_the_workers_and_ends_the_jobset():
    _, (jobset,) = build("h100-80gb", "mpi-2-nodes")
    launcher, worker = jobset["spec"]["replicatedJobs"]
    assert (launcher["name"], worker["name"]) == ("launcher", "worker")
    assert jobset["spec"]["successPolicy"] == {"operator": "Any", "targetReplicatedJobs": ["launcher"]}
    (lc,) = launcher["template"]["spec"]["template"]["spec"]["containers"]
    (wc,) = worker["template"]["spec"]["template"]["spec"]["containers"]
    assert lc["command"] == ["mpirun", "python", "t.py"] and "command" not in wc
    assert {"name": "MPI_HOST", "value": "mpi-2-nodes-worker-0-0.mpi-2-nodes,mpi-2-nodes-worker-0-1.mpi-2-nodes"} in lc[
        "env"
    ]
    assert lc["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    assert worker["template"]["spec"]["completions"] == 2
    # OnFailure pods restart in place; a pod failure policy would need restartPolicy Never.
    assert "podFailurePolicy" not in worker["template"]["spec"]


def test_a_notebook_and_an_endpoint_carry_the_queue_label_to_their_pods_and_no_volcano_annotation():
    _, (notebook,) = build("a100-80gb-1g.10gb", "notebook")
    assert notebook["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal"
    assert "annotations" not in notebook["metadata"]
    _, (isvc,) = build("l4-shared", "endpoint-model")
    assert isvc["spec"]["predictor"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal"
    assert "annotations" not in isvc["spec"]["predictor"]


@requires_reference
def test_the_kueue_runtimes_have_no_gang_scheduling_and_fit_the_trainer_crd():
    runtimes = cluster_training_runtimes("kueue")
    assert [r["metadata"]["name"] for r in runtimes] == [
        "gpu-portal-torch-distributed-kueue-guaranteed",
        "gpu-portal-torch-distributed-kueue-preemptible",
    ]
    volcano = {
        r["metadata"]["name"].replace("-distributed-", "-distributed-kueue-"): r for r in cluster_training_runtimes()
    }
    for runtime in runtimes:
        validate_custom(runtime)
        assert "podGroupPolicy" not in runtime["spec"]
        (pod,) = pods_of(runtime)
        assert "schedulerName" not in pod.spec
        assert_restricted(pod.spec)
        # Otherwise the same runtime as Volcano's.
        twin = volcano[runtime["metadata"]["name"]]
        twin_pod = twin["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert {k: v for k, v in twin_pod.items() if k != "schedulerName"} == pod.spec
    assert cluster_objects("kueue")[2:] == runtimes


@requires_reference
def test_team_objects_on_a_kueue_cluster_put_the_kueue_queues_where_the_volcano_queue_was():
    queue_objects = (
        kueue.resource_flavor(H100),
        kueue.cluster_queue("vision", "team-vision", {"gpu-h100-80gb": {"nvidia.com/gpu": (2, 6)}}),
        kueue.local_queue("vision", "team-vision"),
    )
    amounts = {"nvidia.com/gpu": (2, 8)}
    objects = team_objects(VISION, TeamQuota(amounts, "kueue", queue_objects))
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "ResourceQuota",
        "ResourceQuota",
        "ServiceAccount",
        "NetworkPolicy",
    ]
    for obj in objects:
        validate_core(obj) if is_core(obj) else validate_custom(obj)
    # Everything but the queue is what a Volcano cluster gets.
    volcano = team_objects(VISION, amounts)
    assert [o for o in volcano if o["kind"] != "Queue"] == [
        o for o in objects if o["apiVersion"].startswith(("v1", "networking"))
    ]


def test_the_names_and_labels_jobs_uses_are_the_ones_quotas_and_the_sandbox_use():
    assert labels.KUEUE_QUEUE_LABEL == kueue.QUEUE_NAME_LABEL == sandbox_kueue.QUEUE_LABEL
    assert names.KUEUE_LOCAL_QUEUE == kueue.LOCAL_QUEUE_NAME
    assert kueue.queue_labels() == {labels.KUEUE_QUEUE_LABEL: names.KUEUE_LOCAL_QUEUE}
    # The sandbox's Kueue copies exactly the portal's workload labels onto Workloads.
    assert set(sandbox_kueue.LABEL_KEYS_TO_COPY) == set(labels.workload_labels("t", 1, "notebook"))
