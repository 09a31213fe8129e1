"""Changing a team's quota: the one function every front end calls, and quota requests.

``set_quota`` is the only code that writes ``Quota.guaranteed`` and ``Quota.limit``: the
Django admin, the approvals console, the API and the expiry task all call it, so every
change is validated the same way, written to the audit log and announced with
``quota_changed`` (jobs then re-applies the team's Queue and ResourceQuota).

Team admins ask for a change with ``file_request``; a platform admin decides it in
``quotas.approvals``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from portal.access import can_manage_team, is_platform_admin
from portal.models import Offering
from quotas import audit
from quotas.admission import fmt
from quotas.compute import CLASSES
from quotas.gpu_classes import mig_class
from quotas.models import AuditEntry, Quota, QuotaRequest, RequestState
from quotas.signals import quota_changed

MAX_AMOUNT = Decimal("999999.9999")  # Quota.limit: 10 digits, 4 decimal places
MAX_GRANT_DAYS = 366


class QuotaInputError(ValueError):
    """Input that cannot become a quota. ``errors`` maps a field to its messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = errors
        super().__init__("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in errors.items()))


@dataclass(frozen=True)
class QuotaChange:
    quota: Quota
    before: dict[str, Any]
    after: dict[str, Any]

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _values(quota: Quota | None) -> dict[str, Any]:
    if quota is None:
        return {"guaranteed": Decimal(0), "limit": Decimal(0), "used": Decimal(0), "overage": Decimal(0)}
    return {
        "guaranteed": quota.guaranteed,
        "limit": quota.limit,
        "used": quota.used,
        "overage": quota.overage,
        "count_mig_slices": quota.count_mig_slices,
    }


def parse_amount(raw: Any, field: str, errors: dict[str, list[str]]) -> Decimal | None:
    """A GPU amount from a form, JSON or Python: at least 0, at most 4 decimal places."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        errors.setdefault(field, []).append("must be a number (GPUs, or cores or GiB for cpu or memory), e.g. 8 or 0.5")
        return None
    try:
        value = Decimal(str(raw).strip())
    except InvalidOperation:
        errors.setdefault(field, []).append("must be a number (GPUs, or cores or GiB for cpu or memory), e.g. 8 or 0.5")
        return None
    if not value.is_finite() or value < 0:
        errors.setdefault(field, []).append("must be 0 or more")
    elif value > MAX_AMOUNT:
        errors.setdefault(field, []).append(f"must be at most {MAX_AMOUNT}")
    elif value != value.quantize(Decimal("0.0001")):
        errors.setdefault(field, []).append("use at most 4 decimal places")
    else:
        return value
    return None


def known_gpu_classes(team=None) -> list[str]:
    """Classes a quota can name: the models and MIG profiles on offer, any the team has, cpu and memory."""
    classes: set[str] = set()
    for kind, model, profile in (
        Offering.objects.filter(is_active=True).exclude(kind="cpu").values_list("kind", "gpu_model", "mig_profile")
    ):
        classes.add(model)
        if kind == "mig" and profile:
            classes.add(mig_class(model, profile))
    if team is not None:
        classes.update(Quota.objects.filter(team=team).values_list("gpu_class", flat=True))
    # CPU (cores) and memory (GiB) last: every team may ask for them (quotas.compute).
    return sorted(c for c in classes - set(CLASSES) if c) + list(CLASSES)


# -- the one way to change a quota -------------------------------------------------------------


def check_values(gpu_class: str, guaranteed: Any, limit: Any, reason: str) -> tuple[Decimal, Decimal]:
    """The checks of ``set_quota``, for forms that want to show them next to the fields."""
    errors: dict[str, list[str]] = {}
    g = parse_amount(guaranteed, "guaranteed", errors)
    lim = parse_amount(limit, "limit", errors)
    if g is None and "guaranteed" not in errors:
        errors["guaranteed"] = ["is required"]
    if lim is None and "limit" not in errors:
        errors["limit"] = ["is required"]
    if g is not None and lim is not None and g > lim:
        errors["guaranteed"] = [f"must not exceed the limit ({fmt(lim)})"]
    if not gpu_class:
        errors["gpu_class"] = ["is required"]
    if not (reason or "").strip():
        errors["reason"] = ["say why the quota changes; it goes into the audit log"]
    if errors:
        raise QuotaInputError(errors)
    return g, lim


def set_quota(
    team,
    gpu_class: str,
    guaranteed: Decimal,
    limit: Decimal,
    actor,
    reason: str,
    *,
    count_mig_slices: bool | None = None,
    action: str = AuditEntry.Action.QUOTA_CHANGED,
    request: QuotaRequest | None = None,
    exception=None,
) -> QuotaChange:
    """Set a team's guaranteed and limit of one GPU class; audit it and announce it.

    1. Validate: amounts of at least 0 with at most 4 decimals, guaranteed <= limit, and
       a reason (the audit log is only useful with one).
    2. Lock the quota row (creating it at zero if the team has none), as admission does,
       so a change never interleaves with an admission of the same team and class.
    3. One UPDATE sets the new values and ``overage = max(used - limit, 0)``: lowering a
       limit below what is running keeps the check constraint true, so running work goes
       on while admission refuses new work until usage is back under the limit.
    4. A temporary grant of this class still running ends here (a later change, or an
       approved request even if it changes nothing, supersedes it), except the grant
       this change starts or ends (``request``).
    5. Write the audit entry and send ``quota_changed`` in the same transaction.

    Returns the before and after values; nothing is written when nothing changed, except
    the audit entry of a decision (``action`` other than ``quota.changed``). ``actor`` is
    a platform admin, or None for the portal itself (a grant's expiry).
    """
    if actor is not None and not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins change quotas.")
    g, lim = check_values(gpu_class, guaranteed, limit, reason)
    with transaction.atomic():
        quota, _ = Quota.objects.select_for_update().get_or_create(team=team, gpu_class=gpu_class)
        before = _values(quota)
        fields: dict[str, Any] = {
            "guaranteed": g,
            "limit": lim,
            "overage": Greatest(F("used") - Value(lim), Value(Decimal(0))),
        }
        if count_mig_slices is not None:
            fields["count_mig_slices"] = count_mig_slices
        Quota.objects.filter(pk=quota.pk).update(**fields)
        quota.refresh_from_db()
        after = _values(quota)
        change = QuotaChange(quota, before, after)
        if change.changed or request is not None:
            _end_superseded_grants(team, gpu_class, actor, keep=request)
        if change.changed or action != AuditEntry.Action.QUOTA_CHANGED:
            audit.record(
                action,
                actor=actor,
                team=team,
                gpu_class=gpu_class,
                before=before,
                after=after,
                reason=reason.strip(),
                request=request,
                exception=exception,
            )
        if change.changed:
            quota_changed.send(sender=Quota, team=team)
    return change


def _end_superseded_grants(team, gpu_class: str, actor, keep: QuotaRequest | None) -> None:
    """A temporary grant that a later change overrides ends without restoring anything.

    Restoring its old values at its expiry would silently undo the later change. A new
    temporary grant takes over the restore point of the one it replaces
    (``quotas.approvals``), so the quota still goes back to its permanent values.
    """
    grants = QuotaRequest.objects.select_for_update().filter(
        team=team, gpu_class=gpu_class, state=RequestState.APPROVED, expires_at__isnull=False, ended_at__isnull=True
    )
    if keep is not None:
        grants = grants.exclude(pk=keep.pk)
    now = timezone.now()
    for grant in grants:
        note = f"superseded by a later change on {now:%Y-%m-%d %H:%M %Z}"
        QuotaRequest.objects.filter(pk=grant.pk).update(state=RequestState.EXPIRED, ended_at=now, end_note=note)
        audit.record(
            AuditEntry.Action.GRANT_EXPIRED,
            actor=actor,
            team=team,
            gpu_class=gpu_class,
            reason=f"Temporary grant #{grant.pk} {note}; its old values will not be restored.",
            request=grant,
        )


# -- quota requests ---------------------------------------------------------------------------


def expiry_of(until: date) -> datetime:
    """A grant "until 31 March" lasts through that day: it ends at the next midnight."""
    return datetime.combine(until + timedelta(days=1), time.min, tzinfo=timezone.get_current_timezone())


def file_request(
    user,
    team,
    *,
    gpu_class: str,
    guaranteed: Any = None,
    limit: Any = None,
    until: date | None = None,
    justification: str = "",
) -> QuotaRequest:
    """A team admin asks for a new guaranteed and/or limit of one GPU class.

    Raises ``PermissionDenied`` for anyone but the team's admins (and platform admins),
    ``QuotaInputError`` naming each bad field.
    """
    if not can_manage_team(user, team):
        raise PermissionDenied(f"Only team admins of {team.slug} may ask for more quota.")
    errors: dict[str, list[str]] = {}
    gpu_class = (gpu_class or "").strip()
    if not gpu_class:
        errors["gpu_class"] = ["is required: a GPU model such as H100-80GB, or a MIG profile such as A100-80GB/1g.10gb"]
    elif gpu_class not in known_gpu_classes(team):
        errors["gpu_class"] = [
            f"no GPU class {gpu_class!r} is on offer; choose one of {', '.join(known_gpu_classes())}"
        ]
    g = parse_amount(guaranteed, "guaranteed", errors)
    lim = parse_amount(limit, "limit", errors)
    if g is None and lim is None and "guaranteed" not in errors and "limit" not in errors:
        errors["limit"] = ["give a new limit, a new guaranteed amount, or both"]
    today = timezone.localdate()
    if until is not None:
        if until <= today:
            errors["until"] = ["must be a day after today (or empty for a permanent change)"]
        elif until > today + timedelta(days=MAX_GRANT_DAYS):
            errors["until"] = [f"a temporary grant lasts at most {MAX_GRANT_DAYS} days; ask for a permanent change"]
    if not (justification or "").strip():
        errors["justification"] = ["say what the GPUs are for; the platform admins decide on it"]
    if not errors:
        current = Quota.objects.filter(team=team, gpu_class=gpu_class).first()
        now_g = current.guaranteed if current else Decimal(0)
        now_l = current.limit if current else Decimal(0)
        new_g = now_g if g is None else g
        new_l = now_l if lim is None else lim
        if new_g > new_l:
            field = "guaranteed" if g is not None else "limit"
            errors[field] = [f"guaranteed ({fmt(new_g)}) must not exceed the limit ({fmt(new_l)})"]
        elif new_g == now_g and new_l == now_l:
            errors["non_field_errors"] = [
                f"{team.slug} already has {fmt(now_g)} guaranteed and a limit of {fmt(now_l)} {gpu_class}"
            ]
        pending = QuotaRequest.objects.filter(team=team, gpu_class=gpu_class, state=RequestState.PENDING).first()
        if pending is not None:
            errors["gpu_class"] = [_pending_message(team, gpu_class, pending.pk)]
    if errors:
        raise QuotaInputError(errors)
    try:
        with transaction.atomic():
            request = QuotaRequest.objects.create(
                team=team,
                gpu_class=gpu_class,
                guaranteed=g,
                limit=lim,
                until=until,
                justification=justification.strip(),
                requested_by=user,
            )
            audit.record(
                AuditEntry.Action.REQUEST_FILED,
                actor=user,
                team=team,
                gpu_class=gpu_class,
                before={"guaranteed": now_g, "limit": now_l},
                after={"guaranteed": new_g, "limit": new_l, "until": until.isoformat() if until else None},
                reason=request.justification,
                request=request,
            )
    except IntegrityError as exc:
        if "one_pending_request_per_class" not in str(exc):
            raise
        raise QuotaInputError({"gpu_class": [_pending_message(team, gpu_class, None)]}) from None
    return request


def _pending_message(team, gpu_class: str, pk: int | None) -> str:
    ref = f" (#{pk})" if pk else ""
    return f"{team.slug} already has a pending request for {gpu_class}{ref}; withdraw it or wait for the decision"


def withdraw_request(user, request: QuotaRequest) -> bool:
    """The requester or a team admin takes back a pending request. False when it was not pending."""
    if request.requested_by_id != user.pk and not can_manage_team(user, request.team):
        raise PermissionDenied("Only the requester or a team admin may withdraw this request.")
    with transaction.atomic():
        moved = QuotaRequest.objects.filter(pk=request.pk, state=RequestState.PENDING).update(
            state=RequestState.WITHDRAWN, decided_at=timezone.now()
        )
        if moved:
            audit.record(
                AuditEntry.Action.REQUEST_WITHDRAWN,
                actor=user,
                team=request.team,
                gpu_class=request.gpu_class,
                reason=f"Withdrawn by {user.username}.",
                request=request,
            )
    request.refresh_from_db()
    return bool(moved)
