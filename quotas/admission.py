"""Quota admission: lock, count, decide, record, in the caller's transaction.

1. Lock the team's quota row for the request's GPU class (SELECT ... FOR UPDATE), so
   concurrent requests of the same team and class queue up behind each other.
2. Count: the row's ``used`` is what admitted work holds now.
3. Decide: within guaranteed → guaranteed priority; within the limit → preemptible;
   over the limit → pending approval if the user asks for an exception, else refused
   with the numbers.
4. Record: add the charge to ``used`` in the same transaction as the workload row.
   The check constraint ``used <= limit + overage`` stops anything that slipped past.

CPU and memory (``quotas.compute``) are decided alongside, for every workload: their
rows are locked after the GPU class's (always in that order, so two admissions cannot
deadlock), work runs guaranteed only if it is within the guarantee of every quota it
draws on, and over a CPU or memory limit it is refused (exceptions are for GPUs).
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
from quotas import compute
from quotas.compute import Compute
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
    compute: Compute | None = None  # the CPU and memory the workload holds from now (None: not yet)


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


def _lock(team, classes: list[str]) -> dict[str, Quota]:
    """Lock the team's rows of ``classes`` in id order, as the re-count does, so neither can deadlock the other."""
    rows = Quota.objects.select_for_update().filter(team=team, gpu_class__in=classes).order_by("id")
    return {q.gpu_class: q for q in rows}


def _quota_for(rows: dict[str, Quota], charge: Charge, offering) -> Quota | None:
    quota = rows.get(charge.gpu_class)
    if quota and offering.kind == "mig" and charge.gpu_class == offering.gpu_model and not quota.count_mig_slices:
        return None
    return quota


def admit(team, offering, units: int, *, wants_exception: bool = False, resources: Compute | None = None) -> Decision:
    """Decide and record the quota of a new request. Must run inside ``transaction.atomic``.

    ``resources``: the CPU and memory of all the request's pods (``quotas.compute``).
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("admit() must run inside the transaction that creates the workload")
    resources = resources or Compute()
    charge = charge_for(offering, units, _profile_classes(team, offering))
    if charge is None:
        return _admit_cpu_only(team, resources)
    rows = _lock(team, [charge.gpu_class, *compute.CLASSES])
    quota = _quota_for(rows, charge, offering)
    fit = compute.fit(team, resources, [rows[c] for c in compute.CLASSES if c in rows])
    if fit.over:
        raise QuotaRefused(f"Over quota: {fit.numbers}. Ask for a larger CPU or memory quota.")
    used = quota.used if quota else Decimal(0)
    guaranteed = quota.guaranteed if quota else Decimal(0)
    limit = quota.limit if quota else Decimal(0)
    after = used + charge.amount
    # In the class's unit (GPUs or slices), and the request in the offering's own (portal.units).
    in_use = f"{team.slug} has {fmt(used)} of {class_amount(charge.gpu_class, limit)} in use"
    needs = request_amount(offering, units, charge.gpu_class, charge.amount)
    numbers = f"{in_use}; this request needs {needs}"
    if quota is not None and after <= limit:
        within = after <= guaranteed and fit.level == "guaranteed"
        admission = "guaranteed" if within else "preemptible"
        if fit.numbers:
            numbers = f"{numbers}; {fit.numbers}"
        if admission == "preemptible" and _over_budget(team):
            message = f"Over this month's budget, so burst work waits for approval: {numbers}."
            return Decision("", True, charge, PRIORITY_PREEMPTIBLE, message)
        Quota.objects.filter(pk=quota.pk).update(used=F("used") + charge.amount)
        compute.charge(team, resources, [c for c in compute.CLASSES if c in rows])
        priority = PRIORITY_GUARANTEED if admission == "guaranteed" else PRIORITY_PREEMPTIBLE
        return Decision(admission, False, charge, priority, f"Admitted as {admission}: {numbers}.", resources)
    if quota is None:
        numbers = f"{team.slug} has no quota for {charge.gpu_class}; this request needs {needs}"
    if wants_exception:
        return Decision("", True, charge, PRIORITY_PREEMPTIBLE, f"Over quota, waiting for approval: {numbers}.")
    raise QuotaRefused(f"Over quota: {numbers}. Ask for an exception or a larger quota.")


def _admit_cpu_only(team, resources: Compute) -> Decision:
    """Work without a GPU: the team's CPU and memory quotas decide, if it has any."""
    rows = _lock(team, list(compute.CLASSES))
    fit = compute.fit(team, resources, list(rows.values()))
    if not fit.limited:
        # Still recorded on the workload: a CPU quota set later counts what it holds (re-count).
        message = "No GPU, CPU or memory quota limits this team."
        return Decision("guaranteed", False, None, PRIORITY_GUARANTEED, message, resources)
    if fit.over:
        raise QuotaRefused(f"Over quota: {fit.numbers}. Ask for a larger CPU or memory quota.")
    compute.charge(team, resources, list(rows))
    priority = PRIORITY_GUARANTEED if fit.level == "guaranteed" else PRIORITY_PREEMPTIBLE
    numbers = f": {fit.numbers}" if fit.numbers else ""
    return Decision(fit.level, False, None, priority, f"Admitted as {fit.level}{numbers}.", resources)


def extra_charge(offering, gpu_class: str, units: int) -> Charge | None:
    """What ``units`` more of ``offering`` count against ``gpu_class``, the class its workload holds.

    Pinned to the class the workload was admitted on, so that what is added and later
    given back is the same amount of the same row (``release``), whatever quotas the
    team has gained since.
    """
    if not gpu_class:
        return None
    return charge_for(offering, units, {gpu_class})


def admit_extra(team, offering, gpu_class: str, units: int, what: str) -> Charge | None:
    """Charge ``units`` more to a live workload's quota class (a canary's pods), within the limit.

    Lock, count, decide, record, like ``admit``, in the caller's transaction. Only within
    the limit: the extra pods run with the workload's priority class, so they cannot be
    sent to burst or to approval on their own. ``QuotaRefused`` with the numbers otherwise.
    """
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("admit_extra() must run inside the transaction that records the change")
    charge = extra_charge(offering, gpu_class, units)
    if charge is None or not charge.amount:
        return None
    quota = Quota.objects.select_for_update().filter(team=team, gpu_class=charge.gpu_class).first()
    used = quota.used if quota else Decimal(0)
    limit = quota.limit if quota else Decimal(0)
    if quota is None or used + charge.amount > limit:
        count, unit = class_amount(charge.gpu_class, charge.amount).split(" ", 1)
        raise QuotaRefused(
            f"Over quota: {team.slug} has {fmt(used)} of {class_amount(charge.gpu_class, limit)} in use; {what} "
            f"needs {count} more {unit}. Promote or stop other work first, or ask for a larger quota."
        )
    Quota.objects.filter(pk=quota.pk).update(used=F("used") + charge.amount)
    return charge


def grant_exception(team, charge: Charge) -> None:
    """Charge an approved exception: it may go over the limit, so it raises the overage.

    The team's CPU and memory rows are locked with the class's (in id order): the workload's
    CPU and memory are charged next, in the same transaction (``quotas.compute.charge``).
    """
    _lock(team, [charge.gpu_class, *compute.CLASSES])
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
