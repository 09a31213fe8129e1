from __future__ import annotations

import pytest

from jobs.kube.kinds import KINDS, Need, UnknownKind, checked_kinds, kind_info


def test_a_namespaced_custom_kind_has_group_paths_per_namespace_and_across_namespaces():
    trainjob = kind_info("trainer.kubeflow.org/v1alpha1", "TrainJob")

    assert trainjob.collection_path() == "/apis/trainer.kubeflow.org/v1alpha1/trainjobs"
    assert trainjob.collection_path("team-a") == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs"
    assert trainjob.object_path("run-1", "team-a") == (
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/run-1"
    )


def test_core_kinds_live_under_api_v1():
    assert kind_info("v1", "Namespace").object_path("team-a") == "/api/v1/namespaces/team-a"
    assert kind_info("v1", "Pod").object_path("p", "team-a") == "/api/v1/namespaces/team-a/pods/p"
    assert kind_info("v1", "Pod").group_version_path == "/api/v1"


def test_a_cluster_scoped_kind_refuses_a_namespace():
    queue = kind_info("scheduling.volcano.sh/v1beta1", "Queue")

    assert queue.object_path("team-a") == "/apis/scheduling.volcano.sh/v1beta1/queues/team-a"
    with pytest.raises(ValueError, match="cluster-scoped"):
        queue.collection_path("team-a")


def test_a_namespaced_kind_needs_a_namespace_for_one_object():
    with pytest.raises(ValueError, match="namespace is required"):
        kind_info("kubeflow.org/v1", "Notebook").object_path("nb")


def test_the_same_kind_name_in_two_groups_is_told_apart_by_api_version():
    assert kind_info("batch.volcano.sh/v1alpha1", "Job").plural == "jobs"
    with pytest.raises(UnknownKind, match="kinds.py"):
        kind_info("batch/v1", "Job")


def test_the_table_has_one_row_per_api_version_and_kind():
    assert len({(k.api_version, k.kind) for k in KINDS}) == len(KINDS)


def test_the_workload_crds_are_required_and_each_queueing_backend_needs_its_own_kinds():
    needs = {k.kind: k.need for k in checked_kinds()}

    for kind in ("Notebook", "TrainJob", "ClusterTrainingRuntime", "InferenceService"):
        assert needs[kind] is Need.REQUIRED
    for kind in ("Job", "Queue"):
        assert needs[kind] is Need.VOLCANO
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload"):
        assert needs[kind] is Need.KUEUE
    assert needs["PodGroup"] is Need.OPTIONAL
    assert "Pod" not in needs


def test_a_kind_is_required_by_the_backend_that_uses_it():
    from jobs.kube.client import KindCheck
    from jobs.kube.kinds import kind_info

    volcano_job = kind_info("batch.volcano.sh/v1alpha1", "Job")
    local_queue = kind_info("kueue.x-k8s.io/v1beta2", "LocalQueue")
    assert KindCheck(volcano_job, False, "volcano").required
    assert not KindCheck(volcano_job, False, "kueue").required
    assert KindCheck(local_queue, False, "kueue").required
    assert not KindCheck(local_queue, False, "volcano").required
