"""GPU samples → attributed minute rows → hourly and daily rollups, in one transaction.

One tick (``usage.sample_gpus``, every minute):

1. Collect samples from the configured source (``usage.sources``).
2. List the portal's pods once, with its label selector, and map (namespace, pod) to
   the workload id label. A sample on a pod the portal does not manage is kept as
   *unattributed* usage of the cluster; a sample with no pod is a free device and only
   updates the latest readings.
3. ``ingest``: under a lock, read the minute rows the tick would replace, upsert the
   new ones, and add the *difference* to the rollups (workload-day, team-class-hour,
   team-class-day). Running a tick twice for the same minute therefore changes nothing
   the second time (the difference is zero), and a re-run with newer numbers corrects
   the rollups instead of counting twice. That keeps the rollups incremental (a tick
   touches only its own rows), where recomputing an hour or a day from minute rows would
   make every tick cost as much as the whole day so far.

Peaks (memory, activity) are kept with GREATEST, which a correction cannot lower; a
peak is a "highest ever seen" figure, so that is the intended reading.
"""

from __future__ import annotations

import logging
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from jobs.kube.labels import WORKLOAD_ID_LABEL, managed_selector
from jobs.models import Workload
from portal.gpus import GPU_MODELS
from usage.models import DeviceReading, GpuMinute, NodeSeen, Period, TeamUsage, WorkloadDay
from usage.sources import GpuSample, Source

log = logging.getLogger(__name__)

_MODEL_BY_NVML = {m.nvml_name: m for m in GPU_MODELS.values()}
_MODEL_BY_NVML.update({m.nvml_name.replace(" ", "-"): m for m in GPU_MODELS.values()})
LOCK_KEY = zlib.crc32(b"usage.telemetry.ingest")
CHUNK = 1000  # rows per INSERT: PostgreSQL takes at most 65535 parameters per statement


def minute_of(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def gpu_class_of(model_name: str, mig_profile: str = "") -> str:
    """DCGM's modelName (+ MIG profile) → the catalog's GPU class (``A100-80GB/1g.10gb``)."""
    model = _MODEL_BY_NVML.get(model_name)
    key = model.key if model else (model_name or "unknown")
    return f"{key}/{mig_profile}" if mig_profile else key


def mig_share(model_name: str, mig_profile: str) -> float | None:
    model = _MODEL_BY_NVML.get(model_name)
    if model is None or mig_profile not in model.mig_profiles:
        return None
    return float(model.mig_share(mig_profile))


@dataclass(frozen=True)
class Owner:
    """Who a device series belongs to, from the workload its pod carries."""

    workload_id: int
    team_id: int
    user_id: int | None
    offering_id: int | None
    share: float  # of one physical GPU, per unit of the offering


@dataclass
class Row:
    """One minute row, before it is written."""

    minute: datetime
    device: str
    namespace: str
    pod: str
    gpu_class: str
    hostname: str
    owner: Owner | None
    share: float
    activity: float
    fb_used_mib: int
    fb_total_mib: int
    power_w: float
    samples: int
    sharers: int = 1

    @property
    def key(self) -> tuple:
        return (self.device, self.namespace, self.pod, self.minute)

    @property
    def own_activity(self) -> float:
        """The activity attributed to this series' pod: the GPU's, split equally between its sharers.

        dcgm-exporter measures a time-sliced GPU as a whole and repeats that reading on each
        sharing pod's series; without the split, two pods on a GPU busy at 90 % would both
        count as 90 % busy (and be charged as used) while at most one of them was.
        """
        return self.activity / max(self.sharers, 1)


def pod_owners(pods: Iterable[Mapping]) -> dict[tuple[str, str], int]:
    """(namespace, pod name) → workload id, from the portal's workload-id label."""
    owners = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        raw = (meta.get("labels") or {}).get(WORKLOAD_ID_LABEL, "")
        if raw.isdigit():
            owners[(meta.get("namespace", ""), meta.get("name", ""))] = int(raw)
    return owners


def owners_for(workload_ids: Iterable[int]) -> dict[int, Owner]:
    rows = Workload.objects.filter(pk__in=set(workload_ids)).values_list(
        "pk", "team_id", "created_by_id", "offering_id", "offering__share_numerator", "offering__share_denominator"
    )
    return {pk: Owner(pk, team, user, off, num / den if den else 1.0) for pk, team, user, off, num, den in rows}


def build_rows(
    samples: Iterable[GpuSample], pod_workload: Mapping[tuple[str, str], int], owners: Mapping[int, Owner]
) -> tuple[list[Row], list[Row]]:
    """Samples → (minute rows of devices held by pods, readings of free devices). Pure.

    A device's share of a GPU: the owner's offering share when the portal knows the
    pod; for a MIG instance, its profile's compute slices; for an unattributed pod on a
    time-sliced GPU, an equal split between the pods seen on that GPU. ``sharers`` is the
    number of pods seen on the row's physical GPU (1 for a MIG instance): more than one
    only when the exporter reports each sharer (``KUBERNETES_VIRTUAL_GPUS``).
    """
    samples = list(samples)
    pods_per_gpu: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for s in samples:
        if s.pod and not s.gpu_instance:
            pods_per_gpu[s.uuid].add((s.namespace, s.pod))
    held, free = [], []
    for s in samples:
        wid = pod_workload.get((s.namespace, s.pod)) if s.pod else None
        owner = owners.get(wid) if wid is not None else None
        if owner is not None:
            share = owner.share
        elif s.gpu_instance:
            share = mig_share(s.model_name, s.mig_profile) or 1.0
        else:
            share = 1.0 / max(len(pods_per_gpu.get(s.uuid, ())), 1)
        row = Row(
            minute=minute_of(s.time),
            device=s.device,
            namespace=s.namespace,
            pod=s.pod,
            gpu_class=gpu_class_of(s.model_name, s.mig_profile),
            hostname=s.hostname,
            owner=owner,
            share=share,
            activity=s.activity,
            fb_used_mib=int(round(s.fb_used_mib)),
            fb_total_mib=int(round(s.fb_used_mib + s.fb_free_mib)),
            power_w=s.power_w,
            samples=s.samples,
            sharers=1 if s.gpu_instance or not s.pod else max(len(pods_per_gpu[s.uuid]), 1),
        )
        (held if s.pod else free).append(row)
    return held, free


@dataclass
class IngestReport:
    samples: int = 0
    minute_rows: int = 0
    unattributed: int = 0
    free_devices: int = 0
    replaced: int = 0
    errors: list[str] = field(default_factory=list)


def tick(source: Source, list_pods, now: datetime | None = None) -> IngestReport:
    """One sampling tick: collect, attribute, ingest. ``list_pods(selector)`` lists pods."""
    now = now or timezone.now()
    samples = source.collect(now)
    owners_by_pod = pod_owners(list_pods(managed_selector()))
    return ingest(samples, owners_by_pod, snapshot_at=now)


def ingest(
    samples: Iterable[GpuSample],
    pod_workload: Mapping[tuple[str, str], int],
    snapshot_at: datetime | None = None,
) -> IngestReport:
    """Store samples as minute rows and roll them up. Idempotent per (series, minute).

    ``snapshot_at`` (a live tick) also replaces the latest device readings; a backfill
    of old minutes leaves them alone.
    """
    samples = list(samples)
    owners = owners_for(set(pod_workload.values()))
    held, free = build_rows(samples, pod_workload, owners)
    report = IngestReport(samples=len(samples), minute_rows=len(held), free_devices=len(free))
    report.unattributed = sum(1 for r in held if r.owner is None)
    with transaction.atomic():
        _lock()
        old = _existing(held)
        report.replaced = len(old)
        if held:
            _write_minutes(held)
        _roll_up(held, old)
        _record_nodes(held + free)
        if snapshot_at is not None:
            _replace_readings(held + free, snapshot_at)
    return report


def ingest_many(ticks: Iterable[Iterable[GpuSample]], pod_workload: Mapping[tuple[str, str], int]) -> IngestReport:
    """Backfill: many ticks' samples in one transaction, with what one ``ingest`` per tick
    (in the same order) would leave, to the bit, but a few statements instead of a
    transaction and five statements per tick.

    1. Build each tick's rows as ``ingest`` does (sharers and shares are per tick).
    2. Read the minute rows they replace once; walk the ticks in order, each replacing
       what the one before left, and keep each tick's rollup differences.
    3. Read the rollup rows those differences touch and fold the differences into them
       tick by tick, exactly as the database would have added them one tick at a time
       (floating-point sums depend on the order of additions).
    4. Write the last version of every minute row, and each rollup row's final values.

    Latest device readings are left alone (this is history, not "now").
    """
    owners = owners_for(set(pod_workload.values()))
    report = IngestReport()
    built: list[tuple[list[Row], list[Row]]] = []
    for samples in ticks:
        samples = list(samples)
        held, free = build_rows(samples, pod_workload, owners)
        built.append((held, free))
        report.samples += len(samples)
        report.minute_rows += len(held)
        report.free_devices += len(free)
        report.unattributed += sum(1 for r in held if r.owner is None)
    all_held = [r for held, _ in built for r in held]
    with transaction.atomic():
        _lock()
        current = {r.key: r for r in _existing(all_held)}
        differences = []
        for held, _ in built:
            old = [current[r.key] for r in held if r.key in current]
            report.replaced += len(old)
            differences.append(_differences(held, old))
            current.update((r.key, r) for r in held)
        latest = {r.key: current[r.key] for r in all_held}
        if latest:
            _write_minutes(list(latest.values()), bulk=True)
        for model, key, fixed, added, peaks, pick, as_rows in (
            (WorkloadDay, WD_KEY, WD_FIXED, WD_ADDED, WD_PEAKS, 0, _wd_rows),
            (TeamUsage, TU_KEY, TU_FIXED, TU_ADDED, TU_PEAKS, 1, _tu_rows),
        ):
            per_tick = [d[pick] for d in differences]
            stored = _stored_rollups(model, key, added + peaks, set().union(*per_tick) if per_tick else set())
            final = _fold(stored, per_tick, added, peaks)
            _upsert(model, key, fixed + added + peaks, as_rows(final), {c: "replace" for c in added + peaks})
        _record_nodes(all_held + [r for _, free in built for r in free])
    return report


def backfill(source: Source, list_pods, start: datetime, end: datetime, batch_minutes: int = 60) -> IngestReport:
    """Ticks at every minute of [start, end) from ``source`` (Prometheus keeps history),
    ingested ``batch_minutes`` ticks per transaction: a live tick then waits for the lock at
    most one batch. Pods are attributed by the portal's pods listed now, so pods gone since
    count as unattributed (the same as a live tick that missed their labels)."""
    owners_by_pod = pod_owners(list_pods(managed_selector()))
    total = IngestReport()
    t = minute_of(start)
    while t < end:
        stop = min(end, t + timedelta(minutes=batch_minutes))
        batch = []
        while t < stop:
            batch.append(source.collect(t))
            t += timedelta(minutes=1)
        r = ingest_many(batch, owners_by_pod)
        for f in ("samples", "minute_rows", "unattributed", "free_devices", "replaced"):
            setattr(total, f, getattr(total, f) + getattr(r, f))
    return total


def _stored_rollups(model, key: list[str], columns: list[str], keys: set[tuple]) -> dict[tuple, dict]:
    """The stored values of ``columns`` of the rollup rows with these keys."""
    if not keys:
        return {}
    narrowed = model.objects.filter(**{f"{k}__in": {t[i] for t in keys} for i, k in enumerate(key)})
    out = {}
    for values in narrowed.values_list(*key, *columns):
        k = tuple(values[: len(key)])
        if k in keys:
            out[k] = dict(zip(columns, values[len(key) :], strict=True))
    return out


def _fold(stored: dict[tuple, dict], per_tick: list[dict[tuple, dict]], added: list[str], peaks: list[str]):
    """Apply each tick's differences in order, as INSERT … ON CONFLICT would have: the first
    one inserts (all its columns), later ones add their sums and raise the peaks."""
    final: dict[tuple, dict] = {}
    for diffs in per_tick:
        for k, d in diffs.items():
            state = final.get(k)
            if state is None and k in stored:
                state = final[k] = {**d, **stored[k]}  # the row exists: its fixed columns are kept as stored
            elif state is None:
                final[k] = dict(d)
                continue
            for c in added:
                state[c] = state[c] + d[c]
            for c in peaks:
                state[c] = max(state[c], d[c])
    return final


# --- storage ------------------------------------------------------------------------------------


def _lock() -> None:
    """Serialise ingests: two ticks of one minute must not both read 'no old row'."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
    # SQLite (development): transactions are IMMEDIATE, so they already serialise.


MINUTE_COLUMNS = [
    "minute",
    "device",
    "namespace",
    "pod",
    "gpu_class",
    "hostname",
    "workload_id",
    "team_id",
    "user_id",
    "offering_id",
    "share",
    "activity",
    "fb_used_mib",
    "fb_total_mib",
    "power_w",
    "samples",
    "sharers",
]


def _existing(rows: list[Row]) -> list[Row]:
    if not rows:
        return []
    keys = {r.key for r in rows}
    found = GpuMinute.objects.filter(
        minute__in={r.minute for r in rows}, device__in={r.device for r in rows}
    ).values_list(*MINUTE_COLUMNS)
    old = []
    for minute, device, ns, pod, cls, host, wid, team, user, off, share, act, fb, fbt, power, n, sharers in found:
        if (device, ns, pod, minute) not in keys:
            continue
        owner = Owner(wid, team, user, off, share) if wid else None
        old.append(Row(minute, device, ns, pod, cls, host, owner, share, act, fb, fbt, power, n, sharers))
    return old


MINUTE_KEY = ["device", "namespace", "pod", "minute"]


def _minute_values(r: Row) -> tuple:
    """A row's values in ``MINUTE_COLUMNS`` order."""
    o = r.owner
    return (
        r.minute,
        r.device,
        r.namespace,
        r.pod,
        r.gpu_class,
        r.hostname,
        o.workload_id if o else None,
        o.team_id if o else None,
        o.user_id if o else None,
        o.offering_id if o else None,
        r.share,
        r.activity,
        r.fb_used_mib,
        r.fb_total_mib,
        r.power_w,
        r.samples,
        r.sharers,
    )


def _write_minutes(rows: list[Row], bulk: bool = False) -> None:
    """Upsert minute rows. ``bulk`` (a backfill's thousands of rows, on PostgreSQL): COPY them
    into a scratch table and upsert from it in one statement, which skips building and
    parsing one text array per column (most of the cost of a big ``unnest``)."""
    if bulk and connection.vendor == "postgresql":
        _copy_upsert_minutes(rows)
        return
    _upsert(
        GpuMinute,
        MINUTE_KEY,
        [c for c in MINUTE_COLUMNS if c not in MINUTE_KEY],
        [dict(zip(MINUTE_COLUMNS, _minute_values(r), strict=True)) for r in rows],
        {c: "replace" for c in MINUTE_COLUMNS if c not in MINUTE_KEY},
    )


def _copy_upsert_minutes(rows: list[Row]) -> None:
    table = connection.ops.quote_name(GpuMinute._meta.db_table)
    columns = ", ".join(MINUTE_COLUMNS)
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in MINUTE_COLUMNS if c not in MINUTE_KEY)
    with connection.cursor() as cur:
        # Same column types as the minute table, no defaults, gone at commit.
        cur.execute(f"CREATE TEMP TABLE gpu_minute_batch ON COMMIT DROP AS SELECT {columns} FROM {table} WITH NO DATA")
        with cur.cursor.copy(f"COPY gpu_minute_batch ({columns}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(_minute_values(r))
        cur.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM gpu_minute_batch "
            f"ON CONFLICT ({', '.join(MINUTE_KEY)}) DO UPDATE SET {sets}"
        )
        cur.execute("DROP TABLE gpu_minute_batch")


WD_KEY = ["workload_id", "day"]
WD_FIXED = ["team_id", "user_id", "offering_id", "gpu_class"]
WD_ADDED = ["device_minutes", "activity_minutes", "energy_wh"]
WD_PEAKS = ["peak_activity", "peak_fb_mib"]
TU_KEY = ["period", "start", "team_key", "gpu_class"]
TU_FIXED = ["team_id"]
TU_ADDED = ["device_minutes", "gpu_minutes", "busy_gpu_minutes", "energy_wh"]
TU_PEAKS = ["peak_fb_mib"]


def _roll_up(new: list[Row], old: list[Row]) -> None:
    """Add (new − old) to the workload-day and team-class-hour/day rollups."""
    workload_days, team_usage = _differences(new, old)
    _upsert_add(WorkloadDay, WD_KEY, WD_FIXED, WD_ADDED, WD_PEAKS, _wd_rows(workload_days))
    _upsert_add(TeamUsage, TU_KEY, TU_FIXED, TU_ADDED, TU_PEAKS, _tu_rows(team_usage))


def _wd_rows(workload_days: dict[tuple, dict]) -> list[dict]:
    return [{"workload_id": k[0], "day": k[1], **v} for k, v in workload_days.items()]


def _tu_rows(team_usage: dict[tuple, dict]) -> list[dict]:
    return [{"period": k[0], "start": k[1], "team_key": k[2], "gpu_class": k[3], **v} for k, v in team_usage.items()]


def _differences(new: list[Row], old: list[Row]) -> tuple[dict[tuple, dict], dict[tuple, dict]]:
    """(new − old) per workload-day and per team-class-hour/day; peaks of the new rows. Pure."""
    workload_days: dict[tuple, dict] = {}
    team_usage: dict[tuple, dict] = {}
    for rows, sign in ((new, 1), (old, -1)):
        for r in rows:
            day = r.minute.date()
            energy = r.power_w / 60.0 / max(r.sharers, 1)  # the GPU's draw, repeated on each sharer's series
            if r.owner is not None:
                wd = workload_days.setdefault(
                    (r.owner.workload_id, day),
                    {
                        "team_id": r.owner.team_id,
                        "user_id": r.owner.user_id,
                        "offering_id": r.owner.offering_id,
                        "gpu_class": r.gpu_class,
                        "device_minutes": 0,
                        "activity_minutes": 0.0,
                        "peak_activity": 0.0,
                        "peak_fb_mib": 0,
                        "energy_wh": 0.0,
                    },
                )
                wd["device_minutes"] += sign
                wd["activity_minutes"] += sign * r.own_activity
                wd["energy_wh"] += sign * energy
                if sign > 0:
                    wd["peak_activity"] = max(wd["peak_activity"], r.own_activity)
                    wd["peak_fb_mib"] = max(wd["peak_fb_mib"], r.fb_used_mib)
            team_id = r.owner.team_id if r.owner else None
            hour = r.minute.replace(minute=0)
            midnight = hour.replace(hour=0)
            for period, start in ((Period.HOUR, hour), (Period.DAY, midnight)):
                tu = team_usage.setdefault(
                    (period.value, start, team_id or 0, r.gpu_class),
                    {
                        "team_id": team_id,
                        "device_minutes": 0,
                        "gpu_minutes": 0.0,
                        "busy_gpu_minutes": 0.0,
                        "peak_fb_mib": 0,
                        "energy_wh": 0.0,
                    },
                )
                tu["device_minutes"] += sign
                tu["gpu_minutes"] += sign * r.share
                tu["busy_gpu_minutes"] += sign * r.share * r.own_activity
                tu["energy_wh"] += sign * energy
                if sign > 0:
                    tu["peak_fb_mib"] = max(tu["peak_fb_mib"], r.fb_used_mib)
    return workload_days, team_usage


def _record_nodes(rows: list[Row]) -> None:
    """Keep each node's earliest sampled minute (a backfill of older minutes moves it back)."""
    first: dict[str, tuple[datetime, str]] = {}
    for r in rows:
        if r.hostname and (r.hostname not in first or r.minute < first[r.hostname][0]):
            first[r.hostname] = (r.minute, r.gpu_class)
    _upsert(
        NodeSeen,
        ["hostname"],
        ["first_sample_at", "gpu_class"],
        [{"hostname": h, "first_sample_at": m, "gpu_class": c} for h, (m, c) in sorted(first.items())],
        {"first_sample_at": "min"},
    )


def _upsert_add(model, key: list[str], fixed: list[str], added: list[str], peaks: list[str], rows: list[dict]) -> None:
    """Upsert adding ``added`` to the stored values and keeping the max of ``peaks``."""
    how = {c: "add" for c in added} | {c: "max" for c in peaks}
    _upsert(model, key, fixed + added + peaks, rows, how)


def _upsert(model, key: list[str], columns: list[str], rows: list[dict], how: dict[str, str]) -> None:
    """INSERT … ON CONFLICT (key) DO UPDATE: each column replaced, added to, or kept at its max or min.

    Plain SQL because the ORM's upsert can only overwrite. On PostgreSQL the rows go as
    one array per column through ``unnest``, so the statement text is the same for any
    number of rows (psycopg prepares it once) and needs one parameter per column; on
    SQLite (development) as a multi-row VALUES list, where the two-argument MAX is the
    scalar greatest.
    """
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns = key + columns
    postgres = connection.vendor == "postgresql"
    sets = []
    for c in columns[len(key) :]:
        mode = how.get(c, "keep")
        if mode == "replace":
            sets.append(f"{c} = EXCLUDED.{c}")
        elif mode == "add":
            sets.append(f"{c} = {table}.{c} + EXCLUDED.{c}")
        elif mode == "max":
            sets.append(f"{c} = {'GREATEST' if postgres else 'MAX'}({table}.{c}, EXCLUDED.{c})")
        elif mode == "min":
            sets.append(f"{c} = {'LEAST' if postgres else 'MIN'}({table}.{c}, EXCLUDED.{c})")
    action = f"DO UPDATE SET {', '.join(sets)}" if sets else "DO NOTHING"
    conflict = f"ON CONFLICT ({', '.join(key)}) {action}"
    with connection.cursor() as cur:
        if postgres:
            types = _db_types(model)
            arrays = ", ".join(f"%s::{types[c]}[]" for c in columns)
            sql = f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays}) {conflict}"
            cur.execute(sql, [[row[c] for row in rows] for c in columns])
            return
        placeholder = "(" + ", ".join(["%s"] * len(columns)) + ")"
        for i in range(0, len(rows), CHUNK // 10):
            chunk = rows[i : i + CHUNK // 10]
            sql = (
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([placeholder] * len(chunk))} {conflict}"
            )
            cur.execute(sql, [_db_value(row[c]) for row in chunk for c in columns])


def _db_types(model) -> dict[str, str]:
    return {f.column: f.db_type(connection) for f in model._meta.concrete_fields}


def _replace_readings(rows: list[Row], at: datetime) -> None:
    DeviceReading.objects.all().delete()
    DeviceReading.objects.bulk_create(
        [
            DeviceReading(
                at=at,
                device=r.device,
                gpu_class=r.gpu_class,
                mig_profile=r.gpu_class.partition("/")[2],
                hostname=r.hostname,
                namespace=r.namespace,
                pod=r.pod,
                workload_id=r.owner.workload_id if r.owner else None,
                team_id=r.owner.team_id if r.owner else None,
                share=r.share,
                activity=r.activity,
                fb_used_mib=r.fb_used_mib,
                fb_total_mib=r.fb_total_mib,
                power_w=r.power_w,
            )
            for r in rows
        ],
        batch_size=CHUNK,
    )


def stale_after() -> timedelta:
    """Readings older than this are not 'now' any more (the sampler stopped)."""
    return timedelta(minutes=5)


def _db_value(value):
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value
