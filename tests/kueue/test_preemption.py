"""The sandbox's Kueue preempts as the portal's ClusterQueues allow (``quotas.kueue``):
``reclaimWithinCohort: Any`` gives a team its nominal quota back from borrowing peers,
``withinClusterQueue: LowerPriority`` lets guaranteed work evict the team's burst work.

The demo cluster's two H100 nodes hold 16 GPUs; each team's ClusterQueue is the portal's.
"""

from __future__ import annotations

from dataclasses import replace

from jobs.kube.manifests import workload_objects
from jobs.kube.names import PRIORITY_PREEMPTIBLE
from tests.kueue.conftest import NLP, VISION, Kube, condition, kueue_spec

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
H100 = "gpu-h100-80gb"


def training(name: str, workload_id: int, *, team=VISION, gpus: int = 8, priority_class: str = "") -> list[dict]:
    spec = kueue_spec(
        "training",
        name=name,
        workload_id=workload_id,
        replicas=1,
        gpus_per_replica=gpus,
        annotations={"sandbox.local/duration-seconds": "3600"},
    )
    spec = replace(spec, team=team)
    if priority_class:
        spec = replace(spec, priority_class=priority_class)
    return workload_objects(spec)


def admitted(k8s: Kube, name: str, namespace: str) -> bool:
    return condition(k8s.workloads(namespace)[name], "Admitted").get("status") == "True"


def suspended(k8s: Kube, name: str, namespace: str) -> bool:
    return k8s.get(TRAINER_API, "TrainJob", name, namespace)["spec"]["suspend"] is True


def test_a_team_reclaims_its_nominal_quota_from_a_borrowing_peer(k8s: Kube, kueue_sandbox):
    k8s.team(NLP, {H100: {"nvidia.com/gpu": (8, 8)}})
    k8s.team(VISION, {H100: {"nvidia.com/gpu": (8, 8)}})
    k8s.apply(*training("nlp-a", 1, team=NLP))
    kueue_sandbox.settle()
    kueue_sandbox.advance(1)
    k8s.apply(*training("nlp-b", 2, team=NLP))  # borrows vision's idle 8, admitted last
    kueue_sandbox.settle()
    assert admitted(k8s, "nlp-a", "team-nlp") and admitted(k8s, "nlp-b", "team-nlp")

    kueue_sandbox.advance(1)
    k8s.apply(*training("vision", 3))
    kueue_sandbox.settle()

    assert admitted(k8s, "vision", "team-vision")
    assert admitted(k8s, "nlp-a", "team-nlp")  # within nlp's nominal quota: kept
    evicted = k8s.workloads("team-nlp")["nlp-b"]
    preempted = condition(evicted, "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation")
    assert preempted["message"].startswith("Preempted to accommodate a workload (UID: ")
    assert preempted["message"].endswith("due to reclamation within the cohort")
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    assert condition(evicted, "QuotaReserved")["status"] == "False" and "admission" not in evicted["status"]
    assert suspended(k8s, "nlp-b", "team-nlp") and not suspended(k8s, "vision", "team-vision")
    usage = k8s.cluster_queue("team-nlp")["status"]["flavorsUsage"][0]["resources"]
    assert usage == [{"name": "nvidia.com/gpu", "total": "8", "borrowed": "0"}]

    kueue_sandbox.advance(5)  # the evicted workload waits; nothing flips back
    assert admitted(k8s, "vision", "team-vision") and not admitted(k8s, "nlp-b", "team-nlp")
    assert {p["status"]["phase"] for p in k8s.pods("team-vision")} == {"Running"}
    assert not [p for p in k8s.pods("team-nlp") if p["metadata"]["name"].startswith("nlp-b-")]


def test_a_team_does_not_reclaim_beyond_its_nominal_quota(k8s: Kube, kueue_sandbox):
    k8s.team(NLP, {H100: {"nvidia.com/gpu": (12, 4)}})
    k8s.team(VISION, {H100: {"nvidia.com/gpu": (4, 12)}})
    k8s.apply(*training("nlp-a", 1, team=NLP))
    kueue_sandbox.advance(1)
    k8s.apply(*training("nlp-b", 2, team=NLP))  # 16: borrows vision's 4
    kueue_sandbox.settle()

    k8s.apply(*training("vision", 3))  # 8 > vision's nominal 4: it may only borrow, not reclaim
    kueue_sandbox.settle()
    assert not admitted(k8s, "vision", "team-vision")
    assert admitted(k8s, "nlp-a", "team-nlp") and admitted(k8s, "nlp-b", "team-nlp")
    assert "Preempted" not in {c["type"] for c in k8s.workloads("team-nlp")["nlp-b"]["status"]["conditions"]}


def test_guaranteed_work_preempts_its_own_teams_lower_priority_work(k8s: Kube, kueue_sandbox):
    k8s.team(VISION, {H100: {"nvidia.com/gpu": (8, 0)}})
    k8s.apply(*training("burst", 1, priority_class=PRIORITY_PREEMPTIBLE))
    kueue_sandbox.settle()
    assert admitted(k8s, "burst", "team-vision")

    kueue_sandbox.advance(1)
    k8s.apply(*training("guaranteed", 2))
    kueue_sandbox.settle()
    assert admitted(k8s, "guaranteed", "team-vision")
    preempted = condition(k8s.workloads()["burst"], "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "InClusterQueue")
    assert preempted["message"].endswith("due to prioritization in the ClusterQueue")
    assert suspended(k8s, "burst", "team-vision")


def test_work_of_equal_priority_waits_instead_of_preempting(k8s: Kube, kueue_sandbox):
    k8s.team(VISION, {H100: {"nvidia.com/gpu": (8, 0)}})
    k8s.apply(*training("first", 1))
    kueue_sandbox.settle()
    kueue_sandbox.advance(1)
    k8s.apply(*training("second", 2))
    kueue_sandbox.settle()
    assert admitted(k8s, "first", "team-vision") and not admitted(k8s, "second", "team-vision")
