"""What the usage pages show, assembled in a fixed number of queries whatever the data.

The views only render these; the API reuses ``spend`` and ``rightsizing`` directly.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from fractions import Fraction

from django.db.models import Q, Sum
from django.utils import timezone

from jobs import scale
from jobs.models import ACTIVE_STATES, State, Workload
from portal.models import Offering
from usage import charts, rightsizing, spend
from usage.idle import platform_rule
from usage.models import Budget, DeviceReading, GpuMinute, Period, TeamUsage
from usage.telemetry import stale_after

HOUR = timedelta(hours=1)


def _class_of(offering) -> str:
    return f"{offering.gpu_model}/{offering.mig_profile}" if offering.mig_profile else offering.gpu_model


# --- a team -----------------------------------------------------------------------------------------


def team_dashboard(team, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    running = list(
        Workload.objects.filter(team=team, state=State.RUNNING, deleted_at__isnull=True).select_related(
            "offering", "created_by"
        )
    )
    in_use: dict[str, Fraction] = defaultdict(Fraction)
    for w in running:
        if w.offering.kind != "cpu":
            in_use[_class_of(w.offering)] += Fraction(w.offering.share_numerator, w.offering.share_denominator) * (
                w.gpu_units
            )

    # Activity: hourly rollups of the last 7 days (chart), the last 24 h (averages).
    week_start = (now - timedelta(days=7)).replace(minute=0, second=0, microsecond=0)
    by_class: dict[str, list] = defaultdict(list)
    day_totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for cls, start, gpu_minutes, busy in TeamUsage.objects.filter(
        period=Period.HOUR, team_key=team.pk, start__gte=week_start
    ).values_list("gpu_class", "start", "gpu_minutes", "busy_gpu_minutes"):
        if gpu_minutes:
            by_class[cls].append((start + HOUR / 2, busy / gpu_minutes))
        if start >= now - timedelta(hours=24):
            day_totals[cls][0] += busy
            day_totals[cls][1] += gpu_minutes
    busy_all = sum(b for b, _ in day_totals.values())
    held_all = sum(g for _, g in day_totals.values())
    activity_chart = charts.chart(
        "GPU activity by class, last 7 days",
        "%",
        sorted(by_class.items()),
        week_start,
        now,
        y_max=1.0,
        step=HOUR,
    )

    month = spend.month_start(now)
    month_lines = spend.lines(month, spend.next_month(month), Workload.objects.filter(team=team), now)
    allocated = sum((ln.allocated for ln in month_lines), spend.ZERO)
    used = sum((ln.used for ln in month_lines), spend.ZERO)
    per_workload = spend.group(month_lines, "workload")
    expensive = per_workload[:5]
    idle = sorted((t for t in per_workload if t.idle > 0), key=lambda t: (-t.idle, str(t.key)))[:5]

    budget = Budget.objects.filter(team=team).first()
    spent = spend.money(allocated)
    budget_percent = None
    if budget is not None and budget.monthly_amount:
        budget_percent = int(spent * 100 / budget.monthly_amount)

    recent = Workload.objects.filter(team=team, deleted_at__isnull=True).filter(
        Q(state=State.RUNNING) | Q(finished_at__gte=now - timedelta(days=30))
    )
    suggestions = rightsizing.for_workloads(recent.select_related("offering")[:500])[:10]
    names = {w.pk: w.name for w in running}
    names.update({t.key: t.label.split("/", 1)[1] for t in per_workload})

    return {
        "team": team,
        "now": now,
        "running": running,
        "in_use": sorted((cls, float(n)) for cls, n in in_use.items()),
        "activity_24h": (busy_all / held_all) if held_all else None,
        "activity_by_class": sorted((cls, b / g if g else None) for cls, (b, g) in day_totals.items()),
        "activity_chart": activity_chart,
        "month": month,
        "spent": spent,
        "used": spend.money(used),
        "idle_cost": spent - spend.money(used),
        "budget": budget,
        "budget_percent": budget_percent,
        "budget_bar": min(budget_percent or 0, 100),
        "expensive": [(t, spend.money(t.allocated)) for t in expensive],
        "most_idle": [(t, spend.money(t.idle), t.activity) for t in idle],
        "suggestions": [(s, names.get(s.workload_id, f"#{s.workload_id}")) for s in suggestions],
    }


# --- the cluster --------------------------------------------------------------------------------------


def cluster_view(now: datetime | None = None, days: int = 7) -> dict:
    now = now or timezone.now()
    threshold = platform_rule().threshold

    capacity: dict[str, dict] = {}
    for o in Offering.objects.filter(is_active=True).exclude(kind="cpu").order_by("gpu_model", "mig_profile", "slug"):
        cls = _class_of(o)
        row = capacity.setdefault(
            cls, {"gpu_class": cls, "offerings": [], "total": 0, "allocated": 0, "busy": 0.0, "gpus": Fraction(0)}
        )
        row["offerings"].append(o.slug)
        if o.total_units is not None:
            row["total"] += o.total_units
            row["allocated"] += o.total_units - (o.free_units or 0)
            row["gpus"] += Fraction(o.share_numerator, o.share_denominator) * o.total_units

    readings = list(DeviceReading.objects.select_related("workload__created_by", "team"))
    fresh = [r for r in readings if now - r.at <= stale_after()]
    idle_now, free_now = [], defaultdict(int)
    for r in fresh:
        row = capacity.setdefault(
            r.gpu_class,
            {"gpu_class": r.gpu_class, "offerings": [], "total": 0, "allocated": 0, "busy": 0.0, "gpus": Fraction(0)},
        )
        if not r.pod:
            free_now[r.gpu_class] += 1
        elif r.activity >= threshold:
            row["busy"] += 1
        else:
            idle_now.append(r)
    idle_now.sort(key=lambda r: (r.team.slug if r.team else "~", r.hostname, r.device))

    # Utilization over time: hourly rollups up to a week, daily beyond (a 90-day chart
    # then draws 90 points per series, not 2160).
    period = Period.HOUR if days <= 7 else Period.DAY
    step = HOUR if period == Period.HOUR else timedelta(days=1)
    start = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    if period == Period.DAY:
        start = start.replace(hour=0)
    totals = (
        TeamUsage.objects.filter(period=period, start__gte=start)
        .values("start")
        .annotate(held=Sum("gpu_minutes"), busy=Sum("busy_gpu_minutes"))
        .values_list("start", "held", "busy")
    )
    pools = spend.gpu_pools()
    gpus = sum(n for _, _, n, _ in pools) or 1
    minutes_per_step = step / timedelta(minutes=1)
    held_pts, busy_pts = [], []
    for t, held, busy in totals:
        held_pts.append((t + step / 2, held / (gpus * minutes_per_step)))
        busy_pts.append((t + step / 2, busy / (gpus * minutes_per_step)))
    utilization = charts.chart(
        f"Cluster GPUs held and busy, last {days} days ({'hourly' if period == Period.HOUR else 'daily'})",
        "%",
        [("held by pods", held_pts), ("busy", busy_pts)],
        start,
        now,
        y_max=1.0,
        step=step,
    )

    account = spend.cluster_account(start, now, now)
    shown = account.shown()
    return {
        "now": now,
        "days": days,
        "capacity": [
            {**row, "gpus": float(row["gpus"]), "free_devices": free_now.get(row["gpu_class"], 0)}
            for row in sorted(capacity.values(), key=lambda r: r["gpu_class"])
        ],
        "threshold": threshold,
        "sampled": bool(fresh),
        "stale": bool(readings) and not fresh,
        "idle_now": idle_now,
        "free_now": sorted(free_now.items()),
        "utilization": utilization,
        "account": account,
        "spend_rows": [(k, v) for k, v in shown.items() if k != "cluster idle"],
        "spend_idle": shown.get("cluster idle", Decimal(0)),
        "spend_total": spend.money(account.cost),
        "pools": pools,
    }


# --- one workload ----------------------------------------------------------------------------------------


def workload_usage(workload: Workload, now: datetime | None = None, hours: int = 6) -> dict:
    now = now or timezone.now()
    live = workload.state in ACTIVE_STATES and workload.deleted_at is None
    end = min(now, workload.finished_at) if (workload.finished_at and not live) else now
    start = end - timedelta(hours=hours)
    if workload.started_at and workload.started_at > start:
        start = spend.floor_minute(workload.started_at)
    if end - start < timedelta(minutes=10):
        start = end - timedelta(minutes=10)
    activity: dict[str, list] = defaultdict(list)
    memory: dict[str, list] = defaultdict(list)
    memory_top = 1.0
    for device, pod, minute, act, fb, fb_total in (
        GpuMinute.objects.filter(workload=workload, minute__gte=start, minute__lte=end)
        .order_by("minute")
        .values_list("device", "pod", "minute", "activity", "fb_used_mib", "fb_total_mib")
    ):
        label = _device_label(device, pod)
        activity[label].append((minute, act))
        memory[label].append((minute, fb / 1024))
        memory_top = max(memory_top, fb_total / 1024, fb / 1024)
    cost = spend.workload_cost(workload, now)
    suggestion = rightsizing.for_workloads([workload])
    # The rate charged: a running endpoint's replicas running now, not the max_replicas quota holds.
    charge = scale.endpoint_charge(workload)
    units = charge.charged_units if charge and workload.state == State.RUNNING else workload.gpu_units
    return {
        "workload": workload,
        "live": live,
        "activity_chart": charts.chart("GPU activity", "%", sorted(activity.items()), start, end, y_max=1.0),
        "memory_chart": charts.chart(
            "GPU memory used", "GiB", sorted(memory.items()), start, end, y_max=memory_top, peak=True
        ),
        "cost_allocated": spend.money(cost.allocated),
        "cost_used": spend.money(cost.used),
        "cost_idle": spend.money(cost.allocated) - spend.money(cost.used),
        "activity": cost.activity,
        "price_per_hour": (Decimal(workload.offering.price_per_hour) * units).quantize(spend.CENT),
        "minutes": cost.minutes,
        "suggestion": suggestion[0] if suggestion else None,
    }


def _device_label(device: str, pod: str) -> str:
    uuid, _, gi = device.partition("/")
    short = uuid.removeprefix("GPU-")[:8]
    return f"{short} slice {gi}" if gi else f"{short}" + (f" ({pod})" if pod else "")
