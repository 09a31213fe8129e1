"""What a team uses of its quota, as people read it (in GPUs, or slices), and its re-count."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Sum

from portal.models import Team
from quotas import audit
from quotas.compute import is_compute_class, unit
from quotas.gpu_classes import charge_for
from quotas.models import AuditEntry, Decision, Quota, QuotaDrift, QuotaException, QuotaRequest, RequestState
from quotas.signals import quota_changed

ZERO = Decimal(0)


@dataclass(frozen=True)
class QuotaRow:
    gpu_class: str
    used: Decimal
    guaranteed: Decimal
    limit: Decimal
    pending: Decimal  # asked for by workloads waiting for approval
    overage: Decimal = ZERO  # allowed above the limit (approved exceptions, a limit lowered under running work)
    requested_guaranteed: Decimal | None = None  # of the team's pending quota request, if any
    requested_limit: Decimal | None = None
    request_id: int | None = None
    expires_at: datetime | None = None  # a temporary grant is in force until then
    restore_limit: Decimal | None = None  # ... and the limit goes back to this

    @property
    def compute_unit(self) -> str:
        """``cores`` or ``GiB`` for a CPU or memory quota; empty for a GPU class."""
        return unit(self.gpu_class) if is_compute_class(self.gpu_class) else ""

    @property
    def free(self) -> Decimal:
        return max(self.limit - self.used, ZERO)

    @property
    def used_percent(self) -> int:
        return int(self.used * 100 / self.limit) if self.limit else (100 if self.used else 0)

    @property
    def guaranteed_percent(self) -> int:
        return int(self.guaranteed * 100 / self.limit) if self.limit else 0

    @property
    def scale(self) -> Decimal:
        """The bar's full width: the limit, or more when usage or a request goes past it."""
        return max(self.limit, self.used + self.pending, self.requested_limit or ZERO, Decimal(1))

    @property
    def with_pending(self) -> Decimal:
        return self.used + self.pending

    @property
    def state(self) -> str:
        """'guaranteed', 'preemptible' (borrowing above the guarantee) or 'over' (above the limit)."""
        if self.used > self.limit:
            return "over"
        return "preemptible" if self.used > self.guaranteed else "guaranteed"


def quota_rows(teams: Iterable[Team]) -> dict[int, list[QuotaRow]]:
    """Team id → its rows, for many teams in four queries (the overview and the console).

    A class appears once the team has a quota for it, or asks for one.
    """
    ids = [t.pk for t in teams]
    quotas = {(q.team_id, q.gpu_class): q for q in Quota.objects.filter(team_id__in=ids)}
    pending = {
        (row["team_id"], row["gpu_class"]): row["total"]
        for row in QuotaException.objects.filter(team_id__in=ids, decision=Decision.PENDING)
        .values("team_id", "gpu_class")
        .annotate(total=Sum("amount"))
    }
    requests = {
        (r.team_id, r.gpu_class): r
        for r in QuotaRequest.objects.filter(team_id__in=ids, state=RequestState.PENDING).only(
            "id", "team_id", "gpu_class", "guaranteed", "limit"
        )
    }
    grants = {
        (g.team_id, g.gpu_class): g
        for g in QuotaRequest.objects.filter(
            team_id__in=ids, state=RequestState.APPROVED, expires_at__isnull=False, ended_at__isnull=True
        ).only("id", "team_id", "gpu_class", "expires_at", "restore_limit")
    }
    out: dict[int, list[QuotaRow]] = {pk: [] for pk in ids}
    for key in sorted(set(quotas) | set(pending) | set(requests), key=lambda k: (k[0], k[1])):
        q, r, g = quotas.get(key), requests.get(key), grants.get(key)
        out[key[0]].append(
            QuotaRow(
                gpu_class=key[1],
                used=q.used if q else ZERO,
                guaranteed=q.guaranteed if q else ZERO,
                limit=q.limit if q else ZERO,
                pending=pending.get(key) or ZERO,
                overage=q.overage if q else ZERO,
                requested_guaranteed=r.guaranteed if r else None,
                requested_limit=r.limit if r else None,
                request_id=r.pk if r else None,
                expires_at=g.expires_at if g else None,
                restore_limit=g.restore_limit if g else None,
            )
        )
    return out


def team_quota(team) -> list[QuotaRow]:
    return quota_rows([team])[team.pk]


def units_left(team, offering) -> int | None:
    """How many more units of ``offering`` the team's quota admits now; None without a GPU."""
    if offering.kind == "cpu":
        return None
    quotas = {q.gpu_class: q for q in Quota.objects.filter(team=team)}
    charge = charge_for(offering, 1, set(quotas))
    quota = quotas.get(charge.gpu_class)
    if quota is None or charge.amount <= 0:
        return 0
    if offering.kind == "mig" and charge.gpu_class == offering.gpu_model and not quota.count_mig_slices:
        return 0
    return int(max(quota.limit - quota.used, Decimal(0)) / charge.amount)


# -- re-count ----------------------------------------------------------------------------------

Totals = Mapping[tuple[int, str], Decimal]


def recount(observed: Totals | Callable[[], Totals]) -> list[QuotaDrift]:
    """Make ``Quota.used`` equal what active work holds; record every difference as drift.

    ``observed`` maps (team id, GPU class) to the sum of the ``quota_charge`` of the
    team's active workloads of that class (jobs knows them; quotas may not import jobs),
    and (team id, ``cpu``/``memory``) to what they hold of those (``quotas.compute``).
    Pass a callable that computes it: it is called after step 1, so no admission or
    release can happen between the count and the correction. A plain mapping is for
    tests and for repairs while nothing else admits.

    1. Lock every quota row, in id order (admission waits; two re-counts cannot deadlock).
    2. Read the totals.
    3. Where ``used`` differs: record a ``QuotaDrift`` and an audit entry, and set
       ``used`` to the total and ``overage`` to ``max(used - limit, 0)`` in one UPDATE,
       so the check constraint holds whatever the drift was. A class with usage but no
       quota row gets a row with a limit of 0 (all of it overage), except CPU and memory (no row:
       not limited).
    4. Teams whose overage changed get ``quota_changed`` (the cluster's ceiling moved).
    """
    drifts: list[QuotaDrift] = []
    with transaction.atomic():
        rows = {(q.team_id, q.gpu_class): q for q in Quota.objects.select_for_update().order_by("id")}
        totals = observed() if callable(observed) else observed
        totals = {key: Decimal(str(value)) for key, value in totals.items()}
        teams = {t.pk: t for t in Team.objects.filter(pk__in={k[0] for k in set(rows) | set(totals)})}
        changed: set[int] = set()
        for key in sorted(set(rows) | set(totals)):
            team = teams.get(key[0])
            if team is None:
                continue
            expected = totals.get(key, ZERO)
            quota = rows.get(key)
            recorded = quota.used if quota else ZERO
            if recorded == expected:
                continue
            if quota is None:
                if is_compute_class(key[1]):
                    continue  # no CPU (memory) quota: the team is not limited in it, nothing to correct
                quota = Quota.objects.create(team=team, gpu_class=key[1])
            overage = max(expected - quota.limit, ZERO)
            Quota.objects.filter(pk=quota.pk).update(used=expected, overage=overage)
            if overage != quota.overage:
                changed.add(team.pk)
            drifts.append(QuotaDrift.objects.create(team=team, gpu_class=key[1], recorded=recorded, expected=expected))
            audit.record(
                AuditEntry.Action.USAGE_CORRECTED,
                actor=None,
                team=team,
                gpu_class=key[1],
                before={"used": recorded, "overage": quota.overage},
                after={"used": expected, "overage": overage},
                reason=f"Re-count: active workloads hold {audit.amount(expected)}, the quota said "
                f"{audit.amount(recorded)}.",
            )
        for pk in sorted(changed):
            quota_changed.send(sender=Quota, team=teams[pk])
    return drifts
