"""A reconcile pass over 5,000 live workloads on the sandbox, against one GET per object.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/gpu_portal .venv/bin/python bench/reconcile_bench.py

5,000 notebooks are applied to an in-process sandbox cluster and recorded as submitted
workloads. The sandbox's controllers are not run, so the objects stay as applied (no
pods): the pass measures what the reconcile itself costs (listing, grouping, deriving,
comparing with the database), not the simulator.

- ``reconcile``: ``jobs.reconcile.reconcile``, one label-selected list per kind; the
  first pass records each workload's observed phase, the second finds nothing to do.
- ``one GET at a time``: the same information the naive way, a GET of each workload's
  main object and a label-selected pod list per workload.

Prints API calls and seconds for each and the ratios.
"""

from __future__ import annotations

import time

from benchdb import ROOT, portal_database

WORKLOADS = 5000


class Counting:
    """Counts the HTTP requests a Cluster sends."""

    def __init__(self, cluster):
        self.calls = 0
        api = cluster._api
        real = api.call_api

        def call_api(*args, **kwargs):
            self.calls += 1
            return real(*args, **kwargs)

        api.call_api = call_api


def main() -> None:
    from sandbox.testing import running_sandbox

    with portal_database("bench_reconcile"), running_sandbox(ROOT / "deploy/cluster-profiles/demo.yaml") as sb:
        from django.conf import settings
        from django.contrib.auth import get_user_model

        from jobs import lifecycle, reconcile
        from jobs.kube.client import Cluster
        from jobs.kube.labels import workload_selector
        from jobs.kube.manifests import cluster_objects, team_objects, workload_objects
        from jobs.models import State, Workload
        from portal.catalog import sync_catalog
        from portal.cluster_profile import load_profile
        from portal.models import Offering, Team

        settings.KUBE_CONFIG = str(sb.kubeconfig_path)
        sync_catalog(load_profile(ROOT / "deploy/cluster-profiles/demo.yaml"))
        user = get_user_model().objects.create_user("bench")
        team = Team.objects.create(slug="bench", name="Bench")
        offering = Offering.objects.get(slug="cpu")
        rows = [
            Workload(
                team=team,
                created_by=user,
                kind="notebook",
                name=f"nb-{i}",
                offering=offering,
                gpus_per_replica=0,
                image="quay.io/jupyter/base-notebook:2024-12-02",
                state=State.SUBMITTED,
            )
            for i in range(WORKLOADS)
        ]
        Workload.objects.bulk_create(rows, batch_size=1000)
        started = time.perf_counter()
        with Cluster.from_settings() as cluster:
            cluster.apply_all(cluster_objects())
            cluster.apply_all(team_objects(lifecycle.team_ref(team), {}))
            for w in Workload.objects.select_related("team", "offering"):
                cluster.apply_all(workload_objects(lifecycle.spec_of(w)))
        print(f"setup: {WORKLOADS} notebooks applied in {time.perf_counter() - started:.1f} s")

        results = {}
        for label in ("reconcile, first pass", "reconcile, converged"):
            with Cluster.from_settings() as cluster:
                counter = Counting(cluster)
                t0 = time.perf_counter()
                report = reconcile.reconcile(cluster)
                results[label] = (counter.calls, time.perf_counter() - t0, report.writes, report.transitions)
        with Cluster.from_settings() as cluster:
            counter = Counting(cluster)
            t0 = time.perf_counter()
            for w in Workload.objects.select_related("team"):
                cluster.get("kubeflow.org/v1", "Notebook", w.name, w.team.namespace)
                cluster.pods_for(w.team.namespace, workload_selector(w.pk))
            results["one GET at a time"] = (counter.calls, time.perf_counter() - t0, 0, 0)

        print(f"\n{WORKLOADS} live workloads on the sandbox")
        print(f"{'':26} {'API calls':>10} {'seconds':>9} {'cluster writes':>15}")
        for label, (calls, seconds, writes, _) in results.items():
            print(f"{label:26} {calls:>10} {seconds:>9.2f} {writes:>15}")
        naive_calls, naive_s, _, _ = results["one GET at a time"]
        calls, seconds, _, _ = results["reconcile, converged"]
        print(
            f"\nconverged reconcile vs one GET at a time: {naive_calls / calls:.0f}x fewer API calls, "
            f"{naive_s / seconds:.1f}x faster"
        )


if __name__ == "__main__":
    main()
