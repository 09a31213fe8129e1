"""The reconcile and the tasks against the sandbox cluster, through the real client."""

from datetime import timedelta
from unittest import mock

import pytest
from celery.exceptions import Retry
from django.utils import timezone

from jobs import lifecycle, tasks
from jobs.kube import manifests
from jobs.models import State, Workload
from jobs.reconcile import main_kind, reconcile
from quotas.models import Quota
from tests.jobs.conftest import notebook, training

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_celery")]


@pytest.fixture
def big_quota(cast, catalog):
    for gpu_class in ("H100-80GB", "A100-80GB", "L4"):
        Quota.objects.create(team=cast.vision, gpu_class=gpu_class, guaranteed=8, limit=32)


def converge(sandbox, kube, rounds=3):
    for _ in range(rounds):
        sandbox.settle()
        reconcile(kube)


def submitted(cast, data, kube):
    w = lifecycle.request_workload(cast.alice, cast.vision, data)
    assert lifecycle.submit(w.pk, kube)
    return Workload.objects.get(pk=w.pk)


def test_a_notebook_on_a_mig_slice_reaches_running_and_a_converged_world_makes_no_writes(
    cast,
    big_quota,
    sandbox,
    kube,
):
    w = submitted(cast, notebook(), kube)
    converge(sandbox, kube)
    w.refresh_from_db()
    assert w.state == State.RUNNING
    assert w.url == "http://kubeflow.local/notebook/team-vision/nb/"
    report = reconcile(kube)
    assert (report.writes, report.transitions) == (0, 0)
    assert report.lists == 11  # one list per kind, whatever the number of workloads


def test_an_object_that_vanished_is_applied_again(cast, big_quota, sandbox, kube):
    w = submitted(cast, notebook(), kube)
    converge(sandbox, kube)
    kube.delete("kubeflow.org/v1", "Notebook", w.name, "team-vision")
    report = reconcile(kube)
    assert report.applied == [w.pk]
    assert kube.get("kubeflow.org/v1", "Notebook", w.name, "team-vision") is not None


def test_an_object_without_a_live_workload_is_deleted(cast, big_quota, sandbox, kube):
    w = submitted(cast, notebook("ghost"), kube)
    Workload.objects.filter(pk=w.pk).update(deleted_at=timezone.now())
    report = reconcile(kube)
    assert "Notebook/team-vision/ghost" in report.deleted
    assert kube.get("kubeflow.org/v1", "Notebook", "ghost", "team-vision") is None


def test_a_workload_whose_submit_task_was_lost_is_submitted_by_the_reconcile(
    cast,
    big_quota,
    sandbox,
    kube,
    settings,
):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    Workload.objects.filter(pk=w.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    report = reconcile(kube)
    assert report.submitted == [w.pk]
    assert Workload.objects.get(pk=w.pk).state == State.SUBMITTED


def test_a_training_run_succeeds_after_its_simulated_duration(cast, big_quota, sandbox, kube):
    w = submitted(cast, training(annotations={"sandbox.local/duration-seconds": "120"}), kube)
    converge(sandbox, kube)
    assert Workload.objects.get(pk=w.pk).state == State.RUNNING
    sandbox.advance(180)
    converge(sandbox, kube)
    w.refresh_from_db()
    assert w.state == State.SUCCEEDED
    assert Quota.objects.get(team=cast.vision, gpu_class="H100-80GB").used == 0


def test_a_request_the_cluster_cannot_place_stays_submitted_with_the_schedulers_reason(
    cast,
    big_quota,
    sandbox,
    kube,
):
    w = submitted(cast, training(replicas=3, gpus=8), kube)  # 24 H100s; the demo cluster has 16
    converge(sandbox, kube)
    w.refresh_from_db()
    assert w.state == State.SUBMITTED
    assert "nodes are available" in w.cluster_message


def test_the_main_kind_from_the_row_matches_the_manifest_builders(cast, big_quota, catalog):
    cases = [
        notebook("a"),
        notebook("b", offering="h100-80gb-dra"),
        training("c"),
        training("d", framework="mpi"),
        {**training("e"), "offering": "h100-80gb-dra"},
        {
            "kind": "endpoint",
            "name": "f",
            "offering": "l4-shared",
            "gpus_per_replica": 1,
            "model_format": "sklearn",
            "storage_uri": "s3://models/f",
        },
    ]
    for data in cases:
        w = lifecycle.request_workload(cast.alice, cast.vision, data)
        assert main_kind(w) == manifests.main_object_type(lifecycle.spec_of(w)), data["name"]


@pytest.mark.parametrize(
    ("fault", "expect"),
    [
        ({"code": 429, "retry_after": 7}, "retry:7"),
        ({"code": 500}, "retry"),
        ({"code": 409, "count": 1}, "submitted"),  # the client re-reads and retries a conflict itself
        ({"code": 422}, "failed"),
    ],
)
def test_the_submit_task_retries_transient_faults_and_fails_on_permanent_ones(
    cast,
    big_quota,
    sandbox,
    portal_on_sandbox,
    fault,
    expect,
):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    sandbox.inject_fault(fault["code"], count=fault.get("count", 5), verb="patch", retry_after=fault.get("retry_after"))
    with mock.patch.object(tasks.submit_workload, "retry", side_effect=Retry()) as retry:
        if expect.startswith("retry"):
            with pytest.raises(Retry):
                tasks.submit_workload(w.pk)
            if ":" in expect:
                assert retry.call_args.kwargs["countdown"] == float(expect.split(":")[1])
            assert Workload.objects.get(pk=w.pk).state == State.QUEUED
        else:
            tasks.submit_workload(w.pk)
            assert Workload.objects.get(pk=w.pk).state == expect


def test_a_hung_cluster_is_a_timeout_that_the_task_retries(cast, big_quota, sandbox, portal_on_sandbox, settings):
    settings.KUBE_REQUEST_TIMEOUT = 1
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    sandbox.inject_fault(504, count=1, hang_seconds=3)
    with mock.patch.object(tasks.submit_workload, "retry", side_effect=Retry()), pytest.raises(Retry):
        tasks.submit_workload(w.pk)
    assert Workload.objects.get(pk=w.pk).state == State.QUEUED
