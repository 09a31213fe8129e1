"""Quota admission decisions per second, against a bare PostgreSQL row lock and insert.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpu_portal .venv/bin/python bench/admission_bench.py

Creates its own database (``<name>_bench_admission``) with the portal's migrated schema
(admission reads more than quotas, e.g. the budget policy in ``usage``, so a hand-picked
set of tables breaks as soon as it grows) plus a table standing in for workloads, and
drops it at the end.
Eight clients, each its own process and connection (as web and worker processes are),
run for a few seconds per case:

- ``admit``: ``quotas.admission.admit`` and one INSERT in one transaction, as
  ``jobs.lifecycle.request_workload`` does (read the team's classes, lock the quota
  row, count, decide, UPDATE the usage, insert the workload row);
- ``bare``: psycopg without Django: ``SELECT ... FOR UPDATE`` of one row and one
  INSERT in one transaction, the least any locked admission can cost.

Both with one team (every client queues on one row lock) and with ten teams (requests
spread over ten rows). Prints decisions per second, p50/p99 latency and the ratios. The
cases are interleaved and repeated, and the best run of each counts: on a shared
machine other load only ever slows a run down.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time

from benchdb import portal_database

CLIENTS = 8
SECONDS = 3.0
WARMUP = 0.5
ROUNDS = 2  # interleaved; the best round counts (a shared machine only ever makes a run slower)


def main() -> None:
    with portal_database("bench_admission"):
        run(os.environ["DATABASE_URL"])


def setup_tables() -> list[int]:
    """Ten teams with a quota each (the migrated schema, with its check constraints), and a workload stand-in."""
    from django.db import connection

    from portal.models import Team
    from quotas.models import Quota

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_workload (id bigserial PRIMARY KEY, team_id bigint NOT NULL, "
            "gpu_class varchar(60) NOT NULL, charge numeric(12, 6) NOT NULL, admission varchar(20) NOT NULL, "
            "created_at timestamptz NOT NULL DEFAULT now())"
        )
    ids = []
    for i in range(10):
        team = Team.objects.create(slug=f"team-{i}", name=f"Team {i}")
        # Room for every decision of the run: admission says yes each time, as it does most of the time.
        Quota.objects.create(team=team, gpu_class="H100-80GB", guaranteed=4, limit=900000)
        ids.append(team.pk)
    connection.close()
    return ids


def admit_client(team_ids, barrier, deadline_box, out) -> None:
    from django.db import connection, transaction

    from portal.models import Offering, Team
    from quotas.admission import admit

    connection.close()  # never share the parent's socket
    teams = list(Team.objects.filter(pk__in=team_ids))
    offering = Offering(kind="gpu", gpu_model="H100-80GB", share_numerator=1, share_denominator=1)
    pid = os.getpid()
    latencies, i = [], pid
    barrier.wait()
    start_at, stop_at = deadline_box
    while True:
        now = time.perf_counter()
        if now >= stop_at:
            break
        team = teams[i % len(teams)]
        i += 1
        with transaction.atomic():
            decision = admit(team, offering, 1)
            with connection.cursor() as cursor:
                cursor.execute(
                    "INSERT INTO bench_workload (team_id, gpu_class, charge, admission) VALUES (%s, %s, %s, %s)",
                    [team.pk, decision.charge.gpu_class, decision.charge.amount, decision.admission],
                )
        if now >= start_at:
            latencies.append(time.perf_counter() - now)
    connection.close()
    out.put(latencies)


def bare_client(url, team_ids, barrier, deadline_box, out) -> None:
    import psycopg

    conn = psycopg.connect(url)
    latencies, i = [], os.getpid()
    barrier.wait()
    start_at, stop_at = deadline_box
    while True:
        now = time.perf_counter()
        if now >= stop_at:
            break
        team_id = team_ids[i % len(team_ids)]
        i += 1
        with conn.transaction():
            conn.execute(
                "SELECT id FROM quotas_quota WHERE team_id = %s AND gpu_class = %s FOR UPDATE", (team_id, "H100-80GB")
            )
            conn.execute(
                "INSERT INTO bench_workload (team_id, gpu_class, charge, admission) VALUES (%s, %s, %s, %s)",
                (team_id, "H100-80GB", 1, "bare"),
            )
        if now >= start_at:
            latencies.append(time.perf_counter() - now)
    conn.close()
    out.put(latencies)


def measure(target, args) -> dict:
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(CLIENTS + 1), ctx.Queue()
    # Every client measures the same window: decisions before WARMUP are not counted.
    begin = time.perf_counter() + 1.0
    window = (begin + WARMUP, begin + WARMUP + SECONDS)
    procs = [ctx.Process(target=target, args=(*args, barrier, window, out)) for _ in range(CLIENTS)]
    for p in procs:
        p.start()
    barrier.wait()
    latencies = []
    for _ in procs:
        latencies.extend(out.get(timeout=60))
    for p in procs:
        p.join(timeout=30)
        if p.exitcode != 0:
            raise SystemExit(f"a client failed (exit code {p.exitcode})")
    latencies.sort()
    return {
        "rate": len(latencies) / SECONDS,
        "p50": statistics.median(latencies) * 1000,
        "p99": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "n": len(latencies),
    }


def run(url: str) -> None:
    team_ids = setup_tables()
    results: dict[tuple[str, str], dict] = {}
    for _ in range(ROUNDS):
        for label, ids in (("one team", team_ids[:1]), ("ten teams", team_ids)):
            for kind, target, args in (("admit", admit_client, (ids,)), ("bare", bare_client, (url, ids))):
                r = measure(target, args)
                if (kind, label) not in results or r["rate"] > results[(kind, label)]["rate"]:
                    results[(kind, label)] = r
    check(team_ids)
    print(
        f"Admission decisions per second, {CLIENTS} concurrent clients (processes), "
        f"best of {ROUNDS} interleaved {SECONDS:.0f} s runs after warm-up, on {os.cpu_count()} CPUs"
    )
    print(f"{'':40}{'decisions/s':>12}{'p50 ms':>9}{'p99 ms':>9}")
    for (kind, label), r in results.items():
        name = f"{'quotas.admission.admit' if kind == 'admit' else 'bare lock + insert'} ({label})"
        print(f"{name:<40}{r['rate']:>12.0f}{r['p50']:>9.2f}{r['p99']:>9.2f}")
    for label in ("one team", "ten teams"):
        ratio = results[("admit", label)]["rate"] / results[("bare", label)]["rate"]
        print(f"admit / bare ({label}): {ratio:.2f}")
    spread = results[("admit", "ten teams")]["rate"] / results[("admit", "one team")]["rate"]
    print(f"admit, ten teams / one team: {spread:.2f}")


def check(team_ids) -> None:
    """Every admitted decision is in the usage: nothing lost, nothing counted twice."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(SUM(used), 0) FROM quotas_quota")
        used = cursor.fetchone()[0]
        cursor.execute("SELECT COUNT(*) FROM bench_workload WHERE admission <> 'bare'")
        admitted = cursor.fetchone()[0]
    connection.close()
    if used != admitted:
        raise SystemExit(f"usage {used} does not match {admitted} admitted decisions")


if __name__ == "__main__":
    main()
