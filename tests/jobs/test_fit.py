"""Requests the cluster could never hold are refused at submit and flagged in the approvals console.

alice: member of vision (asks for work). admin: platform admin (decides exceptions).
The demo cluster as observed: 2 nodes x 8 H100 (device plugin), 1 A100 node cut into 56 slices.
"""

from decimal import Decimal
from unittest import mock

import pytest

from jobs import fit, lifecycle
from jobs.capacity import node_capacities, refresh_capacity
from jobs.models import State, Workload
from portal.cluster_profile import load_profile
from portal.models import Offering
from quotas.models import Quota, QuotaException
from tests.conftest import DEMO_PROFILE
from tests.jobs.conftest import notebook, training
from tests.ui.test_capacity import GPU_TAINT, H100_PRODUCT, ListingCluster, dra_node, node

OFFERINGS = load_profile(DEMO_PROFILE).offerings


def h100(*node_units):
    return fit.Inventory("h100-80gb", "gpu", tuple(node_units))


# -- the rule, pure ---------------------------------------------------------------------------


def test_three_nodes_of_eight_do_not_fit_on_two_nodes_of_eight():
    errors = fit.problems(h100(8, 8), kind="training", gpus_per_replica=8, replicas=3, max_replicas=3)
    assert list(errors) == ["replicas"]
    assert "at most 2 nodes x 8 GPUs of h100-80gb exist" in errors["replicas"][0]
    assert "room for 2 replicas of 8" in errors["replicas"][0]


def test_a_replica_larger_than_any_node_is_refused_on_gpus_per_replica():
    errors = fit.problems(h100(4, 4, 4), kind="notebook", gpus_per_replica=8, replicas=1, max_replicas=1)
    assert list(errors) == ["gpus_per_replica"]
    assert "no node has 8 GPUs: at most 3 nodes x 4 GPUs of h100-80gb exist" in errors["gpus_per_replica"][0]


def test_small_replicas_are_packed_several_to_a_node():
    inventory = h100(8, 8)
    assert fit.problems(inventory, kind="training", gpus_per_replica=4, replicas=4, max_replicas=4) == {}
    assert (
        "room for 4 replicas of 4"
        in fit.problems(inventory, kind="training", gpus_per_replica=4, replicas=5, max_replicas=5)["replicas"][0]
    )
    # 3 GPUs per pod: two per node (6 of 8), the rest of each node cannot hold a third.
    assert (
        "room for 4 replicas"
        in fit.problems(inventory, kind="training", gpus_per_replica=3, replicas=5, max_replicas=5)["replicas"][0]
    )


def test_mixed_node_sizes_are_described_by_size():
    assert fit.Inventory("x", "gpu", (8, 4, 4)).describe() == "1 node x 8 and 2 nodes x 4 GPUs of x"
    assert fit.Inventory("s", "mig", (56,)).describe() == "1 node x 56 MIG slices of s"


def test_an_endpoint_is_checked_at_its_minimum_and_at_its_maximum_replicas():
    inventory = h100(8, 8)
    only_max = fit.problems(inventory, kind="endpoint", gpus_per_replica=8, replicas=1, max_replicas=3)
    assert list(only_max) == ["max_replicas"]
    both = fit.problems(inventory, kind="endpoint", gpus_per_replica=8, replicas=3, max_replicas=4)
    assert set(both) == {"min_replicas", "max_replicas"}
    assert fit.problems(inventory, kind="endpoint", gpus_per_replica=8, replicas=0, max_replicas=2) == {}


def test_an_offering_without_any_node_is_refused_on_the_offering():
    errors = fit.problems(h100(), kind="notebook", gpus_per_replica=1, replicas=1, max_replicas=1)
    assert errors == {"offering": ["no node of the cluster has h100-80gb; choose another offering"]}


def test_an_unknown_inventory_refuses_nothing():
    assert fit.problems(None, kind="training", gpus_per_replica=8, replicas=16, max_replicas=16) == {}


# -- the inventory, from listed nodes --------------------------------------------------------


def test_the_inventory_counts_cordoned_and_not_ready_nodes_but_not_tainted_or_other_ones():
    nodes = [
        node("ok", H100_PRODUCT, {"nvidia.com/gpu": "8"}),
        node("down", H100_PRODUCT, {"nvidia.com/gpu": "8"}, ready=False),
        node("cordoned", H100_PRODUCT, {"nvidia.com/gpu": "4"}, unschedulable=True),
        node("kept", H100_PRODUCT, {"nvidia.com/gpu": "8"}, taints=[GPU_TAINT, {"key": "x", "effect": "NoSchedule"}]),
        node("other-model", "NVIDIA-L4", {"nvidia.com/gpu": "8"}),
        node("no-gpus-advertised", H100_PRODUCT, {}),
    ]
    assert node_capacities(OFFERINGS["h100-80gb"], nodes) == [8, 8, 4]


def test_a_dra_inventory_is_the_labelled_count_and_unknown_without_the_label():
    offering = OFFERINGS["h100-80gb-dra"]
    assert node_capacities(offering, [dra_node("d1", 8), dra_node("d2", 4)]) == [8, 4]
    unlabelled = node("d3", H100_PRODUCT, **{"nvidia.com/gpu.deploy.device-plugin": "false"})
    assert node_capacities(offering, [dra_node("d1"), unlabelled]) is None
    assert node_capacities(OFFERINGS["cpu"], [dra_node("d1")]) is None


def test_refresh_capacity_stores_each_offerings_inventory(catalog):
    cluster = ListingCluster(
        {"Node": [node("h1", H100_PRODUCT, {"nvidia.com/gpu": "8"}), node("h2", H100_PRODUCT, {"nvidia.com/gpu": "8"})]}
    )
    refresh_capacity(cluster)
    stored = dict(Offering.objects.values_list("slug", "node_units"))
    assert stored["h100-80gb"] == [8, 8]
    assert stored["a100-80gb-1g.10gb"] == []
    assert stored["cpu"] is None


# -- refused at submit: form, API and preview ------------------------------------------------


@pytest.fixture
def observed(catalog):
    """The cluster as the capacity refresh saw it: two 8-GPU H100 nodes, one A100 node of 56 slices."""
    Offering.objects.filter(slug="h100-80gb").update(node_units=[8, 8])
    Offering.objects.filter(slug="a100-80gb-1g.10gb").update(node_units=[56])


@pytest.fixture
def big_quota(cast, catalog):
    return Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=Decimal(32), limit=Decimal(64))


@pytest.fixture(autouse=True)
def no_celery():
    with mock.patch("jobs.tasks.submit_workload.delay"), mock.patch("jobs.tasks.apply_workload.delay"):
        yield


def test_the_api_refuses_three_nodes_of_eight_h100_with_the_clusters_maximum(api, cast, observed, big_quota):
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/", {"team": "vision", **training(replicas=3, gpus=8)}, format="json")
    assert response.status_code == 400, response.content
    assert "at most 2 nodes x 8 GPUs of h100-80gb exist" in response.json()["replicas"][0]
    assert not Workload.objects.exists()
    assert Quota.objects.get(pk=big_quota.pk).used == 0


def test_the_api_accepts_what_fits(api, cast, observed, big_quota):
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/", {"team": "vision", **training(replicas=2, gpus=8)}, format="json")
    assert response.status_code == 201, response.content


def test_an_exception_cannot_be_asked_for_work_that_never_fits(api, cast, observed, big_quota):
    api.force_authenticate(cast.alice)
    body = {"team": "vision", **training(replicas=3, gpus=8), "wants_exception": True, "exception_reason": "big"}
    assert api.post("/api/v1/workloads/", body, format="json").status_code == 400
    assert not QuotaException.objects.exists()


def test_the_api_preview_says_the_same(api, cast, observed):
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/preview/", {"team": "vision", **training(replicas=3, gpus=8)}, format="json")
    assert response.status_code == 400
    assert "replicas" in response.json()


def test_the_form_shows_the_clusters_maximum_next_to_the_field(client, cast, observed, big_quota):
    client.force_login(cast.alice)
    response = client.post(
        "/workloads/new/training/",
        {
            "team": "vision",
            "name": "too-big",
            "offering": "h100-80gb",
            "framework": "torch",
            "replicas": "3",
            "gpus_per_replica": "8",
            "image": "nvcr.io/nvidia/pytorch:24.10-py3",
            "action": "create",
        },
    )
    assert response.status_code == 200
    assert "at most 2 nodes x 8 GPUs of h100-80gb exist" in response.content.decode()
    assert not Workload.objects.exists()


def test_a_notebook_on_a_slice_fits(cast, observed, catalog):
    Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=1, limit=1)
    workload = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    assert workload.state == State.QUEUED


def test_a_rollout_is_not_blocked_by_a_cluster_that_shrank(cast, catalog, big_quota):
    endpoint = {
        "kind": "endpoint",
        "name": "serve",
        "offering": "h100-80gb",
        "gpus_per_replica": 8,
        "min_replicas": 1,
        "max_replicas": 2,
        "model_format": "sklearn",
        "storage_uri": "s3://models/v1",
    }
    workload = lifecycle.request_workload(cast.alice, cast.vision, endpoint)
    Workload.objects.filter(pk=workload.pk).update(state=State.RUNNING)
    workload.refresh_from_db()
    Offering.objects.filter(slug="h100-80gb").update(node_units=[8])  # one node left
    lifecycle.rollout(cast.alice, workload, "s3://models/v2", 10)
    workload.refresh_from_db()
    assert workload.canary_storage_uri == "s3://models/v2"


# -- the approvals console -------------------------------------------------------------------


def waiting_for_exception(cast, replicas):
    workload = Workload.objects.create(
        team=cast.vision,
        created_by=cast.alice,
        kind="training",
        name=f"waiting-{replicas}",
        framework="torch",
        offering=Offering.objects.get(slug="h100-80gb"),
        gpus_per_replica=8,
        replicas=replicas,
        max_replicas=replicas,
        image="nvcr.io/nvidia/pytorch:24.10-py3",
        state=State.PENDING_APPROVAL,
    )
    return QuotaException.objects.create(
        team=cast.vision,
        workload_id=workload.pk,
        gpu_class="H100-80GB",
        amount=Decimal(8 * replicas),
        requested_by=cast.alice,
    )


def test_the_console_warns_on_an_exception_whose_workload_could_never_run(client, cast, observed):
    never = waiting_for_exception(cast, 3)
    fits = waiting_for_exception(cast, 2)
    client.force_login(cast.admin)
    html = client.get("/approvals/").content.decode()
    assert html.count("could never run on the cluster") == 1
    # Listed oldest first: the warning sits in the first card, before the second one starts.
    never_at = html.index(f'name="exception" value="{never.pk}"')
    fits_at = html.index(f'name="exception" value="{fits.pk}"')
    assert never_at < html.index("could never run on the cluster") < fits_at
    assert "at most 2 nodes x 8 GPUs of h100-80gb exist" in html


def test_the_console_does_not_warn_when_the_inventory_is_unknown(client, cast, catalog):
    waiting_for_exception(cast, 3)
    client.force_login(cast.admin)
    assert "could never run" not in client.get("/approvals/").content.decode()


def test_the_sandbox_clusters_inventory_refuses_three_nodes_of_eight(kube, api, cast, catalog, big_quota):
    """End to end: the capacity refresh reads the demo cluster's nodes, and the API refuses what they cannot hold."""
    refresh_capacity(kube)
    stored = dict(Offering.objects.values_list("slug", "node_units"))
    assert stored == {
        "h100-80gb": [8, 8],
        "h100-80gb-dra": [8],
        "a100-80gb-1g.10gb": [56],
        "l4-shared": [16, 16],
        "cpu": None,
    }
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/", {"team": "vision", **training(replicas=3, gpus=8)}, format="json")
    assert response.status_code == 400
    assert "at most 2 nodes x 8 GPUs of h100-80gb exist" in response.json()["replicas"][0]
