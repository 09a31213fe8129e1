"""Which KServe deployment mode an endpoint gets, and that it keeps it."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
import yaml

from jobs import lifecycle
from portal.cluster_profile import ProfileError, parse_profile
from tests.jobs.conftest import training

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
