"""Every kind of workload on every offering of the demo cluster, checked against upstream truth.

For each (offering, case) the builders' objects must fit their CRD schema (or core
Kubernetes 1.34, strict), every pod inside them must meet the restricted Pod Security
Standard and validate as a core Pod, every object and pod must carry the portal's labels,
and the GPU must be requested exactly the way the offering says.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobs.kube.labels import KIND_LABEL, MANAGED_BY_LABEL, TEAM_LABEL, VOLCANO_QUEUE_ANNOTATION, WORKLOAD_ID_LABEL
from jobs.kube.manifests import main_object_type, training_backend, workload_objects
from jobs.specs import WorkloadSpec
from tests.kube_schemas import is_core, requires_reference, validate_any, validate_core
from tests.manifests.conftest import OFFERINGS, spec
from tests.manifests.pods import pods_of
from tests.manifests.pss import assert_restricted

GPUS = {"h100-80gb": 2, "h100-80gb-dra": 2, "a100-80gb-1g.10gb": 1, "l4-shared": 1, "cpu": 0}
COMMON = {"labels": {"project": "retina"}, "env": {"HF_HOME": "/home/jovyan/.cache"}}
CASES: dict[str, dict[str, Any]] = {
    "notebook": {"kind": "notebook"},
    "notebook-with-workspace": {"kind": "notebook", "workspace_gib": 50},
    "stopped-notebook": {"kind": "notebook", "workspace_gib": 10, "stopped": True},
    "torch-1-node": {"kind": "training", "framework": "torch"},
    "torch-4-nodes": {"kind": "training", "framework": "torch", "replicas": 4, "max_runtime_seconds": 7200},
    "mpi-2-nodes": {"kind": "training", "framework": "mpi", "replicas": 2, "command": ["mpirun", "python", "t.py"]},
    "custom-3-nodes": {"kind": "training", "framework": "custom", "replicas": 3},
    "endpoint-model": {"kind": "endpoint", "model_format": "pytorch", "storage_uri": "pvc://models/resnet"},
    "endpoint-custom-container": {
        "kind": "endpoint",
        "model_format": None,
        "storage_uri": "s3://models/llm",
        "min_replicas": 0,
        "max_replicas": 3,
        "image": "ghcr.io/kubeflow/kserve/custom-server:1.0",
        "args": ["--port", "8080"],
    },
    "endpoint-canary": {
        "kind": "endpoint",
        "model_format": "huggingface",
        "storage_uri": "hf://meta-llama/Llama-3.2-1B",
        "canary_traffic_percent": 10,
        "min_replicas": 1,
        "max_replicas": 4,
    },
}
# The model version a rollout put under test (a rollout sets it, a request never does).
CANARY_VERSIONS = {"endpoint-canary": "hf://meta-llama/Llama-3.2-3B"}
MATRIX = [(o, c) for o in GPUS for c in CASES]


def build(offering: str, case: str) -> tuple[WorkloadSpec, list[dict[str, Any]]]:
    fields = {**COMMON, **CASES[case]}
    s = spec(
        fields.pop("kind"), offering=offering, gpus_per_replica=GPUS[offering], name=case, workload_id=42, **fields
    )
    s = replace(s, canary_storage_uri=CANARY_VERSIONS.get(case, ""))
    return s, workload_objects(s)


ids = [f"{o}-{c}" for o, c in MATRIX]


@requires_reference
@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_object_fits_its_upstream_schema(offering, case):
    _, objects = build(offering, case)
    for obj in objects:
        validate_any(obj)


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_core_object_passes_strict_kubernetes_validation(offering, case):
    _, objects = build(offering, case)
    for obj in objects:
        if is_core(obj):
            validate_core(obj)


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_pod_meets_the_restricted_standard_and_validates_as_a_core_pod(offering, case):
    s, objects = build(offering, case)
    pods = [p for obj in objects for p in pods_of(obj)]
    main = objects[-1]
    assert len(pods) == (len(main["spec"]["tasks"]) if main["kind"] == "Job" else 1)
    for pod in pods:
        assert_restricted(pod.spec, pod.annotations)
        validate_core(pod.as_object())
        assert pod.spec["automountServiceAccountToken"] is False
        assert pod.spec["serviceAccountName"] == "gpu-portal-workload"
        assert pod.spec["schedulerName"] == "volcano"
        assert pod.spec["priorityClassName"] == s.priority_class


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_object_and_pod_carries_the_portal_labels(offering, case):
    s, objects = build(offering, case)
    portal = {MANAGED_BY_LABEL: "gpu-portal", TEAM_LABEL: "vision", WORKLOAD_ID_LABEL: "42", KIND_LABEL: s.kind}
    for obj in objects:
        assert obj["metadata"]["labels"].items() >= portal.items(), obj["kind"]
        assert obj["metadata"]["namespace"] == "team-vision"
        for pod in pods_of(obj):
            assert pod.labels.items() >= portal.items(), pod.where
            assert pod.labels["project"] == "retina"


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_every_pod_lands_in_the_team_queue(offering, case):
    _, objects = build(offering, case)
    main = objects[-1]
    if main["kind"] == "Job":
        assert main["spec"]["queue"] == "team-vision"
    elif main["kind"] == "TrainJob":
        patch = main["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["metadata"]
        assert patch["annotations"][VOLCANO_QUEUE_ANNOTATION] == "team-vision"
    else:
        for pod in pods_of(main):
            assert pod.annotations[VOLCANO_QUEUE_ANNOTATION] == "team-vision"


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_the_gpu_request_comes_from_the_offering(offering, case):
    s, objects = build(offering, case)
    o = OFFERINGS[offering]
    claim_templates = [x for x in objects if x["kind"] == "ResourceClaimTemplate"]
    for obj in objects:
        for pod in pods_of(obj):
            gpu_pod = not pod.where.endswith("launcher")
            for c in pod.spec["containers"]:
                requests, limits = c["resources"]["requests"], c["resources"]["limits"]
                assert requests == limits  # Guaranteed QoS; extended resources require it anyway
                gpu_keys = {k for k in limits if k.startswith("nvidia.com/")}
                if o.request_mode == "device-plugin" and gpu_pod:
                    assert limits[o.resource_name] == str(GPUS[offering])
                    assert gpu_keys == {o.resource_name}
                else:
                    assert not gpu_keys
                if o.request_mode == "dra" and gpu_pod:
                    assert c["resources"]["claims"] == [{"name": "gpu"}]
                else:
                    assert "claims" not in c["resources"]
            if o.request_mode == "dra" and gpu_pod:
                assert pod.spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": f"{case}-gpu"}]
            else:
                assert "resourceClaims" not in pod.spec
            if o.kind == "cpu":
                assert pod.spec["affinity"]["nodeAffinity"] == o.node_affinity
                assert "tolerations" not in pod.spec
            else:
                assert pod.spec["nodeSelector"] == o.node_selector
                assert pod.spec["tolerations"] == o.tolerations
    if o.request_mode == "dra":
        (template,) = claim_templates
        request = template["spec"]["spec"]["devices"]["requests"][0]
        assert request["exactly"]["deviceClassName"] == o.dra_device_class
        assert request["exactly"]["count"] == GPUS[offering]
        assert request["exactly"]["selectors"] == [{"cel": {"expression": o.dra_selector}}]
    else:
        assert not claim_templates


@pytest.mark.parametrize(("offering", "case"), MATRIX, ids=ids)
def test_objects_come_in_apply_order_with_the_main_object_last(offering, case):
    s, objects = build(offering, case)
    assert (objects[-1]["apiVersion"], objects[-1]["kind"]) == main_object_type(s)
    kinds = [x["kind"] for x in objects]
    if "ResourceClaimTemplate" in kinds:
        assert kinds.index("ResourceClaimTemplate") == 0
    if s.workspace_gib:
        assert "PersistentVolumeClaim" in kinds[:-1]
    names = [x["metadata"]["name"] for x in objects]
    assert all(len(n) <= 63 for n in names)


def test_torch_training_uses_trainer_except_on_dra_offerings():
    backends = {o: training_backend(build(o, "torch-4-nodes")[0]) for o in GPUS}
    assert backends == {
        "h100-80gb": "trainjob",
        "h100-80gb-dra": "volcano",
        "a100-80gb-1g.10gb": "trainjob",
        "l4-shared": "trainjob",
        "cpu": "trainjob",
    }
    assert {training_backend(build("h100-80gb", c)[0]) for c in ("mpi-2-nodes", "custom-3-nodes")} == {"volcano"}


def test_a_volcano_job_is_gang_scheduled_over_all_its_pods():
    _, objects = build("h100-80gb", "mpi-2-nodes")
    job = objects[-1]
    assert job["spec"]["minAvailable"] == 3  # launcher + 2 workers
    assert job["spec"]["plugins"] == {
        "mpi": ["--master=launcher", "--worker=worker", "--port=2222"],
        "ssh": ["--ssh-key-file-path=/etc/volcano/.ssh"],
        "svc": [],
    }
    _, objects = build("h100-80gb-dra", "torch-4-nodes")
    job = objects[-1]
    assert [(t["name"], t["replicas"]) for t in job["spec"]["tasks"]] == [("node", 4)]
    assert job["spec"]["minAvailable"] == 4
    # Volcano's pytorch plugin would set MASTER_ADDR/RANK, which torchrun ignores.
    assert job["spec"]["plugins"] == {"env": [], "svc": []}
    for task in job["spec"]["tasks"]:
        assert task["template"]["spec"]["activeDeadlineSeconds"] == 7200


def test_the_mpi_launcher_runs_the_command_and_the_workers_run_the_image_entrypoint():
    _, objects = build("h100-80gb", "mpi-2-nodes")
    launcher, worker = objects[-1]["spec"]["tasks"]
    assert launcher["template"]["spec"]["containers"][0]["command"] == ["mpirun", "python", "t.py"]
    assert "command" not in worker["template"]["spec"]["containers"][0]
    assert launcher["template"]["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "2Gi"}
    # Volcano's ssh plugin has no port option and its config names hosts only: mpirun's ssh
    # gets the sshd port and the plugin's key and config itself.
    assert {
        "name": "OMPI_MCA_plm_rsh_args",
        "value": "-p 2222 -i /etc/volcano/.ssh/id_rsa -F /etc/volcano/.ssh/config",
    } in launcher["template"]["spec"]["containers"][0]["env"]


def test_a_torch_trainjob_names_the_runtime_of_its_priority_class_and_its_deadline():
    _, objects = build("h100-80gb", "torch-4-nodes")
    (job,) = objects
    assert job["spec"]["runtimeRef"]["name"] == "gpu-portal-torch-distributed-preemptible"
    assert job["spec"]["activeDeadlineSeconds"] == 7200
    assert job["spec"]["trainer"]["numNodes"] == 4
    assert job["spec"]["trainer"]["numProcPerNode"] == 2


def test_an_endpoint_scales_between_its_replicas_and_has_a_canary_only_when_rolled_out():
    _, (isvc,) = build("l4-shared", "endpoint-canary")
    predictor = isvc["spec"]["predictor"]
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 4)
    # Standard mode (the default): KServe's spec.canary, never Knative's canaryTrafficPercent
    assert "canaryTrafficPercent" not in predictor
    assert isvc["spec"]["canary"][0]["trafficPercent"] == 10
    _, (isvc,) = build("l4-shared", "endpoint-model")
    assert "canary" not in isvc["spec"]


def test_a_custom_server_gets_its_storage_uri_for_the_storage_initializer():
    _, (isvc,) = build("h100-80gb", "endpoint-custom-container")
    (container,) = isvc["spec"]["predictor"]["containers"]
    assert container["name"] == "kserve-container"
    assert {"name": "STORAGE_URI", "value": "s3://models/llm"} in container["env"]
    assert container["args"] == ["--port", "8080"]
