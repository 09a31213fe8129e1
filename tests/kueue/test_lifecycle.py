"""The portal end to end on a Kueue cluster: request, reconcile, the sandbox playing Kueue.

``settings.CLUSTER_PROFILE`` names demo-kueue.yaml and the portal's client reaches a
sandbox started with it; nothing else is switched. The reconcile is what submits (the
submit task "was lost"), observes and finishes work, as in production.

The cast: alice (member of vision) asks; vision may hold 4 H100s guaranteed and 8 at
most, and 7 A100 1g.10gb slices (one A100).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.utils import timezone

from jobs import lifecycle
from jobs.kube import manifests
from jobs.kube.client import Cluster
from jobs.kube.labels import workload_selector
from jobs.models import State, Workload
from jobs.reconcile import main_kind, reconcile
from quotas.models import Quota
from sandbox.testing import running_sandbox
from tests.jobs.conftest import notebook, training
from tests.kueue.conftest import KUEUE_PROFILE, WORKLOAD_API

pytestmark = pytest.mark.django_db

TRAINER_API = "trainer.kubeflow.org/v1alpha1"


@pytest.fixture(autouse=True)
def no_celery():
    with (
        mock.patch("jobs.tasks.submit_workload.delay"),
        mock.patch("jobs.tasks.teardown_workload.delay"),
        mock.patch("jobs.tasks.apply_team.delay"),
    ):
        yield


@pytest.fixture
def kueue_portal(settings, crd_dir):
    """The portal configured for the Kueue demo cluster, and that cluster."""
    settings.CLUSTER_PROFILE = KUEUE_PROFILE
    with running_sandbox(KUEUE_PROFILE, crd_dir=crd_dir, seed=7) as handle:
        settings.KUBE_CONFIG = str(handle.kubeconfig_path)
        settings.KUBE_REQUEST_TIMEOUT = 5
        yield handle


@pytest.fixture
def kube(kueue_portal):
    with Cluster.from_settings() as cluster:
        yield cluster


@pytest.fixture
def quotas(cast, catalog):
    return {
        "h100": Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=Decimal(4), limit=Decimal(8)),
        "a100": Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=Decimal(1), limit=Decimal(1)),
    }


def converge(sandbox, kube, rounds=3):
    for _ in range(rounds):
        sandbox.settle()
        reconcile(kube)


def requested(cast, data) -> Workload:
    """A request whose submit task was lost: the next reconcile submits it."""
    w = lifecycle.request_workload(cast.alice, cast.vision, data)
    Workload.objects.filter(pk=w.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    return Workload.objects.get(pk=w.pk)


def state(w: Workload) -> str:
    w.refresh_from_db()
    return w.state


def test_the_portal_reads_the_backend_from_the_cluster_profile(kueue_portal, settings):
    assert lifecycle.queueing() == "kueue"
    settings.CLUSTER_PROFILE = KUEUE_PROFILE.with_name("demo.yaml")
    assert lifecycle.queueing() == "volcano"


def test_a_training_request_goes_from_queued_to_succeeded_through_kueue(cast, quotas, kueue_portal, kube):
    w = requested(cast, training(replicas=2, gpus=2, annotations={"sandbox.local/duration-seconds": "120"}))
    assert w.state == State.QUEUED

    report = reconcile(kube)
    assert report.submitted == [w.pk]
    assert state(w) == State.SUBMITTED
    job = w.applied_manifests[-1]
    assert (job["kind"], job["spec"]["suspend"]) == ("TrainJob", True)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal"
    # The team's Kueue queues came with it, and no Volcano queue.
    assert kube.get(WORKLOAD_API, "ClusterQueue", "team-vision") is not None
    assert kube.get(WORKLOAD_API, "LocalQueue", "gpu-portal", "team-vision") is not None
    assert kube.get("scheduling.volcano.sh/v1beta1", "Queue", "team-vision") is None

    converge(kueue_portal, kube)
    assert state(w) == State.RUNNING
    assert kube.get(TRAINER_API, "TrainJob", w.name, "team-vision")["spec"]["suspend"] is False

    kueue_portal.advance(180)
    converge(kueue_portal, kube)
    assert state(w) == State.SUCCEEDED
    assert Quota.objects.get(pk=quotas["h100"].pk).used == 0


def test_work_kueue_cannot_admit_yet_shows_kueues_reason_and_runs_when_quota_frees_up(cast, quotas, kueue_portal, kube):
    first = requested(
        cast, training("first", replicas=2, gpus=2, annotations={"sandbox.local/duration-seconds": "120"})
    )
    converge(kueue_portal, kube)
    assert state(first) == State.RUNNING
    kueue_portal.advance(1)

    # The portal lets vision borrow up to its limit of 8; on the cluster nobody lends it the
    # GPUs above its guaranteed 4 (no lending pool yet, no other team), so Kueue holds it.
    second = requested(cast, training("second", replicas=1, gpus=2))
    assert second.priority_class == "gpu-portal-preemptible"
    converge(kueue_portal, kube)
    second.refresh_from_db()
    assert second.state == State.SUBMITTED
    assert second.cluster_phase == "pending"
    assert second.cluster_message == (
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
        "gpu-h100-80gb, 2 more needed"
    )

    kueue_portal.advance(180)
    converge(kueue_portal, kube)
    assert state(first) == State.SUCCEEDED
    second.refresh_from_db()
    assert second.state == State.RUNNING
    assert "couldn't assign flavors" not in second.cluster_message


def test_custom_training_runs_as_a_jobset(cast, quotas, kueue_portal, kube):
    w = requested(
        cast,
        training("sweep", framework="custom", replicas=2, gpus=1, annotations={"sandbox.local/duration-seconds": "60"}),
    )
    converge(kueue_portal, kube)
    assert state(w) == State.RUNNING
    assert w.applied_manifests[-1]["kind"] == "JobSet"
    kueue_portal.advance(90)
    converge(kueue_portal, kube)
    assert state(w) == State.SUCCEEDED


def test_a_notebook_runs_through_kueues_pod_integration(cast, quotas, kueue_portal, kube):
    w = requested(cast, notebook())
    converge(kueue_portal, kube)
    assert state(w) == State.RUNNING
    (pod,) = kube.pods_for("team-vision", workload_selector(w.pk))
    assert not pod["spec"].get("schedulingGates")
    (queued,) = kube.list(WORKLOAD_API, "Workload", namespace="team-vision", label_selector=workload_selector(w.pk))
    assert queued["metadata"]["ownerReferences"][0]["name"] == pod["metadata"]["name"]


def test_a_notebook_on_a_dra_offering_runs_as_its_statefulset_through_kueue(cast, quotas, kueue_portal, kube):
    # Kueue counts the claimed device as the resource its DeviceClass is mapped to (the
    # portal's Kueue configuration), in the H100 flavor the team's ClusterQueue covers.
    w = requested(cast, notebook("dra", offering="h100-80gb-dra"))
    converge(kueue_portal, kube)
    assert state(w) == State.RUNNING
    statefulset = kube.get("apps/v1", "StatefulSet", "dra", "team-vision")
    assert statefulset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-portal"
    (queued,) = kube.list(WORKLOAD_API, "Workload", namespace="team-vision", label_selector=workload_selector(w.pk))
    [assignment] = queued["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {"gpu.nvidia.com": "gpu-h100-80gb"}
    assert assignment["resourceUsage"] == {"gpu.nvidia.com": "1"}


def test_a_converged_kueue_world_makes_no_writes(cast, quotas, kueue_portal, kube):
    requested(cast, training(replicas=1, gpus=1))
    converge(kueue_portal, kube)
    report = reconcile(kube)
    assert (report.writes, report.transitions) == (0, 0)
    # PriorityClasses, runtimes, ResourceFlavors; 8 workload kinds and pods; Kueue's Workloads.
    assert report.lists == 3 + 9 + 1


def test_apply_team_applies_the_kueue_queues_instead_of_a_volcano_queue(cast, quotas, kueue_portal, kube):
    def h100_quota():
        queue = kube.get(WORKLOAD_API, "ClusterQueue", "team-vision")
        (group,) = [g for g in queue["spec"]["resourceGroups"] if "nvidia.com/gpu" in g["coveredResources"]]
        return group["flavors"]

    dra = "gpu.nvidia.com"
    lifecycle.apply_team(cast.vision.pk, kube)
    assert h100_quota() == [
        {
            "name": "gpu-h100-80gb",
            "resources": [
                {"name": dra, "nominalQuota": "4", "borrowingLimit": "4"},
                {"name": "nvidia.com/gpu", "nominalQuota": "4", "borrowingLimit": "4"},
            ],
        }
    ]
    assert kube.get(WORKLOAD_API, "ResourceFlavor", "gpu-h100-80gb") is not None
    assert kube.get(WORKLOAD_API, "LocalQueue", "gpu-portal", "team-vision")["spec"]["clusterQueue"] == "team-vision"
    assert kube.get("scheduling.volcano.sh/v1beta1", "Queue", "team-vision") is None

    Quota.objects.filter(pk=quotas["h100"].pk).update(guaranteed=Decimal(6))
    lifecycle.apply_team(cast.vision.pk, kube)
    assert [r["nominalQuota"] for r in h100_quota()[0]["resources"]] == ["6", "6"]


def test_the_main_kind_from_the_row_matches_the_builders_on_a_kueue_cluster(cast, quotas, kueue_portal):
    Quota.objects.filter(team=cast.vision).update(limit=Decimal(32))
    cases = [
        notebook("a"),
        notebook("b", offering="h100-80gb-dra"),
        training("c"),
        training("d", framework="mpi"),
        training("e", framework="custom"),
        {**training("f"), "offering": "h100-80gb-dra"},
    ]
    for data in cases:
        w = lifecycle.request_workload(cast.alice, cast.vision, data)
        spec = lifecycle.spec_of(w)
        assert spec.queueing == "kueue"
        assert main_kind(w) == manifests.main_object_type(spec), data["name"]
