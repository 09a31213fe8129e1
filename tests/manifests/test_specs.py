"""validate_request: the one place that accepts or refuses a workload request."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.kube.names import PRIORITY_GUARANTEED, PRIORITY_PREEMPTIBLE
from jobs.specs import (
    ALL_FIELDS,
    FIELDS_BY_KIND,
    FORBIDDEN_FIELDS,
    NON_FIELD_ERRORS,
    SpecError,
    TeamRef,
    parse_image,
    validate_request,
)
from tests.manifests.conftest import OFFERINGS, REGISTRIES, TEAM, request, spec


def errors_of(data, registries=REGISTRIES) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as caught:
        validate_request(data, team=TEAM, offerings=OFFERINGS, allowed_registries=registries)
    return caught.value.errors


# -- good requests ---------------------------------------------------------------------------


def test_a_good_notebook_request_becomes_a_spec():
    s = spec("notebook", workspace_gib=20, labels={"project": "retina"}, env={"HF_HOME": "/home/jovyan/.cache"})
    assert s.kind == "notebook"
    assert s.name == "explore"
    assert s.id == 7
    assert s.team == TEAM
    assert s.offering is OFFERINGS["h100-80gb"]
    assert s.gpus_per_replica == 1  # the default for a GPU offering
    assert (s.replicas, s.max_replicas) == (1, 1)
    assert s.image == "quay.io/jupyter/pytorch-notebook:cuda12-2024-10-07"
    assert (s.cpu, s.memory) == ("2", "8Gi")
    assert s.workspace_gib == 20
    assert s.labels == (("project", "retina"),)
    assert s.env == (("HF_HOME", "/home/jovyan/.cache"),)
    assert s.stopped is False


def test_a_new_spec_runs_at_the_preemptible_priority_until_admission_says_otherwise():
    s = spec("training")
    assert s.priority_class == PRIORITY_PREEMPTIBLE
    assert replace(s, priority_class=PRIORITY_GUARANTEED).priority_class == PRIORITY_GUARANTEED


def test_a_good_training_request_becomes_a_spec():
    s = spec("training", replicas="4", gpus_per_replica=8, max_runtime_seconds=3600, cpu=32, memory="256Gi")
    assert (s.framework, s.replicas, s.max_replicas, s.gpus_per_replica) == ("torch", 4, 4, 8)
    assert (s.cpu, s.memory, s.max_runtime_seconds) == ("32", "256Gi", 3600)
    assert s.command == ("torchrun", "train.py")


def test_a_good_endpoint_request_becomes_a_spec():
    s = spec("endpoint", min_replicas=0, max_replicas=3, canary_traffic_percent=10)
    assert (s.replicas, s.max_replicas, s.canary_traffic_percent) == (0, 3, 10)
    assert (s.model_format, s.storage_uri, s.image) == ("sklearn", "s3://models/iris/v1", "")


def test_a_cpu_offering_defaults_to_no_gpus():
    assert spec("notebook", offering="cpu").gpus_per_replica == 0


def test_the_team_queue_is_named_after_the_team():
    assert TEAM.queue_name == "team-vision"


def test_a_team_ref_refuses_a_slug_that_cannot_name_kubernetes_objects():
    with pytest.raises(ValueError):
        TeamRef(slug="Vision Team", namespace="team-vision")
    with pytest.raises(ValueError):
        TeamRef(slug="vision", namespace="team_vision")


def test_the_field_lists_per_kind_are_exported_for_forms_and_serializers():
    assert set(FIELDS_BY_KIND) == {"notebook", "training", "endpoint"}
    assert "workspace_gib" in FIELDS_BY_KIND["notebook"] and "workspace_gib" not in FIELDS_BY_KIND["training"]
    assert "framework" in FIELDS_BY_KIND["training"]
    assert {"min_replicas", "max_replicas", "model_format", "storage_uri"} <= set(FIELDS_BY_KIND["endpoint"])
    assert not ALL_FIELDS & set(FORBIDDEN_FIELDS)


# -- the shape of a request -----------------------------------------------------------------


@pytest.mark.parametrize("field", sorted(FORBIDDEN_FIELDS))
def test_each_forbidden_field_is_refused_with_a_message_naming_it(field):
    errors = errors_of(request("notebook", **{field: True}))
    assert errors == {field: [f"{field}: not allowed: {FORBIDDEN_FIELDS[field]}"]}


def test_privileged_is_refused_because_of_the_restricted_standard():
    errors = errors_of(request("training", privileged=True))
    assert errors["privileged"] == [
        "privileged: not allowed: the portal runs every workload under the restricted Pod Security Standard"
    ]


def test_the_priority_class_cannot_be_chosen_by_the_user():
    errors = errors_of(request("training", priority_class=PRIORITY_GUARANTEED))
    assert errors["priority_class"][0].startswith("priority_class: not allowed: the portal chooses")


def test_an_unknown_field_is_refused():
    errors = errors_of(request("notebook", gpu_model="H100"))
    assert list(errors) == ["gpu_model"]
    assert errors["gpu_model"][0].startswith("unknown field for a notebook; allowed: annotations, args, command")


def test_a_field_of_another_kind_is_refused():
    errors = errors_of(request("training", workspace_gib=10))
    assert "unknown field for a training" in errors["workspace_gib"][0]


def test_an_unknown_kind_is_refused():
    errors = errors_of({"kind": "cronjob", "name": "x"})
    assert errors == {"kind": ["must be one of notebook, training, endpoint, not 'cronjob'"]}


def test_a_request_that_is_not_a_mapping_is_refused():
    with pytest.raises(SpecError) as caught:
        validate_request(["kind", "notebook"], team=TEAM, offerings=OFFERINGS, allowed_registries=REGISTRIES)
    assert caught.value.errors == {NON_FIELD_ERRORS: ["the request must be an object of fields"]}


def test_field_names_must_be_strings():
    assert NON_FIELD_ERRORS in errors_of({**request("notebook"), 1: "x"})


def test_every_problem_is_reported_at_once():
    errors = errors_of(request("notebook", name="Bad_Name", image="evil.io/x:1", cpu="lots", hostNetwork=True))
    assert set(errors) == {"name", "image", "cpu", "hostNetwork"}


def test_a_spec_error_reads_as_field_and_message():
    with pytest.raises(SpecError, match=r"^offering: unknown offering 'tpu'; available: a100-80gb-1g.10gb, cpu, "):
        validate_request(
            request("notebook", offering="tpu"), team=TEAM, offerings=OFFERINGS, allowed_registries=REGISTRIES
        )


# -- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["1st-run", "Explore", "my_notebook", "run-", "-run", "run.v2", "rün", "a" * 41, ""])
def test_a_name_that_is_not_a_short_rfc_1035_label_is_refused(name):
    assert "name" in errors_of(request("notebook", name=name))


def test_a_name_of_forty_characters_is_accepted():
    assert spec("notebook", name="a" * 40).name == "a" * 40


def test_a_name_with_a_trailing_newline_is_refused():
    assert "name" in errors_of(request("notebook", name="explore\n"))


# -- images -----------------------------------------------------------------------------------


def test_an_image_from_an_unlisted_registry_is_refused():
    errors = errors_of(request("notebook", image="evil.io/miner:1.0"))
    assert errors == {
        "image": ["registry 'evil.io' is not allowed; allowed: nvcr.io, docker.io, ghcr.io/kubeflow, quay.io/jupyter"]
    }


def test_a_host_and_path_entry_allows_only_repositories_below_that_path():
    assert spec("training", image="ghcr.io/kubeflow/trainer/torch:2.4").image == "ghcr.io/kubeflow/trainer/torch:2.4"
    errors = errors_of(request("training", image="ghcr.io/evil/torch:2.4"))
    assert errors["image"] == [
        "repository 'ghcr.io/evil/torch' is not allowed; allowed: nvcr.io, docker.io, ghcr.io/kubeflow, quay.io/jupyter"
    ]


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/kubeflowevil/x:1",  # a prefix matches whole path components only
        "nvcr.io.evil.com/nvidia/pytorch:24.08-py3",  # the host is parsed, not compared as a prefix
        "evil.io/nvcr.io/pytorch:1",
        "nvcr.io:443/nvidia/pytorch:24.08-py3",  # another port is another registry
    ],
)
def test_the_registry_check_compares_parsed_hosts_and_paths(image):
    assert "image" in errors_of(request("training", image=image))


@pytest.mark.parametrize(
    ("image", "reference"),
    [
        ("python:3.11", "docker.io/library/python:3.11"),
        ("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime", "docker.io/pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"),
        ("docker.io/python:3.11", "docker.io/library/python:3.11"),
        ("index.docker.io/library/python:3.11", "docker.io/library/python:3.11"),
        ("NVCR.IO/nvidia/pytorch:24.08-py3", "nvcr.io/nvidia/pytorch:24.08-py3"),
        (
            "python@sha256:" + "a" * 64,
            "docker.io/library/python@sha256:" + "a" * 64,
        ),
        (
            "nvcr.io/nvidia/pytorch:24.08-py3@sha256:" + "0" * 64,
            "nvcr.io/nvidia/pytorch:24.08-py3@sha256:" + "0" * 64,
        ),
    ],
)
def test_docker_hub_short_names_and_aliases_are_expanded_to_full_references(image, reference):
    assert parse_image(image).reference == reference
    assert spec("training", image=image).image == reference


def test_docker_hub_short_names_are_refused_when_docker_hub_is_not_allowed():
    errors = errors_of(request("training", image="python:3.11"), registries=("nvcr.io",))
    assert errors["image"] == ["registry 'docker.io' is not allowed; allowed: nvcr.io"]


def test_localhost_with_a_port_is_a_registry_host():
    ref = parse_image("localhost:5000/team/app:1")
    assert (ref.registry, ref.repository, ref.tag) == ("localhost:5000", "team/app", "1")


@pytest.mark.parametrize(
    "image",
    [
        "python",  # implied latest
        "python:",
        "Python:3.11",
        "nvcr.io/nvidia/PyTorch:24.08",
        "nvcr.io/nvidia/pytorch@sha256:abc",
        "python@sha256:" + "a" * 63,
        "py thon:3",
        "python:3.11\n",
        "ghcr.io//x:1",
        "-x:1",
        "x:" + "a" * 129,
        "ex$ample.com/x:1",
        "nvcr.io/nvidia/pytorch:24.08;rm -rf /",
        "x/" * 300 + "y:1",
    ],
)
def test_malformed_image_references_are_refused(image):
    assert "image" in errors_of(request("training", image=image))


def test_a_notebook_needs_an_image():
    assert errors_of(request("notebook", image=None)) == {"image": ["is required"]}


# -- environment ------------------------------------------------------------------------------


def test_env_may_be_a_mapping_or_a_list_of_name_value_objects():
    assert spec("training", env={"A": "1", "_B": ""}).env == (("A", "1"), ("_B", ""))
    assert spec("training", env=[{"name": "A", "value": "1"}]).env == (("A", "1"),)


@pytest.mark.parametrize("name", ["1X", "A-B", "A.B", "ÄPFEL", "", "A B", "A=B", "X" * 129])
def test_env_names_must_be_portable_identifiers(name):
    errors = errors_of(request("training", env={name: "1"}))
    assert "is not a valid variable name" in errors["env"][0]


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_MPS_PIPE_DIRECTORY",
        "PET_NNODES",
        "MASTER_ADDR",
        "RANK",
        "VC_WORKER_HOSTS",
        "KUBERNETES_SERVICE_HOST",
        "NB_PREFIX",
        "PORT",
        "STORAGE_URI",
    ],
)
def test_env_names_the_platform_sets_are_refused(name):
    errors = errors_of(request("training", env={name: "all"}))
    assert errors["env"][0].startswith(f"{name} cannot be set: ")


def test_the_gpu_runtime_variables_are_refused_with_the_reason():
    errors = errors_of(request("notebook", env={"NVIDIA_VISIBLE_DEVICES": "all"}))
    assert errors["env"] == [
        "NVIDIA_VISIBLE_DEVICES cannot be set: the GPU runtime reads it to decide which devices the container sees"
    ]


def test_cuda_variables_that_only_tune_a_process_are_allowed():
    assert spec("training", env={"CUDA_LAUNCH_BLOCKING": "1"}).env == (("CUDA_LAUNCH_BLOCKING", "1"),)


@pytest.mark.parametrize(
    "env",
    [
        [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
        {"A": 1},
        {"A": "x" * 8193},
        {"A": "a\x00b"},
        "A=1",
        [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
        {f"V{i}": "1" for i in range(65)},
    ],
)
def test_bad_env_values_are_refused(env):
    assert "env" in errors_of(request("training", env=env))


# -- labels and annotations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "gpu-portal.io/team",
        "gpu-portal.io/workload-id",
        "app.kubernetes.io/managed-by",
        "kubernetes.io/metadata.name",
        "scheduling.volcano.sh/queue-name",
        "kueue.x-k8s.io/queue-name",
        "serving.kserve.io/deploymentMode",
        "notebooks.kubeflow.org/http-rewrite-uri",
        "kubeflow-resource-stopped",
        "autoscaling.knative.dev/max-scale",
        "sidecar.istio.io/inject",
        "nvidia.com/gpu.product",
        "statefulset",
    ],
)
def test_a_label_or_annotation_the_portal_or_a_controller_owns_is_refused(key):
    errors = errors_of(request("notebook", labels={key: "x"}, annotations={key: "x"}))
    assert "is reserved" in errors["labels"][0]
    assert "is reserved" in errors["annotations"][0]


def test_a_label_that_would_override_the_portals_team_is_refused_with_the_reason():
    errors = errors_of(request("training", labels={"gpu-portal.io/team": "someone-else"}))
    assert errors["labels"][0].startswith(
        "'gpu-portal.io/team' is reserved: the portal and the cluster's controllers own keys under gpu-portal.io, "
    )


def test_a_multus_network_annotation_is_refused():
    assert "annotations" in errors_of(request("notebook", annotations={"k8s.v1.cni.cncf.io/networks": "host"}))


def test_user_labels_and_annotations_with_their_own_prefix_are_kept():
    s = spec(
        "notebook",
        labels={"example.com/cost-center": "ml-42", "project": ""},
        annotations={"description": "Retina experiments, round 2"},
    )
    assert s.labels == (("example.com/cost-center", "ml-42"), ("project", ""))
    assert s.annotations == (("description", "Retina experiments, round 2"),)


@pytest.mark.parametrize(
    "labels",
    [
        {"project": "a b"},
        {"project": "x" * 64},
        {"project": "-x"},
        {"Example.com/x": "1"},
        {"/x": "1"},
        {"x/": "1"},
        {"a" * 64: "1"},
        {"project": 3},
        ["project", "x"],
        {f"l{i}": "1" for i in range(33)},
    ],
)
def test_labels_must_be_valid_kubernetes_labels(labels):
    assert "labels" in errors_of(request("notebook", labels=labels))


def test_annotation_values_are_bounded():
    assert "annotations" in errors_of(request("notebook", annotations={"note": "x" * 4097}))


# -- GPUs and replicas ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offering", "gpus", "ok"),
    [
        ("h100-80gb", 1, True),
        ("h100-80gb", 8, True),
        ("h100-80gb", 0, False),
        ("h100-80gb", 9, False),
        ("h100-80gb-dra", 4, True),
        ("a100-80gb-1g.10gb", 1, True),
        ("a100-80gb-1g.10gb", 2, False),
        ("l4-shared", 1, True),
        ("l4-shared", 2, False),
        ("cpu", 0, True),
        ("cpu", 1, False),
    ],
)
def test_gpus_per_replica_follow_the_offering(offering, gpus, ok):
    data = request("training", offering=offering, gpus_per_replica=gpus)
    if ok:
        assert (
            validate_request(data, team=TEAM, offerings=OFFERINGS, allowed_registries=REGISTRIES).gpus_per_replica
            == gpus
        )
    else:
        assert "gpus_per_replica" in errors_of(data)


def test_a_second_mig_slice_is_refused_with_the_reason():
    errors = errors_of(request("notebook", offering="a100-80gb-1g.10gb", gpus_per_replica=2))
    assert errors["gpus_per_replica"][0].startswith("must be 1: a replica gets one MIG slice")


@pytest.mark.parametrize("gpus", [True, 1.5, "two", "-1", [1]])
def test_gpus_per_replica_must_be_a_whole_number(gpus):
    assert "gpus_per_replica" in errors_of(request("training", gpus_per_replica=gpus))


@pytest.mark.parametrize(
    ("field", "value"),
    [("replicas", 0), ("replicas", 17), ("max_runtime_seconds", 59), ("max_runtime_seconds", 31 * 24 * 3600)],
)
def test_training_ranges_are_enforced(field, value):
    assert field in errors_of(request("training", **{field: value}))


def test_a_notebook_has_no_replicas_field():
    assert "replicas" in errors_of(request("notebook", replicas=2))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, "max_replicas"),
        ({"max_replicas": 11}, "max_replicas"),
        ({"min_replicas": -1}, "min_replicas"),
        ({"max_replicas": 0}, "max_replicas"),
        ({"canary_traffic_percent": 101}, "canary_traffic_percent"),
    ],
)
def test_endpoint_ranges_are_enforced(fields, field):
    assert field in errors_of(request("endpoint", **fields))


def test_a_workspace_must_be_at_least_one_gib():
    assert "workspace_gib" in errors_of(request("notebook", workspace_gib=0))


def test_stopped_must_be_a_boolean():
    assert "stopped" in errors_of(request("notebook", stopped="yes"))


def test_training_needs_a_framework():
    assert errors_of(request("training", framework=None)) == {"framework": ["is required; one of torch, mpi, custom"]}


# -- cpu and memory ------------------------------------------------------------------------------


def test_cpu_and_memory_defaults_depend_on_the_kind():
    assert (spec("training").cpu, spec("training").memory) == ("8", "32Gi")
    assert (spec("endpoint").cpu, spec("endpoint").memory) == ("2", "8Gi")


def test_numbers_are_accepted_as_quantities():
    s = spec("notebook", cpu=0.5, memory=2**31)
    assert (s.cpu, s.memory) == ("0.5", "2147483648")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cpu", "50m"),
        ("cpu", "193"),
        ("cpu", "0.0001"),
        ("cpu", "1e3"),
        ("cpu", "-1"),
        ("cpu", "two"),
        ("cpu", True),
        ("memory", "100Mi"),
        ("memory", "3Ti"),
        ("memory", "8m"),
        ("memory", "8 Gi"),
        ("memory", float("nan")),
        ("cpu", "١"),
    ],
)
def test_cpu_and_memory_must_be_sane_quantities(field, value):
    assert field in errors_of(request("notebook", **{field: value}))


def test_memory_in_milli_bytes_is_refused_with_a_hint():
    assert errors_of(request("notebook", memory="8000m")) == {
        "memory": ["'m' means thousandths of a byte; write Mi for mebibytes"]
    }


# -- command and args ----------------------------------------------------------------------------


def test_a_command_line_from_the_form_is_split_like_a_shell_would():
    s = spec("training", command="torchrun --nproc-per-node 8 'train script.py'")
    assert s.command == ("torchrun", "--nproc-per-node", "8", "train script.py")


@pytest.mark.parametrize(
    "command", ["python 'unterminated", [1, 2], {"a": "b"}, ["ok"] * 129, ["x" * 16385], ["a\x00b"]]
)
def test_bad_commands_are_refused(command):
    assert "command" in errors_of(request("training", command=command))


# -- endpoints -----------------------------------------------------------------------------------


def test_an_endpoint_serves_a_model_or_an_image():
    errors = errors_of(request("endpoint", model_format=None, storage_uri=None))
    assert errors == {
        NON_FIELD_ERRORS: [
            "an endpoint serves either a model (model_format and storage_uri) or your own server (image)"
        ]
    }


def test_a_model_needs_a_storage_uri():
    assert errors_of(request("endpoint", storage_uri=None)) == {"storage_uri": ["is required to serve a sklearn model"]}


def test_a_model_server_runs_the_runtimes_command():
    assert "command" in errors_of(request("endpoint", command=["python", "serve.py"]))


def test_a_custom_server_image_needs_no_model_format():
    s = spec("endpoint", model_format=None, storage_uri=None, image="ghcr.io/kubeflow/kserve/custom:1.0")
    assert (s.model_format, s.image) == ("", "ghcr.io/kubeflow/kserve/custom:1.0")


@pytest.mark.parametrize(
    "uri",
    [
        "ftp://models/x",
        "file:///etc/passwd",
        "s3://",
        "s3://Bad_Bucket!/x",
        "pvc://claim/../../etc",
        "pvc://Not_A_Claim/x",
        "https://",
        "s3://models/a b",
        "gs://models/ü",
        "models/iris",
    ],
)
def test_storage_uris_must_use_an_allowed_scheme_and_name_a_location(uri):
    assert "storage_uri" in errors_of(request("endpoint", storage_uri=uri))


@pytest.mark.parametrize(
    "uri",
    [
        "s3://models/iris/v1",
        "gs://my-bucket/model",
        "pvc://models/resnet/1",
        "hf://meta-llama/Llama-3.2-1B",
        "https://example.com/models/x.onnx",
    ],
)
def test_allowed_storage_uris_are_kept(uri):
    assert spec("endpoint", storage_uri=uri).storage_uri == uri
