"""What GPUs cost: allocated, used and idle, per workload, team and day, and for the cluster.

Rules (every report, page and export follows them):

- **Allocated cost** = units held × offering price per hour × hours held. A MIG slice
  or shared GPU's offering is already priced per unit (its share of the pool's GPU
  price, unless an admin set its own), so units × price is right for every kind.
- **To the minute, touched minutes count**: a run holds its GPUs from its start
  truncated down to the minute to its end (``finished_at``, or now) rounded *up* to
  the minute. A run of 10:00:40–10:02:05 is charged 10:00–10:03, three minutes; a
  run that starts and ends inside one minute is charged one. Periods (days, months,
  report ranges) are whole minutes, so a run's minutes in consecutive periods add up
  to its total exactly: a run across midnight or across a month end is split there.
- **Money is exact**: sums are kept in *price-minutes* (``Decimal``: units × price ×
  minutes, no division), converted to currency (÷ 60) and rounded to cents only when
  shown. When several rounded amounts are shown next to their total, the cents are
  distributed by largest remainder (ties in order), so the shown parts add up to the
  shown total.
- **Used cost** weighs allocated cost by measured GPU activity (the workload's mean
  for that day); **idle cost** = allocated − used. A day with no samples counts as
  used: we do not call a team idle when we did not measure (sampler down, CPU work).
- **Every cent of the cluster's GPU cost is attributed**: cluster cost per hour = Σ
  over GPU nodes of the node's GPUs × its pool's price (the cluster profile). Teams are
  charged what their workloads were allocated on GPU offerings; the remainder is
  **cluster idle**. It can be negative for a pool only where an admin priced an
  offering above its share of the pool price, or where two runs touched the same
  minute of a device (handover minutes are charged to both).
- **The cluster's cost starts with its data**: a node costs from the minute of its
  first sample (``NodeSeen``), and the account (teams included) starts at the first
  sample of any node, so a report never charges idle GPUs for days before the cluster
  was measured. Pages say "since <time>" when that is later than the period's start.
- Runs: a workload's current run is (``started_at``, ``finished_at``); earlier runs of
  a notebook that was stopped and started again are kept in ``WorkloadRun``.
- **Endpoints are charged for the replicas that run, not the ones reserved.** Quota admits
  an endpoint at ``max_replicas`` (plus a canary's replicas) so that scaling up is never
  refused; spend charges each minute per-replica units × the replicas observed in that
  minute (``jobs.WorkloadScale``: the reconcile records the predictor pods holding GPUs,
  canary pods included, each time the count changes, capped at what quota reserved then).
  Touched minutes again: a minute in which the count changed is charged at the larger
  count. A minute of a run before the first observation is charged at ``min_replicas``,
  which KServe keeps up whatever the traffic.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q, Sum
from django.utils import timezone

from jobs.models import Kind, Workload, WorkloadScale
from portal.cluster_profile import load_profile
from usage.models import NodeSeen, WorkloadDay, WorkloadRun

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
CENT = Decimal("0.01")
ZERO = Decimal(0)


# --- time ---------------------------------------------------------------------------------------


def floor_minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def ceil_minute(at: datetime) -> datetime:
    floored = floor_minute(at)
    return floored if floored == at else floored + MINUTE


def held_interval(started_at: datetime | None, finished_at: datetime | None, now: datetime):
    """The minutes a run is charged for: [start floored, end rounded up), at least one minute."""
    if started_at is None:
        return None
    start = floor_minute(started_at)
    end = ceil_minute(finished_at or now)
    return (start, max(end, start + MINUTE))


def overlap_minutes(interval, period_start: datetime, period_end: datetime) -> int:
    if interval is None:
        return 0
    lo, hi = max(interval[0], period_start), min(interval[1], period_end)
    return max(int((hi - lo) / MINUTE), 0)


def day_start(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def month_start(at: datetime) -> datetime:
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def next_month(start: datetime) -> datetime:
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)


# --- money ---------------------------------------------------------------------------------------


def money(price_minutes: Decimal) -> Decimal:
    """Price-minutes → currency, rounded to the cent (banker's rounding)."""
    return (Decimal(price_minutes) / 60).quantize(CENT, rounding=ROUND_HALF_EVEN)


def split_cents(parts: Mapping, total: Decimal | None = None) -> dict:
    """Round each part (price-minutes) to cents so that the rounded parts add up to the rounded total.

    Largest remainder: every part gets its amount rounded down, then the cents left
    go to the parts with the largest remainders (ties: in the mapping's order).
    """
    total = sum(parts.values(), ZERO) if total is None else total
    target = int(money(total) / CENT)
    floors, remainders = {}, []
    for i, (key, pm) in enumerate(parts.items()):
        exact = Decimal(pm) / 60 / CENT
        floor = math.floor(exact)
        floors[key] = floor
        remainders.append((-(exact - floor), i, key))
    left = target - sum(floors.values())
    remainders.sort()
    step = 1 if left >= 0 else -1
    order = remainders if left >= 0 else list(reversed(remainders))
    for _, _, key in order[: abs(left)]:
        floors[key] += step
    return {key: Decimal(cents) * CENT for key, cents in floors.items()}


@dataclass(frozen=True)
class Estimate:
    per_hour: Decimal
    total: Decimal | None  # for the maximum runtime; None when there is none
    minutes: int | None


def estimate(offering, units: int, max_runtime_seconds: int | None) -> Estimate:
    """What a request will cost per hour and, at most, over its maximum runtime (pure)."""
    per_hour = Decimal(offering.price_per_hour) * units
    if not max_runtime_seconds:
        return Estimate(per_hour.quantize(CENT), None, None)
    minutes = math.ceil(max_runtime_seconds / 60)
    return Estimate(per_hour.quantize(CENT), money(per_hour * minutes), minutes)


# --- lines: one workload, one day -----------------------------------------------------------------


# Exact integer forms of money, so a report sums ints and makes Decimals once per total:
# allocated in 10⁻⁴ price-minutes (prices have four decimal places), used in 10⁻⁶
# (it is quantized to six places). Shares of a GPU are kept per denominator.
ALLOC_PLACES, USED_PLACES = 4, 6
_USED_STEP = 10**ALLOC_PLACES  # (10⁻⁴ allocated × 10⁻⁶ activity = 10⁻¹⁰) → 10⁻⁶


@lru_cache(maxsize=256)
def _scaled(value: Decimal, places: int) -> int | None:
    """``value`` × 10^places as an int, or None when it has more decimal places than that."""
    scaled = value.scaleb(places)
    return int(scaled) if scaled == scaled.to_integral_value() else None


def _activity_millionths(activity: float) -> int | None:
    """``Decimal(str(round(activity, 6)))`` × 10⁶ as an int, without the Decimal.

    round(a, 6) is the double nearest to n/10⁶, so times 10⁶ it is within far less than
    ½ of n for any activity this side of a million; beyond that, or negative, None."""
    if not 0 <= activity < 1e6:
        return None
    return round(round(activity, 6) * 1_000_000)


def _half_even(numerator: int, step: int) -> int:
    """numerator / step rounded half to even (Decimal.quantize's default), for numerator ≥ 0."""
    q, r = divmod(numerator, step)
    return q + 1 if 2 * r > step or (2 * r == step and q % 2) else q


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

    def __post_init__(self) -> None:
        # Integer forms (None: a price with more than four decimals, kept in Decimal).
        price = _scaled(Decimal(self.price), ALLOC_PLACES)
        self.alloc_units = None if price is None else price * self.units * self.minutes
        self.used_units = None
        if self.alloc_units is not None:
            if self.activity is None or not self.is_gpu:
                self.used_units = self.alloc_units * 10 ** (USED_PLACES - ALLOC_PLACES)
            else:
                act = _activity_millionths(self.activity)
                if act is not None:
                    self.used_units = _half_even(self.alloc_units * act, _USED_STEP)

    @property
    def allocated(self) -> Decimal:
        """Price-minutes."""
        if self.alloc_units is not None:
            return Decimal(self.alloc_units).scaleb(-ALLOC_PLACES)
        return self.price * self.units * self.minutes

    @property
    def used(self) -> Decimal:
        if self.used_units is not None:
            return Decimal(self.used_units).scaleb(-USED_PLACES)
        if self.activity is None or not self.is_gpu:
            return self.allocated
        return (self.allocated * Decimal(str(round(self.activity, 6)))).quantize(Decimal("0.000001"))

    @property
    def idle(self) -> Decimal:
        return self.allocated - self.used

    @property
    def gpu_hours(self) -> Fraction:
        return self.share * self.units * self.minutes / 60 if self.is_gpu else Fraction(0)


def _runs(workloads: Iterable[tuple[int, datetime | None, datetime | None]], now: datetime):
    """(id, started_at, finished_at) of workloads → each one's charged intervals: earlier runs
    from WorkloadRun, the current one from the row."""
    workloads = list(workloads)
    earlier: dict[int, dict[datetime, datetime | None]] = defaultdict(dict)
    for wid, started, finished in WorkloadRun.objects.filter(workload__in=[w[0] for w in workloads]).values_list(
        "workload_id", "started_at", "finished_at"
    ):
        earlier[wid][started] = finished
    runs = {}
    for pk, current_start, current_end in workloads:
        spans = dict(earlier.get(pk, {}))
        if current_start is not None:
            spans[current_start] = current_end
        intervals = []
        for started, finished in sorted(spans.items()):
            if finished is None and current_start != started:
                continue  # an earlier run whose end was never recorded: charge nothing rather than forever
            intervals.append(held_interval(started, finished, now))
        runs[pk] = intervals
    return runs


def _scales(endpoint_ids: list[int], end: datetime) -> dict[int, list[tuple[datetime, int]]]:
    """(time, replicas) of each endpoint's recorded replica counts before ``end``, oldest first (one query)."""
    found: dict[int, list[tuple[datetime, int]]] = defaultdict(list)
    if not endpoint_ids:
        return found
    for wid, at, replicas in (
        WorkloadScale.objects.filter(workload__in=endpoint_ids, started_at__lt=end)
        .order_by("workload_id", "started_at", "id")
        .values_list("workload_id", "started_at", "replicas")
    ):
        found[wid].append((at, replicas))
    return found


FAR_PAST = datetime(1970, 1, 1, tzinfo=UTC)
FAR_FUTURE = datetime(9999, 1, 1, tzinfo=UTC)


def replica_pieces(scales: list[tuple[datetime, int]]) -> list[tuple[datetime, datetime, int | None]]:
    """Minute-aligned pieces [from, to) covering all time, each with the replicas charged (pure).

    ``scales``: (time, count) observations, oldest first; a count holds until the next one.
    Touched minutes: a minute in which an observation was made is charged at the largest
    count that held at any instant of it. None: no observation yet (the caller charges
    ``min_replicas``).
    """
    pieces: list[tuple[datetime, datetime, int | None]] = []
    held: int | None = None  # the count that holds at the end of the last piece
    edge = FAR_PAST
    i = 0
    while i < len(scales):
        minute = floor_minute(scales[i][0])
        inside = []
        while i < len(scales) and floor_minute(scales[i][0]) == minute:
            inside.append(scales[i])
            i += 1
        if edge < minute:
            pieces.append((edge, minute, held))
        counts = [r for _, r in inside]
        if held is not None and inside[0][0] != minute:
            counts.append(held)  # the earlier count held for the first seconds of this minute
        pieces.append((minute, minute + MINUTE, max(counts)))
        held, edge = inside[-1][1], minute + MINUTE
    pieces.append((edge, FAR_FUTURE, held))
    return pieces


def _between(start: datetime, end: datetime, workloads=None):
    qs = Workload.objects.all() if workloads is None else workloads
    overlaps = Q(finished_at__isnull=True) | Q(finished_at__gte=start - MINUTE)
    earlier = WorkloadRun.objects.filter(overlaps, started_at__lt=end).values("workload_id")
    return qs.filter((Q(started_at__lt=end) & overlaps) | Q(pk__in=earlier))


def workloads_between(start: datetime, end: datetime, workloads=None):
    """Workloads that may have held GPUs in [start, end): one query, related rows joined.

    The workload's own run, or an earlier one from ``WorkloadRun`` (a subquery, not a
    join, so no DISTINCT over every column). Fields no cost needs are deferred.
    """
    return _between(start, end, workloads).select_related("team", "created_by", "offering").defer(*HEAVY_FIELDS)


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


def _line_fields() -> tuple[str, ...]:
    return (
        "pk",
        "name",
        "team_id",
        "team__slug",
        "created_by_id",
        f"created_by__{get_user_model().USERNAME_FIELD}",
        "offering_id",
        "offering__slug",
        "offering__share_numerator",
        "offering__share_denominator",
        "offering__gpu_model",
        "offering__mig_profile",
        "offering__pool",
        "offering__kind",
        "offering__price_per_hour",
        "kind",
        "gpus_per_replica",
        "replicas",
        "max_replicas",
        "started_at",
        "finished_at",
    )


def lines(start: datetime, end: datetime, workloads=None, now: datetime | None = None) -> list[Line]:
    """Per workload per day cost lines for [start, end) (minute-aligned). Four queries (three
    when no endpoint is among the workloads): the workloads, their earlier runs, their
    measured activity, and the endpoints' replica counts.

    An endpoint gets one line per day and number of units it ran at that day (see the
    rules at the top); every other workload one line per day.

    Workloads are read as plain tuples, not model instances: a 90-day report of a few
    thousand workloads spent most of its time building models it read five fields of.
    """
    now = now or timezone.now()
    end = min(end, ceil_minute(now))
    if end <= start:
        return []
    rows = list(_between(start, end, workloads).values_list(*_line_fields()))
    runs = _runs(((r[0], r[19], r[20]) for r in rows), now)
    scales = _scales([r[0] for r in rows if r[15] == Kind.ENDPOINT], end)
    activity = {
        (wid, day): (act / n if n else None)
        for wid, day, act, n in WorkloadDay.objects.filter(
            workload__in=[r[0] for r in rows], day__gte=start.date(), day__lt=(end + DAY).date()
        ).values_list("workload_id", "day", "activity_minutes", "device_minutes")
    }
    out: list[Line] = []
    for (
        pk,
        name,
        team_id,
        team_slug,
        user_id,
        username,
        offering_id,
        offering_slug,
        share_num,
        share_den,
        gpu_model,
        mig_profile,
        pool,
        offering_kind,
        price,
        kind,
        per_replica,
        replicas,
        max_replicas,
        _,
        _,
    ) in rows:
        share = Fraction(share_num, share_den or 1)
        gpu_class = f"{gpu_model}/{mig_profile}" if mig_profile else gpu_model
        # Replicas charged over time: an endpoint's observed counts (min_replicas before the
        # first), a training run's nodes throughout.
        # The reconcile caps what it records at max_replicas plus the canary's replicas then;
        # no canary runs more than max_replicas, so twice that bounds any count.
        pieces = (
            [(lo, hi, replicas if r is None else min(r, 2 * max_replicas)) for lo, hi, r in replica_pieces(scales[pk])]
            if kind == Kind.ENDPOINT and pk in scales
            else [(FAR_PAST, FAR_FUTURE, replicas)]
        )
        per_day: dict[tuple[date, int], int] = defaultdict(int)
        for interval in runs[pk]:
            for piece_lo, piece_hi, count in pieces:
                lo, hi = max(interval[0], start, piece_lo), min(interval[1], end, piece_hi)
                d = lo.date()
                while lo < hi:
                    boundary = min(day_start(d) + DAY, hi)
                    per_day[(d, count)] += int((boundary - lo) / MINUTE)
                    lo, d = boundary, d + DAY
        for (d, count), minutes in sorted(per_day.items()):
            units = per_replica * count
            if minutes <= 0 or units <= 0:
                continue
            out.append(
                Line(
                    workload_id=pk,
                    workload_name=name,
                    team_id=team_id,
                    team_slug=team_slug,
                    user_id=user_id,
                    username=username,
                    offering_id=offering_id,
                    offering_slug=offering_slug,
                    gpu_class=gpu_class or "cpu",
                    pool=pool,
                    is_gpu=offering_kind != "cpu",
                    day=d,
                    units=units,
                    share=share,
                    minutes=minutes,
                    price=Decimal(price),
                    activity=activity.get((pk, d)),
                )
            )
    return out


# --- totals --------------------------------------------------------------------------------------


class Total:
    """Lines added up: ints while adding, a Decimal (or Fraction) once when read."""

    def __init__(self, key: object, label: str) -> None:
        self.key, self.label = key, label
        self.minutes = 0
        self.workloads: set = set()
        self._alloc_units = self._used_units = 0
        self._alloc_rest = self._used_rest = ZERO  # lines whose price has more than four decimals
        self._share_minutes: dict[int, int] = defaultdict(int)  # share denominator → numerator × minutes

    @property
    def allocated(self) -> Decimal:  # price-minutes
        return Decimal(self._alloc_units).scaleb(-ALLOC_PLACES) + self._alloc_rest

    @property
    def used(self) -> Decimal:
        return Decimal(self._used_units).scaleb(-USED_PLACES) + self._used_rest

    @property
    def gpu_hours(self) -> Fraction:
        return sum((Fraction(n, d * 60) for d, n in self._share_minutes.items()), Fraction(0))

    @property
    def idle(self) -> Decimal:
        return self.allocated - self.used

    @property
    def activity(self) -> float | None:
        allocated = self.allocated
        return float(self.used / allocated) if allocated else None

    def add(self, line: Line) -> None:
        if line.alloc_units is not None:
            self._alloc_units += line.alloc_units
        else:
            self._alloc_rest += line.allocated
        if line.used_units is not None:
            self._used_units += line.used_units
        else:
            self._used_rest += line.used
        self.minutes += line.minutes
        if line.is_gpu:
            self._share_minutes[line.share.denominator] += line.share.numerator * line.units * line.minutes
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
        total = totals.get(key)
        if total is None:
            total = totals[key] = Total(key, label)
        total.add(ln)
    if by == "day":
        return sorted(totals.values(), key=lambda t: (t.label, str(t.key)))
    return sorted(totals.values(), key=lambda t: (-t.allocated, str(t.key)))


def workload_cost(workload: Workload, now: datetime | None = None) -> Total:
    """One workload's cost so far (all its runs)."""
    now = now or timezone.now()
    total = Total(workload.pk, workload.name)
    far_past = datetime(2000, 1, 1, tzinfo=UTC)
    for ln in lines(far_past, ceil_minute(now), Workload.objects.filter(pk=workload.pk), now):
        total.add(ln)
    return total


def team_month_spend(team, now: datetime | None = None) -> Decimal:
    """Price-minutes the team was allocated this calendar month (UTC), all offerings."""
    now = now or timezone.now()
    start = month_start(now)
    return sum((ln.allocated for ln in lines(start, next_month(start), Workload.objects.filter(team=team), now)), ZERO)


# --- the cluster ----------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def _pools(path: str, mtime: float) -> tuple[tuple[str, str, int, Decimal], ...]:
    profile = load_profile(path)
    return tuple(
        (p.name, p.gpu_model.key, p.nodes * p.gpus_per_node, p.gpu_price_per_hour)
        for p in profile.pools.values()
        if p.has_gpus
    )


def gpu_pools(profile_path: str | Path | None = None) -> tuple[tuple[str, str, int, Decimal], ...]:
    """(pool, GPU model, GPUs, price per GPU-hour) of every GPU pool of the cluster profile."""
    path = Path(profile_path or settings.CLUSTER_PROFILE)
    return _pools(str(path), path.stat().st_mtime)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    model: str  # GPU model key
    nodes: int
    gpus_per_node: int
    price: Decimal  # per GPU-hour
    mig_profiles: tuple[str, ...]


@lru_cache(maxsize=4)
def _specs(path: str, mtime: float) -> tuple[PoolSpec, ...]:
    profile = load_profile(path)
    return tuple(
        PoolSpec(p.name, p.gpu_model.key, p.nodes, p.gpus_per_node, p.gpu_price_per_hour, tuple(p.mig_layout))
        for p in profile.pools.values()
        if p.has_gpus
    )


def pool_specs(profile_path: str | Path | None = None) -> tuple[PoolSpec, ...]:
    path = Path(profile_path or settings.CLUSTER_PROFILE)
    return _specs(str(path), path.stat().st_mtime)


def pool_of_node(hostname: str, gpu_class: str, specs: Iterable[PoolSpec], taken: Mapping[str, int]):
    """The GPU pool a sampled node belongs to, or None. Pure.

    1. A pool whose name appears in the node name as whole dash-separated words (node
       pools usually name their nodes after themselves: ``h100-dra-0``, ``gke-x-h100-pool-ab12``);
       the longest such name wins.
    2. Otherwise the pools of the node's GPU model (and MIG profile): the first, in profile
       order, that has fewer nodes seen (``taken``) than it declares; else the first of them.
    """
    specs = list(specs)
    padded = f"-{hostname}-"
    named = [p for p in specs if f"-{p.name}-" in padded]
    if named:
        return max(named, key=lambda p: len(p.name))
    model, _, profile = gpu_class.partition("/")
    fits = [p for p in specs if p.model == model and (profile in p.mig_profiles if profile else not p.mig_profiles)]
    for p in fits:
        if taken.get(p.name, 0) < p.nodes:
            return p
    return fits[0] if fits else None


@dataclass
class ClusterAccount:
    """The cluster's GPU cost over [start, end) and who it is attributed to (price-minutes).

    ``since`` is when the account really starts: the first sample of any node, when later
    than ``start``; None when no node was ever sampled (then nothing is counted).
    """

    start: datetime
    end: datetime
    cost: Decimal
    by_team: dict[int, Decimal]
    by_pool: dict[str, tuple[Decimal, Decimal]]  # pool → (cost, allocated)
    team_slugs: dict[int, str]
    since: datetime | None = None
    node_since: dict[str, datetime] = field(default_factory=dict)  # node → first sampled minute

    @property
    def starts_late(self) -> bool:
        return self.since is None or self.since > self.start

    @property
    def allocated(self) -> Decimal:
        return sum(self.by_team.values(), ZERO)

    @property
    def idle(self) -> Decimal:
        return self.cost - self.allocated

    def shown(self) -> dict:
        """Team slugs and 'cluster idle' → cents that add up to the shown cluster cost."""
        parts = {
            self.team_slugs[t]: pm for t, pm in sorted(self.by_team.items(), key=lambda kv: self.team_slugs[kv[0]])
        }
        parts["cluster idle"] = self.idle
        return split_cents(parts, self.cost)


def cluster_account(start: datetime, end: datetime, now: datetime | None = None, profile_path=None) -> ClusterAccount:
    """The account of [start, end): each sampled node's cost from its first sample, and what
    teams were allocated from the first sample of any node (see the rules at the top)."""
    now = now or timezone.now()
    end = min(end, ceil_minute(now))
    specs = pool_specs(profile_path)
    by_pool = {p.name: (ZERO, ZERO) for p in specs}
    taken: dict[str, int] = defaultdict(int)
    node_since: dict[str, datetime] = {}
    # Every node ever seen, oldest first, so a node's pool does not depend on the period.
    for hostname, gpu_class, first in NodeSeen.objects.order_by("first_sample_at", "hostname").values_list(
        "hostname", "gpu_class", "first_sample_at"
    ):
        spec = pool_of_node(hostname, gpu_class, specs, taken)
        if spec is None:
            continue
        taken[spec.name] += 1
        node_start = max(start, floor_minute(first))
        node_since[hostname] = floor_minute(first)
        minutes = max(int((end - node_start) / MINUTE), 0)
        cost, allocated = by_pool[spec.name]
        by_pool[spec.name] = (cost + Decimal(spec.gpus_per_node) * spec.price * minutes, allocated)
    since = max(start, min(node_since.values())) if node_since else None
    by_team: dict[int, Decimal] = defaultdict(lambda: ZERO)
    slugs = {}
    for ln in lines(since, end, None, now) if since is not None else ():
        if not ln.is_gpu:
            continue
        by_team[ln.team_id] += ln.allocated
        slugs[ln.team_id] = ln.team_slug
        cost, allocated = by_pool.get(ln.pool, (ZERO, ZERO))
        by_pool[ln.pool] = (cost, allocated + ln.allocated)
    cost = sum((c for c, _ in by_pool.values()), ZERO)
    return ClusterAccount(start, end, cost, dict(by_team), by_pool, slugs, since, node_since)


def measured_activity(workload_ids: Iterable[int], start: date, end: date) -> dict[int, float]:
    """Mean measured activity per workload over days [start, end)."""
    out = {}
    for wid, act, n in (
        WorkloadDay.objects.filter(workload__in=list(workload_ids), day__gte=start, day__lt=end)
        .values("workload_id")
        .annotate(a=Sum("activity_minutes"), n=Sum("device_minutes"))
        .values_list("workload_id", "a", "n")
    ):
        if n:
            out[wid] = act / n
    return out
