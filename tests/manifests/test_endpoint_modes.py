"""Endpoints in KServe's two deployment modes: the mode is named on every InferenceService and
the predictor's pod fields are what that mode accepts (Knative Serving's field mask in Knative
mode, a plain Deployment's pod in Standard mode)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.kube.manifests import workload_objects
from jobs.specs import SpecError, endpoint_deployment_mode
from tests.kube_schemas import requires_reference, validate_any, validate_core
from tests.manifests.conftest import OFFERINGS, spec
from tests.manifests.pods import pods_of
from tests.manifests.pss import assert_restricted

MODE = "serving.kserve.io/deploymentMode"


def knative(**fields):
    return replace(spec("endpoint", **fields), deployment_mode="Knative")


def test_a_standard_endpoint_names_its_mode_and_keeps_the_pod_security_context():
    [isvc] = workload_objects(spec("endpoint"))
    assert isvc["metadata"]["annotations"][MODE] == "Standard"
    assert isvc["spec"]["predictor"]["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"


def test_a_knative_endpoint_has_no_pod_security_context_and_stays_restricted_per_container():
    [isvc] = workload_objects(knative())
    predictor = isvc["spec"]["predictor"]
    assert isvc["metadata"]["annotations"][MODE] == "Knative"
    # Knative never accepts fsGroupChangePolicy and needs a flag for any pod securityContext.
    assert "securityContext" not in predictor
    assert predictor["model"]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 1000,
        "runAsGroup": 100,
    }
    for pod in pods_of(isvc):
        assert_restricted(pod.spec)


def test_a_knative_custom_container_endpoint_carries_the_restricted_settings_itself():
    [isvc] = workload_objects(
        knative(model_format=None, image="ghcr.io/kubeflow/kserve/custom-server:1.0", storage_uri="s3://models/llm")
    )
    [container] = isvc["spec"]["predictor"]["containers"]
    assert container["securityContext"]["runAsUser"] == 1000
    assert "securityContext" not in isvc["spec"]["predictor"]


def test_a_user_annotation_cannot_choose_the_deployment_mode():
    with pytest.raises(SpecError, match="'serving.kserve.io/deploymentMode' is reserved"):
        spec("endpoint", annotations={MODE: "Standard"})


def test_an_endpoint_on_a_dra_offering_is_standard_even_when_the_cluster_serves_with_knative():
    assert endpoint_deployment_mode(OFFERINGS["h100-80gb-dra"], 1, "Knative") == "Standard"
    assert endpoint_deployment_mode(OFFERINGS["h100-80gb"], 1, "Knative") == "Knative"
    assert endpoint_deployment_mode(OFFERINGS["h100-80gb"], 1, "Standard") == "Standard"


def test_the_builder_refuses_a_dra_endpoint_in_knative_mode():
    with pytest.raises(ValueError, match="DRA offering must use KServe's Standard mode"):
        workload_objects(knative(offering="h100-80gb-dra", gpus_per_replica=1))


KNATIVE_OFFERINGS = ["h100-80gb", "a100-80gb-1g.10gb", "l4-shared", "cpu"]


@requires_reference
@pytest.mark.parametrize("offering", KNATIVE_OFFERINGS)
def test_a_knative_endpoint_fits_the_crd_and_runs_restricted_on_every_non_dra_offering(offering):
    gpus = 0 if offering == "cpu" else 1
    [isvc] = workload_objects(knative(offering=offering, gpus_per_replica=gpus))
    validate_any(isvc)
    for pod in pods_of(isvc):
        assert_restricted(pod.spec)
        validate_core(pod.as_object())


# -- canaries ----------------------------------------------------------------------------------

V2 = "s3://models/iris/v2"


def test_a_knative_canary_is_the_predictor_with_a_traffic_share():
    # Knative keeps the previous revision (the stable version) for the rest of the traffic.
    s = replace(knative(), canary_storage_uri=V2, canary_traffic_percent=10)
    [isvc] = workload_objects(s)
    predictor = isvc["spec"]["predictor"]
    assert (predictor["canaryTrafficPercent"], predictor["model"]["storageUri"]) == (10, V2)
    assert "canary" not in isvc["spec"]


def test_a_standard_canary_is_a_second_predictor_of_the_new_version():
    s = replace(spec("endpoint"), canary_storage_uri=V2, canary_traffic_percent=25)
    [isvc] = workload_objects(s)
    assert isvc["spec"]["predictor"]["model"]["storageUri"] == "s3://models/iris/v1"
    assert "canaryTrafficPercent" not in isvc["spec"]["predictor"]
    assert isvc["spec"]["canary"] == [
        {
            "predictor": {
                "name": "canary",
                "model": {"name": "kserve-container", "modelFormat": {"name": "sklearn"}, "storageUri": V2},
            },
            "trafficPercent": 25,
        }
    ]


def test_a_share_without_a_canary_version_is_no_canary():
    [isvc] = workload_objects(replace(knative(), canary_traffic_percent=10))
    assert "canaryTrafficPercent" not in isvc["spec"]["predictor"]


def test_a_knative_custom_server_canary_gets_the_new_version_as_storage_uri():
    s = replace(
        knative(model_format=None, image="ghcr.io/kubeflow/kserve/custom-server:1.0", storage_uri="s3://models/llm"),
        canary_storage_uri="s3://models/llm2",
        canary_traffic_percent=5,
    )
    [isvc] = workload_objects(s)
    [container] = isvc["spec"]["predictor"]["containers"]
    assert {"name": "STORAGE_URI", "value": "s3://models/llm2"} in container["env"]


def test_a_standard_custom_server_cannot_have_a_canary():
    s = replace(
        spec("endpoint", model_format=None, image="ghcr.io/kubeflow/kserve/custom-server:1.0"),
        canary_storage_uri="s3://models/llm2",
        canary_traffic_percent=5,
    )
    with pytest.raises(ValueError, match="Standard-mode canary needs a model endpoint"):
        workload_objects(s)


@requires_reference
def test_a_standard_canary_fits_the_crd():
    validate_any(workload_objects(replace(spec("endpoint"), canary_storage_uri=V2, canary_traffic_percent=0))[0])
