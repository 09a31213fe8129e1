"""Liveness and readiness probes."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from kombu import Connection

log = logging.getLogger(__name__)


@never_cache
def healthz(request):
    return JsonResponse({"status": "ok"})


def _database_ok() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means "not ready"
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return None


def _broker_ok() -> str | None:
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return None


@never_cache
def readyz(request):
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    down = {name: error for name, error in checks.items() if error}
    for name, error in down.items():
        log.warning("readyz: %s is down: %s", name, error)
    # Anyone may call the probe: the error text (host names, users) is logged, and shown
    # only in development.
    body = {
        "status": "ok" if not down else "unavailable",
        "checks": {
            name: (f"down: {down[name]}" if settings.DEBUG else "down") if name in down else "ok" for name in checks
        },
    }
    return JsonResponse(body, status=503 if down else 200)
