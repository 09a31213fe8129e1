"""jobs.capacity on hand-made node, pod and claim lists, and refresh_capacity's one list per kind."""

import pytest

from jobs.capacity import free_units, refresh_capacity
from portal.cluster_profile import load_profile
from tests.conftest import DEMO_PROFILE

OFFERINGS = load_profile(DEMO_PROFILE).offerings
H100 = OFFERINGS["h100-80gb"]
SLICE = OFFERINGS["a100-80gb-1g.10gb"]
SHARED_L4 = OFFERINGS["l4-shared"]
H100_DRA = OFFERINGS["h100-80gb-dra"]
CPU = OFFERINGS["cpu"]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(name, product, allocatable=None, *, ready=True, unschedulable=False, taints=(GPU_TAINT,), **labels):
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product, **labels}},
        "spec": {"unschedulable": unschedulable, "taints": list(taints)},
        "status": {
            "allocatable": {"cpu": "64", **(allocatable or {})},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(node_name, resource, amount, *, phase="Running", init=None):
    spec = {
        "nodeName": node_name,
        "containers": [{"name": "main", "resources": {"limits": {resource: str(amount)}}}],
    }
    if init:
        spec["initContainers"] = init
    return {"metadata": {"name": f"p-{node_name}-{amount}"}, "spec": spec, "status": {"phase": phase}}


H100_PRODUCT = H100.node_selector["nvidia.com/gpu.product"]
A100_PRODUCT = SLICE.node_selector["nvidia.com/gpu.product"]
L4_PRODUCT = SHARED_L4.node_selector["nvidia.com/gpu.product"]


def test_full_gpus_are_allocatable_minus_the_requests_of_running_pods_bound_to_the_nodes():
    nodes = [node("h1", H100_PRODUCT, {"nvidia.com/gpu": "8"}), node("h2", H100_PRODUCT, {"nvidia.com/gpu": "8"})]
    pods = [
        pod("h1", "nvidia.com/gpu", 3),
        pod("h2", "nvidia.com/gpu", 8, phase="Succeeded"),  # terminated: holds nothing
        pod("", "nvidia.com/gpu", 8, phase="Pending"),  # not bound yet: holds nothing
        pod("h2", "cpu", 4),  # asks for no GPU
    ]
    assert free_units(H100, nodes, pods) == (16, 13)


def test_nodes_that_are_not_ready_cordoned_or_tainted_against_the_offering_do_not_count():
    nodes = [
        node("ok", H100_PRODUCT, {"nvidia.com/gpu": "8"}),
        node("down", H100_PRODUCT, {"nvidia.com/gpu": "8"}, ready=False),
        node("cordoned", H100_PRODUCT, {"nvidia.com/gpu": "8"}, unschedulable=True),
        node(
            "drained",
            H100_PRODUCT,
            {"nvidia.com/gpu": "8"},
            taints=[GPU_TAINT, {"key": "maint", "effect": "NoExecute"}],
        ),
        node("other-model", "NVIDIA-L4", {"nvidia.com/gpu": "8"}),
    ]
    assert free_units(H100, nodes, []) == (8, 8)


def test_mig_slices_count_the_slice_resource_of_the_profile():
    nodes = [node("a1", A100_PRODUCT, {"nvidia.com/mig-1g.10gb": "56", "nvidia.com/mig-3g.40gb": "2"})]
    pods = [
        pod("a1", "nvidia.com/mig-1g.10gb", 1),
        pod("a1", "nvidia.com/mig-1g.10gb", 1),
        pod("a1", "nvidia.com/mig-3g.40gb", 1),
    ]
    assert free_units(SLICE, nodes, pods) == (56, 54)


def test_shared_gpus_count_their_replicas_and_init_containers_count_as_the_scheduler_does():
    nodes = [node(f"l{i}", L4_PRODUCT, {"nvidia.com/gpu.shared": "16"}) for i in range(2)]
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"nvidia.com/gpu.shared": "1"}}}
    setup = {"name": "i", "resources": {"requests": {"nvidia.com/gpu.shared": "3"}}}
    pods = [pod("l0", "nvidia.com/gpu.shared", 1, init=[sidecar]), pod("l1", "nvidia.com/gpu.shared", 1, init=[setup])]
    # l0: 1 + 1 sidecar = 2; l1: max(1, init 3) = 3.
    assert free_units(SHARED_L4, nodes, pods) == (32, 27)


def test_a_node_cannot_have_fewer_than_zero_free():
    nodes = [node("h1", H100_PRODUCT, {"nvidia.com/gpu": "2"}), node("h2", H100_PRODUCT, {"nvidia.com/gpu": "2"})]
    assert free_units(H100, nodes, [pod("h1", "nvidia.com/gpu", 5)]) == (4, 2)


def dra_node(name, count=8):
    labels = {"nvidia.com/gpu.count": str(count), "nvidia.com/gpu.deploy.device-plugin": "false"}
    return node(name, H100_PRODUCT, **labels)


def claim(node_name, devices, device_class="gpu.nvidia.com", *, by_pool=False):
    allocation = {
        "devices": {
            "results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node_name, "device": f"gpu-{i}"}
                for i in range(devices)
            ]
        }
    }
    if not by_pool:
        allocation["nodeSelector"] = {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]
        }
    return {
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
        "status": {"allocation": allocation},
    }


def test_dra_gpus_are_the_labelled_count_minus_devices_allocated_to_claims_on_those_nodes():
    nodes = [dra_node("d1"), node("h1", H100_PRODUCT, {"nvidia.com/gpu": "8"})]
    claims = [
        claim("d1", 2),
        claim("d1", 1, by_pool=True),
        claim("d1", 1, device_class="mig.nvidia.com"),  # another device class
        claim("h1", 1),  # not a DRA node of this offering
        {"spec": {}, "status": {}},  # not allocated yet
    ]
    assert free_units(H100_DRA, nodes, [], claims) == (8, 5)
    # The device-plugin offering of the same GPU ignores the DRA node, and vice versa.
    assert free_units(H100, nodes, []) == (8, 8)


def test_dra_free_units_are_unknown_when_claims_could_not_be_listed():
    assert free_units(H100_DRA, [dra_node("d1")], [], None) == (8, None)


def test_cpu_offerings_have_no_units_to_count():
    assert free_units(CPU, [node("c1", "", {"cpu": "64"})], []) == (None, None)


class ListingCluster:
    """A cluster that answers lists from fixed objects and records what was asked."""

    def __init__(self, objects):
        self.objects = objects
        self.calls = []

    def list(self, api_version, kind, *, label_selector, namespace=None):
        self.calls.append((kind, namespace))
        return self.objects.get(kind, [])


@pytest.mark.django_db
def test_refresh_capacity_lists_each_kind_once_and_stores_every_offering(catalog):
    from portal.models import Offering

    cluster = ListingCluster(
        {
            "Node": [node("h1", H100_PRODUCT, {"nvidia.com/gpu": "8"}), dra_node("d1")],
            "Pod": [pod("h1", "nvidia.com/gpu", 2)],
            "ResourceClaim": [claim("d1", 3)],
        }
    )
    assert refresh_capacity(cluster) == len(catalog)
    assert cluster.calls == [("Node", None), ("Pod", None), ("ResourceClaim", None)]
    stored = {o.slug: (o.total_units, o.free_units) for o in Offering.objects.all()}
    assert stored["h100-80gb"] == (8, 6)
    assert stored["h100-80gb-dra"] == (8, 5)
    assert stored["a100-80gb-1g.10gb"] == (0, 0)
    assert stored["cpu"] == (None, None)
    assert all(o.capacity_observed_at for o in Offering.objects.all())


@pytest.mark.django_db
def test_refresh_capacity_reads_the_sandbox_clusters_nodes(catalog, cluster):
    from jobs.kube.client import Cluster
    from portal.models import Offering

    with Cluster.from_settings() as kube:
        refresh_capacity(kube)
    totals = {o.slug: o.total_units for o in Offering.objects.all()}
    # The demo profile: 2 nodes of 8 H100, 1 of 8 A100 cut in 7 slices, 2 of 4 L4 shared 4 ways, 8 DRA H100.
    assert totals == {
        "h100-80gb": 16,
        "a100-80gb-1g.10gb": 56,
        "l4-shared": 32,
        "h100-80gb-dra": 8,
        "cpu": None,
    }
