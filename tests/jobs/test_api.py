"""The workload API: the same lifecycle as the pages, scoped to the caller's teams."""

from unittest import mock

import pytest

from jobs import lifecycle
from jobs.models import State, Workload
from quotas.models import Quota
from tests.jobs.conftest import notebook, training

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_celery():
    with (
        mock.patch("jobs.tasks.submit_workload.delay"),
        mock.patch("jobs.tasks.teardown_workload.delay"),
    ):
        yield


@pytest.fixture
def quota(cast, catalog):
    Quota.objects.create(team=cast.vision, gpu_class="H100-80GB", guaranteed=2, limit=4)
    Quota.objects.create(team=cast.vision, gpu_class="A100-80GB", guaranteed=1, limit=1)
    Quota.objects.create(team=cast.nlp, gpu_class="H100-80GB", guaranteed=2, limit=4)


def post(api, user, body):
    api.force_authenticate(user)
    return api.post("/api/v1/workloads/", body, format="json")


def test_post_creates_a_queued_workload_and_returns_201(api, cast, quota):
    response = post(api, cast.alice, {"team": "vision", **notebook()})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["state"], body["team"], body["offering"]) == ("queued", "vision", "a100-80gb-1g.10gb")
    assert body["timeline"][0]["to_state"] == "queued"


def test_post_names_each_bad_field(api, cast, quota):
    response = post(
        api, cast.alice, {"team": "vision", **notebook(name="Bad_Name", image="evil.io/miner:1"), "privileged": True}
    )
    assert response.status_code == 400
    body = response.json()
    assert {"name", "image", "privileged"} <= set(body)
    assert "registry 'evil.io' is not allowed" in body["image"][0]
    assert "restricted Pod Security Standard" in body["privileged"][0]
    assert not Workload.objects.exists()


@pytest.mark.parametrize(
    "field",
    ["hostPath", "hostNetwork", "serviceAccountName", "securityContext", "nodeSelector", "tolerations", "volumes"],
)
def test_post_refuses_every_forbidden_field_by_name(api, cast, quota, field):
    response = post(api, cast.alice, {"team": "vision", **notebook(), field: "x"})
    assert response.status_code == 400
    assert field in response.json()


def test_a_label_that_would_override_the_portals_is_refused(api, cast, quota):
    response = post(api, cast.alice, {"team": "vision", **notebook(labels={"gpu-portal.io/team": "nlp"})})
    assert response.status_code == 400
    assert "labels" in response.json()


def test_post_over_quota_is_a_400_with_the_numbers(api, cast, quota):
    response = post(api, cast.alice, {"team": "vision", **training(replicas=5)})
    assert response.status_code == 400
    assert "vision has 0 of 4 H100-80GB GPUs in use; this request needs 5 H100-80GB GPUs" in response.json()["quota"][0]


def test_post_to_a_team_you_are_not_in_is_refused_without_revealing_it(api, cast, quota):
    response = post(api, cast.alice, {"team": "nlp", **training()})
    assert response.status_code == 400
    assert response.json()["team"] == ["you are not in a team named 'nlp'"]


def test_the_list_shows_only_your_teams_and_filters(api, cast, quota):
    lifecycle.request_workload(cast.alice, cast.vision, notebook("a"))
    lifecycle.request_workload(cast.alice, cast.vision, training("b"))
    lifecycle.request_workload(cast.bob, cast.nlp, training("c"))
    api.force_authenticate(cast.alice)
    names = [w["name"] for w in api.get("/api/v1/workloads/").json()["results"]]
    assert sorted(names) == ["a", "b"]
    assert [w["name"] for w in api.get("/api/v1/workloads/?kind=training").json()["results"]] == ["b"]
    api.force_authenticate(cast.carol)
    assert [w["name"] for w in api.get("/api/v1/workloads/?team=nlp").json()["results"]] == ["c"]
    assert api.get("/api/v1/workloads/?state=running").json()["count"] == 0
    assert api.get("/api/v1/workloads/?state=queued,running").json()["count"] == 3


def test_the_list_query_count_does_not_grow_with_the_number_of_workloads(
    api, cast, quota, django_assert_max_num_queries
):
    Quota.objects.filter(team=cast.vision, gpu_class="A100-80GB").update(limit=10)
    api.force_authenticate(cast.alice)
    lifecycle.request_workload(cast.alice, cast.vision, notebook("n0"))
    with django_assert_max_num_queries(6) as few:
        api.get("/api/v1/workloads/")
    for i in range(1, 30):
        lifecycle.request_workload(cast.alice, cast.vision, notebook(f"n{i}"))
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert api.get("/api/v1/workloads/").json()["count"] == 30


def test_another_teams_workload_is_a_404_everywhere(api, cast, quota):
    w = lifecycle.request_workload(cast.bob, cast.nlp, training())
    api.force_authenticate(cast.alice)
    for method, url in [
        ("get", f"/api/v1/workloads/{w.pk}/"),
        ("post", f"/api/v1/workloads/{w.pk}/stop/"),
        ("post", f"/api/v1/workloads/{w.pk}/start/"),
        ("delete", f"/api/v1/workloads/{w.pk}/"),
        ("get", f"/api/v1/workloads/{w.pk}/logs/"),
    ]:
        assert getattr(api, method)(url).status_code == 404, url
    assert Workload.objects.get(pk=w.pk).state == State.QUEUED


def test_anonymous_callers_get_401(api, cast, quota):
    assert api.get("/api/v1/workloads/").status_code == 401
    assert api.post("/api/v1/workloads/", {}, format="json").status_code == 401


def test_stop_then_start_a_notebook_through_the_api(api, cast, quota):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    api.force_authenticate(cast.carol)  # a teammate may stop it too
    assert api.post(f"/api/v1/workloads/{w.pk}/stop/").json()["state"] == "stopped"
    assert api.post(f"/api/v1/workloads/{w.pk}/stop/").status_code == 409
    assert api.post(f"/api/v1/workloads/{w.pk}/start/").json()["state"] == "queued"


def test_delete_hides_the_workload(api, cast, quota):
    w = lifecycle.request_workload(cast.alice, cast.vision, notebook())
    api.force_authenticate(cast.alice)
    assert api.delete(f"/api/v1/workloads/{w.pk}/").status_code == 204
    assert api.get(f"/api/v1/workloads/{w.pk}/").status_code == 404


def test_preview_returns_the_manifests_and_creates_nothing(api, cast, quota):
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/preview/", {"team": "vision", **notebook()}, format="json")
    assert response.status_code == 200, response.content
    kinds = [o["kind"] for o in response.json()["objects"]]
    assert kinds == ["Notebook"]
    assert "kind: Notebook" in response.json()["yaml"]
    assert not Workload.objects.exists()


def test_preview_refuses_a_forbidden_field_by_name(api, cast, quota):
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/preview/", {"team": "vision", **notebook(), "hostPID": True}, format="json")
    assert response.status_code == 400
    assert "hostPID" in response.json()


@pytest.mark.parametrize("offering", ["h100-80gb", "a100-80gb-1g.10gb", "l4-shared", "h100-80gb-dra", "cpu"])
@pytest.mark.parametrize("kind", ["notebook", "training", "endpoint"])
def test_preview_works_for_every_offering_and_kind_of_the_demo_profile(api, cast, quota, offering, kind):
    body = {
        "team": "vision",
        "kind": kind,
        "name": "x",
        "offering": offering,
        "gpus_per_replica": 0 if offering == "cpu" else 1,
    }
    if kind == "endpoint":
        body.update(model_format="sklearn", storage_uri="s3://models/x")
    else:
        body["image"] = "nvcr.io/nvidia/pytorch:24.10-py3"
    if kind == "training":
        body.update(framework="torch", replicas=2)
    api.force_authenticate(cast.alice)
    response = api.post("/api/v1/workloads/preview/", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["objects"]


def test_the_openapi_schema_documents_the_workload_endpoints_with_examples(client, cast):
    schema = client.get("/api/schema/").content.decode()
    for path in [
        "/api/v1/workloads/",
        "/api/v1/workloads/{id}/stop/",
        "/api/v1/workloads/{id}/start/",
        "/api/v1/workloads/{id}/logs/",
        "/api/v1/workloads/preview/",
    ]:
        assert path in schema
    assert "Notebook on a MIG slice" in schema


def endpoint(name="sentiment", **extra):
    return {
        "kind": "endpoint",
        "name": name,
        "offering": "h100-80gb",
        "gpus_per_replica": 1,
        "model_format": "sklearn",
        "storage_uri": "s3://models/sentiment/v1",
        **extra,
    }


def test_a_new_model_version_rolls_out_as_a_canary_then_is_promoted(api, cast, quota):
    from tests.jobs.fakes import FakeCluster

    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    cluster = FakeCluster()
    lifecycle.submit(w.pk, cluster)
    api.force_authenticate(cast.alice)
    response = api.post(
        f"/api/v1/workloads/{w.pk}/rollout/",
        {"storage_uri": "s3://models/sentiment/v2", "canary_traffic_percent": 10},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert "rolled out s3://models/sentiment/v2 to 10% of the traffic (canary)" in body["timeline"][-1]["message"]
    assert (body["storage_uri"], body["canary_storage_uri"], body["canary_traffic_percent"]) == (
        "s3://models/sentiment/v1",
        "s3://models/sentiment/v2",
        10,
    )
    assert lifecycle.apply_current(w.pk, cluster)
    isvc = cluster.applied[-1]
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == "s3://models/sentiment/v1"
    assert isvc["spec"]["canary"][0]["predictor"]["model"]["storageUri"] == "s3://models/sentiment/v2"
    promoted = api.post(f"/api/v1/workloads/{w.pk}/promote/", format="json")
    assert promoted.status_code == 200, promoted.content
    assert (promoted.json()["storage_uri"], promoted.json()["canary_storage_uri"]) == ("s3://models/sentiment/v2", "")
    lifecycle.apply_current(w.pk, cluster)
    assert "canary" not in cluster.applied[-1]["spec"]
    assert cluster.applied[-1]["spec"]["predictor"]["model"]["storageUri"] == "s3://models/sentiment/v2"
    again = api.post(f"/api/v1/workloads/{w.pk}/promote/", format="json")
    assert again.status_code == 400 and again.json()["canary"] == ["this endpoint has no canary to promote"]


def test_a_rollout_names_the_bad_field_and_only_endpoints_roll_out(api, cast, quota):
    from tests.jobs.fakes import FakeCluster

    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    lifecycle.submit(w.pk, FakeCluster())
    api.force_authenticate(cast.alice)
    bad = api.post(
        f"/api/v1/workloads/{w.pk}/rollout/",
        {"storage_uri": "ftp://x/y", "canary_traffic_percent": 150},
        format="json",
    )
    assert bad.status_code == 400
    assert {"storage_uri", "canary_traffic_percent"} <= set(bad.json())
    nb = lifecycle.request_workload(cast.alice, cast.vision, notebook("nb"))
    refused = api.post(f"/api/v1/workloads/{nb.pk}/rollout/", {"storage_uri": "s3://m/v2"}, format="json")
    assert refused.status_code == 400
    assert "state" in refused.json()
