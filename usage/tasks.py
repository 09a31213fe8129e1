"""Celery tasks of usage: thin, each a call into a module, safe to run twice.

Beat runs them (schedule in ``portal/celery.py``); none retries, because the next
tick a minute later does the same work with fresher data, and every one of them is
idempotent (the sampler per minute bucket, the others by compare-and-set).
"""

from __future__ import annotations

import logging

from celery import shared_task

from usage.portal_metrics import count_task_error

log = logging.getLogger(__name__)
OPTS = {"acks_late": True, "time_limit": 120, "soft_time_limit": 100, "ignore_result": True}


def _guarded(name: str, fn):
    try:
        return fn()
    except Exception:
        count_task_error(name)
        raise


@shared_task(name="usage.sample_gpus", **OPTS)
def sample_gpus() -> dict:
    def run():
        from jobs.kube.client import Cluster
        from usage import sources, telemetry

        source = sources.from_settings()
        with Cluster.from_settings() as cluster:
            report = telemetry.tick(source, lambda selector: cluster.list("v1", "Pod", label_selector=selector))
        return {"samples": report.samples, "rows": report.minute_rows, "unattributed": report.unattributed}

    return _guarded("usage.sample_gpus", run)


@shared_task(name="usage.check_idle_notebooks", **OPTS)
def check_idle_notebooks() -> dict:
    from usage import idle

    report = _guarded("usage.check_idle_notebooks", idle.check)
    return {"warned": report.warned, "reset": report.reset, "stopped": report.stopped}


@shared_task(name="usage.check_budgets", **OPTS)
def check_budgets() -> list:
    from usage import budgets

    return _guarded("usage.check_budgets", budgets.check)


@shared_task(name="usage.prune", **OPTS)
def prune() -> dict:
    from usage import retention

    return _guarded("usage.prune", retention.prune)
