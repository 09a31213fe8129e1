"""Kueue builders: literal objects, Kueue's own rules, and the upstream v1beta2 CRD schemas."""

from decimal import Decimal

import pytest

from quotas import kueue
from quotas.cluster import ClassQuota, active_offerings
from quotas.models import Quota
from tests.kube_schemas import requires_reference, validate_custom
from tests.quotas.conftest import make_quota

pytestmark = pytest.mark.django_db


def test_flavors_are_one_per_gpu_class_with_the_offerings_node_labels(catalog):
    flavors = kueue.flavors(active_offerings())
    assert [(f.name, f.gpu_class, dict(f.node_labels)) for f in flavors] == [
        ("gpu-a100-80gb", "A100-80GB", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        ("gpu-a100-80gb-1g-10gb", "A100-80GB/1g.10gb", {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        ("gpu-h100-80gb", "H100-80GB", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        ("gpu-l4", "L4", {"nvidia.com/gpu.product": "NVIDIA-L4"}),
    ]
    assert kueue.resource_flavor(flavors[2]) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {
            "name": "gpu-h100-80gb",
            "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/gpu-class": "h100-80gb"},
        },
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    }


def test_a_team_gets_a_cluster_queue_with_guaranteed_as_nominal_and_the_rest_as_borrowing(cast, catalog):
    make_quota(cast.nlp, "H100-80GB", 2, 6)
    assert kueue.team_kueue_objects(cast.nlp) == [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {
                "name": "team-nlp",
                "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp"},
            },
            "spec": {
                "cohortName": "gpu-portal",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-nlp"}},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "withinClusterQueue": "LowerPriority",
                    "borrowWithinCohort": {"policy": "Never"},
                },
                # The H100 quota covers the device-plugin GPUs and the DRA offering's devices, counted
                # as the resource Kueue's configuration maps the gpu.nvidia.com DeviceClass to.
                "resourceGroups": [
                    {
                        "coveredResources": ["gpu.nvidia.com", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "gpu-h100-80gb",
                                "resources": [
                                    {
                                        "name": "gpu.nvidia.com",
                                        "nominalQuota": "2",
                                        "borrowingLimit": "4",
                                    },
                                    {"name": "nvidia.com/gpu", "nominalQuota": "2", "borrowingLimit": "4"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {
                "name": "gpu-portal",
                "namespace": "team-nlp",
                "labels": {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/team": "nlp"},
            },
            "spec": {"clusterQueue": "team-nlp"},
        },
    ]


def test_classes_sharing_a_resource_share_a_group_profile_flavor_first():
    quotas = {
        "A100-80GB": ClassQuota("A100-80GB", Decimal(1), Decimal(2)),
        "A100-80GB/1g.10gb": ClassQuota("A100-80GB/1g.10gb", Decimal(3), Decimal(5)),
        "H100-80GB": ClassQuota("H100-80GB", Decimal(0), Decimal(4)),
    }
    amounts = {
        "gpu-a100-80gb": {"nvidia.com/gpu": (1, 1)},  # a pool of whole A100s as well as slices
        "gpu-a100-80gb-1g-10gb": {"nvidia.com/mig-1g.10gb": (3, 2)},
        "gpu-h100-80gb": {"nvidia.com/gpu": (0, 4)},
    }
    classes = {kueue.flavor_name(c): c for c in quotas}
    groups = kueue.resource_groups(amounts, classes=classes)
    assert groups == [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "gpu-a100-80gb",
                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1", "borrowingLimit": "1"}],
                },
                {
                    "name": "gpu-h100-80gb",
                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "0", "borrowingLimit": "4"}],
                },
            ],
        },
        {
            "coveredResources": ["nvidia.com/mig-1g.10gb"],
            "flavors": [
                {
                    "name": "gpu-a100-80gb-1g-10gb",
                    "resources": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "3", "borrowingLimit": "2"}],
                }
            ],
        },
    ]


def test_a_flavor_lists_every_resource_of_its_group_in_order_with_zero_where_it_has_none():
    amounts = {"f-a": {"r1": (1, 0), "r2": (2, 0)}, "f-b": {"r2": (5, 1)}}
    [group] = kueue.resource_groups(amounts)
    assert group["coveredResources"] == ["r1", "r2"]
    assert [[(r["name"], r["nominalQuota"]) for r in f["resources"]] for f in group["flavors"]] == [
        [("r1", "1"), ("r2", "2")],
        [("r1", "0"), ("r2", "5")],
    ]


def test_mig_slices_on_a_model_quota_become_slices_and_a_profile_quota_takes_precedence(cast, catalog):
    make_quota(cast.vision, "A100-80GB", 1, 2)
    cq = kueue.team_cluster_queue(cast.vision)
    [group] = cq["spec"]["resourceGroups"]
    assert group["flavors"] == [
        {
            "name": "gpu-a100-80gb",
            "resources": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "7", "borrowingLimit": "7"}],
        }
    ]
    make_quota(cast.vision, "A100-80GB/1g.10gb", 2, 3)
    [group] = kueue.team_cluster_queue(cast.vision)["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == ["gpu-a100-80gb-1g-10gb"]


def test_the_lending_pool_lends_what_no_team_is_guaranteed(cast, catalog):
    from portal.models import Offering

    Offering.objects.filter(slug="h100-80gb").update(total_units=16)
    Offering.objects.filter(slug="a100-80gb-1g.10gb").update(total_units=56)
    make_quota(cast.vision, "H100-80GB", 4, 8)
    make_quota(cast.nlp, "H100-80GB", 2, 16)
    make_quota(cast.nlp, "A100-80GB/1g.10gb", 7, 14)  # slices of the same GPUs as the model flavor
    objects = kueue.cluster_kueue_objects()
    pool = objects[-1]
    assert pool["metadata"]["name"] == "gpu-portal-lending-pool"
    flavors = {f["name"]: f["resources"] for g in pool["spec"]["resourceGroups"] for f in g["flavors"]}
    assert flavors == {
        "gpu-a100-80gb": [{"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "49"}],
        "gpu-h100-80gb": [{"name": "nvidia.com/gpu", "nominalQuota": "10"}],
    }


def test_workloads_name_the_local_queue_with_a_label():
    assert kueue.queue_labels() == {"kueue.x-k8s.io/queue-name": "gpu-portal"}


def test_the_label_set_is_the_one_jobs_uses():
    from jobs.kube import labels

    assert (kueue.MANAGED_BY_LABEL, kueue.MANAGED_BY_VALUE, kueue.TEAM_LABEL) == (
        labels.MANAGED_BY_LABEL,
        labels.MANAGED_BY_VALUE,
        labels.TEAM_LABEL,
    )


@requires_reference
def test_every_kueue_object_is_valid_under_the_upstream_crds(cast, catalog):
    from portal.models import Offering

    Offering.objects.filter(slug="h100-80gb").update(total_units=16)
    make_quota(cast.vision, "H100-80GB", 4, 8, used=Decimal(9), overage=Decimal(1))
    make_quota(cast.vision, "A100-80GB", 1, 2)
    make_quota(cast.vision, "L4", Decimal("0.5"), 2)
    make_quota(cast.nlp, "A100-80GB/1g.10gb", 2, 3)
    make_quota(cast.nlp, "A100-80GB", 1, 1)
    objects = kueue.cluster_kueue_objects() + kueue.team_kueue_objects(cast.vision) + kueue.team_kueue_objects(cast.nlp)
    objects.append(kueue.default_flavor())
    objects.append(kueue.cluster_queue("cpu-team", "team-cpu-team", {}, cpu_memory={"cpu": "64", "memory": "512Gi"}))
    assert {o["kind"] for o in objects} == {"ResourceFlavor", "ClusterQueue", "LocalQueue"}
    for obj in objects:
        validate_custom(obj)
    assert Quota.objects.count() == 5


@requires_reference
def test_the_schema_check_catches_a_borrowing_limit_without_a_cohort():
    from tests.kube_schemas import SchemaViolation

    cq = kueue.cluster_queue("x", "team-x", {"gpu-h100-80gb": {"nvidia.com/gpu": (1, 1)}})
    del cq["spec"]["cohortName"]
    with pytest.raises(SchemaViolation, match="borrowingLimit must be nil when cohort is empty"):
        validate_custom(cq)


def test_dra_offerings_are_counted_under_the_resource_their_device_class_is_mapped_to():
    from types import SimpleNamespace

    from portal.scheduler_config import dra_resource_name

    def dra(kind: str, device_class: str, mig_profile: str = "", share: tuple[int, int] = (1, 1)):
        return SimpleNamespace(
            kind=kind,
            resource_name="",
            dra_device_class=device_class,
            gpu_model="A100-80GB",
            mig_profile=mig_profile,
            share_numerator=share[0],
            share_denominator=share[1],
            node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        )

    gpu, mig = dra("gpu", "gpu.nvidia.com"), dra("mig", "mig.nvidia.com", "1g.10gb", (1, 7))
    quotas = {"A100-80GB": ClassQuota("A100-80GB", Decimal(2), Decimal(3))}
    assert kueue.kueue_resource(gpu) == dra_resource_name("gpu.nvidia.com")
    # A slice is one mig.nvidia.com device and 1/7 of a GPU: 2 GPUs guaranteed are 14 devices.
    assert kueue.team_amounts(quotas, [gpu, mig]) == {
        "gpu-a100-80gb": {
            "gpu.nvidia.com": (2, 1),
            "mig.nvidia.com": (14, 7),
        }
    }
    assert [f.name for f in kueue.flavors([gpu, mig])] == ["gpu-a100-80gb", "gpu-a100-80gb-1g-10gb"]
