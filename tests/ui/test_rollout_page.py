"""Rolling out a new model version from an endpoint's page."""

from unittest import mock

import pytest

from jobs import lifecycle
from jobs.models import Workload
from quotas.models import Quota
from tests.jobs.fakes import FakeCluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_endpoint(cast, catalog):
    Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=2, limit=4)
    with mock.patch("jobs.tasks.submit_workload.delay"):
        w = lifecycle.request_workload(
            cast.alice,
            cast.vision,
            {
                "kind": "endpoint",
                "name": "sentiment",
                "offering": "h100-80gb",
                "gpus_per_replica": 1,
                "model_format": "sklearn",
                "storage_uri": "s3://models/sentiment/v1",
            },
        )
    lifecycle.submit(w.pk, FakeCluster())
    return w


def test_the_endpoint_page_rolls_out_a_canary(client, cast, running_endpoint):
    client.force_login(cast.alice)
    page = client.get(f"/workloads/{running_endpoint.pk}/").content.decode()
    assert "Roll out" in page
    with mock.patch("jobs.tasks.apply_workload.delay"):
        response = client.post(
            f"/workloads/{running_endpoint.pk}/rollout/",
            {"storage_uri": "s3://models/sentiment/v2", "canary_traffic_percent": "20"},
            follow=True,
        )
    assert "rolling out the new model version" in response.content.decode()
    w = Workload.objects.get(pk=running_endpoint.pk)
    assert (w.storage_uri, w.canary_traffic_percent) == ("s3://models/sentiment/v2", 20)


def test_a_bad_share_is_named_and_nothing_changes(client, cast, running_endpoint):
    client.force_login(cast.alice)
    response = client.post(
        f"/workloads/{running_endpoint.pk}/rollout/",
        {"storage_uri": "s3://m/v2", "canary_traffic_percent": "lots"},
        follow=True,
    )
    assert "canary_traffic_percent: must be a whole number" in response.content.decode()
    assert Workload.objects.get(pk=running_endpoint.pk).storage_uri == "s3://models/sentiment/v1"
