"""Issue 12: the cluster's cost (and its idle share) starts when its data starts, per node."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.test import Client

from tests.cast import PASSWORD
from tests.usage.conftest import DEMO_NODES, at, nodes_seen_since
from usage import spend, telemetry
from usage.models import NodeSeen
from usage.sources import GpuSample

pytestmark = pytest.mark.django_db
PER_HOUR = Decimal("124.80")  # the demo cluster: 16 + 8 H100 at 4.00, 8 A100 at 2.80, 8 L4 at 0.80


def free_sample(hostname: str, when: str, model: str = "NVIDIA H100 80GB HBM3", **kw) -> GpuSample:
    return GpuSample(time=at(when), uuid=f"GPU-{hostname}", model_name=model, hostname=hostname, **kw)


def test_a_fifteen_minute_old_cluster_costs_fifteen_minutes_not_the_whole_period():
    nodes_seen_since("2026-03-02 11:45:15")
    now = at("2026-03-02 12:00:00")
    account = spend.cluster_account(now - timedelta(days=30), now, now=now)
    assert spend.money(account.cost) == PER_HOUR / 4
    assert account.since == at("2026-03-02 11:45:00") and account.starts_late
    assert account.idle == account.cost  # nobody ran anything


def test_each_node_costs_from_its_own_first_sample():
    nodes_seen_since("2026-03-02 10:00:00", {"h100-0": "H100-80GB"})
    nodes_seen_since("2026-03-02 11:00:00", {"h100-1": "H100-80GB"})
    account = spend.cluster_account(at("2026-03-02 00:00:00"), at("2026-03-02 12:00:00"), now=at("2026-03-03"))
    cost, _ = account.by_pool["h100"]
    assert cost == Decimal("4.00") * 8 * (120 + 60)  # price-minutes
    assert account.by_pool["l4-shared"] == (0, 0)  # never sampled: no cost
    assert account.node_since == {"h100-0": at("2026-03-02 10:00:00"), "h100-1": at("2026-03-02 11:00:00")}


def test_a_period_after_the_first_sample_is_not_cut(make_workload):
    nodes_seen_since("2026-02-01 00:00:00")
    account = spend.cluster_account(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00"), now=at("2026-03-04"))
    assert spend.money(account.cost) == PER_HOUR * 24
    assert account.since == at("2026-03-02 00:00:00") and not account.starts_late


def test_team_allocations_before_the_first_sample_are_left_out_so_every_cent_still_adds_up(make_workload, cast):
    make_workload("h100-80gb", started="2026-03-02 09:00:00", finished="2026-03-02 12:00:00", units=2)
    nodes_seen_since("2026-03-02 11:00:00")
    account = spend.cluster_account(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00"), now=at("2026-03-04"))
    assert account.by_team[cast.vision.pk] == Decimal("4.00") * 2 * 60  # 11:00-12:00 only
    assert account.allocated + account.idle == account.cost
    assert sum(account.shown().values()) == spend.money(account.cost)


def test_a_cluster_never_sampled_has_no_cost_and_says_so(make_workload):
    make_workload("h100-80gb", started="2026-03-02 09:00:00", finished="2026-03-02 12:00:00")
    account = spend.cluster_account(at("2026-03-02 00:00:00"), at("2026-03-03 00:00:00"), now=at("2026-03-04"))
    assert account.cost == 0 and account.by_team == {} and account.since is None and account.starts_late


def test_ingest_keeps_each_nodes_earliest_sample_and_a_backfill_moves_it_back():
    telemetry.ingest([free_sample("h100-0", "2026-03-02 10:00:30")], {})
    telemetry.ingest([free_sample("h100-0", "2026-03-02 10:05:30")], {})
    assert NodeSeen.objects.get(hostname="h100-0").first_sample_at == at("2026-03-02 10:00:00")
    telemetry.ingest([free_sample("h100-0", "2026-03-02 09:00:30")], {})  # a backfill of older minutes
    seen = NodeSeen.objects.get(hostname="h100-0")
    assert seen.first_sample_at == at("2026-03-02 09:00:00") and seen.gpu_class == "H100-80GB"


def test_a_node_belongs_to_the_pool_named_in_it_or_else_to_a_pool_of_its_gpu_model():
    specs = spend.pool_specs()
    assert spend.pool_of_node("h100-dra-0", "H100-80GB", specs, {}).name == "h100-dra"
    assert spend.pool_of_node("h100-1", "H100-80GB", specs, {}).name == "h100"
    assert spend.pool_of_node("gke-prod-l4-shared-pool-x1", "L4", specs, {}).name == "l4-shared"
    # no pool name in it: the first pool of the model with room left
    assert spend.pool_of_node("node-7", "H100-80GB", specs, {}).name == "h100"
    assert spend.pool_of_node("node-7", "H100-80GB", specs, {"h100": 2}).name == "h100-dra"
    assert spend.pool_of_node("node-8", "A100-80GB/1g.10gb", specs, {}).name == "a100-mig"
    assert spend.pool_of_node("node-9", "B200-180GB", specs, {}) is None


def test_the_cluster_page_says_since_when_it_counts(cast, catalog):
    client = Client()
    assert client.login(username="admin", password=PASSWORD)
    with time_machine.travel(at("2026-03-02 12:00:00"), tick=False):
        html = client.get("/usage/cluster/").content.decode()
        assert "No GPU node has been sampled yet" in html
        nodes_seen_since("2026-03-02 11:45:15", {name: cls for name, cls in DEMO_NODES.items()})
        html = client.get("/usage/cluster/").content.decode()
    assert "Since 2026-03-02 11:45" in html and "the first GPU sample" in html
    assert "$31.20" in html  # 15 minutes of 124.80/h, not 7 days of it


def test_the_cluster_api_gives_the_account_with_its_start(cast, catalog, make_workload):
    from rest_framework.test import APIClient

    make_workload("h100-80gb", started="2026-03-02 09:00:00", finished="2026-03-02 12:00:00")
    nodes_seen_since("2026-03-02 11:00:00")
    api = APIClient()
    api.force_authenticate(cast.alice)
    assert api.get("/api/v1/usage/cluster/").status_code == 403
    api.force_authenticate(cast.admin)
    with time_machine.travel(at("2026-03-03 00:00:00"), tick=False):
        body = api.get("/api/v1/usage/cluster/?start=2026-03-02&end=2026-03-02").json()
    assert body["since"] == "2026-03-02T11:00:00+00:00"
    assert body["cost"] == f"{PER_HOUR * 13:.2f}"  # 11:00 to midnight
    assert body["teams"] == {"vision": "4.00"} and body["nodes"]["h100-dra-0"] == "2026-03-02T11:00:00+00:00"
    assert Decimal(body["cluster_idle"]) + Decimal("4.00") == Decimal(body["cost"])
    bad = api.get("/api/v1/usage/cluster/?start=2026-03-05&end=2026-03-01")
    assert bad.status_code == 400 and "end" in bad.json()
