"""The reconcile records how many replicas an endpoint runs, as intervals, only when it changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import lifecycle, scale
from jobs.kube.status import derive, gpu_replicas
from jobs.models import State, Workload, WorkloadScale
from jobs.reconcile import ISVC, reconcile
from quotas.models import Quota

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_celery")]


@pytest.fixture
def h100(cast, catalog):
    return Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=8, limit=16)


def endpoint(min_replicas=2, max_replicas=4):
    return {
        "kind": "endpoint",
        "name": "iris",
        "offering": "h100-80gb",
        "gpus_per_replica": 1,
        "min_replicas": min_replicas,
        "max_replicas": max_replicas,
        "model_format": "sklearn",
        "storage_uri": "s3://models/iris/v1",
    }


def converge(sandbox, kube, rounds=3):
    for _ in range(rounds):
        sandbox.settle()
        reconcile(kube)


def counts(w) -> list[int]:
    return list(WorkloadScale.objects.filter(workload=w).values_list("replicas", flat=True))


def test_the_reconcile_records_an_endpoints_replicas_when_they_change_and_only_then(cast, h100, sandbox, kube):
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint(min_replicas=2, max_replicas=4))
    assert lifecycle.submit(w.pk, kube)
    converge(sandbox, kube, rounds=4)
    w.refresh_from_db()
    assert w.state == State.RUNNING
    assert counts(w)[-1] == 2  # the sandbox keeps minReplicas up, like KServe
    rows = WorkloadScale.objects.count()
    report = reconcile(kube)
    assert report.scales == 0 and WorkloadScale.objects.count() == rows  # the same count writes nothing

    # The autoscaler scales up: the sandbox runs what the InferenceService asks for.
    kube.merge_patch(*ISVC, w.name, {"spec": {"predictor": {"minReplicas": 3}}}, w.team.namespace)
    converge(sandbox, kube, rounds=3)
    assert counts(w) == [0, 2, 3]  # a row per change: submitted (no pod bound yet), min replicas, scaled up
    assert scale.current(w) == 3
    assert WorkloadScale.objects.filter(workload=w, replicas=3).count() == 1


def test_a_knative_canarys_pods_are_counted_beside_the_stable_ones_until_it_is_promoted(cast, h100, sandbox, kube):
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint(min_replicas=1, max_replicas=2))
    Workload.objects.filter(pk=w.pk).update(deployment_mode="Knative")
    assert lifecycle.submit(w.pk, kube)
    converge(sandbox, kube, rounds=4)
    w = Workload.objects.get(pk=w.pk)
    assert (w.state, counts(w)[-1]) == (State.RUNNING, 1)

    lifecycle.rollout(cast.alice, w, "s3://models/iris/v2", 20)
    lifecycle.apply_current(w.pk, kube)  # what the apply task does after commit
    converge(sandbox, kube, rounds=4)
    assert counts(w)[-1] == 2  # the previous revision serves 80 %, the canary's revision 20 %

    lifecycle.promote(cast.alice, Workload.objects.get(pk=w.pk))
    lifecycle.apply_current(w.pk, kube)
    converge(sandbox, kube, rounds=6)
    assert counts(w) == [0, 1, 2, 1]  # submitted (no pod bound yet), running, canary, promoted


def _pod(node="h100-0", phase="Running", component="predictor"):
    return {
        "metadata": {"labels": {"component": component}},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def test_pods_bound_to_a_node_hold_gpus_until_they_end_unscheduled_ones_do_not():
    pods = [
        _pod(),  # serving
        _pod(phase="Pending"),  # bound, pulling its image: holds its GPUs already
        _pod(node="", phase="Pending"),  # not scheduled: holds nothing
        _pod(phase="Failed"),
        _pod(phase="Succeeded"),
        _pod(component="transformer"),
    ]
    assert gpu_replicas(pods) == 2


def test_an_inference_service_reports_its_replicas_ready_or_not():
    isvc = {"metadata": {"name": "iris"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert derive("InferenceService", isvc, [_pod(), _pod(phase="Pending")]).replicas == 2
    isvc["status"]["conditions"][0]["status"] = "True"
    assert derive("InferenceService", isvc, [_pod(), _pod(), _pod()]).replicas == 3
    assert derive("TrainJob", {"metadata": {}, "status": {}}, []).replicas is None


def test_a_count_above_the_reservation_is_capped_and_a_repeat_is_not_written(cast, h100, cluster):
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint(min_replicas=1, max_replicas=2))
    lifecycle.submit(w.pk, cluster)
    w = Workload.objects.get(pk=w.pk)
    now = timezone.now()
    # A rolling update surges a third pod beside the two quota reserved: KServe's, not charged.
    assert scale.record(w, 3, now, scale.latest([w.pk]).get(w.pk))
    assert counts(w) == [2]
    assert not scale.record(w, 5, now + timedelta(seconds=5), scale.latest([w.pk]).get(w.pk))
    Workload.objects.filter(pk=w.pk).update(canary_replicas=2)
    w.refresh_from_db()
    assert scale.record(w, 3, now + timedelta(seconds=10), scale.latest([w.pk]).get(w.pk))  # a canary's pods count
    assert counts(w) == [2, 3]


def _running_endpoint(cast, cluster, min_replicas=1, max_replicas=4, gpus=2):
    data = {**endpoint(min_replicas=min_replicas, max_replicas=max_replicas), "gpus_per_replica": gpus}
    w = lifecycle.request_workload(cast.alice, cast.vision, data)
    lifecycle.submit(w.pk, cluster)
    Workload.objects.filter(pk=w.pk).update(state=State.RUNNING, started_at=timezone.now())
    return Workload.objects.get(pk=w.pk)


def test_the_endpoint_page_shows_the_quota_reservation_next_to_what_is_charged_now(client, cast, h100, cluster):
    w = _running_endpoint(cast, cluster)
    client.force_login(cast.alice)
    page = client.get(f"/workloads/{w.pk}/").content.decode()
    assert "Reserved in quota: 8 H100-80GB GPUs (max replicas" in page
    assert "charged for what runs: 2 H100-80GB GPUs now (1 replica, min replicas until the cluster reports" in page
    WorkloadScale.objects.create(workload=w, started_at=timezone.now(), replicas=3)
    page = client.get(f"/workloads/{w.pk}/").content.decode()
    assert "charged for what runs: 6 H100-80GB GPUs now (3 replicas)" in page


def test_the_api_gives_an_endpoints_reservation_and_charge_and_null_for_other_kinds(api, cast, h100, cluster):
    w = _running_endpoint(cast, cluster, min_replicas=2, max_replicas=3, gpus=1)
    WorkloadScale.objects.create(workload=w, started_at=timezone.now(), replicas=2)
    Workload.objects.filter(pk=w.pk).update(canary_replicas=1)
    api.force_authenticate(cast.alice)
    body = api.get(f"/api/v1/workloads/{w.pk}/").json()
    assert body["endpoint_charge"] == {
        "reserved_replicas": 4,  # max 3 + the canary's 1
        "reserved_units": 4,
        "charged_replicas": 2,
        "charged_units": 2,
        "observed": True,
    }
    Workload.objects.filter(pk=w.pk).update(state=State.STOPPED, finished_at=timezone.now())
    assert api.get(f"/api/v1/workloads/{w.pk}/").json()["endpoint_charge"]["charged_units"] == 0
    training = lifecycle.request_workload(
        cast.alice,
        cast.vision,
        {
            "kind": "training",
            "name": "t",
            "offering": "h100-80gb",
            "framework": "torch",
            "replicas": 1,
            "gpus_per_replica": 1,
            "image": "nvcr.io/nvidia/pytorch:24.10-py3",
            "command": ["torchrun", "train.py"],
        },
    )
    assert api.get(f"/api/v1/workloads/{training.pk}/").json()["endpoint_charge"] is None
