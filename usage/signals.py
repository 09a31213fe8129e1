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
    if instance.to_state == State.RUNNING or instance.to_state in ENDED:
        WorkloadRun.objects.update_or_create(
            workload=workload,
            started_at=workload.started_at,
            defaults={"finished_at": workload.finished_at if instance.to_state in ENDED else None},
        )


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
