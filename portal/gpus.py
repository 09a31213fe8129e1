"""Facts about NVIDIA GPU models and their MIG profiles.

Transcribed from NVIDIA's MIG user guide and the GPU Operator's default mig-parted
configuration (the same facts as ``shared/reference/mig/mig-profiles.csv``; a test
cross-checks the two when that folder is present). The portal ships its own copy
because a user's clone has no ``../shared`` and the catalog must still load.

Plain Python, no Django: the sandbox cluster and the manifest builders use it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.10gb" or "1g.10gb+me"
    compute_slices: int  # the "g" in the name
    memory_gb: int  # nominal size in the name
    max_instances: int  # per physical GPU

    @property
    def resource_name(self) -> str:
        """Device-plugin resource under the mixed strategy ('+' becomes '.')."""
        return "nvidia.com/mig-" + self.name.replace("+", ".")


@dataclass(frozen=True)
class GpuModel:
    key: str  # catalog key, e.g. "H100-80GB"
    product: str  # GPU Feature Discovery nvidia.com/gpu.product value
    nvml_name: str  # NVML name: DRA productName attribute, DCGM modelName label
    memory_mib: int  # nvidia.com/gpu.memory
    family: str  # nvidia.com/gpu.family
    compute_major: int
    compute_minor: int
    max_compute_slices: int = 0  # 0: no MIG support
    mig_profiles: dict[str, MigProfile] = field(default_factory=dict)

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_profiles)

    def mig_share(self, profile: str) -> Fraction:
        """The share of one physical GPU that a slice of ``profile`` holds.

        A GPU has ``max_compute_slices`` compute slices (7 on A100/H100, 4 on A30);
        a 1g slice of an A100 is 1/7 of it. Cost and quota use this share.
        """
        return Fraction(self.mig_profiles[profile].compute_slices, self.max_compute_slices)


def _profiles(*rows: tuple[str, int, int, int]) -> dict[str, MigProfile]:
    return {name: MigProfile(name, g, gb, n) for name, g, gb, n in rows}


_SEVEN_SLICE_80GB = (
    ("1g.10gb", 1, 10, 7),
    ("1g.10gb+me", 1, 10, 1),
    ("1g.20gb", 1, 20, 4),
    ("2g.20gb", 2, 20, 3),
    ("3g.40gb", 3, 40, 2),
    ("4g.40gb", 4, 40, 1),
    ("7g.80gb", 7, 80, 1),
)

GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel(
            "A30-24GB",
            "NVIDIA-A30",
            "NVIDIA A30",
            24576,
            "ampere",
            8,
            0,
            4,
            _profiles(
                ("1g.6gb", 1, 6, 4),
                ("1g.6gb+me", 1, 6, 1),
                ("2g.12gb", 2, 12, 2),
                ("2g.12gb+me", 2, 12, 1),
                ("4g.24gb", 4, 24, 1),
            ),
        ),
        GpuModel(
            "A100-40GB",
            "NVIDIA-A100-SXM4-40GB",
            "NVIDIA A100-SXM4-40GB",
            40960,
            "ampere",
            8,
            0,
            7,
            _profiles(
                ("1g.5gb", 1, 5, 7),
                ("1g.5gb+me", 1, 5, 1),
                ("1g.10gb", 1, 10, 4),
                ("2g.10gb", 2, 10, 3),
                ("3g.20gb", 3, 20, 2),
                ("4g.20gb", 4, 20, 1),
                ("7g.40gb", 7, 40, 1),
            ),
        ),
        GpuModel(
            "A100-80GB",
            "NVIDIA-A100-SXM4-80GB",
            "NVIDIA A100-SXM4-80GB",
            81920,
            "ampere",
            8,
            0,
            7,
            _profiles(*_SEVEN_SLICE_80GB),
        ),
        GpuModel(
            "H100-80GB",
            "NVIDIA-H100-80GB-HBM3",
            "NVIDIA H100 80GB HBM3",
            81559,
            "hopper",
            9,
            0,
            7,
            _profiles(*_SEVEN_SLICE_80GB),
        ),
        GpuModel(
            "H100-94GB",
            "NVIDIA-H100-NVL",
            "NVIDIA H100 NVL",
            95830,
            "hopper",
            9,
            0,
            7,
            _profiles(
                ("1g.12gb", 1, 12, 7),
                ("1g.12gb+me", 1, 12, 1),
                ("1g.24gb", 1, 24, 4),
                ("2g.24gb", 2, 24, 3),
                ("3g.47gb", 3, 47, 2),
                ("4g.47gb", 4, 47, 1),
                ("7g.94gb", 7, 94, 1),
            ),
        ),
        GpuModel(
            "H200-141GB",
            "NVIDIA-H200",
            "NVIDIA H200",
            143771,
            "hopper",
            9,
            0,
            7,
            _profiles(
                ("1g.18gb", 1, 18, 7),
                ("1g.18gb+me", 1, 18, 1),
                ("1g.35gb", 1, 35, 4),
                ("2g.35gb", 2, 35, 3),
                ("3g.71gb", 3, 71, 2),
                ("4g.71gb", 4, 71, 1),
                ("7g.141gb", 7, 141, 1),
            ),
        ),
        GpuModel(
            "B200-180GB",
            "NVIDIA-B200",
            "NVIDIA B200",
            183359,
            "blackwell",
            10,
            0,
            7,
            _profiles(
                ("1g.23gb", 1, 23, 7),
                ("1g.23gb+me", 1, 23, 1),
                ("1g.45gb", 1, 45, 4),
                ("2g.45gb", 2, 45, 3),
                ("3g.90gb", 3, 90, 2),
                ("4g.90gb", 4, 90, 1),
                ("7g.180gb", 7, 180, 1),
            ),
        ),
        # GPUs without MIG: shared by time slicing or MPS, or used whole.
        GpuModel("L4", "NVIDIA-L4", "NVIDIA L4", 23034, "ada-lovelace", 8, 9),
        GpuModel("L40S", "NVIDIA-L40S", "NVIDIA L40S", 46068, "ada-lovelace", 8, 9),
        GpuModel("T4", "Tesla-T4", "Tesla T4", 15360, "turing", 7, 5),
    )
}
