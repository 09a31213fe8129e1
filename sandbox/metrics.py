"""A DCGM-exporter look-alike: Prometheus text for every simulated GPU.

Series and labels follow dcgm-exporter: ``gpu``, ``UUID``, ``pci_bus_id``, ``device``,
``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` for MIG instances, ``Hostname``, the
``DCGM_FI_DRIVER_VERSION`` label field, then the pod mapper's attributes. One series per
GPU or MIG instance, with GPU-level readings; which pods label it (``container``,
``namespace``, ``pod``, ``vgpu``, ``dra_*``) depends on the settings of the exporter
DaemonSet on that node (``sandbox.gpu_operator``), exactly as upstream's pod mapper does
(see ``attribute``). ``DCGM_FI_DEV_GPU_UTIL`` is not reported for MIG instances (real
DCGM has nothing useful there; use ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``).

Values are a deterministic function of the seed, the device UUID, the pod and the
simulated time (hashed value noise), never of the wall clock:

- training pods (TrainJob, Volcano Job) are busy: activity 0.85-0.98, memory high;
- notebooks idle below 0.05 with occasional bursts (about one 10-minute window in 7);
- inference predictors follow a daily curve (quiet at night UTC, busy mid-afternoon);
- unused devices idle at 0 with no framebuffer in use.

A pod annotation ``sandbox.local/activity`` (0..1) pins a pod's activity.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sandbox import gpu_operator
from sandbox.gpu_operator import ExporterConfig
from sandbox.podutil import workload_of
from sandbox.world import DRA_DRIVER, DRIVER_VERSION, Device, Gpu, World

if TYPE_CHECKING:
    from sandbox.cluster import Sandbox

ACTIVITY_ANNOTATION = "sandbox.local/activity"

METRICS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
)


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _smooth(seed: int, key: str, t: float, period: float) -> float:
    """Value noise in [0, 1): cosine interpolation between hashed points ``period`` apart."""
    bucket = math.floor(t / period)
    frac = t / period - bucket
    a, b = _unit(seed, key, period, bucket), _unit(seed, key, period, bucket + 1)
    w = (1 - math.cos(math.pi * frac)) / 2
    return a * (1 - w) + b * w


def activity(pod: dict[str, Any] | None, seed: int, key: str, t: float) -> float:
    if pod is None:
        return 0.0
    pinned = (pod["metadata"].get("annotations") or {}).get(ACTIVITY_ANNOTATION)
    if pinned is not None:
        try:
            return min(1.0, max(0.0, float(pinned)))
        except ValueError:
            pass
    kind = workload_of(pod)
    if kind in ("trainjob", "vcjob"):
        return 0.85 + 0.13 * _smooth(seed, key, t, 60)
    if kind == "notebook":
        if _unit(seed, key, "burst", math.floor(t / 600)) < 0.15:
            return 0.3 + 0.6 * _smooth(seed, key, t, 30)
        return 0.005 + 0.04 * _smooth(seed, key, t, 120)
    if kind == "inference":
        hour = (t % 86400) / 3600
        daily = 0.5 - 0.5 * math.cos(2 * math.pi * (hour - 3) / 24)
        return min(1.0, 0.08 + 0.75 * daily * (0.85 + 0.15 * _smooth(seed, key, t, 90)))
    return 0.3 + 0.3 * _smooth(seed, key, t, 60)


def own_activity(world: World, devices: list[str], pod: dict[str, Any], seed: int, t: float) -> float:
    """The pod's own use of its GPUs (before a shared GPU adds its neighbours'): its highest
    activity on any device it holds, keyed as ``render`` keys it."""
    uid = pod["metadata"]["uid"]
    keys = []
    for dev_id in devices:
        dev = world.devices.get(dev_id)
        if dev is not None:
            keys.append(f"{dev.mig_uuid}|{uid}" if dev.mig_profile else f"{dev.gpu.uuid}|{uid}")
    return max((activity(pod, seed, key, t) for key in keys or [uid]), default=0.0)


def memory_share(pod: dict[str, Any] | None, seed: int, key: str, act: float) -> float:
    if pod is None:
        return 0.0
    kind = workload_of(pod)
    stable = _unit(seed, key, "memory")
    if kind in ("trainjob", "vcjob"):
        return 0.80 + 0.15 * stable
    if kind == "notebook":
        return min(0.95, 0.06 + 0.25 * stable + (0.3 if act > 0.25 else 0.0))
    if kind == "inference":
        return 0.45 + 0.25 * stable
    return 0.2 + 0.4 * stable


@dataclass
class Holder:
    """A container holding a device, as the kubelet's pod-resources API lists it."""

    pod: dict[str, Any]
    container: str
    device: Device
    claim: dict[str, Any] | None = None  # the ResourceClaim, for a DRA device


@dataclass
class Series:
    """One exporter series before the pod mapper: a GPU or MIG instance with its readings."""

    gpu: Gpu
    dev: Device | None  # the MIG instance; None for a whole (possibly shared) GPU
    values: dict[str, str]
    plugin: list[Holder] = field(default_factory=list)  # device-plugin holders, in list order
    dra: list[Holder] = field(default_factory=list)  # DRA holders


def _pod_attrs(h: Holder) -> dict[str, str]:
    meta = h.pod["metadata"]
    return {"container": h.container, "namespace": meta["namespace"], "pod": meta["name"]}


def _dra_attrs(h: Holder) -> dict[str, str]:
    dev, claim = h.device, h.claim or {"metadata": {}}
    attrs = {
        "dra_claim_name": claim["metadata"].get("name", ""),
        "dra_claim_namespace": claim["metadata"].get("namespace", ""),
        "dra_driver_name": DRA_DRIVER,
        "dra_pool_name": dev.node,
        "dra_device_name": dev.dra_name,
    }
    if dev.mig_profile:
        attrs |= {"dra_mig_profile": dev.mig_profile, "dra_mig_device_uuid": dev.mig_uuid}
    return attrs


def attribute(series: list[Series], config: ExporterConfig) -> list[tuple[Series, dict[str, str] | None]]:
    """One node's series → (series, pod attributes) as dcgm-exporter's pod mapper labels them.

    Mirrors ``PodMapper.Process`` (internal/pkg/transformation/kubernetes.go):

    1. Kubernetes mode off: no pod attributes (``None``).
    2. Virtual GPUs on: every series is copied once per device-plugin holder, with a
       ``vgpu`` label for a time-slicing replica; series nobody holds are dropped, unless
       nobody on the node holds anything (then all are kept unlabelled). Upstream returns
       here, before its DRA pass, so DRA-claimed GPUs stay unlabelled.
    3. Otherwise each series gets the *last* holder mapped to its device: a shared GPU's
       replicas all map to the GPU's UUID, so one of its pods gets the whole GPU.
    4. Then, with DRA on, a series held through ResourceClaims is copied once per claiming
       container with the ``dra_*`` labels; without it DRA devices carry no pod labels.
    """
    if not config.kubernetes:
        return [(s, None) for s in series]
    if config.virtual_gpus:
        copies = []
        for s in series:
            for h in s.plugin:
                attrs = _pod_attrs(h)
                if h.device.replica is not None:
                    attrs["vgpu"] = str(h.device.replica)
                copies.append((s, attrs))
        return copies or [(s, {}) for s in series]
    out: list[tuple[Series, dict[str, str] | None]] = []
    for s in series:
        if config.enable_dra and s.dra:
            seen = set()
            for h in s.dra:
                key = (h.pod["metadata"]["uid"], h.container)
                if key not in seen:
                    seen.add(key)
                    out.append((s, _pod_attrs(h) | _dra_attrs(h)))
            continue
        out.append((s, _pod_attrs(s.plugin[-1]) if s.plugin else {}))
    return out


def _labels(gpu: Gpu, dev: Device | None, attrs: dict[str, str] | None) -> str:
    parts = [
        f'gpu="{gpu.index}"',
        f'UUID="{gpu.uuid}"',
        f'pci_bus_id="{gpu.pci_bus_id}"',
        f'device="nvidia{gpu.index}"',
        f'modelName="{gpu.model.nvml_name}"',
    ]
    if dev is not None and dev.mig_profile:
        parts += [f'GPU_I_PROFILE="{dev.mig_profile}"', f'GPU_I_ID="{dev.gi_id}"']
    parts += [f'Hostname="{gpu.node}"', f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"']
    if attrs is not None:
        # Kubernetes mode: an unmapped series shows empty pod labels, as in upstream's README.
        attrs = {"container": "", "namespace": "", "pod": ""} | attrs
        parts += [f'{k}="{v}"' for k, v in sorted(attrs.items())]
    return "{" + ",".join(parts) + "}"


def _holders(sandbox: Sandbox, assignments, pods, claims) -> dict[str, list[Holder]]:
    """Device id → its holders, in the order the pods were admitted (the kubelet's list order)."""
    world = sandbox.world
    claim_of: dict[tuple[str, str, str], dict[str, Any]] = {}
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            for user in status.get("reservedFor") or []:
                claim_of[(r.get("pool", ""), r.get("device", ""), user.get("uid", ""))] = claim
    holders: dict[str, list[Holder]] = {}
    for a in assignments.values():
        pod = pods.get(a.get("pod", ""))
        if pod is None or pod.get("status", {}).get("phase") != "Running":
            continue
        for dev_id in a.get("devices", []):
            dev = world.devices.get(dev_id)
            if dev is None:
                continue
            claim = None if dev.resource else claim_of.get((dev.node, dev.dra_name, pod["metadata"]["uid"]))
            holders.setdefault(dev_id, []).append(Holder(pod, a.get("containers", {}).get(dev_id, ""), dev, claim))
    return holders


def render(sandbox: Sandbox) -> str:
    store, world, seed = sandbox.store, sandbox.world, sandbox.seed
    with store.lock:
        t = sandbox.clock.now()
        boot = float(store.internal.get("boot", t))
        assignments = {uid: dict(a) for uid, a in store.internal.get("assignments", {}).items()}
        pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in store.items("/pods")}
        claims = list(store.items("resource.k8s.io/resourceclaims"))
        daemonsets = list(store.items(gpu_operator.DAEMONSETS))
    configs = gpu_operator.node_configs(daemonsets, {n: spec.labels for n, spec in world.nodes.items()})
    holders = _holders(sandbox, assignments, pods, claims)
    by_gpu: dict[str, list[Device]] = {}
    for dev in world.devices.values():
        by_gpu.setdefault(dev.gpu.uuid, []).append(dev)
    rows: dict[str, list[str]] = {name: [] for name, _, _ in METRICS}
    by_node: dict[str, list[Series]] = {}
    for gpu in sorted(world.gpus, key=lambda g: (g.node, g.index)):
        if gpu.node in configs:
            series = _gpu_series(world, gpu, by_gpu.get(gpu.uuid, []), holders, seed, t, boot)
            by_node.setdefault(gpu.node, []).extend(series)
    for node, series in by_node.items():
        for s, attrs in attribute(series, configs[node]):
            labels = _labels(s.gpu, s.dev, attrs)
            for name, value in s.values.items():
                rows[name].append(f"{name}{labels} {value}")
    out = []
    for name, type_, help_ in METRICS:
        if rows[name]:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {type_}")
            out.extend(rows[name])
    return "\n".join(out) + "\n"


def _gpu_series(
    world: World, gpu: Gpu, devices: list[Device], holders: dict[str, list[Holder]], seed: int, t: float, boot: float
) -> list[Series]:
    """One series per MIG instance, or one for the whole GPU with every pod sharing it."""
    idle_w, max_w, max_clock, mem_clock = world.power_profile(gpu)
    total_mib = gpu.model.memory_mib
    reserved_gpu = max(256, total_mib // 160)
    entities: list[tuple[Device | None, float, float, int, list[Holder]]] = []
    if any(d.mig_profile for d in devices):
        for dev in devices:
            held = holders.get(dev.id, [])
            pod = held[0].pod if held else None
            key = f"{dev.mig_uuid}|{pod['metadata']['uid'] if pod else ''}"
            act = activity(pod, seed, key, t)
            used = dev.memory_mib * memory_share(pod, seed, key, act)
            entities.append((dev, act, used, dev.memory_mib, held))
        share = {d.mig_profile: gpu.model.mig_share(d.mig_profile) for d in devices}
        gpu_act = min(1.0, sum(e[1] * float(share[e[0].mig_profile]) for e in entities if e[0]))
    else:
        held = [h for d in devices for h in holders.get(d.id, [])]
        acts, used_total = [], 0.0
        for h in held:
            key = f"{gpu.uuid}|{h.pod['metadata']['uid']}"
            act = activity(h.pod, seed, key, t)
            acts.append(act)
            used_total += total_mib * memory_share(h.pod, seed, key, act) / max(1, len(held))
        gpu_act = min(1.0, sum(acts))
        # The readings are the GPU's: with several pods on it, each one's series (when the
        # exporter splits them) repeats the same GPU-level values, as real DCGM does.
        entities.append((None, gpu_act, used_total, total_mib, held))
    jitter = _smooth(seed, gpu.uuid, t, 45)
    power = idle_w + (max_w - idle_w) * gpu_act * (0.92 + 0.08 * jitter)
    temp = 30 + 45 * gpu_act + 3 * jitter
    sm_clock = 345 if gpu_act < 0.02 else int(max_clock * (0.8 + 0.2 * min(1.0, gpu_act)))
    energy = int((idle_w + 0.3 * (max_w - idle_w)) * max(0.0, t - boot) * 1000)
    out = []
    for dev, act, used, size, held in entities:
        reserved = max(64, size // 160) if dev is not None else reserved_gpu
        used_mib = int(min(used, size - reserved))
        kinds = {workload_of(h.pod) for h in held}
        tensor = act * (0.65 if kinds & {"trainjob", "vcjob", "inference"} else 0.15)
        values = {
            "DCGM_FI_DEV_SM_CLOCK": str(sm_clock),
            "DCGM_FI_DEV_MEM_CLOCK": str(mem_clock),
            "DCGM_FI_DEV_MEMORY_TEMP": str(int(temp + 4)),
            "DCGM_FI_DEV_GPU_TEMP": str(int(temp)),
            "DCGM_FI_DEV_POWER_USAGE": f"{power:.3f}",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": str(energy),
            "DCGM_FI_DEV_MEM_COPY_UTIL": str(int(round(act * 40))),
            "DCGM_FI_DEV_FB_FREE": str(int(size - reserved - used_mib)),
            "DCGM_FI_DEV_FB_USED": str(used_mib),
            "DCGM_FI_DEV_FB_RESERVED": str(reserved),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"{act:.6f}",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f"{tensor:.6f}",
            "DCGM_FI_PROF_DRAM_ACTIVE": f"{act * 0.5:.6f}",
        }
        if dev is None:
            values["DCGM_FI_DEV_GPU_UTIL"] = str(int(round(act * 100)))
        series = Series(gpu, dev, values)
        for h in held:
            (series.plugin if h.device.resource else series.dra).append(h)
        out.append(series)
    return out
