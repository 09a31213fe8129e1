"""The approvals console warns on quota requests for more than the cluster has.

bob: team admin of nlp (files requests). admin: platform admin (reads the console).
The demo cluster as observed: 2 nodes x 8 H100 (device plugin) and 1 node x 8 H100 (DRA),
one A100 node cut into 56 1g.10gb slices (8 GPUs).
"""

from decimal import Decimal

import pytest

from portal.models import Offering
from quotas.approvals import cluster_totals
from quotas.requests import file_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def observed(catalog):
    Offering.objects.filter(slug="h100-80gb").update(node_units=[8, 8])
    Offering.objects.filter(slug="h100-80gb-dra").update(node_units=[8])
    Offering.objects.filter(slug="a100-80gb-1g.10gb").update(node_units=[56])
    Offering.objects.filter(slug="l4-shared").update(node_units=[16, 16])


def test_cluster_totals_count_gpus_of_a_model_and_slices_of_a_profile(observed):
    totals = cluster_totals(Offering.objects.filter(is_active=True))
    assert totals["H100-80GB"] == 24
    assert totals["A100-80GB"] == 8  # 56 slices of 1/7
    assert totals["A100-80GB/1g.10gb"] == 56
    assert totals["L4"] == 8  # 32 time-sliced replicas of 1/4


def test_a_class_with_an_unobserved_offering_has_no_total(observed):
    Offering.objects.filter(slug="h100-80gb-dra").update(node_units=None)
    assert "H100-80GB" not in cluster_totals(Offering.objects.filter(is_active=True))


def test_the_console_warns_on_a_limit_above_what_the_cluster_has(client, cast, observed):
    file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=40, justification="Everything")
    client.force_login(cast.admin)
    html = client.get("/approvals/").content.decode()
    assert "More than the cluster has:" in html
    assert "the cluster has 24 H100-80GB in all, so 40 could never be used in full" in html


def test_the_console_says_nothing_for_a_request_that_fits_or_an_unknown_cluster(client, cast, catalog):
    file_request(cast.bob, cast.nlp, gpu_class="H100-80GB", limit=Decimal(40), justification="Everything")
    client.force_login(cast.admin)
    assert "More than the cluster has" not in client.get("/approvals/").content.decode()  # never observed
    Offering.objects.filter(slug__startswith="h100").update(node_units=[8, 8, 8, 8, 8])
    assert "More than the cluster has" not in client.get("/approvals/").content.decode()  # 80 GPUs
