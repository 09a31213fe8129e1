import csv
from decimal import Decimal
from fractions import Fraction

import pytest
import yaml

from portal.catalog import sync_catalog
from portal.cluster_profile import ProfileError, load_profile, parse_profile
from portal.gpus import GPU_MODELS
from portal.models import Offering
from tests.conftest import DEMO_PROFILE


def demo_data() -> dict:
    return yaml.safe_load(DEMO_PROFILE.read_text())


def test_the_demo_profile_offers_full_mig_shared_dra_and_cpu():
    profile = load_profile(DEMO_PROFILE)
    kinds = {slug: o.kind for slug, o in profile.offerings.items()}
    assert kinds == {
        "h100-80gb": "gpu",
        "a100-80gb-1g.10gb": "mig",
        "l4-shared": "shared",
        "h100-80gb-dra": "gpu",
        "cpu": "cpu",
    }


def test_a_mig_slice_is_a_seventh_of_an_a100_and_priced_by_its_share():
    slice_ = load_profile(DEMO_PROFILE).offerings["a100-80gb-1g.10gb"]
    assert slice_.share == Fraction(1, 7)
    assert slice_.price_per_hour == Decimal("0.4000")  # 2.80 / 7
    assert slice_.resource_name == "nvidia.com/mig-1g.10gb"
    assert slice_.memory_gib == 10


def test_a_time_sliced_l4_is_a_quarter_and_requests_the_shared_resource():
    shared = load_profile(DEMO_PROFILE).offerings["l4-shared"]
    assert shared.share == Fraction(1, 4)
    assert shared.resource_name == "nvidia.com/gpu.shared"
    assert shared.price_per_hour == Decimal("0.2000")


def test_a_dra_offering_uses_a_device_class_and_a_cel_selector_not_a_resource():
    dra = load_profile(DEMO_PROFILE).offerings["h100-80gb-dra"]
    assert dra.resource_name == ""
    assert dra.dra_device_class == "gpu.nvidia.com"
    assert dra.dra_selector == "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def test_gpu_offerings_select_their_product_and_tolerate_the_gpu_taint():
    h100 = load_profile(DEMO_PROFILE).offerings["h100-80gb"]
    assert h100.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert h100.tolerations == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_cpu_only_work_never_lands_on_gpu_nodes():
    cpu = load_profile(DEMO_PROFILE).offerings["cpu"]
    assert cpu.tolerations == []
    terms = cpu.node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"}]}]


def test_node_pools_advertise_the_extended_resources_of_their_partitioning():
    pools = load_profile(DEMO_PROFILE).pools
    assert pools["h100"].allocatable() == {"nvidia.com/gpu": 8}
    assert pools["a100-mig"].allocatable() == {"nvidia.com/mig-1g.10gb": 56}
    assert pools["l4-shared"].allocatable() == {"nvidia.com/gpu.shared": 16}
    assert pools["h100-dra"].allocatable() == {}


def with_pool_change(index: int, **changes) -> dict:
    data = demo_data()
    data["node_pools"][index].update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            with_pool_change(1, mig={"strategy": "mixed", "layout": {"5g.20gb": 1}}),
            "node_pools[1].mig.layout.5g.20gb: A100-80GB has no MIG profile '5g.20gb'",
        ),
        (
            with_pool_change(1, mig={"strategy": "mixed", "layout": {"3g.40gb": 3}}),
            "node_pools[1].mig.layout.3g.40gb: a A100-80GB holds at most 2 3g.40gb instances, not 3",
        ),
        (
            with_pool_change(1, mig={"strategy": "mixed", "layout": {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}}),
            "node_pools[1].mig.layout: uses 8 compute slices but a A100-80GB has 7",
        ),
        (with_pool_change(2, mig={"layout": {"1g.10gb": 1}}), "node_pools[2]: a pool is either MIG-partitioned"),
        (with_pool_change(0, gpu_model="H900"), "node_pools[0].gpu_model: unknown GPU model 'H900'"),
        (with_pool_change(0, gpus_per_node=0), "node_pools[0].gpus_per_node: must be a whole number of at least 1"),
        (with_pool_change(0, colour="blue"), "node_pools[0].colour: unknown field"),
        (with_pool_change(2, request_mode="dra"), "node_pools[2].sharing: sharing is configured in the device plugin"),
        (with_pool_change(0, gpu_price_per_hour="lots"), "node_pools[0].gpu_price_per_hour: must be a price"),
    ],
)
def test_an_impossible_profile_is_refused_with_the_field_named(data, message):
    with pytest.raises(ProfileError) as caught:
        parse_profile(data)
    assert message in str(caught.value)


def test_an_offering_must_name_an_existing_pool_and_slice():
    data = demo_data()
    data["offerings"].append({"slug": "a100-3g", "pool": "a100-mig", "mig_profile": "3g.40gb"})
    with pytest.raises(ProfileError, match=r"offerings\[5\].mig_profile: pool 'a100-mig' has no '3g.40gb' slices"):
        parse_profile(data)
    data["offerings"][-1] = {"slug": "ghost", "pool": "nowhere"}
    with pytest.raises(ProfileError, match=r"offerings\[5\].pool: no node pool named 'nowhere'"):
        parse_profile(data)


def test_a_cpu_offering_needs_its_own_price():
    data = demo_data()
    del data["offerings"][4]["price_per_hour"]
    with pytest.raises(ProfileError, match=r"offerings\[4\].price_per_hour: a CPU-only offering needs its own price"):
        parse_profile(data)


def test_a_missing_profile_file_is_named(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        load_profile(tmp_path / "nope.yaml")


@pytest.mark.django_db
def test_loading_the_catalog_twice_changes_nothing_the_second_time():
    first = sync_catalog(load_profile(DEMO_PROFILE))
    second = sync_catalog(load_profile(DEMO_PROFILE))
    assert len(first.created) == 5
    assert (second.created, second.updated, second.deactivated) == ([], [], [])
    assert Offering.objects.count() == 5


@pytest.mark.django_db
def test_a_price_set_by_an_admin_survives_a_reload_and_dropped_offerings_are_deactivated():
    sync_catalog(load_profile(DEMO_PROFILE))
    Offering.objects.filter(slug="h100-80gb").update(price_per_hour=Decimal("3.10"), price_set_by_admin=True)
    data = demo_data()
    data["offerings"] = [o for o in data["offerings"] if o["slug"] != "l4-shared"]
    changes = sync_catalog(parse_profile(data))
    assert changes.deactivated == ["l4-shared"]
    assert Offering.objects.get(slug="h100-80gb").price_per_hour == Decimal("3.1000")
    assert not Offering.objects.get(slug="l4-shared").is_active


def test_the_portals_mig_facts_match_the_upstream_reference(shared_reference):
    rows = list(csv.DictReader((shared_reference / "mig" / "mig-profiles.csv").open()))
    assert rows, "the reference table is empty"
    by_key = {key.split(" ")[0]: model for key, model in GPU_MODELS.items()}
    for row in rows:
        model = by_key[row["gpu_model"].split(" ")[0]]
        profile = model.mig_profiles[row["profile"]]
        assert profile.compute_slices == int(row["compute_slices_g"]), row["profile"]
        assert profile.memory_gb == int(row["memory_gb"]), row["profile"]
        assert profile.max_instances == int(row["max_instances_per_gpu"]), row["profile"]
        assert profile.resource_name == row["k8s_resource_mixed_strategy"], row["profile"]
    assert sum(len(m.mig_profiles) for m in GPU_MODELS.values()) == len(rows)
