"""The sandbox's KServe: deployment modes and Knative Serving's field mask from config-features."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from jobs import preflight
from jobs.kube.client import Cluster
from jobs.kube.errors import Invalid
from jobs.kube.manifests import dra_quota_key, priority_classes, team_objects, workload_objects
from jobs.kube.status import derive
from portal.cluster_profile import load_profile
from sandbox import knative, kserve_config
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


# -- canaries ------------------------------------------------------------------------------------

V2 = "gs://models/sklearn/2.0/model"


def canary(name: str = "v2", percent: int = 20, **predictor) -> dict:
    return {
        "predictor": {
            "name": name,
            "model": {"name": "kserve-container", "modelFormat": {"name": "sklearn"}, "storageUri": V2},
            **predictor,
        },
        "trafficPercent": percent,
    }


def pods_by_app(sandbox) -> dict[str, int]:
    core = client.CoreV1Api(sandbox.api_client())
    out: dict[str, int] = {}
    for pod in core.list_namespaced_pod("default").items:
        if pod.status.phase == "Running":
            out[pod.metadata.labels["app"]] = out.get(pod.metadata.labels["app"], 0) + 1
    return out


def test_a_standard_canary_runs_its_own_deployment_and_reports_its_share(sandbox, custom):
    body = isvc("iris", "Standard", minReplicas=4)
    body["spec"]["canary"] = [canary(percent=20)]
    custom.create_namespaced_custom_object(*GROUP, body)
    sandbox.settle()
    # ceil(4 * 20 / 100) = 1 canary pod, taken from the stable Deployment
    assert pods_by_app(sandbox) == {"isvc.iris-predictor": 3, "isvc.iris-v2-predictor": 1}
    status = custom.get_namespaced_custom_object(*GROUP, "iris")["status"]
    assert status["deploymentMode"] == "Standard"
    assert status["canaryStatuses"] == [{"name": "v2", "ready": True, "trafficPercent": 20}]
    conditions = {c["type"]: (c["status"], c.get("reason")) for c in status["conditions"]}
    assert conditions["CanaryPredictorReady"] == ("True", "AllCanariesReady")
    assert conditions["Ready"][0] == "True"
    [canary_pod] = [
        p
        for p in client.CoreV1Api(sandbox.api_client()).list_namespaced_pod("default").items
        if p.metadata.labels["app"] == "isvc.iris-v2-predictor"
    ]
    assert {"name": "STORAGE_URI", "value": V2} in [
        {"name": e.name, "value": e.value} for e in canary_pod.spec.containers[0].env
    ]


def test_promoting_a_standard_canary_rolls_the_stable_deployment_and_removes_the_canary(sandbox, custom):
    body = isvc("iris", "Standard", minReplicas=2)
    body["spec"]["canary"] = [canary(percent=50)]
    custom.create_namespaced_custom_object(*GROUP, body)
    sandbox.settle()
    promoted = isvc("iris", "Standard", minReplicas=2)
    promoted["spec"]["predictor"]["model"]["storageUri"] = V2
    promoted["metadata"]["resourceVersion"] = custom.get_namespaced_custom_object(*GROUP, "iris")["metadata"][
        "resourceVersion"
    ]
    custom.replace_namespaced_custom_object(*GROUP[:3], "inferenceservices", "iris", promoted)
    sandbox.settle()
    assert pods_by_app(sandbox) == {"isvc.iris-predictor": 2}
    status = custom.get_namespaced_custom_object(*GROUP, "iris")["status"]
    assert "canaryStatuses" not in status
    assert "CanaryPredictorReady" not in {c["type"] for c in status["conditions"]}
    # the stable Deployment's second pod template (deployment.kubernetes.io/revision)
    assert status["components"]["predictor"]["latestCreatedRevision"] == "2"
    predictor_ready = next(c for c in status["conditions"] if c["type"] == "PredictorReady")
    assert (predictor_ready["reason"], predictor_ready["message"]) == (
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    )


def test_canary_traffic_percent_does_nothing_in_standard_mode(sandbox, custom):
    custom.create_namespaced_custom_object(*GROUP, isvc("iris", "Standard"))
    sandbox.settle()
    change = {"spec": {"predictor": {"canaryTrafficPercent": 10, "model": {"storageUri": V2}}}}
    custom.patch_namespaced_custom_object(*GROUP[:3], "inferenceservices", "iris", change)
    sandbox.settle()
    # a plain rolling update: the new version takes everything
    assert pods_by_app(sandbox) == {"isvc.iris-predictor": 1}
    status = custom.get_namespaced_custom_object(*GROUP, "iris")["status"]
    assert "traffic" not in status["components"]["predictor"]


def test_spec_canary_needs_the_standard_annotation_on_the_object(custom):
    body = isvc("iris")  # the installation's default (Knative), not Standard
    body["spec"]["canary"] = [canary()]
    message = refusal(custom, body)
    assert "spec.canary: Forbidden: canary is only supported with serving.kserve.io/deploymentMode: Standard" in message


def test_kserve_refuses_a_canary_it_cannot_run(custom):
    body = isvc("iris", "Standard", minReplicas=1)
    body["spec"]["predictor"]["name"] = "v1"
    body["spec"]["canary"] = [canary("v1", 60, maxReplicas=3, minReplicas=2), canary("v3", 50)]
    message = refusal(custom, body)
    assert 'spec.canary[0].predictor.name: Duplicate value: "v1"' in message
    assert "spec.canary[0].predictor.maxReplicas: Forbidden: a canary runs a fixed number of replicas" in message
    assert (
        "spec.canary[0].predictor.minReplicas: Invalid value: 2: must not exceed the stable predictor's (1)" in message
    )
    assert "spec.canary: Invalid value: 110: the canaries' trafficPercent add up to more than 100" in message


# -- the storage initializer ---------------------------------------------------------------------


def apply_portal_endpoint(handle, mode: str = "Standard") -> dict:
    """Apply team vision and its endpoint iris as the portal does; settle; return the InferenceService."""
    team, endpoint = portal_endpoint(mode)
    with Cluster(handle.api_client(), request_timeout=5) as cluster:
        cluster.apply_all(team)
        cluster.apply_all(endpoint)
    handle.settle()
    custom = client.CustomObjectsApi(handle.api_client())
    return custom.get_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", "team-vision", "inferenceservices", "iris"
    )


def test_stock_kserve_injects_a_storage_initializer_that_the_restricted_namespace_refuses(stock_sandbox):
    isvc = apply_portal_endpoint(stock_sandbox)
    assert endpoint_pods(stock_sandbox) == []
    ready = next(c for c in isvc["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "FailedCreate"
    assert 'violates PodSecurity "restricted:latest"' in ready["message"]
    assert (
        'allowPrivilegeEscalation != false (container "storage-initializer" must set '
        "securityContext.allowPrivilegeEscalation=false)"
    ) in ready["message"]
    # the portal shows KServe's words while the endpoint is pending
    seen = derive("InferenceService", isvc, [])
    assert seen.phase == "pending" and 'container "storage-initializer"' in seen.message


def test_the_recommended_storage_container_makes_the_initializer_restricted(sandbox):
    apply_portal_endpoint(sandbox)
    [pod] = endpoint_pods(sandbox)
    assert pod.status.phase == "Running"
    [init] = pod.spec.init_containers
    assert init.name == "storage-initializer" and init.image == "kserve/storage-initializer:v0.20.0"
    assert init.security_context.allow_privilege_escalation is False
    assert init.security_context.capabilities.drop == ["ALL"]
    assert init.args == ["s3://models/iris/v1", "/mnt/models"]


def test_the_initializer_follows_the_inferenceservice_config_when_no_storage_container_matches(sandbox, custom, core):
    core.patch_namespaced_config_map(
        "inferenceservice-config",
        "kserve",
        {
            "data": {
                "storageInitializer": json.dumps(
                    {"image": "registry.local/si:1", "cpuLimit": "2", "memoryLimit": "2Gi"}
                )
            }
        },
    )
    custom.delete_cluster_custom_object("serving.kserve.io", "v1alpha1", "clusterstoragecontainers", "default")
    custom.create_namespaced_custom_object(*GROUP, isvc("iris", "Standard"))
    sandbox.settle()
    [pod] = core.list_namespaced_pod("default").items
    [init] = pod.spec.init_containers
    assert init.image == "registry.local/si:1" and init.security_context is None
    assert init.resources.limits == {"cpu": "2", "memory": "2Gi"}


def test_a_custom_server_with_a_storage_uri_gets_the_initializer_too(sandbox, custom, core):
    body = isvc("server", "Standard")
    del body["spec"]["predictor"]["model"]
    body["spec"]["predictor"]["containers"] = [
        {"name": "kserve-container", "image": "ghcr.io/x/server:1", "env": [{"name": "STORAGE_URI", "value": V2}]}
    ]
    custom.create_namespaced_custom_object(*GROUP, body)
    sandbox.settle()
    [pod] = core.list_namespaced_pod("default").items
    assert [c.name for c in pod.spec.init_containers] == ["storage-initializer"]
    assert pod.spec.init_containers[0].args == [V2, "/mnt/models"]


# -- the portal's canaries, end to end -------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "revisions"),
    [("Knative", ("iris-predictor-00001", "iris-predictor-00002")), ("Standard", ("", "canary"))],
)
def test_a_portal_canary_runs_and_the_portal_reads_back_its_split(sandbox, mode, revisions):
    base = replace(spec("endpoint", name="iris", offering="l4-shared", gpus_per_replica=1), deployment_mode=mode)
    quota = {"cpu": (32, 32), "memory": (256 * 2**30, 256 * 2**30), "nvidia.com/gpu.shared": (4, 4)}
    canary_spec = replace(base, canary_storage_uri="s3://models/iris/v2", canary_traffic_percent=25)
    with Cluster(sandbox.api_client(), request_timeout=5) as cluster:
        cluster.apply_all([*priority_classes(), *team_objects(TEAM, quota)])
        cluster.apply_all(workload_objects(base))
        sandbox.settle()
        cluster.apply_all(workload_objects(canary_spec))
        sandbox.settle()
        [isvc] = cluster.list(
            "serving.kserve.io/v1beta1", "InferenceService", label_selector="", namespace="team-vision"
        )
    seen = derive("InferenceService", isvc, [])
    assert seen.phase == "running"
    assert [(s.role, s.percent, s.revision, s.ready) for s in seen.traffic] == [
        ("stable", 75, revisions[0], True),
        ("canary", 25, revisions[1], True),
    ]
    uris = {
        e.value
        for p in endpoint_pods(sandbox)
        for e in p.spec.containers[0].env or []
        if e.name == "STORAGE_URI" and p.status.phase == "Running"
    }
    assert uris == {"s3://models/iris/v1", "s3://models/iris/v2"}
    # promote: the portal applies the endpoint with the new version and without the canary
    with Cluster(sandbox.api_client(), request_timeout=5) as cluster:
        cluster.apply_all(workload_objects(replace(base, storage_uri="s3://models/iris/v2")))
        sandbox.settle()
        [isvc] = cluster.list(
            "serving.kserve.io/v1beta1", "InferenceService", label_selector="", namespace="team-vision"
        )
    seen = derive("InferenceService", isvc, [])
    assert seen.phase == "running" and [(s.role, s.percent) for s in seen.traffic] == [("stable", 100)]
    running = [p for p in endpoint_pods(sandbox) if p.status.phase == "Running" and not p.metadata.deletion_timestamp]
    assert {e.value for p in running for e in p.spec.containers[0].env or [] if e.name == "STORAGE_URI"} == {
        "s3://models/iris/v2"
    }


# -- what the sandbox seeds is what cluster_check asks for -------------------------------------


@pytest.mark.parametrize(("setup", "ok"), [("recommended", True), ("stock", False)])
def test_the_seeded_kserve_and_knative_config_pass_cluster_check_only_when_recommended(setup, ok):
    profile = replace(load_profile(PROFILE), cluster_setup=setup, kserve_deployment_mode="Knative")
    seeded = {
        (obj["metadata"].get("namespace"), obj["metadata"]["name"]): obj for _, obj in kserve_config.seed(profile)
    }
    needs = preflight.portal_needs(profile)
    kserve, mode = preflight.check_kserve(
        seeded[("kserve", "inferenceservice-config")], seeded[(None, "default")], needs
    )
    knative = preflight.check_knative(seeded[("knative-serving", "config-features")], needs, mode)
    statuses = {f.setting: f.status for f in [*kserve, *knative]}
    assert (set(statuses.values()) == {preflight.OK}) is ok, statuses
