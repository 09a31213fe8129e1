"""The simulated hardware: nodes and GPU devices built from a cluster profile.

Each node pool becomes nodes named ``<pool>-<i>``. GPU nodes carry the labels GPU
Feature Discovery would publish (product, count, memory, family, replicas, sharing
strategy, MIG strategy/config and, for the mixed strategy, per-profile
``nvidia.com/mig-<profile>.*`` labels), the taint ``nvidia.com/gpu=present:NoSchedule``
and the extended resources of ``NodePool.allocatable()``.

A ``Device`` is one schedulable unit: a whole GPU, a MIG instance, a time-slicing
replica or a DRA device. The scheduler assigns units to pods and the metrics
exporter reports per unit, so attribution is exact. Everything (UUIDs, PCI bus ids,
MIG instance ids) is a deterministic function of the seed and the node/GPU index.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from portal.cluster_profile import GPU_TAINT_KEY, ClusterProfile, NodePool
from portal.gpus import GpuModel

DRIVER_VERSION = "550.54.15"
CUDA_VERSION = "12.4"
DRA_DRIVER = "gpu.nvidia.com"
POOL_LABEL = "sandbox.local/pool"
PODS_PER_NODE = 110

# Streaming multiprocessors of a full GPU (1g MIG slices get roughly a seventh).
_SMS = {"hopper": 132, "ampere": 108, "blackwell": 148, "ada-lovelace": 58, "turing": 40}
# (idle watts, max watts, max SM clock MHz, memory clock MHz)
_POWER = {
    "H100-80GB": (70, 700, 1980, 2619),
    "H100-94GB": (60, 400, 1785, 2619),
    "H200-141GB": (75, 700, 1980, 3201),
    "A100-80GB": (60, 400, 1410, 1593),
    "A100-40GB": (55, 400, 1410, 1215),
    "A30-24GB": (30, 165, 1440, 1215),
    "B200-180GB": (120, 1000, 1965, 3996),
    "L4": (16, 72, 2040, 6251),
    "L40S": (35, 350, 2520, 9001),
    "T4": (10, 70, 1590, 5001),
}


def stable_hex(*parts: object, length: int = 32) -> str:
    return hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=32).hexdigest()[:length]


def _uuid(prefix: str, *parts: object) -> str:
    h = stable_hex(*parts)
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def mig_memory_mib(profile_gb: int) -> int:
    """Usable MiB of a MIG slice: a little under the nominal size (1g.10gb shows 9984)."""
    return int(profile_gb * 1024 * 0.975) // 128 * 128


@dataclass
class Gpu:
    node: str
    index: int
    uuid: str
    pci_bus_id: str
    model: GpuModel
    model_key: str


@dataclass
class Device:
    id: str  # stable, e.g. "a100-mig-0/gpu3/1g.10gb-2"
    node: str
    gpu: Gpu
    resource: str  # extended resource it backs, or "" for DRA devices
    memory_mib: int
    mig_profile: str = ""
    gi_id: int | None = None
    mig_uuid: str = ""
    replica: int | None = None
    dra_name: str = ""
    dra_attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    dra_capacity: dict[str, str] = field(default_factory=dict)


@dataclass
class NodeSpec:
    name: str
    pool: NodePool
    index: int
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, str]
    address: str


class World:
    def __init__(self, profile: ClusterProfile, seed: int = 0):
        self.profile = profile
        self.seed = seed
        self.nodes: dict[str, NodeSpec] = {}
        self.gpus: list[Gpu] = []
        self.devices: dict[str, Device] = {}
        self.by_resource: dict[tuple[str, str], list[Device]] = {}  # (node, resource) -> devices
        self.dra_devices: dict[str, list[Device]] = {}  # node -> devices
        for p_index, pool in enumerate(profile.pools.values()):
            for i in range(pool.nodes):
                self._build_node(pool, p_index, i)

    # construction ---------------------------------------------------------------------------

    def _build_node(self, pool: NodePool, p_index: int, i: int) -> None:
        name = f"{pool.name}-{i}"
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": f"sandbox-{pool.name}",
            POOL_LABEL: pool.name,
        }
        taints: list[dict[str, str]] = []
        allocatable = {
            "cpu": str(pool.cpu),
            "memory": f"{pool.memory_gib}Gi",
            "pods": str(PODS_PER_NODE),
            "ephemeral-storage": "1000Gi",
        }
        if pool.has_gpus:
            labels.update(self._gfd_labels(pool))
            taints.append({"key": GPU_TAINT_KEY, "value": "present", "effect": "NoSchedule"})
            allocatable.update({k: str(v) for k, v in pool.allocatable().items()})
            for g in range(pool.gpus_per_node):
                self._build_gpu(pool, name, g, p_index)
        self.nodes[name] = NodeSpec(name, pool, i, labels, taints, allocatable, f"10.0.{p_index}.{10 + i}")

    def _gfd_labels(self, pool: NodePool) -> dict[str, str]:
        model = pool.gpu_model
        assert model is not None
        product = model.product
        count = pool.gpus_per_node
        memory = model.memory_mib
        replicas = "1"
        sharing = "none"
        labels: dict[str, str] = {}
        if pool.sharing_strategy:
            sharing = pool.sharing_strategy
            replicas = str(pool.sharing_replicas)
            if not pool.sharing_rename:
                product += "-SHARED"
        if pool.mig_layout and pool.request_mode != "dra":
            labels["nvidia.com/mig.strategy"] = pool.mig_strategy
            if pool.mig_strategy == "single":
                ((profile_name, per_gpu),) = pool.mig_layout.items()
                spec = model.mig_profiles[profile_name]
                product += f"-MIG-{profile_name}"
                count = per_gpu * pool.gpus_per_node
                memory = mig_memory_mib(spec.memory_gb)
                labels["nvidia.com/gpu.multiprocessors"] = str(self._mig_sms(model, spec.compute_slices))
                labels["nvidia.com/gpu.slices.gi"] = str(spec.compute_slices)
                labels["nvidia.com/gpu.slices.ci"] = str(spec.compute_slices)
            else:
                replicas = "0"
                for profile_name, per_gpu in pool.mig_layout.items():
                    spec = model.mig_profiles[profile_name]
                    base = f"nvidia.com/mig-{profile_name}"
                    labels[f"{base}.count"] = str(per_gpu * pool.gpus_per_node)
                    labels[f"{base}.memory"] = str(mig_memory_mib(spec.memory_gb))
                    labels[f"{base}.multiprocessors"] = str(self._mig_sms(model, spec.compute_slices))
                    labels[f"{base}.product"] = f"{model.product}-MIG-{profile_name}"
                    labels[f"{base}.replicas"] = "1"
                    labels[f"{base}.sharing-strategy"] = "none"
                    labels[f"{base}.slices.gi"] = str(spec.compute_slices)
                    labels[f"{base}.slices.ci"] = str(spec.compute_slices)
        if model.supports_mig:
            labels["nvidia.com/mig.config"] = self._mig_config_name(pool)
            labels["nvidia.com/mig.config.state"] = "success"
        major, minor, rev = DRIVER_VERSION.split(".")
        cuda_major, cuda_minor = CUDA_VERSION.split(".")
        labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(count),
                "nvidia.com/gpu.memory": str(memory),
                "nvidia.com/gpu.family": model.family,
                "nvidia.com/gpu.compute.major": str(model.compute_major),
                "nvidia.com/gpu.compute.minor": str(model.compute_minor),
                "nvidia.com/gpu.replicas": replicas,
                "nvidia.com/gpu.sharing-strategy": sharing,
                "nvidia.com/gpu.machine": f"SANDBOX-{pool.name.upper()}",
                "nvidia.com/gpu.mode": "compute",
                "nvidia.com/mig.capable": "true" if model.supports_mig else "false",
                "nvidia.com/mps.capable": "true" if pool.sharing_strategy == "mps" else "false",
                "nvidia.com/cuda.driver-version.full": DRIVER_VERSION,
                "nvidia.com/cuda.driver-version.major": major,
                "nvidia.com/cuda.driver-version.minor": minor,
                "nvidia.com/cuda.driver-version.revision": rev,
                "nvidia.com/cuda.runtime-version.full": CUDA_VERSION,
                "nvidia.com/cuda.runtime-version.major": cuda_major,
                "nvidia.com/cuda.runtime-version.minor": cuda_minor,
            }
        )
        if pool.request_mode == "dra":
            labels["nvidia.com/gpu.deploy.device-plugin"] = "false"
            labels["nvidia.com/dra-driver-gpu"] = "true"
        return labels

    @staticmethod
    def _mig_sms(model: GpuModel, slices: int) -> int:
        total = _SMS.get(model.family, 108)
        return total * slices // max(model.max_compute_slices, 1) // 2 * 2

    @staticmethod
    def _mig_config_name(pool: NodePool) -> str:
        if not pool.mig_layout:
            return "all-disabled"
        if len(pool.mig_layout) == 1:
            ((profile_name, _),) = pool.mig_layout.items()
            return f"all-{profile_name}"
        return "custom-" + "-".join(f"{n}x{p}" for p, n in pool.mig_layout.items())

    def _build_gpu(self, pool: NodePool, node: str, index: int, p_index: int) -> None:
        model = pool.gpu_model
        assert model is not None
        gpu = Gpu(
            node,
            index,
            _uuid("GPU", self.seed, node, index),
            f"00000000:{(0x18 + 0x10 * index) % 256:02X}:00.0",
            model,
            model.key,
        )
        self.gpus.append(gpu)
        gpu_id = f"{node}/gpu{index}"
        if pool.request_mode == "dra":
            self._build_dra_devices(pool, gpu, gpu_id)
            return
        if pool.mig_layout:
            resource_single = pool.mig_strategy == "single"
            used_ids: set[int] = set()
            base_by_slices = {1: 7, 2: 3, 3: 1, 4: 1, 7: 0}
            for profile_name, per_gpu in pool.mig_layout.items():
                spec = model.mig_profiles[profile_name]
                for k in range(per_gpu):
                    gi = base_by_slices.get(spec.compute_slices, 1) + k
                    while gi in used_ids:
                        gi += 1
                    used_ids.add(gi)
                    resource = "nvidia.com/gpu" if resource_single else spec.resource_name
                    dev = Device(
                        f"{gpu_id}/{profile_name}-{k}",
                        node,
                        gpu,
                        resource,
                        mig_memory_mib(spec.memory_gb),
                        mig_profile=profile_name,
                        gi_id=gi,
                        mig_uuid=_uuid("MIG", self.seed, node, index, profile_name, k),
                    )
                    self._add(dev)
            return
        if pool.sharing_strategy:
            resource = "nvidia.com/gpu.shared" if pool.sharing_rename else "nvidia.com/gpu"
            for r in range(pool.sharing_replicas):
                self._add(Device(f"{gpu_id}/replica-{r}", node, gpu, resource, model.memory_mib, replica=r))
            return
        self._add(Device(gpu_id, node, gpu, "nvidia.com/gpu", model.memory_mib))

    def _build_dra_devices(self, pool: NodePool, gpu: Gpu, gpu_id: str) -> None:
        model = gpu.model
        common = {
            "productName": model.nvml_name,
            "brand": "Nvidia",
            "architecture": model.family.replace("-", " ").title().replace(" ", ""),
            "cudaComputeCapability": f"{model.compute_major}.{model.compute_minor}.0",
            "driverVersion": DRIVER_VERSION,
            "cudaDriverVersion": CUDA_VERSION + ".0",
        }
        std = {"pciBusID": gpu.pci_bus_id.lower()[4:]}
        if not pool.mig_layout:
            attrs = {DRA_DRIVER: {"type": "gpu", "uuid": gpu.uuid, **common}, "resource.kubernetes.io": std}
            dev = Device(
                gpu_id,
                gpu.node,
                gpu,
                "",
                model.memory_mib,
                dra_name=f"gpu-{gpu.index}",
                dra_attributes=attrs,
                dra_capacity={"memory": f"{model.memory_mib}Mi"},
            )
            self._add(dev)
            return
        for profile_name, per_gpu in pool.mig_layout.items():
            spec = model.mig_profiles[profile_name]
            for k in range(per_gpu):
                mig_uuid = _uuid("MIG", self.seed, gpu.node, gpu.index, profile_name, k)
                attrs = {
                    DRA_DRIVER: {
                        "type": "mig",
                        "uuid": mig_uuid,
                        "parentUUID": gpu.uuid,
                        "profile": profile_name,
                        **common,
                    },
                    "resource.kubernetes.io": std,
                }
                name = f"gpu-{gpu.index}-mig-{profile_name.replace('.', '').replace('+', '')}-{k}"
                memory = mig_memory_mib(spec.memory_gb)
                self._add(
                    Device(
                        f"{gpu_id}/{profile_name}-{k}",
                        gpu.node,
                        gpu,
                        "",
                        memory,
                        mig_profile=profile_name,
                        gi_id=7 + k,
                        mig_uuid=mig_uuid,
                        dra_name=name,
                        dra_attributes=attrs,
                        dra_capacity={"memory": f"{memory}Mi"},
                    )
                )

    def _add(self, dev: Device) -> None:
        self.devices[dev.id] = dev
        if dev.resource:
            self.by_resource.setdefault((dev.node, dev.resource), []).append(dev)
        else:
            self.dra_devices.setdefault(dev.node, []).append(dev)

    # objects ----------------------------------------------------------------------------------

    def node_object(self, spec: NodeSpec, now_iso: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": spec.name,
                "labels": dict(spec.labels),
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "sandbox.local/simulated": "true"},
            },
            "spec": {"taints": [dict(t) for t in spec.taints], "podCIDR": f"10.244.{len(spec.name) % 200}.0/24"},
            "status": {
                "capacity": dict(spec.allocatable),
                "allocatable": dict(spec.allocatable),
                "conditions": [
                    {
                        "type": t,
                        "status": "False",
                        "reason": r,
                        "message": m,
                        "lastHeartbeatTime": now_iso,
                        "lastTransitionTime": now_iso,
                    }
                    for t, r, m in (
                        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    )
                ]
                + [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": now_iso,
                        "lastTransitionTime": now_iso,
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": spec.address},
                    {"type": "Hostname", "address": spec.name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS (sandbox)",
                    "kernelVersion": "5.15.0-102-generic",
                    "kubeletVersion": "v1.34.0-sandbox",
                    "kubeProxyVersion": "",
                    "containerRuntimeVersion": "containerd://1.7.20",
                    "machineID": stable_hex(self.seed, spec.name),
                    "systemUUID": _uuid("SYS", self.seed, spec.name)[4:],
                    "bootID": _uuid("BOOT", self.seed, spec.name)[5:],
                },
            },
        }

    def resource_slice(self, node: str) -> dict[str, Any]:
        devices = []
        for dev in self.dra_devices.get(node, []):
            attrs = {}
            for domain, values in dev.dra_attributes.items():
                for k, v in values.items():
                    key = k if domain == DRA_DRIVER else f"{domain}/{k}"
                    kind = (
                        "version"
                        if k in ("driverVersion", "cudaDriverVersion", "cudaComputeCapability")
                        else (
                            "int"
                            if isinstance(v, int) and not isinstance(v, bool)
                            else "bool"
                            if isinstance(v, bool)
                            else "string"
                        )
                    )
                    attrs[key] = {kind: v}
            devices.append(
                {
                    "name": dev.dra_name,
                    "attributes": attrs,
                    "capacity": {k: {"value": v} for k, v in dev.dra_capacity.items()},
                }
            )
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRA_DRIVER}"},
            "spec": {
                "driver": DRA_DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }

    def power_profile(self, gpu: Gpu) -> tuple[int, int, int, int]:
        return _POWER.get(gpu.model_key, (50, 400, 1500, 1500))
