"""Template filters of portal.units: ``{% load units %}``."""

from __future__ import annotations

from django import template

from portal import units

register = template.Library()


@register.filter
def offering_amount(count, offering) -> str:
    """``{{ 2|offering_amount:offering }}`` → "2 H100-80GB GPUs"."""
    if offering is None or count in (None, ""):
        return "—"
    return units.offering_amount(offering, count)


@register.filter
def unit_noun(offering, count=1) -> str:
    """``{{ offering|unit_noun:n }}`` → "slice" / "slices"; "GPU" / "GPUs"."""
    return units.unit_noun(offering, 1 if count in (None, "") else count)


@register.filter
def class_amount(amount, gpu_class) -> str:
    """``{{ workload.quota_charge|class_amount:workload.quota_class }}`` → "0.14 A100-80GB GPU"."""
    if amount in (None, "") or not gpu_class:
        return "—"
    return units.class_amount(gpu_class, amount)
