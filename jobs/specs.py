"""A workload request, validated once, for the HTML form, the API and the preview alike.

``validate_request`` is the only place that decides whether a request is acceptable. It
returns a frozen ``WorkloadSpec`` that the manifest builders trust, or raises ``SpecError``
whose ``errors`` map each input field to messages a person can act on. Forms and
serializers reuse ``FIELDS_BY_KIND`` for their field lists and call ``validate_request``
for the rules, so a rule is never written twice.

Decisions a reviewer should know about:

* Names are RFC 1035 labels (a lowercase letter first), not just DNS-1123 labels:
  Kubeflow Trainer's TrainJob and KServe's InferenceService both refuse a leading digit.
  At most 40 characters so that derived names (``<name>-workspace``, KServe's
  ``<name>-predictor-...``, Volcano's ``<name>-worker-7``) fit in 63.
* Images are parsed as Docker references and stored fully qualified
  (``python:3.11`` -> ``docker.io/library/python:3.11``). The registry check is made on
  that form, and the manifests carry it too, so a node's short-name resolution can never
  fetch the image from a registry other than the one we allowed. An explicit tag or a
  digest is required: an implied ``latest`` makes runs irreproducible.
* Environment variables that steer the GPU runtime (``NVIDIA_*``, ``CUDA_VISIBLE_DEVICES``,
  ``CUDA_MPS_*``) are refused: NVIDIA's container runtime reads them to decide which
  devices a container sees, so a user value could widen access beyond the allocated GPU
  or MIG slice. Names the controllers inject (Trainer's ``PET_*``, Volcano's ``VC_*``,
  ``MASTER_ADDR``/``RANK``..., Knative's ``PORT``/``K_*``, Kubeflow's ``NB_PREFIX``) are
  refused too, so a user value never silently loses to, or breaks, the injected one.
* Labels and annotations under the portal's or a controller's domains are refused (see
  ``jobs.kube.labels.is_reserved_key``); the builders also let the portal's labels win.
* The GPU count rule: full GPUs 1..8 per replica; a MIG slice or a shared GPU exactly 1
  per replica. CUDA uses one MIG device per process, so a second slice in a container
  idles; time-sliced or MPS replicas of one GPU add no compute, and the device plugin
  refuses more than one under MPS (``failRequestsGreaterThanOne``). CPU offerings: 0.
* ``priority_class`` is not an input: it defaults to the preemptible class (the one that
  never preempts anyone) and admission replaces it with ``dataclasses.replace``.
* ``queueing`` is not an input either: it is the cluster's queueing backend ("volcano" or
  "kueue", from the cluster profile), which ``jobs.lifecycle.spec_of`` sets the same way,
  so that the builders stay pure and never read settings.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from jobs.kube.labels import RESERVED_KEY_DOMAINS, RESERVED_KEYS, is_reserved_key
from jobs.kube.names import PRIORITY_PREEMPTIBLE, team_queue_name

KINDS = ("notebook", "training", "endpoint")
FRAMEWORKS = ("torch", "mpi", "custom")
# Model formats the stock KServe ServingRuntimes declare.
MODEL_FORMATS = (
    "sklearn",
    "xgboost",
    "lightgbm",
    "tensorflow",
    "pytorch",
    "onnx",
    "triton",
    "huggingface",
    "pmml",
    "paddle",
    "mlflow",
)
STORAGE_SCHEMES = ("s3", "gs", "pvc", "hf", "https")
NON_FIELD_ERRORS = "__all__"

MAX_NAME_LENGTH = 40
MAX_FULL_GPUS = 8
MAX_TRAINING_NODES = 16
MAX_ENDPOINT_REPLICAS = 10
MAX_WORKSPACE_GIB = 1024
MIN_RUNTIME_SECONDS = 60
MAX_RUNTIME_SECONDS = 30 * 24 * 3600
MAX_ENV_VARS = 64
MAX_ENV_VALUE = 8192
MAX_ARGV_ITEMS = 128  # Trainer's TrainJob caps command and args at 128 items
MAX_ARGV_ITEM = 16 * 1024
MAX_ARGV_TOTAL = 64 * 1024
MAX_LABELS = 32
MAX_ANNOTATIONS = 32
MAX_ANNOTATION_VALUE = 4096
MAX_IMAGE_LENGTH = 500  # TrainJob's spec.trainer.image maxLength
MAX_STORAGE_URI = 2048
CPU_RANGE = (Decimal("0.1"), Decimal(192))  # cores
MEMORY_RANGE = (Decimal(256 * 2**20), Decimal(2048 * 2**30))  # bytes: 256Mi .. 2Ti

DEFAULT_RESOURCES = {  # (cpu, memory) per replica
    "notebook": ("2", "8Gi"),
    "training": ("8", "32Gi"),
    "endpoint": ("2", "8Gi"),
}

_COMMON_FIELDS = (
    "kind",
    "name",
    "offering",
    "gpus_per_replica",
    "image",
    "command",
    "args",
    "env",
    "labels",
    "annotations",
    "cpu",
    "memory",
)
FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "notebook": (*_COMMON_FIELDS, "workspace_gib", "stopped"),
    "training": (*_COMMON_FIELDS, "framework", "replicas", "max_runtime_seconds"),
    "endpoint": (
        *_COMMON_FIELDS,
        "min_replicas",
        "max_replicas",
        "model_format",
        "storage_uri",
        "canary_traffic_percent",
    ),
}
ALL_FIELDS = frozenset(f for fields in FIELDS_BY_KIND.values() for f in fields)

_RESTRICTED = "the portal runs every workload under the restricted Pod Security Standard"
_PLACEMENT = "placement follows the chosen offering"
FORBIDDEN_FIELDS: dict[str, str] = {
    "privileged": _RESTRICTED,
    "securityContext": _RESTRICTED,
    "security_context": _RESTRICTED,
    "capabilities": _RESTRICTED,
    "allowPrivilegeEscalation": _RESTRICTED,
    "runAsUser": _RESTRICTED,
    "run_as_user": _RESTRICTED,
    "runAsNonRoot": _RESTRICTED,
    "hostPath": "host paths are never mounted; use the workspace volume",
    "host_path": "host paths are never mounted; use the workspace volume",
    "hostNetwork": "pods never share the node's network namespace",
    "host_network": "pods never share the node's network namespace",
    "hostPID": "pods never share the node's process namespace",
    "host_pid": "pods never share the node's process namespace",
    "hostIPC": "pods never share the node's IPC namespace",
    "host_ipc": "pods never share the node's IPC namespace",
    "hostPort": "pods never bind ports on the node",
    "serviceAccountName": "every workload runs as the team's workload service account",
    "serviceAccount": "every workload runs as the team's workload service account",
    "service_account": "every workload runs as the team's workload service account",
    "service_account_name": "every workload runs as the team's workload service account",
    "automountServiceAccountToken": "workloads get no Kubernetes API token",
    "nodeName": _PLACEMENT,
    "node_name": _PLACEMENT,
    "nodeSelector": _PLACEMENT,
    "node_selector": _PLACEMENT,
    "affinity": _PLACEMENT,
    "tolerations": _PLACEMENT,
    "schedulerName": "the portal schedules every workload through its team's queue",
    "volumes": "the only volume a user can ask for is the notebook workspace (workspace_gib)",
    "volumeMounts": "the only volume a user can ask for is the notebook workspace (workspace_gib)",
    "resources": "ask with gpus_per_replica, cpu and memory; the offering decides how GPUs are requested",
    "priority_class": "the portal chooses the priority class when it admits the workload",
    "priorityClassName": "the portal chooses the priority class when it admits the workload",
    "priority": "the portal chooses the priority class when it admits the workload",
    "namespace": "workloads run in their team's namespace",
    "team": "the team comes from your membership, not from the request",
    "id": "the portal assigns workload ids",
}

_RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DIGITS = re.compile(r"[0-9]{1,9}")
_QUANTITY = re.compile(r"(?P<number>[0-9]+(\.[0-9]+)?|\.[0-9]+)(?P<suffix>m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Docker reference grammar (distribution/reference), ASCII only.
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(rf"{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]{{1,5}})?")
_PATH_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"(?P<algorithm>[a-z0-9]+(?:[.+_-][a-z0-9]+)*):(?P<hex>[0-9a-f]{32,})")
_DIGEST_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128}
_DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = {"index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}

# Environment variables the platform owns. Exact names, then prefixes, with the reason.
_GPU_RUNTIME = "the GPU runtime reads it to decide which devices the container sees"
RESERVED_ENV_NAMES: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": _GPU_RUNTIME,
    "GPU_DEVICE_ORDINAL": _GPU_RUNTIME,
    "HIP_VISIBLE_DEVICES": _GPU_RUNTIME,
    "ROCR_VISIBLE_DEVICES": _GPU_RUNTIME,
    "MASTER_ADDR": "the training controller sets it for distributed training",
    "MASTER_PORT": "the training controller sets it for distributed training",
    "WORLD_SIZE": "the training controller sets it for distributed training",
    "RANK": "the training controller sets it for distributed training",
    "MPI_HOST": "Volcano's mpi plugin sets it",
    "OMPI_MCA_plm_rsh_args": "the portal sets mpirun's ssh arguments (the workers' sshd port and keys)",
    "PRTE_MCA_plm_ssh_args": "the portal sets mpirun's ssh arguments (the workers' sshd port and keys)",
    "VK_TASK_INDEX": "Volcano's env plugin sets it",
    "NB_PREFIX": "the notebook controller sets it",
    "STORAGE_URI": "the portal sets it from storage_uri",
    "PORT": "Knative sets it for the serving container",
    "K_SERVICE": "Knative sets it",
    "K_CONFIGURATION": "Knative sets it",
    "K_REVISION": "Knative sets it",
}
RESERVED_ENV_PREFIXES: dict[str, str] = {
    "NVIDIA_": _GPU_RUNTIME,
    "CUDA_MPS_": "the MPS control daemon of a shared GPU is configured by the platform",
    "PET_": "Kubeflow Trainer sets the PET_* torchrun variables",
    "VC_": "Volcano's plugins set the VC_* variables",
    "KUBERNETES_": "the kubelet sets the KUBERNETES_* service variables",
    "GPU_PORTAL_": "the portal's own variables",
}


class OfferingLike(Protocol):
    """What the builders need from an offering (``portal.cluster_profile.Offering`` or a model)."""

    @property
    def slug(self) -> str: ...
    @property
    def kind(self) -> str: ...  # "gpu" | "mig" | "shared" | "cpu"
    @property
    def request_mode(self) -> str: ...  # "device-plugin" | "dra" | "none"
    @property
    def resource_name(self) -> str: ...
    @property
    def dra_device_class(self) -> str: ...
    @property
    def dra_selector(self) -> str: ...
    @property
    def node_selector(self) -> Mapping[str, str]: ...
    @property
    def node_affinity(self) -> Mapping[str, Any]: ...
    @property
    def tolerations(self) -> Sequence[Mapping[str, Any]]: ...


class SpecError(ValueError):
    """A request that cannot become a workload; ``errors`` maps input fields to messages."""

    def __init__(self, errors: Mapping[str, Sequence[str]]):
        self.errors: dict[str, list[str]] = {k: list(v) for k, v in errors.items()}
        super().__init__("; ".join(f"{k}: {m}" for k, ms in self.errors.items() for m in ms))


@dataclass(frozen=True)
class TeamRef:
    slug: str
    namespace: str

    def __post_init__(self) -> None:
        # Builders put these into names and labels; a bad value is a portal bug, not user input.
        if not _DNS1123_LABEL.fullmatch(self.slug) or len(self.slug) > 58:
            raise ValueError(f"team slug {self.slug!r} must be a DNS label of at most 58 characters")
        if not _DNS1123_LABEL.fullmatch(self.namespace) or len(self.namespace) > 63:
            raise ValueError(f"team namespace {self.namespace!r} must be a DNS label")

    @property
    def queue_name(self) -> str:
        """The team's Volcano queue, ``team-<slug>`` (see ``jobs.kube.names.team_queue_name``)."""
        return team_queue_name(self.slug)


@dataclass(frozen=True)
class ImageRef:
    registry: str  # lowercase host[:port]; Docker Hub is "docker.io"
    repository: str  # path below the registry, "library/python" for official images
    tag: str = ""
    digest: str = ""

    @property
    def reference(self) -> str:
        ref = f"{self.registry}/{self.repository}"
        if self.tag:
            ref += f":{self.tag}"
        if self.digest:
            ref += f"@{self.digest}"
        return ref


@dataclass(frozen=True)
class WorkloadSpec:
    id: int
    kind: str  # "notebook" | "training" | "endpoint"
    name: str
    team: TeamRef
    offering: OfferingLike = field(hash=False)
    gpus_per_replica: int
    replicas: int = 1  # notebook: 1; training: nodes; endpoint: min replicas
    max_replicas: int = 1  # endpoint only; equal to replicas otherwise
    framework: str = ""  # training: "torch" | "mpi" | "custom"
    image: str = ""  # fully qualified reference, or "" for an endpoint served by a KServe runtime
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    annotations: tuple[tuple[str, str], ...] = ()
    cpu: str = "1"
    memory: str = "4Gi"
    workspace_gib: int | None = None
    max_runtime_seconds: int | None = None
    priority_class: str = PRIORITY_PREEMPTIBLE
    stopped: bool = False
    model_format: str = ""
    storage_uri: str = ""
    canary_traffic_percent: int | None = None
    canary_storage_uri: str = ""  # endpoints: the model version under test (set by a rollout, never requested)
    queueing: str = "volcano"  # the cluster's queueing backend: "volcano" | "kueue"
    # Endpoints: KServe's serving.kserve.io/deploymentMode, "Standard" | "Knative"
    # (``endpoint_deployment_mode``); written explicitly because KServe's install default is Knative.
    deployment_mode: str = "Standard"


def endpoint_deployment_mode(offering: OfferingLike, gpus_per_replica: int, cluster_mode: str) -> str:
    """The KServe deployment mode of one endpoint: the cluster's, except that DRA needs Standard.

    Knative Serving (v1.21, the release KServe v0.20 installs) never lets a pod template carry
    ``resourceClaims``, whatever its feature flags say, so an endpoint on a DRA offering is a
    plain Deployment (Standard mode) even on a cluster that serves the rest with Knative.
    """
    if offering.request_mode == "dra" and gpus_per_replica > 0:
        return "Standard"
    return cluster_mode


@dataclass(frozen=True, eq=False)
class TeamQuota(Mapping[str, tuple[Any, Any]]):
    """A team's quota amounts (resource -> (guaranteed, limit)) with the cluster's queueing.

    ``jobs.kube.manifests.team_objects`` takes a plain mapping of amounts, which means
    Volcano (the team's Queue is built from them). On a Kueue cluster the lifecycle passes
    this instead: the same amounts for the namespace's ResourceQuotas, ``queueing="kueue"``
    so that no Volcano Queue is built, and ``queue_objects``, the team's Kueue objects
    (ResourceFlavors, ClusterQueue, LocalQueue) that ``quotas.kueue`` builds from the
    database, applied where the Volcano Queue would have been.
    """

    amounts: Mapping[str, tuple[Any, Any]]
    queueing: str = "volcano"
    queue_objects: tuple[Mapping[str, Any], ...] = ()

    def __getitem__(self, key: str) -> tuple[Any, Any]:
        return self.amounts[key]

    def __iter__(self):
        return iter(self.amounts)

    def __len__(self) -> int:
        return len(self.amounts)


def validate_request(
    data: Mapping[str, Any],
    *,
    team: TeamRef,
    offerings: Mapping[str, OfferingLike],
    allowed_registries: Sequence[str] | None,
    workload_id: int = 0,
) -> WorkloadSpec:
    """Check every rule at once and return the spec, or raise ``SpecError`` with all problems.

    1. The shape: a mapping with string keys; forbidden fields get their own message;
       fields unknown for the kind are refused.
    2. Each field on its own (types, formats, ranges).
    3. Rules across fields (GPU count against the offering, endpoint model or image,
       min and max replicas).
    """
    if workload_id < 0:
        raise ValueError("workload_id must be 0 or more")
    errors = _Errors()
    if not isinstance(data, Mapping):
        raise SpecError({NON_FIELD_ERRORS: ["the request must be an object of fields"]})
    keys = [k for k in data if isinstance(k, str)]
    if len(keys) != len(data):
        errors.add(NON_FIELD_ERRORS, "field names must be strings")
    for key in keys:
        if key in FORBIDDEN_FIELDS:
            errors.add(key, f"{key}: not allowed: {FORBIDDEN_FIELDS[key]}")

    kind = data.get("kind")
    if kind not in KINDS:
        errors.add("kind", f"must be one of {', '.join(KINDS)}, not {_show(kind)}")
        allowed = ALL_FIELDS
    else:
        allowed = frozenset(FIELDS_BY_KIND[kind])
    for key in keys:
        if key not in allowed and key not in FORBIDDEN_FIELDS:
            where = f"a {kind}" if kind in KINDS else "any workload"
            errors.add(_short(key), f"unknown field for {where}; allowed: {', '.join(sorted(allowed))}")
    if kind not in KINDS:
        raise SpecError(errors.dict)

    name = _name(data.get("name"), errors)
    offering = _offering(data.get("offering"), offerings, errors)
    gpus = _gpus(data.get("gpus_per_replica"), offering, errors)
    image = _image_field(data.get("image"), allowed_registries, errors)
    command = _argv(data.get("command"), "command", errors)
    args = _argv(data.get("args"), "args", errors)
    env = _env(data.get("env"), errors)
    labels = _labels(data.get("labels"), errors)
    annotations = _annotations(data.get("annotations"), errors)
    default_cpu, default_memory = DEFAULT_RESOURCES[kind]
    cpu = _quantity(data.get("cpu", default_cpu), "cpu", CPU_RANGE, errors)
    memory = _quantity(data.get("memory", default_memory), "memory", MEMORY_RANGE, errors)

    extra: dict[str, Any] = {}
    if kind == "notebook":
        extra["workspace_gib"] = _optional_int(data.get("workspace_gib"), "workspace_gib", 1, MAX_WORKSPACE_GIB, errors)
        extra["stopped"] = _bool(data.get("stopped", False), "stopped", errors)
        if image is None and "image" not in errors.dict:
            errors.add("image", "is required")
    elif kind == "training":
        extra["framework"] = _choice(data.get("framework"), "framework", FRAMEWORKS, errors, required=True)
        replicas = _int(data.get("replicas", 1), "replicas", 1, MAX_TRAINING_NODES, errors)
        extra["replicas"] = extra["max_replicas"] = replicas
        extra["max_runtime_seconds"] = _optional_int(
            data.get("max_runtime_seconds"), "max_runtime_seconds", MIN_RUNTIME_SECONDS, MAX_RUNTIME_SECONDS, errors
        )
        if image is None and "image" not in errors.dict:
            errors.add("image", "is required")
    else:
        extra.update(_endpoint(data, image, command, errors))

    if errors:
        raise SpecError(errors.dict)
    return WorkloadSpec(
        id=workload_id,
        kind=kind,
        name=name,
        team=team,
        offering=offering,
        gpus_per_replica=gpus,
        image=image.reference if image else "",
        command=command,
        args=args,
        env=env,
        labels=labels,
        annotations=annotations,
        cpu=cpu,
        memory=memory,
        **extra,
    )


def parse_image(value: str) -> ImageRef:
    """Parse a Docker image reference; raise ``ValueError`` with the reason when it is not one.

    Docker Hub short names are expanded the way Docker does: ``python:3.11`` is
    ``docker.io/library/python:3.11`` and ``pytorch/pytorch:2.4`` is
    ``docker.io/pytorch/pytorch:2.4``. The first path component is a registry host only
    when it contains '.' or ':' or is ``localhost``.
    """
    if not isinstance(value, str) or not value:
        raise ValueError("must be an image reference such as nvcr.io/nvidia/pytorch:24.08-py3")
    if len(value) > MAX_IMAGE_LENGTH:
        raise ValueError(f"must be at most {MAX_IMAGE_LENGTH} characters")
    if any(c.isspace() for c in value) or _CONTROL.search(value):
        raise ValueError("must not contain spaces or control characters")
    rest, _, digest = value.partition("@")
    if digest:
        m = _DIGEST.fullmatch(digest)
        if not m:
            raise ValueError(f"digest {_show(digest)} is not of the form sha256:<64 hex digits>")
        expected = _DIGEST_LENGTH.get(m["algorithm"])
        if expected and len(m["hex"]) != expected:
            raise ValueError(f"a {m['algorithm']} digest has {expected} hex digits, not {len(m['hex'])}")
    tag = ""
    if rest.rfind(":") > rest.rfind("/"):
        rest, _, tag = rest.rpartition(":")
        if not _TAG.fullmatch(tag):
            raise ValueError(f"tag {_show(tag)} is not valid (letters, digits, '_', '.', '-'; at most 128)")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry = first.lower()
        if not _DOMAIN.fullmatch(first):
            raise ValueError(f"registry host {_show(first)} is not valid")
    else:
        registry, remainder = _DOCKER_HUB, rest
    if registry in _DOCKER_HUB_ALIASES:
        registry = _DOCKER_HUB
    if registry == _DOCKER_HUB and "/" not in remainder:
        remainder = "library/" + remainder
    parts = remainder.split("/")
    for part in parts:
        if not _PATH_PART.fullmatch(part):
            raise ValueError(
                f"repository {_show(remainder)} is not valid: path components are lowercase letters and digits "
                "separated by '.', '_', '__' or '-'"
            )
    if len(registry) + 1 + len(remainder) > 255:
        raise ValueError("the repository name must be at most 255 characters")
    if not tag and not digest:
        raise ValueError("add a tag (e.g. ':1.2.3') or a digest; an implied 'latest' is not reproducible")
    return ImageRef(registry, remainder, tag, digest)


def registry_allowed(image: ImageRef, allowed_registries: Sequence[str]) -> bool:
    """True when an entry is the image's registry host or a host/path prefix of its repository."""
    for entry in allowed_registries:
        host, _, prefix = entry.strip().strip("/").partition("/")
        host = host.lower()
        if host in _DOCKER_HUB_ALIASES:
            host = _DOCKER_HUB
        if host != image.registry:
            continue
        if not prefix or image.repository == prefix or image.repository.startswith(prefix + "/"):
            return True
    return False


def parse_quantity(value: str) -> Decimal:
    """The value of a Kubernetes quantity in base units (cores, bytes); ``ValueError`` if invalid.

    Accepts a plain decimal with an optional SI or binary suffix ("500m", "2", "8Gi");
    exponent forms ("1e3") are refused as too easy to misread.
    """
    m = _QUANTITY.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise ValueError("must be a quantity such as 500m, 2, 512Mi or 8Gi")
    return Decimal(m["number"]) * _SUFFIX[m["suffix"] or ""]


# -- field parsers: each returns the clean value (or a harmless stand-in) and records errors


class _Errors:
    def __init__(self) -> None:
        self.dict: dict[str, list[str]] = {}

    def add(self, key: str, message: str) -> None:
        self.dict.setdefault(key, []).append(message)

    def __bool__(self) -> bool:
        return bool(self.dict)


def _show(value: Any, limit: int = 60) -> str:
    """A user value quoted for a message, cut short and with control characters escaped."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def _short(key: str) -> str:
    return key if len(key) <= 100 else key[:100] + "..."


def _name(value: Any, errors: _Errors) -> str:
    if value is None or value == "":
        errors.add("name", "is required")
        return ""
    if not isinstance(value, str):
        errors.add("name", "must be a string")
        return ""
    if len(value) > MAX_NAME_LENGTH:
        errors.add(
            "name",
            f"must be at most {MAX_NAME_LENGTH} characters (it has {len(value)}), so that the names "
            "derived from it fit in 63",
        )
    if not _RFC1035.fullmatch(value):
        errors.add(
            "name",
            "must start with a lowercase letter, contain only lowercase letters, digits and '-', "
            "and end with a letter or digit",
        )
    return value


def _offering(value: Any, offerings: Mapping[str, OfferingLike], errors: _Errors) -> OfferingLike | None:
    if value is None or value == "":
        errors.add("offering", "is required")
        return None
    if not isinstance(value, str) or value not in offerings:
        errors.add("offering", f"unknown offering {_show(value)}; available: {', '.join(sorted(offerings))}")
        return None
    return offerings[value]


def _gpus(value: Any, offering: OfferingLike | None, errors: _Errors) -> int:
    if offering is None:
        return 0
    if offering.kind == "cpu":
        gpus = _int(0 if value is None else value, "gpus_per_replica", 0, MAX_FULL_GPUS, errors)
        if gpus:
            errors.add("gpus_per_replica", f"offering {offering.slug!r} is CPU only; use 0")
        return 0
    gpus = _int(1 if value is None else value, "gpus_per_replica", 0, MAX_FULL_GPUS, errors)
    if "gpus_per_replica" in errors.dict:
        return gpus
    if offering.kind == "gpu" and not 1 <= gpus <= MAX_FULL_GPUS:
        errors.add("gpus_per_replica", f"must be between 1 and {MAX_FULL_GPUS} full GPUs per replica")
    elif offering.kind == "mig" and gpus != 1:
        errors.add(
            "gpus_per_replica",
            "must be 1: a replica gets one MIG slice (CUDA uses a single MIG device per process); "
            "for more, choose a larger slice or a full GPU",
        )
    elif offering.kind == "shared" and gpus != 1:
        errors.add(
            "gpus_per_replica",
            "must be 1: more replicas of a shared GPU add no compute (and MPS refuses more than one); "
            "for more, choose a full GPU",
        )
    return gpus


def _int(value: Any, key: str, low: int, high: int, errors: _Errors) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        errors.add(key, f"must be a whole number, not {_show(value)}")
        return low
    if isinstance(value, str):
        if not _DIGITS.fullmatch(value):
            errors.add(key, f"must be a whole number, not {_show(value)}")
            return low
        value = int(value)
    if not low <= value <= high:
        errors.add(key, f"must be between {low} and {high}, not {value}")
        return low
    return value


def _optional_int(value: Any, key: str, low: int, high: int, errors: _Errors) -> int | None:
    if value is None or value == "":
        return None
    return _int(value, key, low, high, errors)


def _bool(value: Any, key: str, errors: _Errors) -> bool:
    if not isinstance(value, bool):
        errors.add(key, "must be true or false")
        return False
    return value


def _choice(value: Any, key: str, choices: Sequence[str], errors: _Errors, *, required: bool) -> str:
    if value is None or value == "":
        if required:
            errors.add(key, f"is required; one of {', '.join(choices)}")
        return ""
    if value not in choices:
        errors.add(key, f"must be one of {', '.join(choices)}, not {_show(value)}")
        return ""
    return value


def _image_field(value: Any, allowed_registries: Sequence[str] | None, errors: _Errors) -> ImageRef | None:
    if value is None or value == "":
        return None
    try:
        image = parse_image(value)
    except ValueError as exc:
        errors.add("image", str(exc))
        return None
    # None: a stored request being rebuilt; it passed the allow-list when it was made.
    if allowed_registries is not None and not registry_allowed(image, allowed_registries):
        allowed = ", ".join(allowed_registries) or "none (ask an admin)"
        hosts = {e.strip().partition("/")[0].lower() for e in allowed_registries}
        if image.registry in hosts:
            errors.add("image", f"repository '{image.registry}/{image.repository}' is not allowed; allowed: {allowed}")
        else:
            errors.add("image", f"registry '{image.registry}' is not allowed; allowed: {allowed}")
    return image


def _argv(value: Any, key: str, errors: _Errors) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        # The HTML form sends one line; split it the way a POSIX shell would, without running one.
        try:
            value = shlex.split(value)
        except ValueError as exc:
            errors.add(key, f"cannot be split into words: {exc}")
            return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        errors.add(key, "must be a list of strings")
        return ()
    if len(value) > MAX_ARGV_ITEMS:
        errors.add(key, f"must have at most {MAX_ARGV_ITEMS} items")
    if any(len(v) > MAX_ARGV_ITEM for v in value) or sum(len(v) for v in value) > MAX_ARGV_TOTAL:
        errors.add(key, f"items must be at most {MAX_ARGV_ITEM} characters, {MAX_ARGV_TOTAL} in all")
    if any("\x00" in v for v in value):
        errors.add(key, "must not contain NUL characters")
    return tuple(value)


def reserved_env_reason(name: str) -> str | None:
    """Why the platform owns environment variable ``name``, or None when users may set it."""
    if name in RESERVED_ENV_NAMES:
        return RESERVED_ENV_NAMES[name]
    for prefix, reason in RESERVED_ENV_PREFIXES.items():
        if name.startswith(prefix):
            return reason
    return None


def _env(value: Any, errors: _Errors) -> tuple[tuple[str, str], ...]:
    if value is None or value == "":
        return ()
    pairs: list[tuple[Any, Any]] = []
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list | tuple) and all(
        isinstance(item, Mapping) and set(item) <= {"name", "value"} and "name" in item for item in value
    ):
        pairs = [(item["name"], item.get("value", "")) for item in value]
    else:
        errors.add("env", "must map names to values, or be a list of {name, value} objects")
        return ()
    if len(pairs) > MAX_ENV_VARS:
        errors.add("env", f"must have at most {MAX_ENV_VARS} variables")
        return ()
    clean: dict[str, str] = {}
    for name, val in pairs:
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or len(name) > 128:
            errors.add(
                "env",
                f"{_show(name)} is not a valid variable name (a letter or '_' first, then letters, digits, '_')",
            )
            continue
        reason = reserved_env_reason(name)
        if reason:
            errors.add("env", f"{name} cannot be set: {reason}")
            continue
        if name in clean:
            errors.add("env", f"{name} is set twice")
            continue
        if not isinstance(val, str):
            errors.add("env", f"the value of {name} must be a string")
            continue
        if len(val) > MAX_ENV_VALUE or "\x00" in val:
            errors.add("env", f"the value of {name} must be at most {MAX_ENV_VALUE} characters, without NUL")
            continue
        clean[name] = val
    return tuple(clean.items())


def _reserved_message(key: str) -> str:
    domains = ", ".join(RESERVED_KEY_DOMAINS)
    exact = ", ".join(sorted(RESERVED_KEYS))
    return (
        f"{_show(key)} is reserved: the portal and the cluster's controllers own keys under {domains} "
        f"(and their subdomains) and the keys {exact}"
    )


def _key_problem(key: Any) -> str | None:
    if not isinstance(key, str):
        return f"{_show(key)} is not a string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix)):
        return f"the prefix of {_show(key)} must be a lowercase DNS subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        return (
            f"{_show(key)} is not a valid key: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit (optionally after a DNS prefix and '/')"
        )
    if is_reserved_key(key):
        return _reserved_message(key)
    return None


def _string_map(value: Any, key: str, limit: int, errors: _Errors) -> list[tuple[Any, Any]] | None:
    if value is None or value == "":
        return []
    if not isinstance(value, Mapping):
        errors.add(key, "must map keys to string values")
        return None
    if len(value) > limit:
        errors.add(key, f"must have at most {limit} entries")
        return None
    return list(value.items())


def _labels(value: Any, errors: _Errors) -> tuple[tuple[str, str], ...]:
    items = _string_map(value, "labels", MAX_LABELS, errors)
    clean: list[tuple[str, str]] = []
    for k, v in items or ():
        problem = _key_problem(k)
        if problem:
            errors.add("labels", problem)
        elif not isinstance(v, str) or len(v) > 63 or not _LABEL_VALUE.fullmatch(v):
            errors.add(
                "labels",
                f"the value of {k} must be at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit (or empty)",
            )
        else:
            clean.append((k, v))
    return tuple(clean)


def _annotations(value: Any, errors: _Errors) -> tuple[tuple[str, str], ...]:
    items = _string_map(value, "annotations", MAX_ANNOTATIONS, errors)
    clean: list[tuple[str, str]] = []
    for k, v in items or ():
        problem = _key_problem(k)
        if problem:
            errors.add("annotations", problem)
        elif not isinstance(v, str) or len(v) > MAX_ANNOTATION_VALUE or "\x00" in v:
            errors.add("annotations", f"the value of {k} must be a string of at most {MAX_ANNOTATION_VALUE} characters")
        else:
            clean.append((k, v))
    return tuple(clean)


def _quantity(value: Any, key: str, bounds: tuple[Decimal, Decimal], errors: _Errors) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        errors.add(key, f"must be a quantity such as {'500m or 2' if key == 'cpu' else '512Mi or 8Gi'}")
        return "0"
    if isinstance(value, int | float):
        try:
            text = format(Decimal(str(value)).normalize(), "f")
        except InvalidOperation:
            text = str(value)
    else:
        text = value
    try:
        amount = parse_quantity(text)
    except ValueError:
        errors.add(key, f"{_show(value)} is not a quantity such as {'500m or 2' if key == 'cpu' else '512Mi or 8Gi'}")
        return "0"
    if key == "memory" and text.endswith("m"):
        errors.add(key, "'m' means thousandths of a byte; write Mi for mebibytes")
        return "0"
    if key == "cpu" and amount * 1000 != (amount * 1000).to_integral_value():
        errors.add(key, "CPU can be set to a thousandth of a core (1m) at most")
        return "0"
    low, high = bounds
    if not low <= amount <= high:
        shown = "0.1 and 192 cores" if key == "cpu" else "256Mi and 2Ti"
        errors.add(key, f"must be between {shown}, not {text}")
        return "0"
    return text


def _storage_uri(value: Any, errors: _Errors) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_STORAGE_URI:
        errors.add("storage_uri", f"must be a URI of at most {MAX_STORAGE_URI} characters")
        return ""
    if any(c.isspace() for c in value) or _CONTROL.search(value) or not value.isascii():
        errors.add("storage_uri", "must be ASCII without spaces or control characters")
        return ""
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in STORAGE_SCHEMES:
        errors.add(
            "storage_uri",
            f"must start with one of {', '.join(s + '://' for s in STORAGE_SCHEMES)} (got {_show(value, 30)})",
        )
        return ""
    segments = rest.split("/")
    if not rest or not segments[0] or ".." in segments:
        errors.add("storage_uri", "must name a location after the scheme, without '..' segments")
        return ""
    if scheme == "pvc" and (len(segments[0]) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(segments[0])):
        errors.add("storage_uri", f"pvc://{segments[0]} does not name a PersistentVolumeClaim (a DNS name)")
        return ""
    if scheme in ("s3", "gs") and not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,221}[a-z0-9]", segments[0]):
        errors.add("storage_uri", f"{_show(segments[0])} is not a valid bucket name")
        return ""
    if scheme == "https" and not _DOMAIN.fullmatch(segments[0]):
        errors.add("storage_uri", f"{_show(segments[0])} is not a valid host")
        return ""
    return value


def _endpoint(data: Mapping[str, Any], image: ImageRef | None, command: tuple[str, ...], errors: _Errors) -> dict:
    low = _int(data.get("min_replicas", 1), "min_replicas", 0, MAX_ENDPOINT_REPLICAS, errors)
    high_default = max(low, 1)
    high = _int(data.get("max_replicas", high_default), "max_replicas", 1, MAX_ENDPOINT_REPLICAS, errors)
    if "min_replicas" not in errors.dict and "max_replicas" not in errors.dict and low > high:
        errors.add("max_replicas", f"must be at least min_replicas ({low})")
    model_format = _choice(data.get("model_format"), "model_format", MODEL_FORMATS, errors, required=False)
    storage_uri = _storage_uri(data.get("storage_uri"), errors)
    canary = _optional_int(data.get("canary_traffic_percent"), "canary_traffic_percent", 0, 100, errors)
    bad_image = "image" in errors.dict
    if model_format:
        if not storage_uri and "storage_uri" not in errors.dict:
            errors.add("storage_uri", f"is required to serve a {model_format} model")
        if command:
            errors.add(
                "command",
                "the serving runtime of the model format provides the command; "
                "leave model_format empty to run your own server image",
            )
    elif image is None and not bad_image and "model_format" not in errors.dict:
        errors.add(
            NON_FIELD_ERRORS,
            "an endpoint serves either a model (model_format and storage_uri) or your own server (image)",
        )
    return {
        "replicas": low,
        "max_replicas": high,
        "model_format": model_format,
        "storage_uri": storage_uri,
        "canary_traffic_percent": canary,
    }
