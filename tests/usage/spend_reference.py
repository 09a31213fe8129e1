"""The spend computation as it was before it was made fast (exact Decimal and Fraction
per line, model instances per workload), kept to prove the fast one gives identical results.

Endpoints are charged for the replicas observed in each minute (``WorkloadScale``), here
minute by minute straight from the definition: the largest count that held at any instant
of the minute, ``min_replicas`` in a minute no observation reaches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction

from django.db.models import Q
from django.utils import timezone

from jobs.models import Kind, Workload, WorkloadScale
from usage.models import WorkloadDay, WorkloadRun
from usage.spend import DAY, MINUTE, ZERO, ceil_minute, held_interval


@dataclass
class Line:
    workload_id: int
    workload_name: str
    team_id: int
    team_slug: str
    user_id: int
    username: str
    offering_id: int
    offering_slug: str
    gpu_class: str
    pool: str
    is_gpu: bool
    day: date
    units: int
    share: Fraction
    minutes: int
    price: Decimal
    activity: float | None  # measured mean activity that day, None when not measured

    @property
    def allocated(self) -> Decimal:
        """Price-minutes."""
        return self.price * self.units * self.minutes

    @property
    def used(self) -> Decimal:
        if self.activity is None or not self.is_gpu:
            return self.allocated
        return (self.allocated * Decimal(str(round(self.activity, 6)))).quantize(Decimal("0.000001"))

    @property
    def idle(self) -> Decimal:
        return self.allocated - self.used

    @property
    def gpu_hours(self) -> Fraction:
        return self.share * self.units * self.minutes / 60 if self.is_gpu else Fraction(0)


def _runs(workloads: list[Workload], now: datetime) -> dict[int, list[tuple[datetime, datetime]]]:
    """Each workload's charged intervals: earlier runs from WorkloadRun, the current one from the row."""
    earlier: dict[int, dict[datetime, datetime | None]] = defaultdict(dict)
    for wid, started, finished in WorkloadRun.objects.filter(workload__in=[w.pk for w in workloads]).values_list(
        "workload_id", "started_at", "finished_at"
    ):
        earlier[wid][started] = finished
    runs = {}
    for w in workloads:
        spans = dict(earlier.get(w.pk, {}))
        if w.started_at is not None:
            spans[w.started_at] = w.finished_at
        intervals = []
        for started, finished in sorted(spans.items()):
            if finished is None and w.started_at != started:
                continue  # an earlier run whose end was never recorded: charge nothing rather than forever
            intervals.append(held_interval(started, finished, now))
        runs[w.pk] = intervals
    return runs


def _replicas_in(w: Workload, scales: list[tuple[datetime, int]], minute: datetime) -> int:
    """Replicas charged for one minute: a count holds from its time to the next one's (oldest first)."""
    if w.kind != Kind.ENDPOINT:
        return w.replicas
    touching = [
        r
        for i, (at, r) in enumerate(scales)
        if at < minute + MINUTE and (i + 1 == len(scales) or scales[i + 1][0] > minute)
    ]
    return max(touching) if touching else w.replicas


def workloads_between(start: datetime, end: datetime, workloads=None):
    """Workloads that may have held GPUs in [start, end): one query, related rows joined.

    The workload's own run, or an earlier one from ``WorkloadRun`` (a subquery, not a
    join, so no DISTINCT over every column). Fields no cost needs are deferred.
    """
    qs = Workload.objects.all() if workloads is None else workloads
    overlaps = Q(finished_at__isnull=True) | Q(finished_at__gte=start - MINUTE)
    earlier = WorkloadRun.objects.filter(overlaps, started_at__lt=end).values("workload_id")
    return (
        qs.filter((Q(started_at__lt=end) & overlaps) | Q(pk__in=earlier))
        .select_related("team", "created_by", "offering")
        .defer(*HEAVY_FIELDS)
    )


HEAVY_FIELDS = (
    "applied_manifests",
    "command",
    "args",
    "env",
    "labels",
    "annotations",
    "cluster_message",
    "state_reason",
    "exception_reason",
    "image",
    "storage_uri",
    "url",
)


def lines(start: datetime, end: datetime, workloads=None, now: datetime | None = None) -> list[Line]:
    """Per workload per day cost lines for [start, end) (minute-aligned). Three queries."""
    now = now or timezone.now()
    end = min(end, ceil_minute(now))
    if end <= start:
        return []
    rows = list(workloads_between(start, end, workloads))
    runs = _runs(rows, now)
    activity = {
        (wid, day): (act / n if n else None)
        for wid, day, act, n in WorkloadDay.objects.filter(
            workload__in=[w.pk for w in rows], day__gte=start.date(), day__lt=(end + DAY).date()
        ).values_list("workload_id", "day", "activity_minutes", "device_minutes")
    }
    out: list[Line] = []
    for w in rows:
        offering = w.offering
        share = Fraction(offering.share_numerator, offering.share_denominator or 1)
        gpu_class = f"{offering.gpu_model}/{offering.mig_profile}" if offering.mig_profile else offering.gpu_model
        scales = list(
            WorkloadScale.objects.filter(workload=w).order_by("started_at", "id").values_list("started_at", "replicas")
        )
        per_day: dict[tuple[date, int], int] = defaultdict(int)
        for interval in runs[w.pk]:
            minute = max(interval[0], start)
            while minute < min(interval[1], end):
                per_day[(minute.date(), _replicas_in(w, scales, minute))] += 1
                minute += MINUTE
        for (d, replicas), minutes in sorted(per_day.items()):
            if replicas == 0:
                continue
            out.append(
                Line(
                    workload_id=w.pk,
                    workload_name=w.name,
                    team_id=w.team_id,
                    team_slug=w.team.slug,
                    user_id=w.created_by_id,
                    username=w.created_by.get_username(),
                    offering_id=offering.pk,
                    offering_slug=offering.slug,
                    gpu_class=gpu_class or "cpu",
                    pool=offering.pool,
                    is_gpu=offering.kind != "cpu",
                    day=d,
                    units=w.gpus_per_replica * replicas,
                    share=share,
                    minutes=minutes,
                    price=Decimal(offering.price_per_hour),
                    activity=activity.get((w.pk, d)),
                )
            )
    return out


# --- totals --------------------------------------------------------------------------------------


@dataclass
class Total:
    key: object
    label: str
    allocated: Decimal = ZERO  # price-minutes
    used: Decimal = ZERO
    minutes: int = 0
    gpu_hours: Fraction = Fraction(0)
    workloads: set = field(default_factory=set)

    @property
    def idle(self) -> Decimal:
        return self.allocated - self.used

    @property
    def activity(self) -> float | None:
        return float(self.used / self.allocated) if self.allocated else None

    def add(self, line: Line) -> None:
        self.allocated += line.allocated
        self.used += line.used
        self.minutes += line.minutes
        self.gpu_hours += line.gpu_hours
        self.workloads.add(line.workload_id)


GROUPS = {
    "team": lambda ln: (ln.team_id, ln.team_slug),
    "user": lambda ln: (ln.user_id, ln.username),
    "workload": lambda ln: (ln.workload_id, f"{ln.team_slug}/{ln.workload_name}"),
    "offering": lambda ln: (ln.offering_id, ln.offering_slug),
    "day": lambda ln: (ln.day, ln.day.isoformat()),
}


def group(all_lines: Iterable[Line], by: str) -> list[Total]:
    totals: dict = {}
    for ln in all_lines:
        key, label = GROUPS[by](ln)
        totals.setdefault(key, Total(key, label)).add(ln)
    return sorted(totals.values(), key=lambda t: (t.label if by == "day" else -t.allocated, str(t.key)))
