"""p50/p95 of POST /api/v1/workloads/ while the worker is busy, against cheap requests.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpu_portal REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/request_bench.py

A request validates, admits against quota (row lock), records the workload and its
timeline, and enqueues the submit task on Redis after commit; it never waits for the
cluster. Here no worker consumes the queue at all (the busiest a worker can be), so any
wait on the cluster or the worker would show as a request that never returns.

Baselines in the same run and process: GET /api/v1/teams/ (authentication and one query)
and POST /api/v1/workloads/preview/ (the same validation and manifest building, no
writes). Requests go through Django's WSGI handler in-process, so the figures are the
portal's own cost without a network hop.
"""

from __future__ import annotations

import os
import statistics
import time

from benchdb import ROOT, portal_database

REQUESTS = 300


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    os.environ["PORTAL_API_RATE"] = "off"  # the per-token rate limit would measure itself
    with portal_database("bench_requests"):
        from django.contrib.auth import get_user_model
        from rest_framework.test import APIClient

        from jobs.models import Workload
        from portal.catalog import sync_catalog
        from portal.celery import app
        from portal.cluster_profile import load_profile
        from portal.models import ApiToken, Membership, Team
        from quotas.models import Quota

        sync_catalog(load_profile(ROOT / "deploy/cluster-profiles/demo.yaml"))
        user = get_user_model().objects.create_user("bench")
        team = Team.objects.create(slug="bench", name="Bench")
        Membership.objects.create(user=user, team=team)
        Quota.objects.create(team=team, gpu_class="A100-80GB", guaranteed=100, limit=1000)
        _, secret = ApiToken.issue(user, "bench")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        with app.connection_for_write() as conn:
            queued_before = conn.default_channel.client.llen("celery")

        def body(i: int) -> dict:
            return {
                "team": "bench",
                "kind": "notebook",
                "name": f"nb-{i}",
                "offering": "a100-80gb-1g.10gb",
                "gpus_per_replica": 1,
                "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
            }

        def timed(call) -> list[float]:
            samples = []
            for i in range(REQUESTS):
                t0 = time.perf_counter()
                response = call(i)
                samples.append((time.perf_counter() - t0) * 1000)
                assert response.status_code in (200, 201), response.content[:300]
            return samples

        timed(lambda i: client.get("/api/v1/teams/"))  # warm up
        results = {
            "GET /api/v1/teams/": timed(lambda i: client.get("/api/v1/teams/")),
            "POST .../preview/": timed(lambda i: client.post("/api/v1/workloads/preview/", body(i), format="json")),
            "POST /api/v1/workloads/": timed(lambda i: client.post("/api/v1/workloads/", body(i), format="json")),
        }
        with app.connection_for_write() as conn:
            queued = conn.default_channel.client.llen("celery") - queued_before
        assert Workload.objects.count() == REQUESTS

        print(f"\n{REQUESTS} requests each, in-process, no worker consuming ({queued} submit tasks left queued)")
        print(f"{'':26} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8}")
        for label, samples in results.items():
            print(
                f"{label:26} {percentile(samples, 50):>8.1f} {percentile(samples, 95):>8.1f} "
                f"{statistics.mean(samples):>8.1f}"
            )
        post = percentile(results["POST /api/v1/workloads/"], 95)
        print(
            f"\nPOST p95 / preview p95: {post / percentile(results['POST .../preview/'], 95):.1f}x; "
            f"POST p95 / GET teams p95: {post / percentile(results['GET /api/v1/teams/'], 95):.1f}x"
        )
        with app.connection_for_write() as conn:
            conn.default_channel.client.delete("celery")  # the bench's tasks name rows that are gone


if __name__ == "__main__":
    main()
