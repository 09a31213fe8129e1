"""How long usage rows are kept: minutes N days, hours M days, days (and workload-days) forever.

``PORTAL_USAGE_MINUTE_RETENTION_DAYS`` (default 14) bounds the per-device charts and
idle detection, which look back hours, not weeks; ``PORTAL_USAGE_HOUR_RETENTION_DAYS``
(default 90) bounds the hourly charts. Day rollups are a few rows per team and class
per day and carry chargeback, so they stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from usage.models import GpuMinute, Period, TeamUsage


@dataclass(frozen=True)
class Retention:
    minute_days: int
    hour_days: int

    @classmethod
    def from_settings(cls) -> Retention:
        return cls(
            settings.PORTAL_USAGE_MINUTE_RETENTION_DAYS,
            settings.PORTAL_USAGE_HOUR_RETENTION_DAYS,
        )


def prune(now: datetime | None = None, retention: Retention | None = None) -> dict[str, int]:
    now = now or timezone.now()
    retention = retention or Retention.from_settings()
    minutes, _ = GpuMinute.objects.filter(minute__lt=now - timedelta(days=retention.minute_days)).delete()
    hours, _ = TeamUsage.objects.filter(
        period=Period.HOUR, start__lt=now - timedelta(days=retention.hour_days)
    ).delete()
    return {"minute_rows": minutes, "hour_rows": hours}
