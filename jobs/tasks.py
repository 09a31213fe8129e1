"""Celery tasks: an id in, a lifecycle call, a retry policy. Nothing else lives here.

Every task is safe to run twice (``acks_late``: a worker lost mid-task means the task
runs again): the lifecycle functions are compare-and-set and cluster writes are
server-side applies and deletes of deterministic names.
"""

from __future__ import annotations

import logging

from celery import shared_task

from jobs import lifecycle
from jobs.kube.client import Cluster
from jobs.kube.errors import ClusterError, backoff_seconds

log = logging.getLogger(__name__)

RETRY = {"bind": True, "acks_late": True, "max_retries": 10, "time_limit": 120, "soft_time_limit": 100}


def _retry_later(task, exc: ClusterError):
    """Transient cluster errors retry with backoff (or the server's Retry-After); others fail."""
    if not exc.transient:
        raise exc
    countdown = getattr(exc, "retry_after", None) or backoff_seconds(task.request.retries)
    log.warning("%s: %s; retrying in %.1fs", task.name, exc, countdown)
    raise task.retry(exc=exc, countdown=countdown)


@shared_task(name="jobs.submit_workload", **RETRY)
def submit_workload(self, workload_id: int) -> None:
    try:
        with Cluster.from_settings() as cluster:
            lifecycle.submit(workload_id, cluster)
    except ClusterError as exc:
        _retry_later(self, exc)


@shared_task(name="jobs.teardown_workload", **RETRY)
def teardown_workload(self, workload_id: int) -> None:
    try:
        with Cluster.from_settings() as cluster:
            lifecycle.teardown(workload_id, cluster)
    except ClusterError as exc:
        _retry_later(self, exc)


@shared_task(name="jobs.reconcile", acks_late=True, time_limit=300, soft_time_limit=280)
def reconcile() -> dict:
    from jobs.reconcile import reconcile as run

    # No retry: beat runs it again in a few seconds, and it is level-triggered.
    with Cluster.from_settings() as cluster:
        report = run(cluster)
    return {"lists": report.lists, "writes": report.writes, "seconds": round(report.seconds, 3)}


@shared_task(name="jobs.apply_team", **RETRY)
def apply_team(self, team_id: int) -> None:
    """Apply a team's namespace, queue, quota and policies (after a quota change)."""
    try:
        with Cluster.from_settings() as cluster:
            lifecycle.apply_team(team_id, cluster)
    except ClusterError as exc:
        _retry_later(self, exc)


@shared_task(name="jobs.refresh_capacity", acks_late=True, time_limit=120, soft_time_limit=100)
def refresh_capacity() -> int:
    """What is free in the cluster per offering, for the request form's picker."""
    from jobs.capacity import refresh_capacity as run

    with Cluster.from_settings() as cluster:
        return run(cluster)


@shared_task(name="jobs.recount_quota_usage", acks_late=True, time_limit=120, soft_time_limit=100)
def recount_quota_usage() -> None:
    lifecycle.recount_quota_usage()


@shared_task(name="jobs.apply_workload", **RETRY)
def apply_workload(self, workload_id: int) -> None:
    """Re-apply a live workload's objects (a new model version of an endpoint)."""
    try:
        with Cluster.from_settings() as cluster:
            lifecycle.apply_current(workload_id, cluster)
    except ClusterError as exc:
        _retry_later(self, exc)


@shared_task(name="jobs.check_cluster", time_limit=30, soft_time_limit=20)
def check_cluster() -> bool:
    """Ask the cluster whether it answers, for the pages' banner (they only read the answer)."""
    from jobs import cluster_status

    return cluster_status.probe().reachable
