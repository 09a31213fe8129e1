"""usage's answers to what jobs records: keep each run of a workload.

``jobs.lifecycle`` writes a timeline event in the transaction of every state change,
after refreshing the workload, so the event's workload carries the new ``started_at``
and ``finished_at``. Listening to the event (rather than asking jobs for a hook) keeps
the import rule: usage knows jobs, jobs does not know usage.
"""

from __future__ import annotations

from celery.signals import task_failure, task_postrun
from django.db.models.signals import post_save
from django.dispatch import receiver

from jobs.models import State, WorkloadEvent
from usage.models import WorkloadRun

ENDED = {State.STOPPED, State.SUCCEEDED, State.FAILED}


@receiver(post_save, sender=WorkloadEvent, dispatch_uid="usage.record_run")
def record_run(sender, instance: WorkloadEvent, created: bool, **kwargs) -> None:
    if not created or not instance.to_state:
        return
    workload = instance.workload
    if workload.started_at is None:
        return
    if instance.to_state == State.RUNNING:
        run, _ = WorkloadRun.objects.update_or_create(
            workload=workload, started_at=workload.started_at, defaults={"finished_at": None}
        )
        # The first time the portal saw this run running is its end of the queue.
        WorkloadRun.objects.filter(pk=run.pk, running_at__isnull=True).update(
            requested_at=requested_at(instance), running_at=instance.at
        )
    elif instance.to_state in ENDED:
        WorkloadRun.objects.update_or_create(
            workload=workload, started_at=workload.started_at, defaults={"finished_at": workload.finished_at}
        )


WAITING = (State.PENDING_APPROVAL, State.QUEUED, State.SUBMITTED)


def requested_at(running: WorkloadEvent):
    """When the run that ``running`` starts was asked for: the latest timeline event before it
    that began a wait (the request itself, or a stopped notebook's start), else the creation."""
    began = (
        WorkloadEvent.objects.filter(workload=running.workload_id, to_state__in=WAITING, pk__lt=running.pk)
        .exclude(from_state__in=WAITING)
        .order_by("-at", "-pk")
        .values_list("at", flat=True)
        .first()
    )
    return began or running.workload.created_at


# --- the portal's own metrics, from Celery's signals --------------------------------------------
# Listening here keeps jobs free of any import of usage: every failed task is counted,
# and the reconcile's duration is read from what the jobs.reconcile task returns.


@task_failure.connect(dispatch_uid="usage.count_task_failure")
def count_task_failure(sender=None, **kwargs) -> None:
    from usage.portal_metrics import count_task_error

    count_task_error(getattr(sender, "name", "") or "unknown")


@task_postrun.connect(dispatch_uid="usage.observe_reconcile")
def observe_reconcile_run(sender=None, retval=None, state=None, **kwargs) -> None:
    if getattr(sender, "name", "") != "jobs.reconcile" or state != "SUCCESS" or not isinstance(retval, dict):
        return
    from usage.portal_metrics import observe_reconcile

    if isinstance(retval.get("seconds"), int | float):
        observe_reconcile(retval["seconds"])
