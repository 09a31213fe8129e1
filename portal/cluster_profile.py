"""Cluster profiles: what node pools a cluster has and which offerings it sells.

A profile is a YAML file in ``deploy/cluster-profiles/``. The catalog loads its
offerings into the database, the sandbox cluster builds its simulated nodes from its
node pools, and the manifest builders read an offering's request mode from it.

Everything here is plain Python (no Django, no I/O beyond reading the file) and every
problem is reported as a ``ProfileError`` naming the path of the bad field.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from portal.gpus import GPU_MODELS, GpuModel

GPU_TAINT_KEY = "nvidia.com/gpu"
REQUEST_MODES = ("device-plugin", "dra")
SHARING_STRATEGIES = ("time-slicing", "mps")
QUEUEING_BACKENDS = ("volcano", "kueue")
# How the cluster's add-ons are configured: "recommended" is what the portal needs (README, cluster_check),
# "stock" is each upstream project's shipped default. Only the sandbox reads it, to play that cluster.
CLUSTER_SETUPS = ("recommended", "stock")
# KServe deployment modes the portal builds endpoints for (v0.20 names; "Serverless" and
# "RawDeployment" are KServe's legacy spellings of the same two).
KSERVE_DEPLOYMENT_MODES = ("Standard", "Knative")
_SLUG = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")


class ProfileError(ValueError):
    """A cluster profile that cannot be used; the message names the field."""


@dataclass(frozen=True)
class NodePool:
    name: str
    nodes: int
    cpu: int  # cores per node
    memory_gib: int  # per node
    gpu_model: GpuModel | None = None
    gpus_per_node: int = 0
    request_mode: str = "device-plugin"
    # MIG: strategy "mixed" or "single" and the slices each physical GPU is cut into.
    mig_strategy: str = ""
    mig_layout: dict[str, int] = field(default_factory=dict)
    # Shared GPUs (no MIG): time slicing or MPS with N replicas per GPU.
    sharing_strategy: str = ""
    sharing_replicas: int = 1
    sharing_rename: bool = True  # renameByDefault: advertise nvidia.com/gpu.shared
    gpu_price_per_hour: Decimal = Decimal("0")

    @property
    def has_gpus(self) -> bool:
        return self.gpu_model is not None

    def allocatable(self) -> dict[str, int]:
        """Extended resources one node of this pool advertises (device-plugin mode)."""
        if not self.has_gpus or self.request_mode == "dra":
            return {}
        if self.mig_layout:
            return {
                self.gpu_model.mig_profiles[p].resource_name: n * self.gpus_per_node for p, n in self.mig_layout.items()
            }
        if self.sharing_strategy:
            name = "nvidia.com/gpu.shared" if self.sharing_rename else "nvidia.com/gpu"
            return {name: self.gpus_per_node * self.sharing_replicas}
        return {"nvidia.com/gpu": self.gpus_per_node}


@dataclass(frozen=True)
class Offering:
    """What a user chooses: a full GPU, a MIG slice, a shared GPU, or CPU only."""

    slug: str
    display_name: str
    pool: NodePool
    kind: str  # "gpu" | "mig" | "shared" | "cpu"
    mig_profile: str = ""
    price_per_hour: Decimal = Decimal("0")
    price_is_derived: bool = True

    @property
    def gpu_model(self) -> GpuModel | None:
        return self.pool.gpu_model

    @property
    def share(self) -> Fraction:
        """Share of one physical GPU that one unit of this offering holds."""
        if self.kind == "cpu":
            return Fraction(0)
        if self.kind == "mig":
            return self.pool.gpu_model.mig_share(self.mig_profile)
        if self.kind == "shared":
            return Fraction(1, self.pool.sharing_replicas)
        return Fraction(1)

    @property
    def request_mode(self) -> str:
        return "none" if self.kind == "cpu" else self.pool.request_mode

    @property
    def resource_name(self) -> str:
        """Device-plugin extended resource, or '' for DRA and CPU offerings."""
        if self.request_mode != "device-plugin":
            return ""
        if self.kind == "mig":
            if self.pool.mig_strategy == "single":
                return "nvidia.com/gpu"
            return self.pool.gpu_model.mig_profiles[self.mig_profile].resource_name
        if self.kind == "shared" and self.pool.sharing_rename:
            return "nvidia.com/gpu.shared"
        return "nvidia.com/gpu"

    @property
    def dra_device_class(self) -> str:
        if self.request_mode != "dra":
            return ""
        return "mig.nvidia.com" if self.kind == "mig" else "gpu.nvidia.com"

    @property
    def dra_selector(self) -> str:
        """CEL expression on the DRA driver's published attributes."""
        if self.request_mode != "dra":
            return ""
        attrs = "device.attributes['gpu.nvidia.com']"
        expr = f"{attrs}.productName == '{self.gpu_model.nvml_name}'"
        if self.kind == "mig":
            expr += f" && {attrs}.profile == '{self.mig_profile}'"
        return expr

    @property
    def node_selector(self) -> dict[str, str]:
        if self.kind == "cpu":
            return {}
        product = self.gpu_model.product
        if self.kind == "shared" and not self.pool.sharing_rename:
            product += "-SHARED"  # GFD marks the product when the resource is not renamed
        elif self.kind == "mig" and self.pool.mig_strategy == "single":
            product += "-MIG-" + self.mig_profile
        return {"nvidia.com/gpu.product": product}

    @property
    def node_affinity(self) -> dict[str, Any]:
        """CPU-only work must never land on a GPU node, even an untainted one."""
        if self.kind != "cpu":
            return {}
        return {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"}]}
                ]
            }
        }

    @property
    def tolerations(self) -> list[dict[str, str]]:
        if self.kind == "cpu":
            return []
        return [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]

    @property
    def memory_gib(self) -> int:
        """GPU memory one unit gives the workload (nominal)."""
        if self.kind == "cpu":
            return 0
        if self.kind == "mig":
            return self.gpu_model.mig_profiles[self.mig_profile].memory_gb
        return round(self.gpu_model.memory_mib / 1024)


@dataclass(frozen=True)
class ClusterProfile:
    name: str
    queueing: str
    pools: dict[str, NodePool]
    offerings: dict[str, Offering]
    description: str = ""
    cluster_setup: str = "recommended"
    # How endpoints are served: "Standard" (a Deployment; no Knative) unless the cluster runs
    # Knative and wants scale to zero. DRA endpoints are Standard either way (jobs.specs).
    kserve_deployment_mode: str = "Standard"


def load_profile(path: str | Path) -> ClusterProfile:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"cluster profile {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path.name}: not valid YAML: {exc}") from None
    try:
        return parse_profile(data)
    except ProfileError as exc:
        raise ProfileError(f"{path.name}: {exc}") from None


def current_profile(path: str | Path) -> ClusterProfile | None:
    """The profile at ``path``, read once per file version; None when it is missing or invalid.

    For the readers that need one setting of it on every request (the queueing backend,
    the KServe mode): they fall back to their default, and ``load_catalog`` and
    ``cluster_check`` are where a broken profile is reported.
    """
    try:
        mtime = Path(path).stat().st_mtime
    except OSError:
        return None
    return _cached_profile(str(path), mtime)


@functools.lru_cache(maxsize=4)
def _cached_profile(path: str, mtime: float) -> ClusterProfile | None:
    try:
        return load_profile(path)
    except ProfileError:
        return None


def parse_profile(data: Any) -> ClusterProfile:
    if not isinstance(data, dict):
        raise ProfileError("the profile must be a mapping")
    _known(
        data,
        "",
        {"name", "description", "queueing", "cluster_setup", "kserve_deployment_mode", "node_pools", "offerings"},
    )
    name = _str(data, "name", "")
    queueing = _str(data, "queueing", "", default="volcano")
    if queueing not in QUEUEING_BACKENDS:
        raise ProfileError(f"queueing: must be one of {', '.join(QUEUEING_BACKENDS)}, not {queueing!r}")
    cluster_setup = _str(data, "cluster_setup", "", default="recommended")
    if cluster_setup not in CLUSTER_SETUPS:
        raise ProfileError(f"cluster_setup: must be one of {', '.join(CLUSTER_SETUPS)}, not {cluster_setup!r}")
    serving_mode = _str(data, "kserve_deployment_mode", "", default="Standard")
    if serving_mode not in KSERVE_DEPLOYMENT_MODES:
        raise ProfileError(
            f"kserve_deployment_mode: must be one of {', '.join(KSERVE_DEPLOYMENT_MODES)}, not {serving_mode!r}"
        )
    pools: dict[str, NodePool] = {}
    for i, raw in enumerate(_list(data, "node_pools", "")):
        pool = _parse_pool(raw, f"node_pools[{i}]")
        if pool.name in pools:
            raise ProfileError(f"node_pools[{i}].name: pool {pool.name!r} is defined twice")
        pools[pool.name] = pool
    offerings: dict[str, Offering] = {}
    for i, raw in enumerate(_list(data, "offerings", "")):
        offering = _parse_offering(raw, f"offerings[{i}]", pools)
        if offering.slug in offerings:
            raise ProfileError(f"offerings[{i}].slug: offering {offering.slug!r} is defined twice")
        offerings[offering.slug] = offering
    return ClusterProfile(
        name, queueing, pools, offerings, str(data.get("description", "")), cluster_setup, serving_mode
    )


def _parse_pool(raw: Any, where: str) -> NodePool:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a mapping")
    _known(
        raw,
        where,
        {
            "name",
            "nodes",
            "cpu",
            "memory_gib",
            "gpu_model",
            "gpus_per_node",
            "request_mode",
            "mig",
            "sharing",
            "gpu_price_per_hour",
        },
    )
    name = _str(raw, "name", where)
    if not _SLUG.match(name):
        raise ProfileError(f"{where}.name: {name!r} is not a lowercase DNS-safe name")
    nodes = _int(raw, "nodes", where, minimum=1)
    cpu = _int(raw, "cpu", where, minimum=1, default=32)
    memory_gib = _int(raw, "memory_gib", where, minimum=1, default=256)
    model_key = raw.get("gpu_model")
    if model_key is None:
        for key in ("gpus_per_node", "mig", "sharing", "gpu_price_per_hour"):
            if key in raw:
                raise ProfileError(f"{where}.{key}: a pool without gpu_model has no GPUs")
        return NodePool(name, nodes, cpu, memory_gib)
    if model_key not in GPU_MODELS:
        raise ProfileError(
            f"{where}.gpu_model: unknown GPU model {model_key!r}; known: {', '.join(sorted(GPU_MODELS))}"
        )
    model = GPU_MODELS[model_key]
    gpus = _int(raw, "gpus_per_node", where, minimum=1)
    mode = _str(raw, "request_mode", where, default="device-plugin")
    if mode not in REQUEST_MODES:
        raise ProfileError(f"{where}.request_mode: must be one of {', '.join(REQUEST_MODES)}, not {mode!r}")
    price = _decimal(raw, "gpu_price_per_hour", where)
    kwargs: dict[str, Any] = {}
    if "mig" in raw and "sharing" in raw:
        raise ProfileError(f"{where}: a pool is either MIG-partitioned or shared, not both")
    if "mig" in raw:
        kwargs.update(_parse_mig(raw["mig"], f"{where}.mig", model))
    if "sharing" in raw:
        kwargs.update(_parse_sharing(raw["sharing"], f"{where}.sharing", mode))
    return NodePool(name, nodes, cpu, memory_gib, model, gpus, mode, gpu_price_per_hour=price, **kwargs)


def _parse_mig(raw: Any, where: str, model: GpuModel) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a mapping with strategy and layout")
    _known(raw, where, {"strategy", "layout"})
    if not model.supports_mig:
        raise ProfileError(f"{where}: {model.key} does not support MIG")
    strategy = _str(raw, "strategy", where, default="mixed")
    if strategy not in ("mixed", "single"):
        raise ProfileError(f"{where}.strategy: must be mixed or single, not {strategy!r}")
    layout = raw.get("layout")
    if not isinstance(layout, dict) or not layout:
        raise ProfileError(f"{where}.layout: must map MIG profiles to instances per GPU, e.g. {{1g.10gb: 7}}")
    slices = 0
    clean: dict[str, int] = {}
    for profile, count in layout.items():
        profile = str(profile)
        if profile not in model.mig_profiles:
            raise ProfileError(
                f"{where}.layout.{profile}: {model.key} has no MIG profile {profile!r}; "
                f"its profiles are {', '.join(model.mig_profiles)}"
            )
        spec = model.mig_profiles[profile]
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ProfileError(f"{where}.layout.{profile}: must be a whole number of instances, at least 1")
        if count > spec.max_instances:
            raise ProfileError(
                f"{where}.layout.{profile}: a {model.key} holds at most {spec.max_instances} "
                f"{profile} instances, not {count}"
            )
        slices += spec.compute_slices * count
        clean[profile] = count
    if slices > model.max_compute_slices:
        raise ProfileError(
            f"{where}.layout: uses {slices} compute slices but a {model.key} has {model.max_compute_slices}"
        )
    if strategy == "single" and len(clean) != 1:
        raise ProfileError(f"{where}.layout: the single strategy cuts every GPU into one profile only")
    return {"mig_strategy": strategy, "mig_layout": clean}


def _parse_sharing(raw: Any, where: str, mode: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a mapping with strategy and replicas")
    _known(raw, where, {"strategy", "replicas", "rename"})
    if mode != "device-plugin":
        raise ProfileError(f"{where}: sharing is configured in the device plugin; use request_mode device-plugin")
    strategy = _str(raw, "strategy", where)
    if strategy not in SHARING_STRATEGIES:
        raise ProfileError(f"{where}.strategy: must be one of {', '.join(SHARING_STRATEGIES)}, not {strategy!r}")
    replicas = _int(raw, "replicas", where, minimum=2)
    rename = raw.get("rename", True)
    if not isinstance(rename, bool):
        raise ProfileError(f"{where}.rename: must be true or false")
    return {"sharing_strategy": strategy, "sharing_replicas": replicas, "sharing_rename": rename}


def _parse_offering(raw: Any, where: str, pools: dict[str, NodePool]) -> Offering:
    if not isinstance(raw, dict):
        raise ProfileError(f"{where}: must be a mapping")
    _known(raw, where, {"slug", "display_name", "pool", "mig_profile", "price_per_hour"})
    slug = _str(raw, "slug", where)
    if not _SLUG.match(slug):
        raise ProfileError(f"{where}.slug: {slug!r} is not a lowercase DNS-safe name")
    pool_name = _str(raw, "pool", where)
    if pool_name not in pools:
        raise ProfileError(f"{where}.pool: no node pool named {pool_name!r}")
    pool = pools[pool_name]
    mig_profile = str(raw.get("mig_profile", ""))
    if not pool.has_gpus:
        kind = "cpu"
        if mig_profile:
            raise ProfileError(f"{where}.mig_profile: pool {pool_name!r} has no GPUs")
    elif pool.mig_layout:
        if not mig_profile:
            raise ProfileError(f"{where}.mig_profile: pool {pool_name!r} is MIG-partitioned; name the slice")
        if mig_profile not in pool.mig_layout:
            raise ProfileError(
                f"{where}.mig_profile: pool {pool_name!r} has no {mig_profile!r} slices "
                f"(it has {', '.join(pool.mig_layout)})"
            )
        kind = "mig"
    else:
        if mig_profile:
            raise ProfileError(f"{where}.mig_profile: pool {pool_name!r} is not MIG-partitioned")
        kind = "shared" if pool.sharing_strategy else "gpu"
    explicit = raw.get("price_per_hour")
    if explicit is not None:
        price = _decimal(raw, "price_per_hour", where)
    elif kind == "cpu":
        raise ProfileError(f"{where}.price_per_hour: a CPU-only offering needs its own price")
    else:
        share = _share(pool, kind, mig_profile)
        price = (pool.gpu_price_per_hour * share.numerator / share.denominator).quantize(Decimal("0.0001"))
    display = str(raw.get("display_name") or _display_name(pool, kind, mig_profile))
    return Offering(slug, display, pool, kind, mig_profile, price, explicit is None)


def _share(pool: NodePool, kind: str, mig_profile: str) -> Fraction:
    if kind == "mig":
        return pool.gpu_model.mig_share(mig_profile)
    if kind == "shared":
        return Fraction(1, pool.sharing_replicas)
    return Fraction(1)


def _display_name(pool: NodePool, kind: str, mig_profile: str) -> str:
    if kind == "cpu":
        return "CPU only"
    model = pool.gpu_model.key
    if kind == "mig":
        return f"{model} MIG {mig_profile}"
    if kind == "shared":
        return f"{model} shared ({pool.sharing_strategy}, 1/{pool.sharing_replicas})"
    return f"{model} full GPU"


def _known(raw: dict, where: str, allowed: set[str]) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ProfileError(f"{prefix}{unknown[0]}: unknown field (allowed: {', '.join(sorted(allowed))})")


def _path(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _str(raw: dict, key: str, where: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if value is None or value == "":
        raise ProfileError(f"{_path(where, key)}: is required")
    if not isinstance(value, str):
        raise ProfileError(f"{_path(where, key)}: must be a string")
    return value


def _list(raw: dict, key: str, where: str) -> list:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise ProfileError(f"{_path(where, key)}: must be a non-empty list")
    return value


def _int(raw: dict, key: str, where: str, minimum: int, default: int | None = None) -> int:
    value = raw.get(key, default)
    if value is None:
        raise ProfileError(f"{_path(where, key)}: is required")
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ProfileError(f"{_path(where, key)}: must be a whole number of at least {minimum}, not {value!r}")
    return value


def _decimal(raw: dict, key: str, where: str) -> Decimal:
    value = raw.get(key, 0)
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        raise ProfileError(f"{_path(where, key)}: must be a price such as 2.50, not {value!r}") from None
    if not result.is_finite() or result < 0:
        raise ProfileError(f"{_path(where, key)}: must be a price of 0 or more, not {value!r}")
    return result
