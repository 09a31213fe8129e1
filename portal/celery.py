"""The Celery app, and every periodic task of the portal in one place."""

from __future__ import annotations

import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _beat_schedule(sender, **kwargs) -> None:
    # Set once Celery reads its configuration, not at import: importing ``portal`` (as the
    # sandbox and the benchmarks do, before they point DATABASE_URL elsewhere) must not
    # load the settings.
    sender.conf.beat_schedule = beat_schedule()


def beat_schedule() -> dict:
    """Every periodic task of the portal (reconcile, telemetry, quota expiry) in one place."""
    return {
        "reconcile-workloads": {
            "task": "jobs.reconcile",
            "schedule": float(settings.RECONCILE_INTERVAL_SECONDS),
            "options": {"expires": 30},
        },
        "refresh-capacity": {
            "task": "jobs.refresh_capacity",
            "schedule": 30.0,
            "options": {"expires": 60},
        },
        "usage-sample-gpus": {"task": "usage.sample_gpus", "schedule": 60.0, "options": {"expires": 50}},
        "usage-check-idle-notebooks": {
            "task": "usage.check_idle_notebooks",
            "schedule": 60.0,
            "options": {"expires": 50},
        },
        "usage-check-budgets": {"task": "usage.check_budgets", "schedule": 300.0, "options": {"expires": 240}},
        "usage-prune": {"task": "usage.prune", "schedule": 86400.0},
        "quotas-expire-grants": {"task": "quotas.expire_grants", "schedule": 60.0, "options": {"expires": 50}},
        "quotas-warn-expiring-grants": {
            "task": "quotas.warn_expiring_grants",
            "schedule": 900.0,
            "options": {"expires": 600},
        },
        "jobs-recount-quota-usage": {
            "task": "jobs.recount_quota_usage",
            "schedule": 300.0,
            "options": {"expires": 240},
        },
        "jobs-check-cluster": {"task": "jobs.check_cluster", "schedule": 30.0, "options": {"expires": 25}},
    }
