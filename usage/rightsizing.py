"""Right-sizing: the smallest offering that would have served a workload, from what it did.

Pure on recorded numbers (``suggest``); ``for_workloads`` gathers them in two queries.

A candidate offering *would have served* one unit of the workload when:

- memory: the measured peak framebuffer use of any one device × ``MEMORY_HEADROOM``
  (1.2) fits the candidate's GPU memory per unit. A time-sliced GPU's memory is not
  partitioned, so a shared offering is credited only its share of the GPU's memory;
- compute: the measured mean activity × the current offering's share of a GPU ×
  ``COMPUTE_HEADROOM`` (1.1) fits the candidate's share. Activity is compared as a
  share of *a* GPU whatever its generation: an A100 slice is slower than the same
  slice of an H100, which the headroom only partly covers. The suggestion is a hint
  for the next request, not an automatic change.

Among the candidates that fit and cost less per hour, the cheapest is suggested (then
the smaller share, then the slug, so the answer is deterministic). Only workloads with
at least ``MIN_MINUTES`` sampled device-minutes per unit are judged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from django.db.models import Max, Sum

from portal.models import Offering
from usage.models import WorkloadDay

MEMORY_HEADROOM = 1.2
COMPUTE_HEADROOM = 1.1
MIN_MINUTES = 60


@dataclass(frozen=True)
class Measured:
    peak_fb_mib: int  # the highest use of any one device
    mean_activity: float  # 0..1, over sampled device-minutes
    device_minutes: int


@dataclass(frozen=True)
class Suggestion:
    workload_id: int
    current: str
    suggested: str
    current_name: str
    suggested_name: str
    peak_gib: float
    activity: float
    saving_per_day: Decimal

    @property
    def message(self) -> str:
        return (
            f"peak {self.peak_gib:.0f} GiB and {self.activity * 100:.0f} % activity on {self.current_name}: "
            f"{self.suggested_name} would have done, saving ${self.saving_per_day:.2f} per day"
        )

    def as_dict(self) -> dict:
        return {
            "workload": self.workload_id,
            "current": self.current,
            "suggested": self.suggested,
            "peak_gib": round(self.peak_gib, 2),
            "mean_activity": round(self.activity, 4),
            "saving_per_day": f"{self.saving_per_day:.2f}",
            "message": self.message,
        }


def share_of(offering) -> Fraction:
    return Fraction(offering.share_numerator, offering.share_denominator or 1)


def memory_gib(offering) -> float:
    if offering.kind == "shared":
        return offering.gpu_memory_gib * float(share_of(offering))
    return float(offering.gpu_memory_gib)


def suggest(workload_id: int, current, units: int, measured: Measured, candidates: Iterable) -> Suggestion | None:
    if current.kind == "cpu" or units <= 0 or measured.device_minutes < MIN_MINUTES * units:
        return None
    need_gib = measured.peak_fb_mib * MEMORY_HEADROOM / 1024
    need_share = measured.mean_activity * float(share_of(current)) * COMPUTE_HEADROOM
    fitting = [
        c
        for c in candidates
        if c.kind != "cpu"
        and c.is_active
        and c.pk != current.pk
        and Decimal(c.price_per_hour) < Decimal(current.price_per_hour)
        and memory_gib(c) >= need_gib
        and float(share_of(c)) >= need_share
    ]
    if not fitting:
        return None
    best = min(fitting, key=lambda c: (Decimal(c.price_per_hour), share_of(c), c.slug))
    saving = (Decimal(current.price_per_hour) - Decimal(best.price_per_hour)) * units * 24
    return Suggestion(
        workload_id,
        current.slug,
        best.slug,
        current.display_name,
        best.display_name,
        measured.peak_fb_mib / 1024,
        measured.mean_activity,
        saving.quantize(Decimal("0.01")),
    )


def measured(workload_ids: Iterable[int]) -> dict[int, Measured]:
    rows = (
        WorkloadDay.objects.filter(workload__in=list(workload_ids))
        .values("workload_id")
        .annotate(peak=Max("peak_fb_mib"), act=Sum("activity_minutes"), n=Sum("device_minutes"))
        .values_list("workload_id", "peak", "act", "n")
    )
    return {wid: Measured(peak or 0, (act / n) if n else 0.0, n or 0) for wid, peak, act, n in rows}


def for_workloads(workloads: Iterable) -> list[Suggestion]:
    """Suggestions for workloads (with ``offering`` loaded), largest saving first. Two queries."""
    workloads = list(workloads)
    data = measured(w.pk for w in workloads)
    candidates = list(Offering.objects.filter(is_active=True))
    out = []
    for w in workloads:
        if w.pk in data:
            s = suggest(w.pk, w.offering, w.gpu_units, data[w.pk], candidates)
            if s is not None:
                out.append(s)
    return sorted(out, key=lambda s: (-s.saving_per_day, s.workload_id))
