"""CPU and memory quotas: every workload draws on them, for all of its pods (quotas/compute.py).

vision gets CPU and memory quotas per test; nlp has none (not limited, as before CPU quotas).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from jobs import lifecycle
from jobs.models import State, Workload
from quotas import approvals
from quotas.admission import PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE, QuotaRefused
from quotas.cluster import team_resource_quota
from quotas.models import AuditEntry, Quota, QuotaDrift, QuotaException
from quotas.requests import file_request, known_gpu_classes
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db

IMAGE = "quay.io/jupyter/pytorch-notebook:2024-12-02"


def cpu_notebook(name="nb", cpu="2", memory="4Gi"):
    return {"kind": "notebook", "name": name, "offering": "cpu", "gpus_per_replica": 0, "image": IMAGE,
            "cpu": cpu, "memory": memory}  # fmt: skip


def gpu_training(name="train", replicas=2, framework="torch", cpu="4", memory="16Gi"):
    return {
        "kind": "training",
        "name": name,
        "offering": "h100-80gb",
        "framework": framework,
        "replicas": replicas,
        "gpus_per_replica": 1,
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": ["torchrun", "train.py"] if framework == "torch" else ["mpirun", "python", "train.py"],
        "cpu": cpu,
        "memory": memory,
    }


def used(team, gpu_class) -> Decimal:
    return Quota.objects.get(team=team, gpu_class=gpu_class).used


@pytest.fixture
def vision_compute(cast, catalog):
    """vision: 4 cores guaranteed, 8 at most; 16 GiB guaranteed, 32 at most."""
    return make_quota(cast.vision, "cpu", 4, 8), make_quota(cast.vision, "memory", 16, 32)


def test_cpu_only_work_is_admitted_within_the_cpu_quota_and_refused_over_it(cast, vision_compute):
    first = lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("a", cpu="4"))
    assert (first.admission, first.priority_class) == ("guaranteed", PRIORITY_GUARANTEED)
    second = lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("b", cpu="3"))
    assert (second.admission, second.priority_class) == ("preemptible", PRIORITY_PREEMPTIBLE)
    assert used(cast.vision, "cpu") == 7
    with pytest.raises(QuotaRefused) as refused:
        lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("c", cpu="1500m"))
    assert "vision has 7 of 8 cores cpu in use; this request needs 1.5" in str(refused.value)
    assert "larger CPU or memory quota" in str(refused.value)
    assert not Workload.objects.filter(name="c").exists()
    assert used(cast.vision, "cpu") == 7


def test_memory_over_its_limit_refuses_the_request_and_names_memory(cast, vision_compute):
    lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("a", cpu="1", memory="30Gi"))
    with pytest.raises(QuotaRefused) as refused:
        lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("b", cpu="1", memory="3Gi"))
    assert "vision has 30 of 32 GiB memory in use; this request needs 3" in str(refused.value)
    assert used(cast.vision, "cpu") == 1


def test_every_replica_counts_and_an_mpi_job_adds_its_launcher(cast, catalog, vision_h100):
    make_quota(cast.vision, "cpu", 100, 100)
    make_quota(cast.vision, "memory", 500, 500)
    torch = lifecycle.request_workload(cast.alice, cast.vision, gpu_training("t", replicas=3))
    assert (torch.cpu_charge, torch.memory_charge) == (12, 48)
    mpi = lifecycle.request_workload(
        cast.alice, cast.vision, gpu_training("m", replicas=2, framework="mpi", cpu="500m", memory="512Mi")
    )
    assert (mpi.cpu_charge, mpi.memory_charge) == (2, 3)  # 2 x 0.5 + 1 core, 2 x 0.5 + 2 GiB of the launcher
    assert (used(cast.vision, "cpu"), used(cast.vision, "memory")) == (14, 51)


def test_gpu_work_within_its_gpu_guarantee_runs_preemptible_when_its_cpu_is_above_the_cpu_guarantee(
    cast, vision_h100, vision_compute
):
    within = lifecycle.request_workload(cast.alice, cast.vision, gpu_training("a", replicas=1, cpu="4"))
    assert within.admission == "guaranteed"
    above = lifecycle.request_workload(cast.alice, cast.vision, gpu_training("b", replicas=1, cpu="2"))
    assert (above.admission, above.priority_class) == ("preemptible", PRIORITY_PREEMPTIBLE)
    assert used(cast.vision, "H100-80GB") == 2  # within the 4 guaranteed H100s


def test_gpu_work_over_the_cpu_limit_is_refused_even_when_it_asks_for_an_exception(cast, vision_h100, vision_compute):
    with pytest.raises(QuotaRefused) as refused:
        lifecycle.request_workload(
            cast.alice, cast.vision, gpu_training(replicas=3, cpu="3"), wants_exception=True, reason="deadline"
        )
    assert "9" in str(refused.value) and "cores cpu" in str(refused.value)
    assert not QuotaException.objects.exists()
    assert (used(cast.vision, "H100-80GB"), used(cast.vision, "cpu")) == (0, 0)


def test_a_team_without_cpu_or_memory_quota_is_not_limited_but_its_work_records_what_it_holds(cast, catalog):
    w = lifecycle.request_workload(cast.bob, cast.nlp, cpu_notebook(cpu="150", memory="1Ti"))
    assert (w.state, w.admission) == (State.QUEUED, "guaranteed")
    assert (w.cpu_charge, w.memory_charge) == (150, 1024)
    assert not Quota.objects.filter(team=cast.nlp).exists()


def test_stopping_gives_the_cpu_and_memory_back(cast, vision_compute):
    w = lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook(cpu="3", memory="10Gi"))
    assert (used(cast.vision, "cpu"), used(cast.vision, "memory")) == (3, 10)
    lifecycle.stop(cast.alice, w)
    assert (used(cast.vision, "cpu"), used(cast.vision, "memory")) == (0, 0)
    lifecycle.start(cast.alice, Workload.objects.get(pk=w.pk))  # started again: admitted again
    assert (used(cast.vision, "cpu"), used(cast.vision, "memory")) == (3, 10)


def test_an_approved_gpu_exception_charges_cpu_and_memory_then_even_above_the_limit(cast, vision_h100, vision_compute):
    Quota.objects.filter(pk=vision_h100.pk).update(used=8)
    waiting = lifecycle.request_workload(
        cast.alice, cast.vision, gpu_training(replicas=1, cpu="6"), wants_exception=True, reason="deadline"
    )
    assert waiting.state == State.PENDING_APPROVAL
    assert used(cast.vision, "cpu") == 0  # nothing held while it waits
    lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook(cpu="4"))  # meanwhile
    approvals.decide_exception(cast.admin, QuotaException.objects.get().pk, approve=True)
    cpu = Quota.objects.get(team=cast.vision, gpu_class="cpu")
    assert (cpu.used, cpu.limit, cpu.overage) == (10, 8, 2)
    assert Workload.objects.get(pk=waiting.pk).cpu_charge == 6


def test_the_recount_corrects_cpu_drift_and_leaves_teams_without_a_cpu_quota_alone(cast, vision_compute):
    lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("a", cpu="2", memory="8Gi"))
    lifecycle.request_workload(cast.bob, cast.nlp, cpu_notebook("b", cpu="2"))
    Quota.objects.filter(team=cast.vision, gpu_class="cpu").update(used=5)
    lifecycle.recount_quota_usage()
    assert (used(cast.vision, "cpu"), used(cast.vision, "memory")) == (2, 8)
    assert list(QuotaDrift.objects.values_list("gpu_class", "recorded", "expected")) == [("cpu", 5, 2)]
    assert not Quota.objects.filter(team=cast.nlp).exists()


def test_the_cluster_gets_cpu_cores_and_memory_bytes_in_the_queue_and_resource_quotas(
    cast, catalog, vision_h100, volcano_builder
):
    from jobs.kube.manifests import team_objects
    from jobs.specs import TeamRef

    make_quota(cast.vision, "cpu", Decimal("4.5"), 8)
    make_quota(cast.vision, "memory", 16, Decimal("32.5"))
    amounts = team_resource_quota(cast.vision)
    assert amounts["cpu"] == (Decimal("4.5"), 8)
    assert amounts["memory"] == (16 * 2**30, 65 * 2**29)
    objects = {o["kind"] + o["metadata"]["name"]: o for o in team_objects(TeamRef("vision", "team-vision"), amounts)}
    queue = objects["Queueteam-vision"]["spec"]
    assert (queue["capability"]["cpu"], queue["capability"]["memory"]) == ("8", str(65 * 2**29))
    assert queue["deserved"]["cpu"] == "4500m"
    hard = objects["ResourceQuotagpu-quota"]["spec"]["hard"]
    assert (hard["requests.cpu"], hard["requests.memory"], hard["requests.nvidia.com/gpu"]) == (
        "8",
        str(65 * 2**29),
        "8",
    )
    assert objects["ResourceQuotagpu-quota-guaranteed"]["spec"]["hard"]["requests.cpu"] == "4500m"


def test_a_team_without_cpu_quota_puts_no_cpu_in_the_cluster(cast, catalog, vision_h100):
    assert set(team_resource_quota(cast.vision)) == {"nvidia.com/gpu"}


def test_team_admins_can_ask_for_cpu_and_memory_and_the_approval_sets_them(cast, catalog):
    assert known_gpu_classes()[-2:] == ["cpu", "memory"]
    request = file_request(
        cast.bob, cast.nlp, gpu_class="cpu", guaranteed="16", limit="32", justification="preprocessing"
    )
    approvals.decide_request(cast.admin, request.pk, approve=True)
    quota = Quota.objects.get(team=cast.nlp, gpu_class="cpu")
    assert (quota.guaranteed, quota.limit) == (16, 32)
    assert AuditEntry.objects.filter(action="request.approved", gpu_class="cpu").exists()


def test_the_quota_page_shows_cpu_in_cores_and_memory_in_gib(client, cast, vision_compute):
    client.force_login(cast.alice)
    page = client.get("/quotas/").content.decode()
    assert "<code>cpu</code> <small>(cores)</small>" in page
    assert "<code>memory</code> <small>(GiB)</small>" in page


def test_work_charged_to_the_last_core_and_byte_runs_in_the_sandbox_under_its_resource_quota(
    cast, catalog, vision_h100, sandbox, kube
):
    """The charge matches what the pods request: at a limit equal to it, the cluster's quota admits every pod."""
    from jobs.reconcile import reconcile

    # A 2-replica MPI job (2 x 2 + 1 launcher core; 2 x 8 + 2 GiB) and a CPU notebook (2 cores, 4 GiB).
    make_quota(cast.vision, "cpu", 7, 7)
    make_quota(cast.vision, "memory", 22, 22)
    mpi = lifecycle.request_workload(
        cast.alice, cast.vision, gpu_training("m", replicas=2, framework="mpi", cpu="2", memory="8Gi")
    )
    nb = lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("nb", cpu="2", memory="4Gi"))
    for w in (mpi, nb):
        assert lifecycle.submit(w.pk, kube)
    for _ in range(3):
        sandbox.settle()
        reconcile(kube)
    assert {w.name: w.state for w in Workload.objects.all()} == {"m": State.RUNNING, "nb": State.RUNNING}
    quota = kube.get("v1", "ResourceQuota", "gpu-quota", "team-vision")
    assert quota["status"]["used"]["requests.cpu"] == "7"
    assert quota["spec"]["hard"]["requests.memory"] == str(22 * 2**30)
    with pytest.raises(QuotaRefused):
        lifecycle.request_workload(cast.alice, cast.vision, cpu_notebook("more", cpu="100m", memory="256Mi"))


def test_the_request_form_offers_cpu_in_cores_and_memory_in_gib(client, cast, catalog):
    client.force_login(cast.bob)
    page = client.get("/quotas/").content.decode()
    assert '<option value="cpu">cpu (cores)</option>' in page
    assert '<option value="memory">memory (GiB)</option>' in page
