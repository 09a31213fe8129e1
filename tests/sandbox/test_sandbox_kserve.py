"""The sandbox's KServe: deployment modes and Knative Serving's field mask from config-features."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobs.kube.client import Cluster
from jobs.kube.errors import Invalid
from jobs.kube.manifests import dra_quota_key, priority_classes, team_objects, workload_objects
from portal.cluster_profile import load_profile
from sandbox import knative
from sandbox.testing import running_sandbox
from tests.manifests.conftest import OFFERINGS, TEAM, spec
from tests.sandbox.conftest import CRD_DIR, PROFILE, START

GROUP = ("serving.kserve.io", "v1beta1", "default", "inferenceservices")
MODE = "serving.kserve.io/deploymentMode"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture
def stock_sandbox():
    """A cluster whose KServe and Knative are configured as upstream ships them."""
    with running_sandbox(replace(load_profile(PROFILE), cluster_setup="stock"), start_time=START) as handle:
        yield handle


@pytest.fixture
def stock_custom(stock_sandbox):
    return client.CustomObjectsApi(stock_sandbox.api_client())


def isvc(name: str, mode: str | None = None, **predictor) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if mode:
        meta["annotations"] = {MODE: mode}
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": meta,
        "spec": {
            "predictor": {
                "model": {"modelFormat": {"name": "sklearn"}, "storageUri": "gs://models/sklearn/1.0/model"},
                **predictor,
            }
        },
    }


def refusal(custom, obj) -> str:
    """The message of the 422 the create gets."""
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(*GROUP, obj)
    assert caught.value.status == 422
    return json.loads(caught.value.body)["message"]


def test_a_stock_knative_refuses_a_node_selector_and_names_the_flag(stock_custom):
    exc = refusal(stock_custom, isvc("placed", "Knative", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"}))
    assert (
        "spec.predictor.nodeSelector: must not set the field(s) in Knative mode: needs kubernetes.podspec-nodeselector "
        '"enabled" in ConfigMap knative-serving/config-features'
    ) in exc


def test_without_an_annotation_stock_kserve_uses_knative_and_refuses_the_scheduler(stock_custom):
    exc = refusal(stock_custom, isvc("volcano", schedulerName="volcano", tolerations=[GPU_TOLERATION]))
    assert "spec.predictor.schedulerName" in exc and "spec.predictor.tolerations" in exc


def test_the_legacy_serverless_name_means_knative(stock_custom):
    exc = refusal(stock_custom, isvc("legacy", "Serverless", priorityClassName="gpu-portal-preemptible"))
    assert "kubernetes.podspec-priorityclassname" in exc


def test_standard_mode_takes_any_pod_field(stock_custom):
    stock_custom.create_namespaced_custom_object(
        *GROUP,
        isvc(
            "raw",
            "Standard",
            schedulerName="volcano",
            nodeSelector={"a": "b"},
            securityContext={"fsGroup": 100, "fsGroupChangePolicy": "OnRootMismatch"},
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "raw-gpu"}],
        ),
    )


def test_the_recommended_setup_enables_the_placement_flags(custom):
    custom.create_namespaced_custom_object(
        *GROUP,
        isvc(
            "placed",
            "Knative",
            schedulerName="volcano",
            priorityClassName="gpu-portal-preemptible",
            nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4"},
            tolerations=[GPU_TOLERATION],
            affinity={"nodeAffinity": {}},
        ),
    )


def test_knative_never_takes_fs_group_change_policy_or_dra_claims_whatever_the_flags(custom):
    exc = refusal(
        custom,
        isvc(
            "dra",
            "Knative",
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "dra-gpu"}],
            securityContext={"fsGroup": 100, "fsGroupChangePolicy": "OnRootMismatch"},
        ),
    )
    assert "spec.predictor.resourceClaims: must not set the field(s) in Knative mode: Knative Serving never" in exc
    # the pod securityContext needs its flag, which the recommended setup leaves off
    assert "spec.predictor.securityContext: must not set the field(s)" in exc
    body = isvc("claims", "Knative")
    body["spec"]["predictor"]["model"]["resources"] = {"claims": [{"name": "gpu"}]}
    exc = refusal(custom, body)
    assert "spec.predictor.model.resources.claims: must not set the field(s) in Knative mode: DRA claims" in exc


def test_an_operator_can_enable_a_flag_through_the_config_map(stock_custom):
    core = client.CoreV1Api(stock_custom.api_client)
    core.patch_namespaced_config_map(
        "config-features", "knative-serving", {"data": {"kubernetes.podspec-nodeselector": "allowed"}}
    )
    stock_custom.create_namespaced_custom_object(*GROUP, isvc("placed", "Knative", nodeSelector={"a": "b"}))


def test_the_deployment_mode_cannot_change(custom, sandbox):
    custom.create_namespaced_custom_object(*GROUP, isvc("fixed", "Standard"))
    sandbox.settle()
    change = {"metadata": {"annotations": {MODE: "Knative"}}}
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object(*GROUP[:3], "inferenceservices", "fixed", change)
    assert caught.value.status == 422 and "deploymentMode cannot be changed" in caught.value.body


def test_an_unknown_mode_is_refused(custom):
    exc = refusal(custom, isvc("odd", "Raw"))
    assert 'Unsupported value: "Raw"' in exc


@pytest.mark.skipif(not (CRD_DIR / "knative-serving").is_dir(), reason="../shared/reference (upstream data) is absent")
def test_the_field_mask_agrees_with_the_upstream_table():
    rows = [
        r
        for r in csv.DictReader(
            line for line in (CRD_DIR / "knative-serving" / "podspec-fieldmask.csv").open() if not line.startswith("#")
        )
    ]
    tables = {
        "PodSpec": knative.POD_SPEC,
        "Container": knative.CONTAINER,
        "PodSecurityContext": knative.POD_SECURITY_CONTEXT,
        "SecurityContext": knative.SECURITY_CONTEXT,
        "VolumeSource": knative.VOLUME_SOURCES,
    }
    checked = 0
    for row in rows:
        table = tables.get(row["object"])
        if table is None or row["field"].startswith("("):
            continue
        status, flag = table.get(row["field"], (knative.NEVER, ""))
        assert status == row["status"], row
        if row["status"] == "flag":
            assert flag == row["feature_flag"], row
            assert knative.FLAG_DEFAULTS[flag] == row["flag_default"], row
            assert (flag in knative.EXACTLY_ENABLED) == ("exactly enabled" in row["notes"]), row
        checked += 1
    assert checked > 90


# -- the portal's endpoints on the sandbox -----------------------------------------------------


def portal_endpoint(mode: str, offering: str = "l4-shared") -> tuple[list[dict], list[dict]]:
    """(team objects, endpoint objects) as the portal applies them for team vision."""
    s = replace(spec("endpoint", name="iris", offering=offering, gpus_per_replica=1), deployment_mode=mode)
    gpu = OFFERINGS[offering].resource_name or dra_quota_key(OFFERINGS[offering].dra_device_class)
    quota = {"cpu": (32, 32), "memory": (256 * 2**30, 256 * 2**30), gpu: (4, 4)}
    return [*priority_classes(), *team_objects(TEAM, quota)], workload_objects(s)


def endpoint_pods(handle) -> list:
    core = client.CoreV1Api(handle.api_client())
    return core.list_namespaced_pod("team-vision", label_selector="serving.kserve.io/inferenceservice=iris").items


@pytest.mark.parametrize("mode", ["Knative", "Standard"])
def test_a_portal_endpoint_runs_in_either_mode_on_a_recommended_cluster(sandbox, mode):
    team, endpoint = portal_endpoint(mode)
    with Cluster(sandbox.api_client(), request_timeout=5) as cluster:
        cluster.apply_all(team)
        cluster.apply_all(endpoint)
    sandbox.settle()
    pods = endpoint_pods(sandbox)
    assert pods and all(p.status.phase == "Running" for p in pods)


def test_a_portal_dra_endpoint_runs_in_standard_mode(sandbox):
    team, endpoint = portal_endpoint("Standard", offering="h100-80gb-dra")
    with Cluster(sandbox.api_client(), request_timeout=5) as cluster:
        cluster.apply_all(team)
        cluster.apply_all(endpoint)
    sandbox.settle()
    [pod] = endpoint_pods(sandbox)
    assert pod.status.phase == "Running" and pod.spec.resource_claims


def test_a_stock_knative_refuses_the_portals_knative_endpoint_naming_each_field(stock_sandbox):
    team, endpoint = portal_endpoint("Knative")
    with Cluster(stock_sandbox.api_client(), request_timeout=5) as cluster:
        cluster.apply_all(team)
        with pytest.raises(Invalid) as caught:
            cluster.apply_all(endpoint)
    message = str(caught.value)
    for field, flag in [
        ("schedulerName", "schedulername"),
        ("priorityClassName", "priorityclassname"),
        ("nodeSelector", "nodeselector"),
        ("tolerations", "tolerations"),
    ]:
        expected = f"spec.predictor.{field}: must not set the field(s) in Knative mode: needs kubernetes.podspec-{flag}"
        assert expected in message
