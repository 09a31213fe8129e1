"""Which quota an offering draws on, and how much one unit of it counts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

SIX_PLACES = Decimal("0.000001")


@dataclass(frozen=True)
class Charge:
    gpu_class: str
    amount: Decimal  # in the class's units: GPUs, or slices for a MIG-profile class


def mig_class(gpu_model: str, profile: str) -> str:
    return f"{gpu_model}/{profile}"


def share_amount(numerator: int, denominator: int, units: int) -> Decimal:
    """``units`` times a share, rounded down to six places.

    Rounding down means seven 1/7 slices sum to 0.999999, never to more than one
    GPU, so a limit on a whole number of GPUs admits exactly the slices it should.
    """
    return (Decimal(numerator * units) / Decimal(denominator)).quantize(SIX_PLACES, rounding=ROUND_FLOOR)


def charge_for(offering, units: int, quota_classes: set[str]) -> Charge | None:
    """The quota charge of ``units`` of ``offering``; None for CPU-only work.

    A MIG slice draws on a quota for its exact profile when the team has one
    (counted in slices), otherwise on its GPU model's quota as its share of a GPU.
    Shared GPUs count as their share of the model too.
    """
    if offering.kind == "cpu":
        return None
    if offering.kind == "mig":
        profile_class = mig_class(offering.gpu_model, offering.mig_profile)
        if profile_class in quota_classes:
            return Charge(profile_class, Decimal(units))
    if offering.kind in ("mig", "shared"):
        return Charge(offering.gpu_model, share_amount(offering.share_numerator, offering.share_denominator, units))
    return Charge(offering.gpu_model, Decimal(units))
