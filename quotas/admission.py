"""Quota admission: lock, count, decide, record, in the caller's transaction.

1. Lock the team's quota row for the request's GPU class (SELECT ... FOR UPDATE), so
   concurrent requests of the same team and class queue up behind each other.
2. Count: the row's ``used`` is what admitted work holds now.
3. Decide: within guaranteed → guaranteed priority; within the limit → preemptible;
   over the limit → pending approval if the user asks for an exception, else refused
   with the numbers.
4. Record: add the charge to ``used`` in the same transaction as the workload row.
   The check constraint ``used <= limit + overage`` stops anything that slipped past.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils.module_loading import import_string

from portal.units import class_amount, number, request_amount
from quotas.gpu_classes import Charge, charge_for, mig_class
from quotas.models import Quota

PRIORITY_GUARANTEED = "gpu-portal-guaranteed"
PRIORITY_PREEMPTIBLE = "gpu-portal-preemptible"


def _over_budget(team) -> bool:
    """The team's budget policy sends burst requests to approval once it is spent.

    Spend lives above quotas (in ``usage``); the check is named by a setting so that
    quotas never imports it.
    """
    check = settings.BURST_BUDGET_CHECK
    return bool(check) and import_string(check)(team)


class QuotaRefused(Exception):
    """The request does not fit and no exception was asked for. The message has the numbers."""


@dataclass(frozen=True)
class Decision:
    admission: str  # "guaranteed" | "preemptible" | "" (pending approval)
    pending_approval: bool
    charge: Charge | None
    priority_class: str
    message: str


def fmt(amount: Decimal) -> str:
    """2 → '2', 0.428571 → '0.43': people read GPUs, not six decimals."""
    return number(amount)  # one rounding rule for every amount shown (portal.units)


def _profile_classes(team, offering) -> set[str]:
    """The team's quota of a MIG slice's own profile, if any: the only class ``charge_for`` asks about.

    Other offerings draw on their model's quota whatever else the team has, so they skip
    this query (it runs before the lock; admission is one SELECT FOR UPDATE and one UPDATE).
    """
    if offering.kind != "mig":
        return set()
    profile = mig_class(offering.gpu_model, offering.mig_profile)
    return set(Quota.objects.filter(team=team, gpu_class=profile).values_list("gpu_class", flat=True))


def _quota_for(team, charge: Charge, offering) -> Quota | None:
    quota = Quota.objects.select_for_update().filter(team=team, gpu_class=charge.gpu_class).first()
    if quota and offering.kind == "mig" and charge.gpu_class == offering.gpu_model and not quota.count_mig_slices:
        return None
    return quota


def admit(team, offering, units: int, *, wants_exception: bool = False) -> Decision:
    """Decide and record the quota of a new request. Must run inside ``transaction.atomic``."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("admit() must run inside the transaction that creates the workload")
    charge = charge_for(offering, units, _profile_classes(team, offering))
    if charge is None:
        return Decision("guaranteed", False, None, PRIORITY_GUARANTEED, "CPU-only work needs no GPU quota.")
    quota = _quota_for(team, charge, offering)
    used = quota.used if quota else Decimal(0)
    guaranteed = quota.guaranteed if quota else Decimal(0)
    limit = quota.limit if quota else Decimal(0)
    after = used + charge.amount
    # In the class's unit (GPUs or slices), and the request in the offering's own (portal.units).
    in_use = f"{team.slug} has {fmt(used)} of {class_amount(charge.gpu_class, limit)} in use"
    needs = request_amount(offering, units, charge.gpu_class, charge.amount)
    numbers = f"{in_use}; this request needs {needs}"
    if quota is not None and after <= limit:
        admission = "guaranteed" if after <= guaranteed else "preemptible"
        if admission == "preemptible" and _over_budget(team):
            message = f"Over this month's budget, so burst work waits for approval: {numbers}."
            return Decision("", True, charge, PRIORITY_PREEMPTIBLE, message)
        Quota.objects.filter(pk=quota.pk).update(used=F("used") + charge.amount)
        priority = PRIORITY_GUARANTEED if admission == "guaranteed" else PRIORITY_PREEMPTIBLE
        return Decision(admission, False, charge, priority, f"Admitted as {admission}: {numbers}.")
    if quota is None:
        numbers = f"{team.slug} has no quota for {charge.gpu_class}; this request needs {needs}"
    if wants_exception:
        return Decision("", True, charge, PRIORITY_PREEMPTIBLE, f"Over quota, waiting for approval: {numbers}.")
    raise QuotaRefused(f"Over quota: {numbers}. Ask for an exception or a larger quota.")


def grant_exception(team, charge: Charge) -> None:
    """Charge an approved exception: it may go over the limit, so it raises the overage."""
    quota, _ = Quota.objects.select_for_update().get_or_create(team=team, gpu_class=charge.gpu_class)
    Quota.objects.filter(pk=quota.pk).update(
        used=F("used") + charge.amount,
        overage=Greatest(F("overage"), F("used") + charge.amount - F("limit")),
    )


def release(team, gpu_class: str, amount: Decimal) -> None:
    """Give back what a finished or stopped workload held."""
    if not gpu_class or not amount:
        return
    Quota.objects.filter(team=team, gpu_class=gpu_class).update(
        used=Greatest(F("used") - amount, Decimal(0)),
        overage=Greatest(F("used") - amount - F("limit"), Decimal(0)),
    )


def ask_exception(team, workload_id: int, charge: Charge, user, reason: str) -> None:
    """Record that a workload waits for a platform admin to allow it over the limit."""
    from quotas.models import QuotaException

    QuotaException.objects.create(
        team=team,
        workload_id=workload_id,
        gpu_class=charge.gpu_class,
        amount=charge.amount,
        requested_by=user,
        reason=reason,
    )
