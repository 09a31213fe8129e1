"""The audit log of quotas: every change and every decision, with who, when and why.

Entries are written in the transaction of the change they describe, so the log never
claims a change that was rolled back, nor misses one that was committed. Amounts are
stored as strings ("8", "0.142857") so JSON never rounds them.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from portal.access import is_platform_admin
from portal.models import Membership
from portal.spreadsheets import safe_cell
from quotas.models import AuditEntry

Action = AuditEntry.Action

CSV_COLUMNS = ["at", "actor", "team", "action", "gpu_class", "before", "after", "reason", "request", "exception"]


def _plain(values: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if isinstance(value, Decimal):
            out[key] = amount(value)
        elif value is None or isinstance(value, str | int | float | bool):
            out[key] = value
        else:
            out[key] = str(value)
    return out


def amount(value: Decimal) -> str:
    """Decimal('8.0000') → '8', Decimal('0.142857') → '0.142857'."""
    return f"{value.normalize():f}"


def record(
    action: str,
    *,
    actor,
    team,
    gpu_class: str = "",
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    reason: str = "",
    request=None,
    exception=None,
) -> AuditEntry:
    return AuditEntry.objects.create(
        action=action,
        actor=actor if actor is not None and getattr(actor, "pk", None) else None,
        team=team,
        gpu_class=gpu_class,
        before=_plain(before),
        after=_plain(after),
        reason=reason,
        request=request,
        exception=exception,
    )


def may_read(user) -> bool:
    """Platform admins and team admins read the log (team admins only their teams' part)."""
    if is_platform_admin(user):
        return True
    return user.is_authenticated and Membership.objects.filter(user=user, role=Membership.TEAM_ADMIN).exists()


def entries_for(user, params: Mapping[str, str] | None = None):
    """The entries ``user`` may read, filtered by ``team``, ``gpu_class`` and ``action``.

    The one queryset behind the page, the CSV export and the API.
    """
    params = params or {}
    qs = AuditEntry.objects.visible_to(user).select_related("actor", "team")
    if params.get("team"):
        qs = qs.filter(team__slug=params["team"])
    if params.get("gpu_class"):
        qs = qs.filter(gpu_class=params["gpu_class"])
    if params.get("action"):
        qs = qs.filter(action=params["action"])
    return qs.order_by("-at", "-id")


# jsonb keeps no key order; show the amounts in the order people read them.
KEY_ORDER = {"guaranteed": 0, "limit": 1, "used": 2, "overage": 3, "amount": 4, "until": 5}


def ordered(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    return sorted(values.items(), key=lambda kv: (KEY_ORDER.get(kv[0], 99), kv[0]))


def changes_text(values: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in ordered(values))


def write_csv(entries: Iterable[AuditEntry], out) -> None:
    """One row per entry; before/after as ``key=value`` pairs a spreadsheet can show."""
    write_header(out)
    write_rows(entries, out)


def write_header(out) -> None:
    csv.writer(out).writerow(CSV_COLUMNS)


def write_rows(entries: Iterable[AuditEntry], out) -> None:
    writer = csv.writer(out)
    for e in entries:
        writer.writerow(
            [
                e.at.isoformat(),
                safe_cell(e.actor_name),
                e.team.slug,
                e.action,
                e.gpu_class,
                changes_text(e.before),
                changes_text(e.after),
                safe_cell(e.reason),
                e.request_id or "",
                e.exception_id or "",
            ]
        )
