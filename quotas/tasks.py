"""Celery tasks of quotas: thin wrappers, run by beat (see the schedule in portal/celery.py).

No arguments and no retries: each run looks at the clock and the rows, so the next run
(minutes later) does whatever a failed one left; ``quotas.expiry`` claims each grant
with a compare-and-set, so a run repeated after a lost worker does nothing twice.
"""

from __future__ import annotations

from celery import shared_task

from quotas import expiry

OPTIONS = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, "ignore_result": True}


@shared_task(name="quotas.expire_grants", **OPTIONS)
def expire_grants() -> dict:
    return {"expired": expiry.expire_grants()}


@shared_task(name="quotas.warn_expiring_grants", **OPTIONS)
def warn_expiring_grants() -> dict:
    return {"warned": expiry.warn_expiring()}
