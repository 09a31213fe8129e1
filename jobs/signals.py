"""jobs' answers to what quotas announces."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import receiver

from quotas.signals import exception_decided, quota_changed


@receiver(exception_decided)
def move_the_waiting_workload(sender, exception, approved, actor, **kwargs):
    from jobs import lifecycle

    return lifecycle.exception_decided(exception, approved, actor)


@receiver(quota_changed)
def apply_the_teams_quota_to_the_cluster(sender, team, **kwargs):
    from jobs import tasks

    transaction.on_commit(lambda: tasks.apply_team.delay(team.pk))
