"""A DCGM-exporter look-alike: Prometheus text for every simulated GPU.

Series and labels follow dcgm-exporter in Kubernetes mode: ``gpu``, ``UUID``,
``pci_bus_id``, ``device``, ``modelName``, ``GPU_I_PROFILE``/``GPU_I_ID`` for MIG
instances, ``Hostname``, the ``DCGM_FI_DRIVER_VERSION`` label field, then
``container``, ``namespace``, ``pod`` (empty when no pod holds the device). One
series per GPU or MIG instance; a time-sliced GPU has one series per pod holding a
replica. ``DCGM_FI_DEV_GPU_UTIL`` is not reported for MIG instances (real DCGM has
nothing useful there; use ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``).

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
from typing import TYPE_CHECKING, Any

from sandbox.podutil import workload_of
from sandbox.world import DRIVER_VERSION, Device, Gpu

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


def _labels(gpu: Gpu, dev: Device | None, pod: dict[str, Any] | None, container: str) -> str:
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
    if pod is not None:
        parts += [
            f'container="{container}"',
            f'namespace="{pod["metadata"]["namespace"]}"',
            f'pod="{pod["metadata"]["name"]}"',
        ]
    else:
        parts += ['container=""', 'namespace=""', 'pod=""']
    return "{" + ",".join(parts) + "}"


def render(sandbox: Sandbox) -> str:
    store, world, seed = sandbox.store, sandbox.world, sandbox.seed
    with store.lock:
        t = sandbox.clock.now()
        boot = float(store.internal.get("boot", t))
        assignments = {uid: dict(a) for uid, a in store.internal.get("assignments", {}).items()}
        pods = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in store.items("/pods")}
    holders: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for a in assignments.values():
        pod = pods.get(a.get("pod", ""))
        if pod is None or pod.get("status", {}).get("phase") != "Running":
            continue
        for dev_id in a.get("devices", []):
            holders.setdefault(dev_id, []).append((pod, a.get("containers", {}).get(dev_id, "")))
    by_gpu: dict[str, list[Device]] = {}
    for dev in world.devices.values():
        by_gpu.setdefault(dev.gpu.uuid, []).append(dev)
    rows: dict[str, list[str]] = {name: [] for name, _, _ in METRICS}
    for gpu in sorted(world.gpus, key=lambda g: (g.node, g.index)):
        devices = by_gpu.get(gpu.uuid, [])
        idle_w, max_w, max_clock, mem_clock = world.power_profile(gpu)
        total_mib = gpu.model.memory_mib
        reserved_gpu = max(256, total_mib // 160)
        entities: list[tuple[Device | None, dict[str, Any] | None, str, float, float, int]] = []
        mig = any(d.mig_profile for d in devices)
        if mig:
            for dev in devices:
                held = holders.get(dev.id, [])
                pod, container = held[0] if held else (None, "")
                key = f"{dev.mig_uuid}|{pod['metadata']['uid'] if pod else ''}"
                act = activity(pod, seed, key, t)
                used = dev.memory_mib * memory_share(pod, seed, key, act)
                entities.append((dev, pod, container, act, used, dev.memory_mib))
            share = {d.mig_profile: gpu.model.mig_share(d.mig_profile) for d in devices}
            gpu_act = min(1.0, sum(e[3] * float(share[e[0].mig_profile]) for e in entities if e[0]))
        else:
            held = [h for d in devices for h in holders.get(d.id, [])]
            acts, used_total = [], 0.0
            for pod, _ in held:
                key = f"{gpu.uuid}|{pod['metadata']['uid']}"
                act = activity(pod, seed, key, t)
                acts.append(act)
                used_total += total_mib * memory_share(pod, seed, key, act) / max(1, len(held))
            gpu_act = min(1.0, sum(acts))
            if held:
                for pod, container in held:
                    entities.append((None, pod, container, gpu_act, used_total, total_mib))
            else:
                entities.append((None, None, "", 0.0, 0.0, total_mib))
        jitter = _smooth(seed, gpu.uuid, t, 45)
        power = idle_w + (max_w - idle_w) * gpu_act * (0.92 + 0.08 * jitter)
        temp = 30 + 45 * gpu_act + 3 * jitter
        sm_clock = 345 if gpu_act < 0.02 else int(max_clock * (0.8 + 0.2 * min(1.0, gpu_act)))
        energy = int((idle_w + 0.3 * (max_w - idle_w)) * max(0.0, t - boot) * 1000)
        for dev, pod, container, act, used, size in entities:
            labels = _labels(gpu, dev, pod, container)
            reserved = max(64, size // 160) if dev is not None else reserved_gpu
            used_mib = int(min(used, size - reserved))
            kind = workload_of(pod) if pod else ""
            tensor = act * (0.65 if kind in ("trainjob", "vcjob", "inference") else 0.15)
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
            for name, value in values.items():
                rows[name].append(f"{name}{labels} {value}")
    out = []
    for name, type_, help_ in METRICS:
        if rows[name]:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {type_}")
            out.extend(rows[name])
    return "\n".join(out) + "\n"
