"""Ingest one day of samples for 64 GPUs through the rollup code, against a bare COPY.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpu_portal .venv/bin/python bench/telemetry_bench.py

Creates its own database (``<name>_bench_telemetry``), migrates it, and drops it at the
end. Figures for the same 1440 × 64 minute rows:

- ``usage.telemetry.ingest``, one call per minute as the live sampler does it: read the
  rows it replaces, upsert the minute rows, add the differences to the workload-day
  and team hour/day rollups, in one transaction;
- ``usage.telemetry.ingest_many`` as a backfill does it (``telemetry.backfill``: an hour
  of ticks per transaction), and the whole day in one; the rollups are checked to be
  identical to the per-minute ones;
- a bare ``COPY`` of the same rows into a copy of the minute table (same indexes).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from benchdb import ROOT, portal_database

GPUS, MINUTES = 64, 1440


def main() -> None:
    with portal_database("bench_telemetry"):
        run()


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from jobs.models import State, Workload
    from portal.catalog import sync_catalog
    from portal.cluster_profile import load_profile
    from portal.models import Offering, Team
    from usage import telemetry
    from usage.models import GpuMinute, TeamUsage, WorkloadDay
    from usage.sources import GpuSample

    sync_catalog(load_profile(ROOT / "deploy" / "cluster-profiles" / "demo.yaml"))
    team = Team.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create_user("bench")
    h100 = Offering.objects.get(slug="h100-80gb")
    day = datetime(2026, 3, 2, tzinfo=UTC)
    workloads = [
        Workload.objects.create(
            team=team,
            created_by=user,
            kind="training",
            name=f"w{i}",
            offering=h100,
            state=State.RUNNING,
            started_at=day,
        )
        for i in range(GPUS)
    ]
    owners = {(team.namespace, f"pod-{i}"): w.pk for i, w in enumerate(workloads)}

    def samples(minute: int) -> list[GpuSample]:
        t = day + timedelta(minutes=minute, seconds=15)
        return [
            GpuSample(
                time=t,
                uuid=f"GPU-{i:04d}",
                model_name="NVIDIA H100 80GB HBM3",
                hostname=f"h100-{i // 8}",
                namespace=team.namespace,
                pod=f"pod-{i}",
                activity=((i * 7 + minute) % 100) / 100,
                fb_used_mib=1000 + i * 10 + minute % 50,
                fb_free_mib=80000,
                power_w=100 + i,
            )
            for i in range(GPUS)
        ]

    all_samples = [samples(m) for m in range(MINUTES)]
    started = time.perf_counter()
    for minute_samples in all_samples:
        telemetry.ingest(minute_samples, owners)
    ingest_s = time.perf_counter() - started
    rows = GpuMinute.objects.count()
    assert rows == GPUS * MINUTES, rows
    assert WorkloadDay.objects.count() == GPUS and TeamUsage.objects.filter(period="hour").count() == 24

    def rollups():
        return (
            sorted(WorkloadDay.objects.values_list("workload_id", "device_minutes", "activity_minutes", "energy_wh")),
            sorted(TeamUsage.objects.values_list("period", "start", "device_minutes", "busy_gpu_minutes", "energy_wh")),
        )

    def wipe():
        for model in (GpuMinute, WorkloadDay, TeamUsage):
            model.objects.all().delete()

    per_minute = rollups()
    batched = {}
    for label, size in (("an hour per transaction", 60), ("the day in one transaction", MINUTES)):
        wipe()
        started = time.perf_counter()
        for i in range(0, MINUTES, size):
            telemetry.ingest_many(all_samples[i : i + size], owners)
        batched[label] = time.perf_counter() - started
        assert GpuMinute.objects.count() == rows and rollups() == per_minute, label

    # The same rows, bare: COPY into a table shaped like the minute table, indexes included.
    table = GpuMinute._meta.db_table
    with connection.cursor() as cur:
        cur.execute(f"CREATE TABLE bench_copy (LIKE {table} INCLUDING ALL)")
        columns = telemetry.MINUTE_COLUMNS
        values = [
            (
                s.time.replace(second=0),
                s.device,
                s.namespace,
                s.pod,
                "H100-80GB",
                s.hostname,
                owners[(s.namespace, s.pod)],
                team.pk,
                user.pk,
                h100.pk,
                1.0,
                s.activity,
                int(s.fb_used_mib),
                int(s.fb_used_mib + s.fb_free_mib),
                s.power_w,
                1,
                1,
            )
            for minute_samples in all_samples
            for s in minute_samples
        ]
        raw = cur.cursor  # psycopg's cursor under Django's wrapper
        started = time.perf_counter()
        with raw.copy(f"COPY bench_copy ({', '.join(columns)}) FROM STDIN") as copy:
            for row in values:
                copy.write_row(row)
        copy_s = time.perf_counter() - started
        cur.execute("SELECT count(*) FROM bench_copy")
        assert cur.fetchone()[0] == rows
        cur.execute("DROP TABLE bench_copy")

    print(f"telemetry_bench: {rows} minute rows ({GPUS} GPUs × {MINUTES} minutes)")
    print(
        f"  usage.telemetry.ingest, one call per minute: {ingest_s:7.2f} s  {rows / ingest_s:10.0f} rows/s"
        f"  ({ingest_s / MINUTES * 1000:.1f} ms per tick, rollups included)"
    )
    for label, seconds in batched.items():
        print(
            f"  ingest_many, {label:32} {seconds:7.2f} s  {rows / seconds:10.0f} rows/s"
            f"  ({seconds / copy_s:.1f}x COPY; rollups identical to per-minute)"
        )
    print(f"  bare COPY of the same rows:                  {copy_s:7.2f} s  {rows / copy_s:10.0f} rows/s")
    print(f"  ratio ingest/COPY: {ingest_s / copy_s:.1f}x slower (per minute)")


if __name__ == "__main__":
    main()
