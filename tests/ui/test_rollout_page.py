"""Rolling out a new model version from an endpoint's page."""

import re
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
    w.refresh_from_db()
    return w


def test_the_endpoint_page_rolls_out_a_canary(client, cast, running_endpoint):
    client.force_login(cast.alice)
    page = client.get(f"/workloads/{running_endpoint.pk}/").content.decode()
    assert "Roll out" in page and "Promote canary" not in page
    with mock.patch("jobs.tasks.apply_workload.delay"):
        response = client.post(
            f"/workloads/{running_endpoint.pk}/rollout/",
            {"storage_uri": "s3://models/sentiment/v2", "canary_traffic_percent": "20"},
            follow=True,
        )
    page = response.content.decode()
    assert "rolling out the new model version to 20% of the traffic as a canary" in page
    w = Workload.objects.get(pk=running_endpoint.pk)
    assert (w.storage_uri, w.canary_storage_uri, w.canary_traffic_percent) == (
        "s3://models/sentiment/v1",
        "s3://models/sentiment/v2",
        20,
    )
    # the requested split shows until the cluster reports it
    assert "As requested; the cluster has not reported this split yet." in page
    assert "Promote canary" in page and "Roll back canary" in page


def test_the_page_shows_the_split_kserve_reports_with_each_version(client, cast, running_endpoint):
    with mock.patch("jobs.tasks.apply_workload.delay"):
        lifecycle.rollout(cast.alice, running_endpoint, "s3://models/sentiment/v2", 10)
    Workload.objects.filter(pk=running_endpoint.pk).update(
        deployment_mode="Knative",
        cluster_traffic=[
            {"role": "stable", "percent": 90, "revision": "sentiment-predictor-00001", "ready": True},
            {"role": "canary", "percent": 10, "revision": "sentiment-predictor-00002", "ready": False},
        ],
    )
    client.force_login(cast.alice)
    page = client.get(f"/workloads/{running_endpoint.pk}/").content.decode()
    rows = re.findall(
        r"<tr>\s*<th scope=\"row\">(\w+)</th>\s*<td><code class=\"wrap\">([^<]+)</code></td>\s*"
        r"<td>(\d+)%</td>\s*<td><code>([^<]+)</code></td>\s*<td>(\w+)</td>",
        page,
    )
    assert rows == [
        ("Stable", "s3://models/sentiment/v1", "90", "sentiment-predictor-00001", "yes"),
        ("Canary", "s3://models/sentiment/v2", "10", "sentiment-predictor-00002", "no"),
    ]
    assert "not reported this split yet" not in page


@pytest.mark.parametrize(
    ("action", "storage_uri"),
    [("promote", "s3://models/sentiment/v2"), ("rollback", "s3://models/sentiment/v1")],
)
def test_promote_and_rollback_end_the_canary(
    client, cast, running_endpoint, action, storage_uri, django_capture_on_commit_callbacks
):
    with mock.patch("jobs.tasks.apply_workload.delay") as apply:
        lifecycle.rollout(cast.alice, running_endpoint, "s3://models/sentiment/v2", 10)
        client.force_login(cast.alice)
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(f"/workloads/{running_endpoint.pk}/{action}/", follow=True)
    assert response.status_code == 200
    w = Workload.objects.get(pk=running_endpoint.pk)
    assert (w.storage_uri, w.canary_storage_uri, w.canary_traffic_percent) == (storage_uri, "", None)
    apply.assert_called_once_with(w.pk)  # the change is applied by the task
    again = client.post(f"/workloads/{running_endpoint.pk}/{action}/", follow=True).content.decode()
    assert "Canary: this endpoint has no canary to" in again


def test_another_teams_member_cannot_promote(client, cast, running_endpoint):
    with mock.patch("jobs.tasks.apply_workload.delay"):
        lifecycle.rollout(cast.alice, running_endpoint, "s3://models/sentiment/v2", 10)
    client.force_login(cast.bob)  # nlp only
    assert client.post(f"/workloads/{running_endpoint.pk}/promote/").status_code == 404
    assert Workload.objects.get(pk=running_endpoint.pk).canary_storage_uri == "s3://models/sentiment/v2"


def test_errors_name_the_fields_as_people_read_them(client, cast, running_endpoint):
    client.force_login(cast.alice)
    response = client.post(
        f"/workloads/{running_endpoint.pk}/rollout/",
        {"storage_uri": "s3://m/v2", "canary_traffic_percent": "lots"},
        follow=True,
    )
    assert "Canary traffic percent: must be a whole number" in response.content.decode()
    assert Workload.objects.get(pk=running_endpoint.pk).storage_uri == "s3://models/sentiment/v1"
    response = client.post(
        f"/workloads/{running_endpoint.pk}/rollout/",
        {"storage_uri": "ftp://m/v2", "canary_traffic_percent": "150"},
        follow=True,
    )
    page = response.content.decode()
    assert "New model version: must start with one of" in page
    assert "Canary traffic percent: must be a whole number from 0 to 100, not 150" in page
    assert "canary_traffic_percent:" not in page and "storage_uri:" not in page
