"""A 90-day team spend report against a bare GROUP BY over the same rows.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpu_portal .venv/bin/python bench/spend_bench.py

Creates its own database (``<name>_bench_spend``) and drops it at the end. One team
with 2000 workloads spread over 90 days (runs of minutes to three days, 1-8 GPUs, four
offerings) and a workload-day row of measured activity for each day each ran. Timed:

- ``usage.spend.lines`` + ``group(…, "day")``: the report the API and the dashboard
  use (minute-exact allocation split at midnight, activity-weighted used cost);
- a bare SQL ``GROUP BY day`` over the workload-day rows joined to the offerings'
  prices (device-minutes × price): what a report costs with no per-run arithmetic.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta

from benchdb import ROOT, portal_database

WORKLOADS, DAYS, REPEAT = 2000, 90, 5


def main() -> None:
    with portal_database("bench_spend"):
        run()


def run() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from jobs.models import State, Workload
    from portal.catalog import sync_catalog
    from portal.cluster_profile import load_profile
    from portal.models import Offering, Team
    from usage import spend
    from usage.models import WorkloadDay

    sync_catalog(load_profile(ROOT / "deploy" / "cluster-profiles" / "demo.yaml"))
    team = Team.objects.create(slug="bench", name="Bench")
    user = get_user_model().objects.create_user("bench")
    offerings = list(Offering.objects.exclude(kind="cpu"))
    rng = random.Random(7)
    end = datetime(2026, 6, 1, tzinfo=UTC)
    start = end - timedelta(days=DAYS)
    rows, days = [], []
    for i in range(WORKLOADS):
        began = start + timedelta(seconds=rng.randrange(DAYS * 86400))
        finished = min(began + timedelta(seconds=rng.randrange(300, 3 * 86400)), end)
        rows.append(
            Workload(
                team=team,
                created_by=user,
                kind="training",
                name=f"w{i}",
                offering=rng.choice(offerings),
                gpus_per_replica=rng.choice((1, 2, 4, 8)),
                state=State.SUCCEEDED,
                started_at=began,
                finished_at=finished,
                created_at=began,
            )
        )
    Workload.objects.bulk_create(rows, batch_size=500)
    for w in Workload.objects.filter(team=team):
        d = w.started_at.date()
        while d <= w.finished_at.date():
            n = rng.randrange(1, 1440) * w.gpus_per_replica
            days.append(
                WorkloadDay(
                    workload=w,
                    day=d,
                    team=team,
                    user=user,
                    offering_id=w.offering_id,
                    gpu_class="x",
                    device_minutes=n,
                    activity_minutes=n * rng.random(),
                )
            )
            d += timedelta(days=1)
    WorkloadDay.objects.bulk_create(days, batch_size=1000)

    def report():
        lines = spend.lines(start, end, Workload.objects.filter(team=team), now=end)
        return spend.group(lines, "day")

    def bare():
        with connection.cursor() as cur:
            cur.execute(
                "SELECT wd.day, SUM(wd.device_minutes * o.price_per_hour) / 60, "
                "SUM(wd.activity_minutes * o.price_per_hour) / 60 "
                "FROM usage_workloadday wd JOIN portal_offering o ON o.id = wd.offering_id "
                "WHERE wd.team_id = %s AND wd.day >= %s AND wd.day < %s GROUP BY wd.day ORDER BY wd.day",
                [team.pk, start.date(), end.date()],
            )
            return cur.fetchall()

    report(), bare()  # warm caches
    timings = {}
    for name, fn in (("report", report), ("bare", bare)):
        best = float("inf")
        for _ in range(REPEAT):
            t = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - t)
        timings[name] = (best, len(out))
    total = sum(t.allocated for t in report())
    print(
        f"spend_bench: {WORKLOADS} workloads, {len(days)} workload-day rows over {DAYS} days, "
        f"allocated ${spend.money(total):,}"
    )
    print(
        f"  usage.spend 90-day team report (per day): {timings['report'][0] * 1000:8.1f} ms  "
        f"({timings['report'][1]} days)"
    )
    print(
        f"  bare GROUP BY day over the same rows:     {timings['bare'][0] * 1000:8.1f} ms  ({timings['bare'][1]} days)"
    )
    print(f"  ratio report/GROUP BY: {timings['report'][0] / timings['bare'][0]:.1f}x (best of {REPEAT})")


if __name__ == "__main__":
    main()
