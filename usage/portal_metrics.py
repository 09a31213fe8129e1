"""The portal's own metrics, for Prometheus at ``/metrics``.

Most numbers are read from the database at scrape time by ``PortalCollector`` (a
scrape every 15-60 s costs a handful of aggregate queries): workloads by state,
admission decisions, queue wait, GPUs held, this month's spend, the age of the
latest GPU sample. Two numbers are events in other processes (the reconcile runs in
a Celery worker, the web process serves the scrape), so they are recorded in the
database, in ``PortalCounter`` rows updated with ``F()`` (no lost increments, works
with any number of workers, no Redis needed):

- ``observe_reconcile(seconds)``: call after each reconcile;
- ``count_task_error(name)``: call when a task fails.

Access: when ``PORTAL_METRICS_TOKEN`` is set, a scrape must send
``Authorization: Bearer <token>``; without it, ``/metrics`` is open in development
and refused (403) in production, so it is never public by accident.
"""

from __future__ import annotations

import hmac
import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Min, Sum, Value
from django.db.models.functions import Greatest
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from jobs.models import State, Workload
from usage.models import DeviceReading, PortalCounter, WorkloadRun

log = logging.getLogger(__name__)
RECONCILE = "reconcile_seconds"
TASK_ERRORS = "task_errors"


def _bump(name: str, label: str, seconds: float | None = None) -> None:
    fields = {"count": F("count") + 1, "updated_at": timezone.now()}
    if seconds is not None:
        fields.update(total=F("total") + seconds, last=seconds)
    if PortalCounter.objects.filter(name=name, label=label).update(**fields):
        return
    try:
        with transaction.atomic():
            PortalCounter.objects.create(name=name, label=label)
    except IntegrityError:
        pass  # another process created it first
    PortalCounter.objects.filter(name=name, label=label).update(**fields)


def observe_reconcile(seconds: float) -> None:
    """Record one reconcile run and how long it took."""
    try:
        _bump(RECONCILE, "", float(seconds))
    except Exception:  # a metrics write must never fail the reconcile
        log.exception("could not record the reconcile duration")


def count_task_error(name: str) -> None:
    """Count one failure of the Celery task ``name``."""
    try:
        _bump(TASK_ERRORS, name[:100])
    except Exception:
        log.exception("could not count an error of task %s", name)


class PortalCollector:
    def collect(self):
        now = timezone.now()
        workloads = GaugeMetricFamily("gpu_portal_workloads", "Workloads by state and kind.", labels=["state", "kind"])
        for state, kind, n in (
            Workload.objects.filter(deleted_at__isnull=True).values_list("state", "kind").annotate(n=Count("id"))
        ):
            workloads.add_metric([state, kind], n)
        yield workloads

        decisions = CounterMetricFamily(
            "gpu_portal_admission_decisions",
            "Workload requests by admission decision (pending_approval: waiting for or refused an exception).",
            labels=["decision"],
        )
        for admission, n in Workload.objects.values_list("admission").annotate(n=Count("id")):
            decisions.add_metric([admission or "pending_approval"], n)
        yield decisions

        # Both ends on the portal's clock (see WorkloadRun); never below zero, so the sum of
        # a summary can only grow.
        wait = Greatest(
            ExpressionWrapper(F("running_at") - F("requested_at"), output_field=DurationField()),
            Value(timedelta(0), output_field=DurationField()),
        )
        agg = WorkloadRun.objects.filter(running_at__isnull=False, requested_at__isnull=False).aggregate(
            n=Count("id"), total=Sum(wait)
        )
        yield SummaryMetricFamily(
            "gpu_portal_queue_wait_seconds",
            "Time from request (or restart) to running, over runs that started.",
            count_value=agg["n"] or 0,
            sum_value=agg["total"].total_seconds() if agg["total"] else 0.0,
        )
        oldest = Workload.objects.filter(state__in=[State.QUEUED, State.SUBMITTED], deleted_at__isnull=True).aggregate(
            t=Min("created_at")
        )["t"]
        yield GaugeMetricFamily(
            "gpu_portal_oldest_waiting_seconds",
            "Age of the oldest workload queued or submitted but not running.",
            value=(now - oldest).total_seconds() if oldest else 0.0,
        )

        held = GaugeMetricFamily(
            "gpu_portal_gpu_units_held",
            "Units of each offering held by running workloads.",
            labels=["team", "offering"],
        )
        per: dict[tuple[str, str], int] = {}
        for w in Workload.objects.filter(state=State.RUNNING, deleted_at__isnull=True).select_related(
            "team", "offering"
        ):
            key = (w.team.slug, w.offering.slug)
            per[key] = per.get(key, 0) + w.gpu_units
        for (team, offering), n in sorted(per.items()):
            held.add_metric([team, offering], n)
        yield held

        counters = {(c.name, c.label): c for c in PortalCounter.objects.all()}
        rec = counters.get((RECONCILE, ""))
        yield SummaryMetricFamily(
            "gpu_portal_reconcile_duration_seconds",
            "Reconcile runs and their total duration.",
            count_value=rec.count if rec else 0,
            sum_value=rec.total if rec else 0.0,
        )
        yield GaugeMetricFamily(
            "gpu_portal_reconcile_last_duration_seconds",
            "Duration of the latest reconcile.",
            value=rec.last if rec else 0,
        )
        errors = CounterMetricFamily("gpu_portal_task_errors", "Failed Celery task runs.", labels=["task"])
        for (name, label), c in sorted(counters.items()):
            if name == TASK_ERRORS:
                errors.add_metric([label], c.count)
        yield errors

        latest = DeviceReading.objects.aggregate(t=Max("at"))["t"]
        yield GaugeMetricFamily(
            "gpu_portal_gpu_sample_age_seconds",
            "Age of the latest GPU sample (grows when the sampler or the exporter stops).",
            value=(now - latest).total_seconds() if latest else float("inf"),
        )


def _authorised(request) -> tuple[bool, int]:
    token = settings.PORTAL_METRICS_TOKEN
    if token:
        sent = request.headers.get("Authorization", "")
        ok = sent.startswith("Bearer ") and hmac.compare_digest(sent[7:].encode(), token.encode())
        return ok, 401
    return not getattr(settings, "PRODUCTION", False), 403


def metrics_view(request):
    ok, status = _authorised(request)
    if not ok:
        response = HttpResponse(
            "metrics need a bearer token (PORTAL_METRICS_TOKEN)\n", status=status, content_type="text/plain"
        )
        if status == 401:
            response["WWW-Authenticate"] = "Bearer"
        return response
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
