"""The sandbox plays Kueue for a profile that says ``queueing: kueue``.

The objects are the portal's own (its builders, in Kueue mode), applied through the
official client; the simulated clock only moves in ``advance``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.kube.manifests import workload_objects
from quotas import kueue
from sandbox.testing import running_sandbox
from tests.kube_schemas import validate_custom
from tests.kueue.conftest import A100, A100_1G, H100, NLP, START, VISION, WORKLOAD_API, Kube, condition, kueue_spec
from tests.sandbox.conftest import PROFILE as VOLCANO_PROFILE

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def training(name: str, workload_id: int, *, replicas: int = 2, gpus: int = 2, seconds: int = 120, **fields):
    return workload_objects(
        kueue_spec(
            "training",
            name=name,
            workload_id=workload_id,
            replicas=replicas,
            gpus_per_replica=gpus,
            annotations={"sandbox.local/duration-seconds": str(seconds)},
            **fields,
        )
    )


def running(k8s: Kube, name: str) -> list[dict]:
    return [p for p in k8s.pods() if p["metadata"]["name"].startswith(f"{name}-") and p["status"]["phase"] == "Running"]


def test_a_suspended_trainjob_with_enough_quota_is_admitted_runs_and_gives_its_quota_back(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (8, 0)}})
    k8s.apply(*training("finetune", 1))
    kueue_sandbox.settle()

    workload = k8s.workloads()["finetune"]
    assert workload["metadata"]["labels"]["gpu-portal.io/workload-id"] == "1"  # labelKeysToCopy
    assert condition(workload, "QuotaReserved")["status"] == "True"
    assert condition(workload, "Admitted") == {
        **condition(workload, "Admitted"),
        "status": "True",
        "reason": "Admitted",
    }
    assert workload["status"]["admission"] == {
        "clusterQueue": "team-vision",
        "podSetAssignments": [
            {
                "name": "node",
                "flavors": {"nvidia.com/gpu": "gpu-h100-80gb"},
                "resourceUsage": {"nvidia.com/gpu": "4"},
                "count": 2,
            }
        ],
    }
    assert k8s.get(TRAINER_API, "TrainJob", "finetune", "team-vision")["spec"]["suspend"] is False
    pods = running(k8s, "finetune")
    assert len(pods) == 2
    assert all(
        p["spec"]["nodeName"].startswith("h100-") and p["spec"]["schedulerName"] == "default-scheduler" for p in pods
    )
    status = k8s.cluster_queue()["status"]
    assert (status["admittedWorkloads"], status["pendingWorkloads"]) == (1, 0)
    assert status["flavorsUsage"] == [
        {"name": "gpu-h100-80gb", "resources": [{"name": "nvidia.com/gpu", "total": "4", "borrowed": "0"}]}
    ]

    kueue_sandbox.advance(180)
    assert condition(k8s.get(TRAINER_API, "TrainJob", "finetune", "team-vision"), "Complete")["status"] == "True"
    assert condition(k8s.workloads()["finetune"], "Finished")["reason"] == "Succeeded"
    status = k8s.cluster_queue()["status"]
    assert status["admittedWorkloads"] == 0
    assert status["flavorsUsage"][0]["resources"][0]["total"] == "0"


def test_a_trainjob_over_quota_stays_suspended_with_kueues_message_and_runs_once_the_blocker_is_done(
    k8s, kueue_sandbox
):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (4, 0)}})
    k8s.apply(*training("blocker", 1, replicas=2, gpus=2, seconds=120))
    kueue_sandbox.settle()
    kueue_sandbox.advance(1)  # a later creationTimestamp: Kueue admits in creation order
    k8s.apply(*training("waiting", 2, replicas=1, gpus=2))
    kueue_sandbox.settle()

    workload = k8s.workloads()["waiting"]
    assert condition(workload, "QuotaReserved") == {
        **condition(workload, "QuotaReserved"),
        "status": "False",
        "reason": "Pending",
        "message": "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
        "gpu-h100-80gb, 2 more needed",
    }
    assert "admission" not in workload["status"]
    job = k8s.get(TRAINER_API, "TrainJob", "waiting", "team-vision")
    assert job["spec"]["suspend"] is True
    assert condition(job, "Suspended")["status"] == "True"
    assert not [p for p in k8s.pods() if p["metadata"]["name"].startswith("waiting-")]  # no pods before admission
    assert k8s.cluster_queue()["status"]["pendingWorkloads"] == 1
    local = k8s.get(WORKLOAD_API, "LocalQueue", "gpu-portal", "team-vision")["status"]
    assert (local["admittedWorkloads"], local["pendingWorkloads"]) == (1, 1)

    kueue_sandbox.advance(180)  # the blocker finishes and gives back its 4 GPUs
    assert condition(k8s.workloads()["waiting"], "Admitted")["status"] == "True"
    assert len(running(k8s, "waiting")) == 1
    assert k8s.cluster_queue()["status"]["pendingWorkloads"] == 0


def test_a_request_the_queue_could_never_hold_says_so(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (4, 4)}})  # alone in the cohort: nobody to borrow from
    k8s.apply(*training("huge", 1, replicas=1, gpus=8))
    kueue_sandbox.settle()
    message = condition(k8s.workloads()["huge"], "QuotaReserved")["message"]
    assert message == (
        "couldn't assign flavors to pod set node: insufficient quota for nvidia.com/gpu in flavor gpu-h100-80gb, "
        "request > maximum capacity (8 > 4)"
    )


def test_a_team_borrows_idle_quota_in_its_cohort_up_to_its_borrowing_limit(k8s, kueue_sandbox):
    k8s.team(NLP, {"gpu-h100-80gb": {"nvidia.com/gpu": (6, 0)}})  # nlp runs nothing: its 6 GPUs are idle
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (2, 2)}})
    k8s.apply(*training("borrower", 1, replicas=2, gpus=2))
    kueue_sandbox.settle()
    kueue_sandbox.advance(1)
    k8s.apply(*training("greedy", 2, replicas=1, gpus=1))
    kueue_sandbox.settle()

    assert condition(k8s.workloads()["borrower"], "Admitted")["status"] == "True"
    assert k8s.cluster_queue()["status"]["flavorsUsage"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "total": "4", "borrowed": "2"}
    ]
    assert condition(k8s.workloads()["greedy"], "QuotaReserved")["message"].endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor gpu-h100-80gb, 1 more needed"
    )


def test_a_notebook_pod_is_gated_until_its_workload_is_admitted(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (1, 0)}}, flavors=(H100, A100, A100_1G))
    notebook = workload_objects(
        kueue_spec("notebook", name="explore", workload_id=3, offering="a100-80gb-1g.10gb", gpus_per_replica=1)
    )
    k8s.apply(*notebook)
    kueue_sandbox.settle()

    (pod,) = k8s.pods()
    assert pod["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert condition(pod, "PodScheduled")["reason"] == "SchedulingGated"
    assert "nodeName" not in pod["spec"]
    workload = k8s.workloads()[pod["metadata"]["name"]]
    assert workload["metadata"]["name"].startswith("pod-explore-0-")
    assert condition(workload, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: resource nvidia.com/mig-1g.10gb unavailable in ClusterQueue"
    )

    # The team's quota gets A100 slices: the profile's flavor comes first, as quotas.kueue orders them.
    k8s.team(
        VISION,
        {
            "gpu-a100-80gb-1g-10gb": {"nvidia.com/mig-1g.10gb": (2, 0)},
            "gpu-a100-80gb": {"nvidia.com/mig-1g.10gb": (7, 0)},
            "gpu-h100-80gb": {"nvidia.com/gpu": (1, 0)},
        },
        flavors=(H100, A100, A100_1G),
    )
    kueue_sandbox.settle()
    (pod,) = k8s.pods()
    assert not pod["spec"].get("schedulingGates")
    assert pod["status"]["phase"] == "Running"
    admission = k8s.workloads()[pod["metadata"]["name"]]["status"]["admission"]
    assert admission["podSetAssignments"][0]["flavors"] == {"nvidia.com/mig-1g.10gb": "gpu-a100-80gb-1g-10gb"}


def test_each_endpoint_replica_is_admitted_on_its_own(k8s, kueue_sandbox):
    l4 = kueue.Flavor("gpu-l4", "L4", {"nvidia.com/gpu.product": "NVIDIA-L4"})
    # The namespace quota allows 3 (nominal 2 + borrowing 1); nobody in the cohort lends the third.
    k8s.team(VISION, {"gpu-l4": {"nvidia.com/gpu.shared": (2, 1)}}, flavors=(l4,))
    endpoint = kueue_spec(
        "endpoint", name="classifier", workload_id=4, min_replicas=3, max_replicas=3, gpus_per_replica=1
    )
    # Above the guarantee: the preemptible class, as admission gives it (the scoped quota caps the guaranteed one).
    isvc = workload_objects(replace(endpoint, priority_class="gpu-portal-preemptible"))
    k8s.apply(*isvc)
    kueue_sandbox.settle()
    pods = k8s.pods()
    assert len(pods) == 3
    gated = [p for p in pods if p["spec"].get("schedulingGates")]
    assert len(gated) == 1 and gated[0]["status"]["phase"] == "Pending"
    assert sum(p["status"]["phase"] == "Running" for p in pods) == 2
    waiting = k8s.workloads()[gated[0]["metadata"]["name"]]
    assert condition(waiting, "QuotaReserved")["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu.shared in flavor "
        "gpu-l4, 1 more needed"
    )


def test_a_jobset_runs_every_pod_with_a_stable_host_name_and_releases_its_quota_when_done(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (4, 0)}})
    k8s.apply(*training("sweep", 5, replicas=2, gpus=1, framework="custom", seconds=60))
    kueue_sandbox.settle()

    assert k8s.get(JOBSET_API, "JobSet", "sweep", "team-vision")["spec"]["suspend"] is False
    pods = sorted(running(k8s, "sweep"), key=lambda p: p["spec"]["hostname"])
    assert [(p["spec"]["hostname"], p["spec"]["subdomain"]) for p in pods] == [
        ("sweep-worker-0-0", "sweep"),
        ("sweep-worker-0-1", "sweep"),
    ]
    assert [e for e in pods[1]["spec"]["containers"][0]["env"] if e["name"] == "JOB_COMPLETION_INDEX"] == [
        {"name": "JOB_COMPLETION_INDEX", "value": "1"}
    ]
    service = k8s.get("v1", "Service", "sweep", "team-vision")
    assert service["spec"]["clusterIP"] == "None"
    assert k8s.workloads()["sweep"]["status"]["admission"]["podSetAssignments"][0]["count"] == 2

    kueue_sandbox.advance(90)
    jobset = k8s.get(JOBSET_API, "JobSet", "sweep", "team-vision")
    assert condition(jobset, "Completed")["status"] == "True"
    assert condition(k8s.workloads()["sweep"], "Finished")["status"] == "True"
    assert k8s.cluster_queue()["status"]["flavorsUsage"][0]["resources"][0]["total"] == "0"


def test_an_mpi_jobset_admits_the_launcher_and_the_workers_as_one_workload(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (4, 0)}})
    k8s.apply(*training("allreduce", 6, replicas=2, gpus=2, framework="mpi", command=["mpirun", "python", "t.py"]))
    kueue_sandbox.settle()
    admission = k8s.workloads()["allreduce"]["status"]["admission"]
    assert [(a["name"], a["count"], a["resourceUsage"]) for a in admission["podSetAssignments"]] == [
        ("launcher", 1, {}),  # cpu and memory are not Kueue's to count
        ("worker", 2, {"nvidia.com/gpu": "4"}),
    ]
    assert len(running(k8s, "allreduce")) == 3


def test_the_workloads_the_sandbox_writes_fit_kueues_crd(k8s, kueue_sandbox):
    k8s.team(VISION, {"gpu-h100-80gb": {"nvidia.com/gpu": (4, 0)}})
    k8s.apply(*training("fits", 1, replicas=2, gpus=2))
    kueue_sandbox.settle()
    k8s.apply(*training("waits", 2, replicas=1, gpus=2))
    kueue_sandbox.settle()
    for workload in k8s.workloads().values():
        workload["metadata"] = {k: workload["metadata"][k] for k in ("name", "namespace", "labels")}
        validate_custom(workload)
    cluster_queue = k8s.cluster_queue()
    cluster_queue["metadata"] = {"name": "team-vision"}
    validate_custom(cluster_queue)


@pytest.mark.parametrize("profile", [VOLCANO_PROFILE], ids=["volcano"])
def test_on_a_volcano_cluster_nothing_plays_kueue(profile):
    with running_sandbox(profile, start_time=START) as handle:
        k8s = Kube(handle)
        k8s.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-vision"}},
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "plain",
                    "namespace": "team-vision",
                    "labels": {"kueue.x-k8s.io/queue-name": "gpu-portal"},
                },
                "spec": {"containers": [{"name": "c", "image": "docker.io/library/python:3.12"}]},
            },
        )
        handle.settle()
        (pod,) = k8s.pods()
        assert not pod["spec"].get("schedulingGates")
        assert pod["status"]["phase"] == "Running"
        assert k8s.items(WORKLOAD_API, "Workload", "team-vision") == []
