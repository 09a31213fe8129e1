"""Which KServe deployment mode an endpoint gets, and that it keeps it."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import yaml

from jobs import lifecycle
from jobs.kube.errors import Invalid
from jobs.kube.status import Observed, TrafficShare
from jobs.specs import SpecError
from portal.cluster_profile import ProfileError, parse_profile
from tests.jobs.conftest import training
from tests.jobs.fakes import FakeCluster

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[2] / "deploy" / "cluster-profiles" / "demo.yaml"
MODE = "serving.kserve.io/deploymentMode"


@pytest.fixture(autouse=True)
def no_celery():
    with mock.patch("jobs.tasks.submit_workload.delay"):
        yield


@pytest.fixture
def profile(tmp_path, settings):
    """write(mode): the cluster profile now says kserve_deployment_mode=mode."""

    def write(mode: str | None) -> None:
        data = yaml.safe_load(DEMO.read_text())
        if mode:
            data["kserve_deployment_mode"] = mode
        path = tmp_path / f"profile-{mode}.yaml"
        path.write_text(yaml.safe_dump(data))
        settings.CLUSTER_PROFILE = path

    return write


def endpoint(name="iris", offering="h100-80gb"):
    return {
        "kind": "endpoint",
        "name": name,
        "offering": offering,
        "gpus_per_replica": 1,
        "model_format": "sklearn",
        "storage_uri": "s3://models/iris/v1",
    }


def test_endpoints_are_standard_unless_the_profile_says_knative(cast, quotas, profile):
    profile(None)
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    assert w.deployment_mode == "Standard"
    [isvc] = lifecycle.workload_objects_of(w)
    assert isvc["metadata"]["annotations"][MODE] == "Standard"


def test_an_endpoint_keeps_its_mode_when_the_profile_changes(cast, quotas, profile):
    profile("Knative")
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    assert w.deployment_mode == "Knative"
    profile("Standard")
    # KServe refuses to change the mode of an existing InferenceService.
    [isvc] = lifecycle.workload_objects_of(w)
    assert isvc["metadata"]["annotations"][MODE] == "Knative"
    assert "securityContext" not in isvc["spec"]["predictor"]


def test_a_dra_endpoint_is_standard_on_a_knative_cluster(cast, quotas, profile):
    profile("Knative")
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint(offering="h100-80gb-dra"))
    assert w.deployment_mode == "Standard"


def test_other_kinds_have_no_deployment_mode(cast, quotas, profile):
    profile("Knative")
    assert lifecycle.request_workload(cast.alice, cast.vision, training()).deployment_mode == ""


def test_a_profile_names_the_mode_in_kserve_v0_20_terms():
    data = yaml.safe_load(DEMO.read_text())
    assert parse_profile(data).kserve_deployment_mode == "Standard"
    data["kserve_deployment_mode"] = "Serverless"
    with pytest.raises(ProfileError, match="kserve_deployment_mode: must be one of Standard, Knative, not 'Serverl"):
        parse_profile(data)


def test_a_new_endpoint_cannot_ask_for_a_canary_share(cast, quotas, profile):
    profile(None)
    with pytest.raises(SpecError) as caught:
        lifecycle.request_workload(cast.alice, cast.vision, {**endpoint(), "canary_traffic_percent": 10})
    [message] = caught.value.errors["canary_traffic_percent"]
    assert message.startswith("a new endpoint has no earlier model version to share traffic with")


def test_a_knative_canary_rolls_out_as_the_predictor_and_rollback_restores_the_stable_version(cast, quotas, profile):
    profile("Knative")
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    lifecycle.submit(w.pk, FakeCluster())
    w.refresh_from_db()
    lifecycle.rollout(cast.alice, w, "s3://models/iris/v2", 30)
    [isvc] = lifecycle.workload_objects_of(w)
    predictor = isvc["spec"]["predictor"]
    assert (predictor["model"]["storageUri"], predictor["canaryTrafficPercent"]) == ("s3://models/iris/v2", 30)
    lifecycle.rollback(cast.alice, w)
    [isvc] = lifecycle.workload_objects_of(w)
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == "s3://models/iris/v1"
    assert "canaryTrafficPercent" not in isvc["spec"]["predictor"]


def test_a_standard_custom_server_endpoint_is_told_why_it_cannot_have_a_canary(cast, quotas, profile):
    profile(None)
    custom = {**endpoint(), "model_format": "", "image": "nvcr.io/nvidia/tritonserver:24.08-py3"}
    w = lifecycle.request_workload(cast.alice, cast.vision, custom)
    lifecycle.submit(w.pk, FakeCluster())
    w.refresh_from_db()
    with pytest.raises(SpecError) as caught:
        lifecycle.rollout(cast.alice, w, "s3://models/iris/v2", 30)
    assert "roll it out to all traffic instead" in caught.value.errors["canary_traffic_percent"][0]


def test_the_observed_traffic_split_is_kept_for_the_page(cast, quotas, profile):
    profile(None)
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    lifecycle.submit(w.pk, FakeCluster())
    w.refresh_from_db()
    shares = (TrafficShare("stable", 80), TrafficShare("canary", 20, "canary", False))
    lifecycle.observe(w, Observed("running", "Endpoint is ready.", traffic=shares))
    w.refresh_from_db()
    assert w.cluster_traffic == [
        {"role": "stable", "percent": 80, "revision": "", "ready": True},
        {"role": "canary", "percent": 20, "revision": "canary", "ready": False},
    ]


def test_a_change_the_cluster_refuses_is_on_the_timeline_and_nothing_is_recorded_as_applied(cast, quotas, profile):
    profile("Knative")
    w = lifecycle.request_workload(cast.alice, cast.vision, endpoint())
    cluster = FakeCluster()
    lifecycle.submit(w.pk, cluster)
    w.refresh_from_db()
    applied = w.applied_manifests
    lifecycle.rollout(cast.alice, w, "s3://models/iris/v2", 10)
    why = "spec.predictor.nodeSelector: must not set the field(s) in Knative mode"
    cluster.fail_with = Invalid(why, causes=[("spec.predictor.nodeSelector", why)], status=422)
    assert not lifecycle.apply_current(w.pk, cluster)
    w.refresh_from_db()
    assert w.events.order_by("-id").first().message.startswith("The cluster refused the change: ")
    assert why in w.events.order_by("-id").first().message
    assert w.applied_manifests == applied
