"""Idle notebooks: a warning with the stop time, the stop after the grace period, and the reset."""

from __future__ import annotations

from datetime import timedelta

import time_machine

from jobs.models import Kind, State, WorkloadEvent
from portal.models import Notice
from tests.usage.conftest import at
from usage import idle
from usage.models import GpuMinute, IdlePolicy, IdleWarning


def record_minutes(workload, start: str, end: str, activity: float) -> None:
    """Minute rows of the notebook's GPU from ``start`` to ``end`` (exclusive) at ``activity``."""
    t, stop = at(start), at(end)
    rows = []
    while t < stop:
        rows.append(
            GpuMinute(
                minute=t,
                device="GPU-nb",
                namespace=workload.team.namespace,
                pod="nb-0",
                gpu_class="H100-80GB",
                workload=workload,
                team=workload.team,
                user=workload.created_by,
                offering=workload.offering,
                share=1.0,
                activity=activity,
                fb_used_mib=2048,
                fb_total_mib=81559,
            )
        )
        t += timedelta(minutes=1)
    GpuMinute.objects.bulk_create(rows)


def check_at(when: str):
    with time_machine.travel(at(when), tick=False):
        return idle.check()


def notebook(make_workload):
    return make_workload("h100-80gb", kind=Kind.NOTEBOOK, started="2026-03-02 10:00:00", state=State.RUNNING)


def test_an_idle_notebook_is_warned_then_stopped_after_the_grace_period(make_workload, cast):
    nb = notebook(make_workload)
    record_minutes(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.01)

    assert check_at("2026-03-02 10:59:30").warned == []  # not an hour of idleness yet
    report = check_at("2026-03-02 11:00:30")
    assert report.warned == [nb.pk]
    warning = IdleWarning.objects.get(workload=nb)
    assert warning.stop_at == at("2026-03-02 11:30:30")
    notice = Notice.objects.get(user=cast.alice)
    assert "will be stopped at 2026-03-02 11:30" in notice.subject
    assert WorkloadEvent.objects.filter(workload=nb, message__startswith="GPU idle").exists()
    assert check_at("2026-03-02 11:05:00").warned == []  # warned once

    record_minutes(nb, "2026-03-02 11:00:00", "2026-03-02 11:31:00", 0.02)
    assert check_at("2026-03-02 11:20:00").stopped == []  # still in the grace period
    report = check_at("2026-03-02 11:31:00")
    assert report.stopped == [nb.pk]
    nb.refresh_from_db()
    assert nb.state == State.STOPPED and nb.deleted_at is None  # stopped, not deleted
    assert "Stopped as idle" in nb.state_reason
    last = WorkloadEvent.objects.filter(workload=nb).last()
    assert last.to_state == State.STOPPED and "idle" in last.message
    assert not IdleWarning.objects.exists()
    assert Notice.objects.filter(user=cast.alice, subject__contains="was stopped as idle").exists()


def test_activity_after_the_warning_cancels_the_stop_and_restarts_the_countdown(make_workload, cast):
    nb = notebook(make_workload)
    record_minutes(nb, "2026-03-02 10:00:00", "2026-03-02 11:00:00", 0.01)
    check_at("2026-03-02 11:00:30")
    record_minutes(nb, "2026-03-02 11:00:00", "2026-03-02 11:10:00", 0.01)
    record_minutes(nb, "2026-03-02 11:10:00", "2026-03-02 11:11:00", 0.60)  # someone ran a cell

    report = check_at("2026-03-02 11:11:10")
    assert report.reset == [nb.pk] and not IdleWarning.objects.exists()
    assert Notice.objects.filter(user=cast.alice, subject__contains="will not be stopped").exists()
    assert WorkloadEvent.objects.filter(workload=nb, message__contains="idle stop is cancelled").exists()

    # Idle again: a new warning only after a full idle period from the last activity.
    record_minutes(nb, "2026-03-02 11:11:00", "2026-03-02 12:12:00", 0.01)
    assert check_at("2026-03-02 11:45:00").warned == []
    assert check_at("2026-03-02 12:11:30").warned == [nb.pk]
    nb.refresh_from_db()
    assert nb.state == State.RUNNING


def test_missing_samples_never_count_as_idleness(make_workload):
    nb = notebook(make_workload)
    record_minutes(nb, "2026-03-02 10:00:00", "2026-03-02 10:20:00", 0.0)  # then the exporter went away
    assert check_at("2026-03-02 11:30:00").warned == []


def test_a_team_policy_overrides_the_platform_defaults(make_workload, cast):
    IdlePolicy.objects.create(team=cast.vision, threshold_percent=20, idle_minutes=15, grace_minutes=5)
    nb = notebook(make_workload)
    record_minutes(nb, "2026-03-02 10:00:00", "2026-03-02 10:16:00", 0.15)  # busy by the 5 % default
    report = check_at("2026-03-02 10:15:30")
    assert report.warned == [nb.pk]
    assert IdleWarning.objects.get().stop_at == at("2026-03-02 10:20:30")
    IdlePolicy.objects.filter(team=cast.vision).update(enabled=False)
    check_at("2026-03-02 10:16:00")
    assert not IdleWarning.objects.exists()
