"""Liveness and readiness probes.

Readiness checks the database and the broker, plus the checks apps register with
``register_check`` (the jobs app adds the cluster): portal imports none of their modules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from kombu import Connection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    run: Callable[[], str | None]  # the reason it is down, or None
    # A public reason is a few fixed words ("timed out") that name no host or user, shown
    # to any caller; other reasons are shown only in development.
    public_reason: bool = False


_CHECKS: dict[str, Check] = {}


def register_check(name: str, run: Callable[[], str | None], *, public_reason: bool = False) -> None:
    """Add a readiness check (once per name: a second registration replaces the first)."""
    _CHECKS[name] = Check(run, public_reason)


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
    """Ready when the database, the broker and every registered check are.

    ``?skip=cluster`` leaves out registered checks by name (never the database or the
    broker): the chart's readiness probe skips the cluster, because a web pod taken out of
    its Service while the cluster is down would hide the banner that says so.
    """
    skip = {name.strip() for value in request.GET.getlist("skip") for name in value.split(",")}
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    public = set()
    for name, check in _CHECKS.items():
        if name in skip:
            continue
        try:
            checks[name] = check.run()
        except Exception as exc:  # a broken check is a down check, not a crashed probe
            log.exception("readyz: the %s check failed", name)
            checks[name] = type(exc).__name__
        if check.public_reason:
            public.add(name)
    down = {name: error for name, error in checks.items() if error}
    for name, error in down.items():
        log.warning("readyz: %s is down: %s", name, error)
    # Anyone may call the probe: the error text (host names, users) is logged, and shown
    # only in development, unless the check's reasons are public.
    body = {
        "status": "ok" if not down else "unavailable",
        "checks": {
            name: (f"down: {down[name]}" if settings.DEBUG or name in public else "down") if name in down else "ok"
            for name in checks
        },
    }
    return JsonResponse(body, status=503 if down else 200)
