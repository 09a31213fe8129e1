"""Platform admins decide quota requests and quota exceptions.

Every front end (the console, the API, an admin action) calls these functions. Each
decision is one transaction: lock the request, check it is still pending and that the
decider is not the requester, apply it, write the audit entry, tell the requester (the
email goes after commit) and, for exceptions, let jobs move the waiting workload
(``exception_decided``). The database refuses a decision by the requester too
(``*_not_decided_by_requester`` check constraints), whatever the application does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from portal.access import is_platform_admin
from portal.notices import notify
from portal.units import class_amount
from quotas import admission, audit
from quotas.admission import fmt
from quotas.gpu_classes import Charge, mig_class
from quotas.models import AuditEntry, Decision, Quota, QuotaException, QuotaRequest, RequestState
from quotas.requests import expiry_of, set_quota
from quotas.signals import exception_decided, quota_changed

# workload ids -> {id: why the cluster can never hold it}. jobs registers it (quotas cannot
# import jobs); the console warns on exceptions whose workload could never run, so an
# admin does not approve quota for work that would wait forever.
NeverFitsCheck = Callable[[Iterable[int]], dict[int, str]]
_never_fits: NeverFitsCheck | None = None


def set_never_fits_check(check: NeverFitsCheck | None) -> None:
    global _never_fits
    _never_fits = check


def never_fits(workload_ids: Iterable[int]) -> dict[int, str]:
    """Why each of these workloads could never run on the cluster (only those that could not)."""
    ids = list(workload_ids)
    if _never_fits is None or not ids:
        return {}
    return _never_fits(ids)


def cluster_totals(offerings) -> dict[str, Decimal]:
    """GPU class -> how much of it the cluster has in all, from each offering's node inventory.

    A model's class counts physical GPUs: each offering's units times its share of a GPU
    (MIG slices and shared GPUs of one pool add up to the pool's GPUs); a MIG profile's
    class counts its slices. A class with any offering whose inventory is unknown (never
    observed, or not countable) is left out: no warning beats a wrong one.
    """
    totals: dict[str, Decimal] = {}
    unknown: set[str] = set()
    for o in offerings:
        if o.kind == "cpu" or not o.gpu_model:
            continue
        classes = [o.gpu_model] + ([mig_class(o.gpu_model, o.mig_profile)] if o.kind == "mig" else [])
        if o.node_units is None:
            unknown.update(classes)
            continue
        units = sum(int(u) for u in o.node_units)
        totals[o.gpu_model] = totals.get(o.gpu_model, Decimal(0)) + Decimal(units * o.share_numerator) / Decimal(
            o.share_denominator
        )
        if o.kind == "mig":
            profile = mig_class(o.gpu_model, o.mig_profile)
            totals[profile] = totals.get(profile, Decimal(0)) + units
    return {cls: total for cls, total in totals.items() if cls not in unknown}


def beyond_cluster(request: QuotaRequest, totals: dict[str, Decimal]) -> str:
    """Why a quota request asks for more than the cluster has, or "" (a limit can never be used in full)."""
    total = totals.get(request.gpu_class)
    asked = max((v for v in (request.guaranteed, request.limit) if v is not None), default=None)
    if total is None or asked is None or asked <= total:
        return ""
    return f"the cluster has {fmt(total)} {request.gpu_class} in all, so {fmt(asked)} could never be used in full"


class DecisionError(Exception):
    """A decision that cannot be made; the message says why, for the decider."""


class AlreadyDecided(DecisionError):
    pass


class SelfDecision(DecisionError):
    pass


def _link(name: str, *args) -> str:
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return ""


def _check_decider(actor, requested_by_id: int, what: str) -> None:
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide quota requests and exceptions.")
    if requested_by_id == actor.pk:
        raise SelfDecision(f"You asked for {what} yourself; another platform admin must decide it.")


# -- quota requests ------------------------------------------------------------------------------


def decide_request(actor, request_id: int, *, approve: bool, comment: str = "") -> QuotaRequest:
    """Approve (apply through ``set_quota``) or deny a pending quota request.

    Raises ``QuotaRequest.DoesNotExist``, ``PermissionDenied``, ``SelfDecision``,
    ``AlreadyDecided`` or ``DecisionError`` (the approval would not make sense any more).

    A temporary grant keeps the values to restore at its end. When it replaces another
    temporary grant still running for the class, it takes over that grant's restore
    point, so the quota still returns to its permanent values (``set_quota`` ends the
    replaced grant).
    """
    comment = (comment or "").strip()
    with transaction.atomic():
        request = QuotaRequest.objects.select_for_update().select_related("team", "requested_by").get(pk=request_id)
        _check_decider(actor, request.requested_by_id, f"quota request #{request.pk}")
        if request.state != RequestState.PENDING:
            raise AlreadyDecided(f"Quota request #{request.pk} is already {request.get_state_display().lower()}.")
        team = request.team
        now = timezone.now()
        request.decided_by = actor
        request.decided_at = now
        request.comment = comment
        if approve:
            quota = Quota.objects.select_for_update().filter(team=team, gpu_class=request.gpu_class).first()
            current_g = quota.guaranteed if quota else Decimal(0)
            current_l = quota.limit if quota else Decimal(0)
            new_g = current_g if request.guaranteed is None else request.guaranteed
            new_l = current_l if request.limit is None else request.limit
            if new_g > new_l:
                raise DecisionError(
                    f"Request #{request.pk} would set guaranteed {fmt(new_g)} above the limit {fmt(new_l)} "
                    f"(the quota changed since it was filed); deny it and ask for a new one."
                )
            if request.until is not None:
                expires_at = expiry_of(request.until)
                if expires_at <= now:
                    raise DecisionError(f"Request #{request.pk} asked for GPUs until {request.until}; that is over.")
                running = (
                    QuotaRequest.objects.select_for_update()
                    .filter(
                        team=team,
                        gpu_class=request.gpu_class,
                        state=RequestState.APPROVED,
                        expires_at__isnull=False,
                        ended_at__isnull=True,
                    )
                    .order_by("decided_at")
                    .first()
                )
                request.expires_at = expires_at
                request.restore_guaranteed = running.restore_guaranteed if running else current_g
                request.restore_limit = running.restore_limit if running else current_l
            request.state = RequestState.APPROVED
            request.save()
            until = f" until {request.until:%Y-%m-%d}" if request.until else ""
            set_quota(
                team,
                request.gpu_class,
                new_g,
                new_l,
                actor,
                f"Quota request #{request.pk}{until}: {comment or request.justification}",
                action=AuditEntry.Action.REQUEST_APPROVED,
                request=request,
            )
            subject = f"Approved: {team.slug} gets {fmt(new_l)} {request.gpu_class}{until}"
            body = (
                f"{actor.username} approved your request #{request.pk}: {team.slug} now has "
                f"{fmt(new_g)} guaranteed and a limit of {fmt(new_l)} {request.gpu_class}{until}."
            )
        else:
            request.state = RequestState.DENIED
            request.save()
            audit.record(
                AuditEntry.Action.REQUEST_DENIED,
                actor=actor,
                team=team,
                gpu_class=request.gpu_class,
                after={"guaranteed": request.guaranteed, "limit": request.limit},
                reason=comment,
                request=request,
            )
            subject = f"Denied: more {request.gpu_class} for {team.slug}"
            body = f"{actor.username} denied your request #{request.pk}."
        if comment:
            body += f"\n\nComment: {comment}"
        notify(request.requested_by, subject, body, _link("quota-overview"))
    return request


# -- quota exceptions ----------------------------------------------------------------------------


def decide_exception(actor, exception_id: int, *, approve: bool, comment: str = "") -> QuotaException:
    """Approve or deny a workload's request to run above its team's limit.

    Approving charges the quota (``admission.grant_exception``: the overage grows, so the
    check constraint holds) and sends ``exception_decided``; jobs' receiver moves the
    workload to queued. If a receiver answers False, the workload no longer waits (it was
    deleted meanwhile): the charge is undone and the exception is recorded as withdrawn.
    """
    comment = (comment or "").strip()
    with transaction.atomic():
        exception = (
            QuotaException.objects.select_for_update().select_related("team", "requested_by").get(pk=exception_id)
        )
        _check_decider(actor, exception.requested_by_id, f"the exception for workload {exception.workload_id}")
        if exception.decision != Decision.PENDING:
            state = exception.get_decision_display().lower()
            raise AlreadyDecided(f"The exception for workload {exception.workload_id} is already {state}.")
        team = exception.team
        exception.decided_by = actor
        exception.decided_at = timezone.now()
        exception.comment = comment
        amount = class_amount(exception.gpu_class, exception.amount)  # "1 H100-80GB GPU", as admission says it
        if approve:
            before = _quota_values(team, exception.gpu_class)
            exception.decision = Decision.APPROVED
            exception.save()
            try:
                with transaction.atomic():  # a savepoint: undone when the workload is gone
                    admission.grant_exception(team, Charge(exception.gpu_class, exception.amount))
                    answers = exception_decided.send(
                        sender=QuotaException, exception=exception, approved=True, actor=actor
                    )
                    if any(answer is False for _, answer in answers):
                        raise _WorkloadGone
            except _WorkloadGone:
                return _withdrawn(exception, actor)
            audit.record(
                AuditEntry.Action.EXCEPTION_APPROVED,
                actor=actor,
                team=team,
                gpu_class=exception.gpu_class,
                before=before,
                after=_quota_values(team, exception.gpu_class),
                reason=comment or exception.reason,
                exception=exception,
            )
            quota_changed.send(sender=Quota, team=team)  # the cluster's ceiling grows by the overage
            subject = f"Approved: workload {exception.workload_id} may use {amount} over quota"
            body = f"{actor.username} approved the exception; the workload is queued."
        else:
            exception.decision = Decision.DENIED
            exception.save()
            exception_decided.send(sender=QuotaException, exception=exception, approved=False, actor=actor)
            audit.record(
                AuditEntry.Action.EXCEPTION_DENIED,
                actor=actor,
                team=team,
                gpu_class=exception.gpu_class,
                after={"amount": exception.amount},
                reason=comment,
                exception=exception,
            )
            subject = f"Denied: workload {exception.workload_id} over quota ({amount})"
            body = f"{actor.username} denied the exception; the workload will not run."
        if comment:
            body += f"\n\nComment: {comment}"
        notify(exception.requested_by, subject, body, _link("workload-detail", exception.workload_id))
    return exception


class _WorkloadGone(Exception):
    pass


def _withdrawn(exception: QuotaException, actor) -> QuotaException:
    QuotaException.objects.filter(pk=exception.pk).update(
        decision=Decision.WITHDRAWN, decided_by=None, comment="The workload no longer waited for this decision."
    )
    audit.record(
        AuditEntry.Action.EXCEPTION_WITHDRAWN,
        actor=actor,
        team=exception.team,
        gpu_class=exception.gpu_class,
        reason=f"Workload {exception.workload_id} no longer waited; nothing was charged.",
        exception=exception,
    )
    exception.refresh_from_db()
    return exception


def withdraw_exception(workload_id: int, actor=None) -> bool:
    """The waiting workload went away (deleted, stopped): its exception needs no decision.

    For jobs to call in the transaction that ends a ``pending_approval`` workload.
    """
    with transaction.atomic():
        exception = (
            QuotaException.objects.select_for_update()
            .filter(workload_id=workload_id, decision=Decision.PENDING)
            .select_related("team")
            .first()
        )
        if exception is None:
            return False
        QuotaException.objects.filter(pk=exception.pk).update(decision=Decision.WITHDRAWN, decided_at=timezone.now())
        audit.record(
            AuditEntry.Action.EXCEPTION_WITHDRAWN,
            actor=actor,
            team=exception.team,
            gpu_class=exception.gpu_class,
            reason=f"Workload {workload_id} no longer waits for a decision.",
            exception=exception,
        )
    return True


def _quota_values(team, gpu_class: str) -> dict[str, Decimal]:
    quota = Quota.objects.filter(team=team, gpu_class=gpu_class).first()
    if quota is None:
        return {}
    return {"guaranteed": quota.guaranteed, "limit": quota.limit, "used": quota.used, "overage": quota.overage}


# -- several at once -----------------------------------------------------------------------------


@dataclass
class BatchResult:
    decided: list[str] = field(default_factory=list)  # "request #3", "exception for workload 12"
    errors: list[str] = field(default_factory=list)  # one line each, for the decider


def decide_many(
    actor,
    *,
    request_ids: Iterable[int] = (),
    exception_ids: Iterable[int] = (),
    approve: bool,
    comment: str = "",
) -> BatchResult:
    """Decide several requests and exceptions with one comment.

    Each is its own transaction: one that cannot be decided (the decider's own, already
    decided, gone) is reported and does not hold back the others.
    """
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins decide quota requests and exceptions.")
    result = BatchResult()
    for pk in sorted(set(request_ids)):
        try:
            request = decide_request(actor, pk, approve=approve, comment=comment)
            result.decided.append(f"request #{request.pk} ({request.team.slug}, {request.gpu_class})")
        except QuotaRequest.DoesNotExist:
            result.errors.append(f"Quota request #{pk} does not exist.")
        except DecisionError as exc:
            result.errors.append(str(exc))
    for pk in sorted(set(exception_ids)):
        try:
            exception = decide_exception(actor, pk, approve=approve, comment=comment)
            if exception.decision == Decision.WITHDRAWN:
                result.errors.append(f"Workload {exception.workload_id} no longer waits; its exception was withdrawn.")
            else:
                result.decided.append(f"exception for workload {exception.workload_id} ({exception.team.slug})")
        except QuotaException.DoesNotExist:
            result.errors.append(f"Quota exception #{pk} does not exist.")
        except DecisionError as exc:
            result.errors.append(str(exc))
    return result
