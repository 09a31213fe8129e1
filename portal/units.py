"""How much GPU something is, said one way on every page: the offering picker, the quota
table, the workload page and the admission messages of the timeline.

An offering is counted in its own unit: GPUs ("2 H100-80GB GPUs"), MIG slices ("1 slice
of A100-80GB (1g.10gb)") or shares of a time-sliced GPU ("1 share of L4 (1/4 GPU)"); CPU
work in replicas. A quota class is counted in GPUs of a model ("A100-80GB"), or in slices
when it is a MIG profile's own class ("A100-80GB/1g.10gb"). Where a slice or a share is
charged to its model's GPUs the two are joined: "1 slice of A100-80GB (1g.10gb) = 0.14
A100-80GB GPU", never a bare 0.14 next to a "1" that meant a slice.
"""

from __future__ import annotations

from decimal import Decimal


def number(amount) -> str:
    """2 → '2', 0.142857 → '0.14': people read GPUs, not six decimals."""
    rounded = Decimal(amount).quantize(Decimal("0.01"))
    return f"{rounded.normalize():f}" if rounded == rounded.to_integral() else f"{rounded:f}"


def _plural(amount, one: str, many: str) -> str:
    return one if 0 < Decimal(amount) <= 1 else many


def unit_noun(offering, amount=1) -> str:
    """The offering's unit, singular or plural: GPU, slice, share, replica."""
    kind = getattr(offering, "kind", "gpu")
    one = {"gpu": "GPU", "mig": "slice", "shared": "share", "cpu": "replica"}.get(kind, "unit")
    return _plural(amount, one, one + "s")


def unit_of(offering) -> str:
    """One unit of the offering spelled out: "H100-80GB GPU", "slice of A100-80GB (1g.10gb)"."""
    if offering.kind == "mig":
        return f"slice of {offering.gpu_model} ({offering.mig_profile})"
    if offering.kind == "shared":
        return f"share of {offering.gpu_model} ({offering.share_numerator}/{offering.share_denominator} GPU)"
    if offering.kind == "cpu":
        return "CPU-only replica"
    return f"{offering.gpu_model} GPU"


def offering_amount(offering, count) -> str:
    """``count`` units of ``offering``: "1 slice of A100-80GB (1g.10gb)", "2 H100-80GB GPUs"."""
    if offering.kind == "mig":
        noun = _plural(count, "slice", "slices")
        return f"{number(count)} {noun} of {offering.gpu_model} ({offering.mig_profile})"
    if offering.kind == "shared":
        noun = _plural(count, "share", "shares")
        share = f"{offering.share_numerator}/{offering.share_denominator} GPU"
        return f"{number(count)} {noun} of {offering.gpu_model} ({share} each)"
    if offering.kind == "cpu":
        return f"{number(count)} CPU-only {_plural(count, 'replica', 'replicas')}"
    return f"{number(count)} {offering.gpu_model} {_plural(count, 'GPU', 'GPUs')}"


def class_unit(gpu_class: str, amount=2) -> str:
    """What a quota class counts: "GPUs", or "slices" for a MIG profile class."""
    if "/" in gpu_class:
        return _plural(amount, "slice", "slices")
    return _plural(amount, "GPU", "GPUs")


def class_amount(gpu_class: str, amount) -> str:
    """An amount of a quota class: "2 A100-80GB GPUs", "0.14 A100-80GB GPU", "3 slices of A100-80GB (1g.10gb)"."""
    model, slash, profile = gpu_class.partition("/")
    if slash:
        return f"{number(amount)} {class_unit(gpu_class, amount)} of {model} ({profile})"
    return f"{number(amount)} {model} {class_unit(gpu_class, amount)}"


def request_amount(offering, count, gpu_class: str, charge) -> str:
    """What a request takes, with its quota charge when that is counted in another unit."""
    asked = offering_amount(offering, count)
    if offering.kind in ("mig", "shared") and "/" not in gpu_class:
        return f"{asked} = {class_amount(gpu_class, charge)}"
    return asked
