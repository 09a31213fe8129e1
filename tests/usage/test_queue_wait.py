"""gpu_portal_queue_wait_seconds: request to running on the portal's clock, never negative."""

from __future__ import annotations

import pytest
import time_machine
from django.test import Client

from jobs import lifecycle
from jobs.models import State, Workload
from tests.usage.conftest import at

pytestmark = pytest.mark.django_db


def metric(name: str) -> float:
    body = Client().get("/metrics").content.decode()
    [line] = [ln for ln in body.splitlines() if ln.startswith(name + " ")]
    return float(line.split()[1])


def run(workload: Workload, requested: str, running: str, cluster_start: str) -> None:
    """The timeline of one run: asked for at ``requested``, seen running at ``running``,
    with the pods' start time on the cluster's clock ``cluster_start``."""
    with time_machine.travel(at(running), tick=False):
        Workload.objects.filter(pk=workload.pk).update(state=State.RUNNING, started_at=at(cluster_start))
        workload.refresh_from_db()
        lifecycle.record(workload, "Running.", from_state=State.SUBMITTED, to_state=State.RUNNING)


def request(workload: Workload, when: str, from_state: str = "") -> None:
    with time_machine.travel(at(when), tick=False):
        lifecycle.record(workload, "Requested.", from_state=from_state, to_state=State.QUEUED)


def test_a_cluster_clock_behind_the_portals_does_not_make_the_wait_negative(make_workload):
    w = make_workload("h100-80gb", state=State.QUEUED)
    Workload.objects.filter(pk=w.pk).update(created_at=at("2026-03-02 10:00:00"))
    w.refresh_from_db()
    request(w, "2026-03-02 10:00:00")
    # The pods report 09:58 (the node's clock is behind, or an old pod of the same name).
    run(w, "2026-03-02 10:00:00", "2026-03-02 10:01:30", "2026-03-02 09:58:00")
    assert metric("gpu_portal_queue_wait_seconds_sum") == 90.0
    assert metric("gpu_portal_queue_wait_seconds_count") == 1.0


def test_a_restarted_notebook_waits_from_its_restart_not_from_its_creation(make_workload):
    w = make_workload("h100-80gb", state=State.QUEUED)
    Workload.objects.filter(pk=w.pk).update(created_at=at("2026-03-02 10:00:00"))
    w.refresh_from_db()
    request(w, "2026-03-02 10:00:00")
    with time_machine.travel(at("2026-03-02 10:00:05"), tick=False):
        lifecycle.record(w, "Approved.", from_state=State.PENDING_APPROVAL, to_state=State.QUEUED)
    run(w, "2026-03-02 10:00:00", "2026-03-02 10:00:20", "2026-03-02 10:00:19")
    request(w, "2026-03-02 12:00:00", from_state=State.STOPPED)
    run(w, "2026-03-02 12:00:00", "2026-03-02 12:00:45", "2026-03-02 12:00:40")
    assert metric("gpu_portal_queue_wait_seconds_sum") == 20.0 + 45.0
    assert metric("gpu_portal_queue_wait_seconds_count") == 2.0


def test_the_wait_is_never_below_zero_even_for_an_inconsistent_run(make_workload):
    from usage.models import WorkloadRun

    w = make_workload("h100-80gb", started="2026-03-02 10:00:00")
    WorkloadRun.objects.create(
        workload=w,
        started_at=at("2026-03-02 10:00:00"),
        requested_at=at("2026-03-02 10:05:00"),
        running_at=at("2026-03-02 10:00:00"),
    )
    assert metric("gpu_portal_queue_wait_seconds_sum") == 0.0
    assert metric("gpu_portal_queue_wait_seconds_count") == 1.0
