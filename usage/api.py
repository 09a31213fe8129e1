"""Chargeback and usage API: totals grouped one way, a per-day CSV, and right-sizing.

Scope: a member sees the workloads of their teams, a platform admin every team's
(deleted workloads included: their spend happened). ``start`` and ``end`` are UTC
dates, both included (``start=2026-03-01&end=2026-03-31`` is March). Amounts are
strings with two decimals; the rows' cents are distributed so that they add up to the
total shown (``usage.spend.split_cents``).
"""

from __future__ import annotations

import csv
from datetime import date, timedelta

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import State, Workload
from portal.access import is_platform_admin, team_for, visible_teams
from portal.schema import ErrorSerializer
from portal.spreadsheets import safe_cell
from usage import rightsizing, spend

MAX_DAYS = 366


def _date(params, name: str, default: date) -> date:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise ValidationError({name: [f"must be a date as YYYY-MM-DD, not {raw!r}"]}) from None


def parse_range(params) -> tuple[date, date]:
    """(first day, last day), both included; defaults to this month so far."""
    today = timezone.now().date()
    start = _date(params, "start", today.replace(day=1))
    end = _date(params, "end", today)
    if end < start:
        raise ValidationError({"end": ["must not be before start"]})
    if (end - start).days + 1 > MAX_DAYS:
        raise ValidationError({"end": [f"the range may span at most {MAX_DAYS} days"]})
    return start, end


def scoped_workloads(request):
    """The workloads whose spend the user may see, narrowed to ``?team=`` when given."""
    teams = visible_teams(request.user)
    slug = request.query_params.get("team")
    if slug:
        teams = [team_for(request.user, slug)]  # 404 for a team the user may not see
    return Workload.objects.filter(team__in=teams)


def _lines(request):
    start, end = parse_range(request.query_params)
    lines = spend.lines(spend.day_start(start), spend.day_start(end + timedelta(days=1)), scoped_workloads(request))
    return start, end, lines


def _amounts(keys_and_totals):
    """Rounded allocated/used per row, adding up to the rounded totals; idle = allocated − used."""
    allocated = spend.split_cents({k: t.allocated for k, t in keys_and_totals})
    used = spend.split_cents({k: t.used for k, t in keys_and_totals})
    return {k: (allocated[k], used[k], allocated[k] - used[k]) for k, _ in keys_and_totals}


# A bad date or range is a 400; a ``team`` the caller is not in (or that does not exist) a 404.
RANGE_ERRORS = {400: ErrorSerializer, 404: ErrorSerializer}

RANGE_PARAMETERS = [
    OpenApiParameter("start", OpenApiTypes.DATE, description="first day (UTC), default: 30 days ago"),
    OpenApiParameter("end", OpenApiTypes.DATE, description="last day (UTC, included), default: today"),
    OpenApiParameter("team", str, description="team slug; default: all your teams"),
]


class UsageView(APIView):
    """GET /api/v1/usage/?group_by=team|user|workload|offering|day&start=&end=&team="""

    @extend_schema(
        tags=["usage"],
        parameters=[
            OpenApiParameter("group_by", str, enum=["team", "user", "workload", "offering", "day"]),
            *RANGE_PARAMETERS,
        ],
        responses={200: OpenApiTypes.OBJECT, **RANGE_ERRORS},
        description="Allocated, used and idle GPU cost, grouped. Amounts are strings with two decimals.",
    )
    def get(self, request):
        group_by = request.query_params.get("group_by", "team")
        if group_by not in spend.GROUPS:
            raise ValidationError({"group_by": [f"must be one of {', '.join(spend.GROUPS)}, not {group_by!r}"]})
        start, end, lines = _lines(request)
        totals = spend.group(lines, group_by)
        amounts = _amounts([(i, t) for i, t in enumerate(totals)])
        all_alloc = sum((a for a, _, _ in amounts.values()), spend.ZERO)
        all_used = sum((u for _, u, _ in amounts.values()), spend.ZERO)
        results = []
        for i, t in enumerate(totals):
            allocated, used, idle = amounts[i]
            results.append(
                {
                    "key": t.label,
                    "id": t.key.isoformat() if group_by == "day" else t.key,
                    "allocated": f"{allocated:.2f}",
                    "used": f"{used:.2f}",
                    "idle": f"{idle:.2f}",
                    "gpu_hours": round(float(t.gpu_hours), 4),
                    "mean_activity": None if t.activity is None else round(t.activity, 4),
                    "workloads": len(t.workloads),
                }
            )
        return Response(
            {
                "start": start.isoformat(),
                "end": end.isoformat(),
                "group_by": group_by,
                "total": {
                    "allocated": f"{all_alloc:.2f}",
                    "used": f"{all_used:.2f}",
                    "idle": f"{all_alloc - all_used:.2f}",
                },
                "results": results,
            }
        )


CSV_COLUMNS = [
    "day",
    "team",
    "user",
    "workload_id",
    "workload",
    "offering",
    "gpu_class",
    "units",
    "minutes",
    "gpu_hours",
    "mean_activity",
    "allocated_cost",
    "used_cost",
    "idle_cost",
]


class ExportView(APIView):
    """GET /api/v1/usage/export.csv?start=&end=&team= — one row per team, user, workload, GPU class and day."""

    def perform_content_negotiation(self, request, force=False):
        # The view writes the CSV itself; the renderers only serve errors, as JSON. Without
        # force, a client sending "Accept: text/csv" would be refused with 406.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(
        tags=["usage"],
        parameters=RANGE_PARAMETERS,
        responses={(200, "text/csv"): OpenApiTypes.STR, **RANGE_ERRORS},
        description="Chargeback export as CSV.",
    )
    def get(self, request):
        start, end, lines = _lines(request)
        lines.sort(key=lambda ln: (ln.day, ln.team_slug, ln.username, ln.workload_id))
        amounts = _amounts([(i, ln) for i, ln in enumerate(lines)])
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="gpu-usage-{start}-{end}.csv"'
        writer = csv.writer(response)
        writer.writerow(CSV_COLUMNS)
        for i, ln in enumerate(lines):
            allocated, used, idle = amounts[i]
            writer.writerow(
                [
                    ln.day.isoformat(),
                    safe_cell(ln.team_slug),
                    safe_cell(ln.username),
                    ln.workload_id,
                    safe_cell(ln.workload_name),
                    safe_cell(ln.offering_slug),
                    safe_cell(ln.gpu_class),
                    ln.units,
                    ln.minutes,
                    f"{float(ln.gpu_hours):.4f}",
                    "" if ln.activity is None else f"{ln.activity:.4f}",
                    f"{allocated:.2f}",
                    f"{used:.2f}",
                    f"{idle:.2f}",
                ]
            )
        return response


class RightsizingView(APIView):
    """GET /api/v1/usage/rightsizing/?team= — running workloads and those finished in the last 30 days."""

    @extend_schema(
        tags=["usage"],
        parameters=[OpenApiParameter("team", str, description="team slug; default: all your teams")],
        responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer},
        description="The smallest offering that would have served each workload, and what it would save.",
    )
    def get(self, request):
        since = timezone.now() - timedelta(days=30)
        scoped = scoped_workloads(request).filter(deleted_at__isnull=True)
        rows = list(
            (scoped.filter(state=State.RUNNING) | scoped.filter(finished_at__gte=since))
            .select_related("offering", "team")
            .order_by("-id")[:1000]
        )
        names = {w.pk: f"{w.team.slug}/{w.name}" for w in rows}
        suggestions = rightsizing.for_workloads(rows)
        return Response({"results": [{**s.as_dict(), "name": names[s.workload_id]} for s in suggestions]})


class ClusterView(APIView):
    """GET /api/v1/usage/cluster/?start=&end= — the cluster's GPU cost, per team and cluster idle (platform admins)."""

    @extend_schema(
        tags=["usage"],
        parameters=RANGE_PARAMETERS[:2],
        responses={200: OpenApiTypes.OBJECT, 400: ErrorSerializer, 403: ErrorSerializer},
        description="The cluster's GPU cost over the range and who it went to. It counts from ``since``: the "
        "first sample of any GPU node (each node costs from its own first sample), later than ``start`` when "
        "the cluster was not measured yet; null when no node was ever sampled (then everything is zero).",
    )
    def get(self, request):
        if not is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins see the cluster's account.")
        start, end = parse_range(request.query_params)
        account = spend.cluster_account(spend.day_start(start), spend.day_start(end + timedelta(days=1)))
        shown = account.shown()
        return Response(
            {
                "start": start.isoformat(),
                "end": end.isoformat(),
                "since": account.since.isoformat() if account.since else None,
                "cost": f"{spend.money(account.cost):.2f}",
                "teams": {k: f"{v:.2f}" for k, v in shown.items() if k != "cluster idle"},
                "cluster_idle": f"{shown.get('cluster idle', spend.ZERO):.2f}",
                "nodes": {host: at.isoformat() for host, at in sorted(account.node_since.items())},
            }
        )
