"""Template filters for quota amounts."""

from __future__ import annotations

from decimal import Decimal

from django import template

from quotas.admission import fmt

register = template.Library()


@register.filter
def gpus(value) -> str:
    """8.0000 → '8', 0.142857 → '0.14': what people read on a quota bar."""
    if value is None or value == "":
        return "—"
    return fmt(Decimal(value))


@register.filter
def plain(value) -> str:
    """A Decimal for an HTML attribute (meter values): no localisation, no exponent."""
    if value is None:
        return "0"
    return f"{Decimal(value).normalize():f}"


@register.filter
def changes(values) -> str:
    """An audit entry's before/after as 'guaranteed=4 limit=8 used=6 overage=0'."""
    from quotas.audit import changes_text

    return changes_text(values or {})
