"""Temporary grants end by themselves, and the team hears about it a day before.

Both functions are idempotent and safe to run concurrently (beat may overlap a slow run,
a worker may die mid-task and ``acks_late`` runs it again): each grant is claimed with a
compare-and-set, so it is restored once and warned about once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from portal.models import Membership
from portal.notices import notify
from quotas.admission import fmt
from quotas.models import AuditEntry, QuotaRequest, RequestState
from quotas.requests import set_quota

WARN_BEFORE = timedelta(days=1)


def _running_grants():
    return QuotaRequest.objects.filter(state=RequestState.APPROVED, expires_at__isnull=False, ended_at__isnull=True)


def _overview_link() -> str:
    try:
        return reverse("quota-overview")
    except NoReverseMatch:
        return ""


def _people_to_tell(grant: QuotaRequest) -> list:
    """The team's admins, and the requester if they are no longer one of them."""
    admins = [
        m.user for m in Membership.objects.filter(team=grant.team, role=Membership.TEAM_ADMIN).select_related("user")
    ]
    if grant.requested_by_id not in {u.pk for u in admins}:
        admins.append(grant.requested_by)
    return admins


def expire_grants(now: datetime | None = None) -> list[int]:
    """End every temporary grant whose time is up; restore the quota it replaced.

    1. Claim the grant: ``UPDATE ... SET state = expired WHERE state = approved`` (the
       loser of a race does nothing).
    2. ``set_quota`` back to the restore point, as the portal (no actor): audited and
       announced. A limit restored below what is running keeps the work running as
       overage; new work is refused until usage is back under it.
    3. Tell the team's admins.

    Each grant is its own transaction, so one failure leaves the others done.
    Returns the ids of the grants ended.
    """
    now = now or timezone.now()
    ended = []
    for grant_id in _running_grants().filter(expires_at__lte=now).order_by("expires_at").values_list("id", flat=True):
        with transaction.atomic():
            claimed = (
                QuotaRequest.objects.filter(pk=grant_id, state=RequestState.APPROVED, ended_at__isnull=True).update(
                    state=RequestState.EXPIRED, ended_at=now, end_note="ended at its expiry"
                )
                == 1
            )
            if not claimed:
                continue
            grant = QuotaRequest.objects.select_related("team", "requested_by").get(pk=grant_id)
            set_quota(
                grant.team,
                grant.gpu_class,
                grant.restore_guaranteed,
                grant.restore_limit,
                None,
                f"Temporary grant #{grant.pk} ended at {grant.expires_at:%Y-%m-%d %H:%M %Z}; previous values restored.",
                action=AuditEntry.Action.GRANT_EXPIRED,
                request=grant,
            )
            for user in _people_to_tell(grant):
                notify(
                    user,
                    f"{grant.team.slug}: the temporary {grant.gpu_class} grant has ended",
                    f"Grant #{grant.pk} ended; {grant.team.slug} is back to {fmt(grant.restore_guaranteed)} "
                    f"guaranteed and a limit of {fmt(grant.restore_limit)} {grant.gpu_class}. Running work goes on; "
                    "new work is admitted within the restored limit.",
                    _overview_link(),
                )
            ended.append(grant_id)
    return ended


def warn_expiring(now: datetime | None = None) -> list[int]:
    """Tell the team's admins, once, that a grant ends within a day. Returns the grant ids."""
    now = now or timezone.now()
    warned = []
    due = _running_grants().filter(expires_at__gt=now, expires_at__lte=now + WARN_BEFORE, expiry_warned_at__isnull=True)
    for grant_id in due.order_by("expires_at").values_list("id", flat=True):
        with transaction.atomic():
            claimed = (
                QuotaRequest.objects.filter(
                    pk=grant_id, state=RequestState.APPROVED, expiry_warned_at__isnull=True
                ).update(expiry_warned_at=now)
                == 1
            )
            if not claimed:
                continue
            grant = QuotaRequest.objects.select_related("team", "requested_by").get(pk=grant_id)
            when = f"{grant.expires_at:%Y-%m-%d %H:%M %Z}"
            for user in _people_to_tell(grant):
                notify(
                    user,
                    f"{grant.team.slug}: the temporary {grant.gpu_class} grant ends {when}",
                    f"Grant #{grant.pk} (limit {fmt(grant.limit) if grant.limit is not None else 'unchanged'}) ends "
                    f"at {when}; the limit then goes back to "
                    f"{fmt(grant.restore_limit)} {grant.gpu_class}. Ask for an extension before then if you need it.",
                    _overview_link(),
                )
            warned.append(grant_id)
    return warned
