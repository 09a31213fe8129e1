"""CPU and memory quotas: a team's cores and GiB, next to its GPU classes.

They are ``Quota`` rows of two reserved classes, ``cpu`` (in cores) and ``memory`` (in
GiB), so requests, approvals, temporary grants, the audit log and the quota page treat
them like any GPU class. Two rules differ:

* A team without a ``cpu`` (or ``memory``) row is not limited in it: quotas on CPU and
  memory came after GPU quotas, and teams that had none must keep working until a
  platform admin sets one. A GPU class without a row admits nothing, as before.
* Every workload draws on them (GPU or not), for all of its pods: each replica (an
  endpoint's maximum), plus helper pods such as an MPI launcher. jobs computes the
  amounts (it knows the pods); admission decides with them.

In the cluster they become ``cpu`` and ``memory`` in the team's Volcano Queue and
ResourceQuotas (``quotas.cluster.resource_amounts``); Kueue's ClusterQueues hold GPUs
only, so there the namespace's ResourceQuota is the cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction

from django.db.models import F
from django.db.models.functions import Greatest

from quotas.models import Quota

CPU = "cpu"
MEMORY = "memory"
CLASSES = (CPU, MEMORY)  # also the order their rows are locked in, after any GPU class
UNITS = {CPU: "cores", MEMORY: "GiB"}
GIB = 2**30
ZERO = Decimal(0)
SIX_PLACES = Decimal("0.000001")


def is_compute_class(name: str) -> bool:
    return name in CLASSES


def unit(name: str) -> str:
    """What one unit of a quota class is, for people: cores, GiB or (any GPU class) GPUs."""
    return UNITS.get(name, "GPUs")


@dataclass(frozen=True)
class Compute:
    """What a workload holds of CPU (cores) and memory (GiB), all pods together."""

    cpu: Decimal = ZERO
    memory: Decimal = ZERO

    @classmethod
    def of(cls, cpu_cores, memory_bytes) -> Compute:
        """From exact base units; rounded up to six places, so a charge is never short."""
        cores = Decimal(cpu_cores).quantize(SIX_PLACES, rounding=ROUND_CEILING)
        gib = (Decimal(memory_bytes) / GIB).quantize(SIX_PLACES, rounding=ROUND_CEILING)
        return cls(cores, gib)

    def amounts(self) -> dict[str, Decimal]:
        return {CPU: self.cpu, MEMORY: self.memory}

    def __bool__(self) -> bool:
        return bool(self.cpu or self.memory)


@dataclass(frozen=True)
class Fit:
    """How a workload's CPU and memory fit the team's quotas."""

    level: str  # "guaranteed", "preemptible" (above a guarantee, within every limit) or "over"
    limited: bool  # the team has a CPU or memory quota at all
    numbers: str  # "vision has 8 of 32 cores cpu in use; this request needs 16", one clause per class

    @property
    def over(self) -> bool:
        return self.level == "over"


def _fmt(amount: Decimal) -> str:
    from quotas.admission import fmt

    return fmt(amount)


def fit(team, need: Compute, rows: list[Quota]) -> Fit:
    """How ``need`` fits the team's CPU and memory ``rows`` (which the caller has locked).

    A class counts for the level only if the request needs some of it; the worst class
    decides (one over its limit makes the whole request over).
    """
    rows = sorted(rows, key=lambda q: q.gpu_class)
    level, clauses, over = "guaranteed", [], []
    for quota in rows:
        wanted = need.amounts()[quota.gpu_class]
        if not wanted:
            continue
        after = quota.used + wanted
        clause = (
            f"{team.slug} has {_fmt(quota.used)} of {_fmt(quota.limit)} {unit(quota.gpu_class)} "
            f"{quota.gpu_class} in use; this request needs {_fmt(wanted)}"
        )
        clauses.append(clause)
        if after > quota.limit:
            over.append(clause)
        elif after > quota.guaranteed:
            level = "preemptible"
    if over:
        return Fit("over", True, "; ".join(over))
    return Fit(level, bool(rows), "; ".join(clauses))


def charge(team, held: Compute, classes=CLASSES, *, allow_overage: bool = False) -> None:
    """Add what a workload now holds to the team's CPU and memory rows (those that exist).

    ``classes``: the ones the team has a row of, when the caller knows (no UPDATE for the others).

    ``allow_overage``: an approved exception may take the team above a limit; the excess
    is recorded as overage so that the check constraint (and the cluster's ceiling) allow it.
    """
    for name, amount in held.amounts().items():
        if not amount or name not in classes:
            continue
        rows = Quota.objects.filter(team=team, gpu_class=name)
        if allow_overage:
            rows.update(used=F("used") + amount, overage=Greatest(F("overage"), F("used") + amount - F("limit")))
        else:
            rows.update(used=F("used") + amount)


def release(team, held: Compute) -> None:
    """Give back what a finished or stopped workload held."""
    for name, amount in held.amounts().items():
        if amount:
            Quota.objects.filter(team=team, gpu_class=name).update(
                used=Greatest(F("used") - amount, ZERO),
                overage=Greatest(F("used") - amount - F("limit"), ZERO),
            )


def cluster_amounts(guaranteed: Decimal, ceiling: Decimal, name: str) -> tuple[Fraction | int, Fraction | int]:
    """A class's (guaranteed, ceiling) in the cluster's base units: cores (exact), or whole bytes.

    Memory is rounded down to whole bytes: a quota may be a byte short, never a byte over.
    """
    if name == CPU:
        return Fraction(guaranteed), Fraction(ceiling)
    return int(guaranteed * GIB), int(ceiling * GIB)
