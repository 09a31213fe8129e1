"""A canary's extra pods are admitted against quota when it starts and given back when it ends.

How many: in Knative mode the canary is a second revision scaling up to max_replicas; in
Standard mode (the default) a Deployment of ceil(min_replicas * percent / 100) pods.

alice: member of vision, runs the endpoint. vision may use 2 guaranteed / 4 H100s.
"""

from decimal import Decimal
from unittest import mock

import pytest

from jobs import lifecycle
from jobs.models import State, Workload
from jobs.specs import SpecError
from quotas.admission import QuotaRefused
from quotas.models import Quota
from tests.jobs.fakes import FakeCluster

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_celery():
    with (
        mock.patch("jobs.tasks.submit_workload.delay"),
        mock.patch("jobs.tasks.apply_workload.delay"),
        mock.patch("jobs.tasks.teardown_workload.delay"),
    ):
        yield


@pytest.fixture
def h100(cast, catalog):
    return Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=Decimal(2), limit=Decimal(4))


def running_endpoint(cast, max_replicas=2, gpus=1, name="sentiment", mode="Knative"):
    w = lifecycle.request_workload(
        cast.alice,
        cast.vision,
        {
            "kind": "endpoint",
            "name": name,
            "offering": "h100-80gb",
            "gpus_per_replica": gpus,
            "min_replicas": 1,
            "max_replicas": max_replicas,
            "model_format": "sklearn",
            "storage_uri": "s3://models/sentiment/v1",
        },
    )
    Workload.objects.filter(pk=w.pk).update(deployment_mode=mode)
    lifecycle.submit(w.pk, FakeCluster())
    return Workload.objects.get(pk=w.pk)


def used(quota) -> Decimal:
    quota.refresh_from_db()
    return quota.used


def test_a_knative_canary_holds_quota_for_its_replicas_until_it_is_promoted(cast, h100):
    w = running_endpoint(cast)
    assert used(h100) == 2  # charged at max replicas
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    w.refresh_from_db()
    assert (w.canary_replicas, w.quota_charge, used(h100)) == (2, 4, 4)
    # Spend prices the endpoint's history from gpu_units: a canary must not re-price it.
    assert w.gpu_units == 2
    assert "canary may run 2 more replicas: 2 H100-80GB more are held" in w.events.last().message
    lifecycle.promote(cast.alice, w)
    w.refresh_from_db()
    assert (w.storage_uri, w.canary_replicas, w.quota_charge, used(h100)) == ("s3://models/sentiment/v2", 0, 2, 2)
    assert "2 H100-80GB released" in w.events.last().message


def test_a_standard_canary_holds_quota_for_its_share_of_the_minimum_until_it_is_rolled_back(cast, h100):
    w = running_endpoint(cast, max_replicas=3, mode="Standard")
    Workload.objects.filter(pk=w.pk).update(replicas=2)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 30)
    w.refresh_from_db()
    assert (w.canary_replicas, w.quota_charge, used(h100)) == (1, 4, 4)  # ceil(2 * 30 / 100)
    lifecycle.rollback(cast.alice, w)
    w.refresh_from_db()
    assert (w.storage_uri, w.canary_replicas, w.quota_charge, used(h100)) == ("s3://models/sentiment/v1", 0, 3, 3)


def test_rolling_out_to_all_traffic_ends_a_canary_and_gives_its_quota_back(cast, h100):
    w = running_endpoint(cast)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    lifecycle.rollout(cast.alice, Workload.objects.get(pk=w.pk), "s3://models/sentiment/v3", None)
    w.refresh_from_db()
    assert (w.storage_uri, w.canary_storage_uri, w.canary_replicas, used(h100)) == (
        "s3://models/sentiment/v3",
        "",
        0,
        2,
    )


def test_a_canary_that_does_not_fit_is_refused_with_the_numbers_and_changes_nothing(cast, h100):
    w = running_endpoint(cast, max_replicas=3)
    with pytest.raises(
        QuotaRefused, match="vision has 3 of 4 H100-80GB GPUs in use; a canary .* needs 3 more H100-80GB GPUs"
    ):
        lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    w.refresh_from_db()
    assert (w.storage_uri, w.canary_storage_uri, w.canary_traffic_percent, w.canary_replicas) == (
        "s3://models/sentiment/v1",
        "",
        None,
        0,
    )
    assert (w.quota_charge, used(h100)) == (3, 3)


def test_a_second_canary_or_a_new_share_keeps_one_extra_set_of_replicas(cast, h100):
    w = running_endpoint(cast)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 50)  # same version, more traffic
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v3", 10)  # replaces the canary revision
    w.refresh_from_db()
    assert (w.canary_replicas, w.quota_charge, used(h100)) == (2, 4, 4)


def test_a_canary_of_the_version_already_serving_is_refused(cast, h100):
    w = running_endpoint(cast)
    with pytest.raises(SpecError, match="is the version that already serves"):
        lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v1", 10)
    w.refresh_from_db()
    assert (w.canary_replicas, used(h100)) == (0, 2)


def test_stopping_during_a_canary_gives_everything_back(cast, h100):
    w = running_endpoint(cast)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    lifecycle.stop(cast.alice, Workload.objects.get(pk=w.pk))
    assert used(h100) == 0


def test_the_recount_agrees_with_the_canarys_charge(cast, h100):
    from quotas.models import QuotaDrift

    w = running_endpoint(cast)
    lifecycle.rollout(cast.alice, w, "s3://models/sentiment/v2", 10)
    lifecycle.recount_quota_usage()
    assert used(h100) == 4
    assert not QuotaDrift.objects.exists()


def test_the_api_refuses_a_canary_over_quota_naming_quota(api, cast, h100):
    w = running_endpoint(cast, max_replicas=3)
    api.force_authenticate(cast.alice)
    response = api.post(
        f"/api/v1/workloads/{w.pk}/rollout/",
        {"storage_uri": "s3://models/sentiment/v2", "canary_traffic_percent": 10},
        format="json",
    )
    assert response.status_code == 400
    assert "needs 3 more H100-80GB GPUs" in response.json()["quota"][0]


def test_the_page_says_why_a_canary_was_not_rolled_out(client, cast, h100):
    w = running_endpoint(cast, max_replicas=3)
    client.force_login(cast.alice)
    response = client.post(
        f"/workloads/{w.pk}/rollout/",
        {"storage_uri": "s3://models/sentiment/v2", "canary_traffic_percent": "10"},
        follow=True,
    )
    assert "Not rolled out: Over quota" in response.content.decode()
    assert Workload.objects.get(pk=w.pk).state == State.SUBMITTED
