"""Idle notebooks: warn the owner, then stop (never delete) the notebook, unless it wakes up.

A running notebook is *idle* when, over the team's idle period (default 60 min), every
sampled minute's GPU activity (mean over its devices) stayed under the threshold
(default 5 %), and at least half of those minutes were sampled: missing samples
(exporter down, sampler stopped) never count as idleness.

GPU activity is measured per physical GPU. In a minute where the notebook shared its GPU
with other pods (time slicing, ``GpuMinute.sharers`` > 1) that activity may be the
neighbour's, so such a minute says nothing either way; there the notebook counts as used
when Kubeflow's notebook controller saw its kernels busy, i.e. its annotation
``notebooks.kubeflow.org/last-activity`` is within the period. A notebook with shared
minutes and no readable annotation is never called idle (we do not cull on a guess).

Each check (``usage.check_idle_notebooks``, every minute):

1. Idle and not yet warned → record an ``IdleWarning`` with the stop time (now +
   grace, default 30 min), tell the owner (notice + email) and write it on the
   notebook's timeline.
2. Warned, and a minute since the warning was at or over the threshold → the
   countdown resets: the warning is removed and the owner is told the stop is off.
3. Warned, the stop time has passed, still idle → ``jobs.lifecycle.stop`` with the
   reason, which goes on the timeline. The notebook keeps its workspace and can be
   started again.

Per-team settings live in ``IdlePolicy``; teams without one use the platform defaults
``PORTAL_IDLE_THRESHOLD_PERCENT``, ``PORTAL_IDLE_MINUTES``, ``PORTAL_IDLE_GRACE_MINUTES``
and ``PORTAL_IDLE_ENABLED``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Max
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs import lifecycle
from jobs.models import Kind, State, Workload
from portal.notices import notify
from usage.models import GpuMinute, IdlePolicy, IdleWarning

log = logging.getLogger(__name__)
MIN_COVERAGE = 0.5


@dataclass(frozen=True)
class Rule:
    enabled: bool
    threshold: float  # 0..1
    idle: timedelta
    grace: timedelta


def platform_rule() -> Rule:
    return Rule(
        enabled=settings.PORTAL_IDLE_ENABLED,
        threshold=settings.PORTAL_IDLE_THRESHOLD_PERCENT / 100,
        idle=timedelta(minutes=settings.PORTAL_IDLE_MINUTES),
        grace=timedelta(minutes=settings.PORTAL_IDLE_GRACE_MINUTES),
    )


def rule_for(policy: IdlePolicy | None) -> Rule:
    if policy is None:
        return platform_rule()
    return Rule(
        policy.enabled,
        policy.threshold_percent / 100,
        timedelta(minutes=policy.idle_minutes),
        timedelta(minutes=policy.grace_minutes),
    )


def is_idle(
    minutes: Mapping[datetime, float | None],
    rule: Rule,
    since: datetime,
    now: datetime,
    last_activity: datetime | None = None,
) -> bool:
    """Every sampled minute in [since, now) under the threshold, and enough of them sampled. Pure.

    A minute's value is ``None`` when the GPU was shared: then the notebook's own
    ``last_activity`` (from Kubeflow's annotation) must be before ``since``.
    """
    window = [a for m, a in minutes.items() if since <= m < now]
    expected = max(int((now - since) / timedelta(minutes=1)), 1)
    if len(window) < MIN_COVERAGE * expected:
        return False
    if any(a is not None and a >= rule.threshold for a in window):
        return False
    if any(a is None for a in window):
        return last_activity is not None and last_activity < since
    return True


def woke_up(
    minutes: Mapping[datetime, float | None], rule: Rule, since: datetime, last_activity: datetime | None = None
) -> bool:
    later = [a for m, a in minutes.items() if m >= since]
    if any(a is not None and a >= rule.threshold for a in later):
        return True
    return any(a is None for a in later) and last_activity is not None and last_activity >= since


@dataclass
class IdleReport:
    warned: list[int] = field(default_factory=list)
    reset: list[int] = field(default_factory=list)
    stopped: list[int] = field(default_factory=list)


def _fmt(at: datetime) -> str:
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")


LAST_ACTIVITY_ANNOTATION = "notebooks.kubeflow.org/last-activity"

LastActivity = Callable[[Iterable[Workload]], dict[int, datetime]]


def last_activity_from_cluster(notebooks: Iterable[Workload]) -> dict[int, datetime]:
    """Workload id → the Notebook's ``last-activity`` annotation, from one label-selected list.

    A cluster that cannot be read gives no times (those notebooks are then not idle).
    """
    from jobs.kube.client import Cluster
    from jobs.kube.labels import WORKLOAD_ID_LABEL, managed_selector

    wanted = {w.pk for w in notebooks}
    try:
        with Cluster.from_settings() as cluster:
            items = list(cluster.list("kubeflow.org/v1", "Notebook", label_selector=managed_selector()))
    except Exception:
        log.warning("idle check: could not list notebooks for their last-activity annotation", exc_info=True)
        return {}
    out = {}
    for nb in items:
        meta = nb.get("metadata") or {}
        raw_id = (meta.get("labels") or {}).get(WORKLOAD_ID_LABEL, "")
        when = parse_datetime((meta.get("annotations") or {}).get(LAST_ACTIVITY_ANNOTATION) or "")
        if raw_id.isdigit() and int(raw_id) in wanted and when is not None and when.tzinfo is not None:
            out[int(raw_id)] = when
    return out


def check(now: datetime | None = None, last_activity: LastActivity = last_activity_from_cluster) -> IdleReport:
    now = now or timezone.now()
    report = IdleReport()
    notebooks = list(
        Workload.objects.filter(kind=Kind.NOTEBOOK, state=State.RUNNING, deleted_at__isnull=True).select_related(
            "team", "created_by"
        )
    )
    # Warnings of notebooks that stopped some other way are finished business.
    IdleWarning.objects.exclude(workload__in=[w.pk for w in notebooks]).delete()
    if not notebooks:
        return report
    policies = {p.team_id: p for p in IdlePolicy.objects.filter(team__in={w.team_id for w in notebooks})}
    warnings = {w.workload_id: w for w in IdleWarning.objects.filter(workload__in=[w.pk for w in notebooks])}
    rules = {w.pk: rule_for(policies.get(w.team_id)) for w in notebooks}
    longest = max(r.idle + r.grace for r in rules.values())
    activity: dict[int, dict[datetime, float | None]] = defaultdict(dict)
    for wid, minute, avg, sharers in (
        GpuMinute.objects.filter(workload__in=[w.pk for w in notebooks], minute__gte=now - longest, minute__lt=now)
        .values("workload_id", "minute")
        .annotate(a=Avg("activity"), s=Max("sharers"))
        .values_list("workload_id", "minute", "a", "s")
    ):
        activity[wid][minute] = None if sharers > 1 else avg
    shared = [w for w in notebooks if any(a is None for a in activity.get(w.pk, {}).values())]
    last_seen = last_activity(shared) if shared else {}
    for workload in notebooks:
        rule = rules[workload.pk]
        minutes = activity.get(workload.pk, {})
        seen = last_seen.get(workload.pk)
        warning = warnings.get(workload.pk)
        if not rule.enabled:
            if warning:
                warning.delete()
            continue
        if warning is not None:
            if woke_up(minutes, rule, warning.warned_at.replace(second=0, microsecond=0), seen):
                _reset(workload, warning)
                report.reset.append(workload.pk)
            elif (
                now >= warning.stop_at
                and is_idle(minutes, rule, warning.warned_at, now, seen)
                and _stop(workload, rule)
            ):
                report.stopped.append(workload.pk)
            continue
        running_since = workload.started_at or now
        if now - running_since >= rule.idle and is_idle(minutes, rule, now - rule.idle, now, seen):
            _warn(workload, rule, now)
            report.warned.append(workload.pk)
    return report


def _link(workload: Workload) -> str:
    return f"/workloads/{workload.pk}/"


def _warn(workload: Workload, rule: Rule, now: datetime) -> None:
    stop_at = now + rule.grace
    with transaction.atomic():
        _, created = IdleWarning.objects.get_or_create(
            workload=workload, defaults={"warned_at": now, "stop_at": stop_at}
        )
        if not created:
            return
        minutes = int(rule.idle.total_seconds() // 60)
        message = (
            f"GPU idle: activity under {rule.threshold * 100:g} % for {minutes} min. "
            f"It will be stopped at {_fmt(stop_at)} unless it is used again."
        )
        lifecycle.record(workload, message)
        notify(
            workload.created_by,
            f"Notebook {workload.team.slug}/{workload.name} is idle and will be stopped at {_fmt(stop_at)}",
            message + " Stopping keeps its workspace; you can start it again.",
            link=_link(workload),
        )


def _reset(workload: Workload, warning: IdleWarning) -> None:
    with transaction.atomic():
        if not IdleWarning.objects.filter(pk=warning.pk).delete()[0]:
            return
        lifecycle.record(workload, "GPU active again: the idle stop is cancelled.")
        notify(
            workload.created_by,
            f"Notebook {workload.team.slug}/{workload.name} is active again: it will not be stopped",
            "Its GPU activity went back above the idle threshold, so the idle stop is cancelled.",
            link=_link(workload),
        )


def _stop(workload: Workload, rule: Rule) -> bool:
    minutes = int((rule.idle + rule.grace).total_seconds() // 60)
    reason = (
        f"Stopped as idle: GPU activity under {rule.threshold * 100:g} % for {minutes} min "
        "(idle notebook policy). Its workspace is kept; start it again to continue."
    )
    with transaction.atomic():
        stopped = lifecycle.stop(None, workload, reason)
        IdleWarning.objects.filter(workload=workload).delete()
    if stopped:
        notify(
            workload.created_by,
            f"Notebook {workload.team.slug}/{workload.name} was stopped as idle",
            reason,
            link=_link(workload),
        )
    return stopped
