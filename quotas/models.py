"""What each team may use of each GPU class."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from portal.models import Membership, Team

GPU_AMOUNT = {"max_digits": 12, "decimal_places": 6}


def _at(at) -> str:
    """ "2026-12-03 10:15 UTC", in the portal's time zone."""
    return f"{timezone.localtime(at):%Y-%m-%d %H:%M %Z}"


def _when(at) -> str:
    """ " on 2026-12-03 10:15 UTC", or "" when unknown."""
    return f" on {_at(at)}" if at is not None else ""


class Quota(models.Model):
    """A team's allowance of one GPU class, in GPUs (or slices, for a MIG-profile class).

    A GPU class is a GPU model (``H100-80GB``) or a MIG profile of one
    (``A100-80GB/1g.10gb``). Work within ``guaranteed`` runs at the team's normal
    priority; between ``guaranteed`` and ``limit`` it runs preemptible.

    ``used`` is what admitted work holds right now. ``overage`` is usage above the
    limit that someone allowed on purpose (an approved exception, or a limit lowered
    below what is running); the check constraint ``used <= limit + overage`` is the
    database's last guard against over-admission, whatever the application does.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quotas")
    gpu_class = models.CharField(max_length=60)
    guaranteed = models.DecimalField(max_digits=10, decimal_places=4, default=Decimal("0"))
    limit = models.DecimalField(max_digits=10, decimal_places=4, default=Decimal("0"))
    count_mig_slices = models.BooleanField(
        default=True,
        help_text="For a GPU-model class: MIG slices of this model count as their share of a GPU "
        "(a 1g.10gb slice of an A100 counts 1/7) when no quota exists for the slice's profile.",
    )
    used = models.DecimalField(**GPU_AMOUNT, default=Decimal("0"))
    overage = models.DecimalField(**GPU_AMOUNT, default=Decimal("0"))

    class Meta:
        ordering = ["team__slug", "gpu_class"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_class"], name="one_quota_per_team_and_class"),
            models.CheckConstraint(condition=Q(guaranteed__lte=F("limit")), name="guaranteed_within_limit"),
            models.CheckConstraint(condition=Q(used__gte=0) & Q(overage__gte=0), name="usage_not_negative"),
            models.CheckConstraint(condition=Q(used__lte=F("limit") + F("overage")), name="used_within_limit"),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.gpu_class} {self.used}/{self.limit}"


class Decision(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    WITHDRAWN = "withdrawn", "Withdrawn"


class QuotaException(models.Model):
    """A member's request to run one workload above the team's limit."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_exceptions")
    workload_id = models.BigIntegerField(unique=True, help_text="The workload waiting for this decision.")
    gpu_class = models.CharField(max_length=60)
    amount = models.DecimalField(**GPU_AMOUNT)
    reason = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_exceptions_requested"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    decision = models.CharField(max_length=20, choices=Decision.choices, default=Decision.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="quota_exceptions_decided",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(decided_by=F("requested_by")), name="exception_not_decided_by_requester"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}: {self.amount} {self.gpu_class} for workload {self.workload_id}"

    @property
    def status(self) -> str:
        """The decision with who and when, e.g. "Denied by admin on 2026-12-03 10:15 UTC"."""
        if self.decision == Decision.PENDING:
            return "Pending: waiting for a platform admin"
        who = f" by {self.decided_by.username}" if self.decided_by_id else ""
        return f"{Decision(self.decision).label}{who}{_when(self.decided_at)}"


class RequestState(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    WITHDRAWN = "withdrawn", "Withdrawn"
    EXPIRED = "expired", "Expired"


class QuotaRequestQuerySet(models.QuerySet):
    def visible_to(self, user) -> QuotaRequestQuerySet:
        """Members see their teams' requests; platform admins see all of them."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(team__memberships__user=user)


class QuotaRequest(models.Model):
    """A team admin's request to change the team's quota of one GPU class.

    ``guaranteed`` and ``limit`` are the values asked for; an empty one keeps the value
    the quota has when the request is approved. A request with ``until`` is temporary:
    once approved, ``expires_at`` is set and ``restore_guaranteed``/``restore_limit`` keep
    the values the quota goes back to (``quotas.expiry``).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    gpu_class = models.CharField(max_length=60)
    guaranteed = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    limit = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    until = models.DateField(
        null=True, blank=True, help_text="Temporary until this day (UTC midnight); empty: permanent."
    )
    justification = models.TextField()
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests_filed"
    )
    requested_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=20, choices=RequestState.choices, default=RequestState.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="quota_requests_decided",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)
    # Temporary grants, once approved.
    expires_at = models.DateTimeField(null=True, blank=True)
    restore_guaranteed = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    restore_limit = models.DecimalField(max_digits=10, decimal_places=4, null=True, blank=True)
    expiry_warned_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_note = models.CharField(max_length=200, blank=True)

    objects = QuotaRequestQuerySet.as_manager()

    class Meta:
        ordering = ["-requested_at", "-id"]
        indexes = [
            models.Index(fields=["state", "expires_at"]),
            models.Index(fields=["team", "-requested_at"]),
        ]
        constraints = [
            models.CheckConstraint(
                condition=~Q(decided_by=F("requested_by")), name="quota_request_not_decided_by_requester"
            ),
            models.CheckConstraint(
                condition=Q(guaranteed__isnull=False) | Q(limit__isnull=False), name="quota_request_asks_something"
            ),
            models.CheckConstraint(
                condition=Q(guaranteed__isnull=True) | Q(limit__isnull=True) | Q(guaranteed__lte=F("limit")),
                name="quota_request_guaranteed_within_limit",
            ),
            models.CheckConstraint(
                condition=Q(guaranteed__gte=0) | Q(guaranteed__isnull=True), name="quota_request_guaranteed_positive"
            ),
            models.CheckConstraint(
                condition=Q(limit__gte=0) | Q(limit__isnull=True), name="quota_request_limit_positive"
            ),
            # Two pending requests for one class would contradict each other.
            models.UniqueConstraint(
                fields=["team", "gpu_class"], condition=Q(state="pending"), name="one_pending_request_per_class"
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team}: {self.gpu_class} ({self.state})"

    @property
    def is_temporary(self) -> bool:
        return self.until is not None

    @property
    def decision(self) -> str:
        """What was decided, in one word: Approved, Denied, Withdrawn, or Pending.

        A temporary grant that ended (state ``expired``, reached only from ``approved``)
        was approved: people ask "was my request approved?", not "is it still running?".
        """
        if self.state in (RequestState.APPROVED, RequestState.EXPIRED):
            return "Approved"
        return RequestState(self.state).label

    @property
    def status(self) -> str:
        """The decision with who and when, e.g. "Approved by admin on 2026-12-03 10:15 UTC; until 2026-12-31"."""
        when = _when(self.decided_at)
        if self.state == RequestState.PENDING:
            return "Pending: waiting for a platform admin"
        if self.state == RequestState.WITHDRAWN:
            return f"Withdrawn{when}"
        who = f" by {self.decided_by.username}" if self.decided_by_id else ""
        text = f"{self.decision}{who}{when}"
        if self.state == RequestState.APPROVED and self.expires_at is not None:
            text += f"; until {_at(self.expires_at)}"
        elif self.state == RequestState.EXPIRED:
            text += f"; ended{_when(self.ended_at)}" + (f" ({self.end_note})" if self.end_note else "")
        return text

    @property
    def is_active_grant(self) -> bool:
        return self.state == RequestState.APPROVED and self.expires_at is not None and self.ended_at is None


class AuditQuerySet(models.QuerySet):
    def visible_to(self, user) -> AuditQuerySet:
        """Platform admins read everything; team admins read their own teams' entries."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(team__memberships__user=user, team__memberships__role=Membership.TEAM_ADMIN)


class AuditEntry(models.Model):
    """Who changed what of a team's quota, when and why. Written by ``quotas.audit.record``."""

    class Action(models.TextChoices):
        QUOTA_CHANGED = "quota.changed", "Quota changed"
        REQUEST_FILED = "request.filed", "Quota request filed"
        REQUEST_APPROVED = "request.approved", "Quota request approved"
        REQUEST_DENIED = "request.denied", "Quota request denied"
        REQUEST_WITHDRAWN = "request.withdrawn", "Quota request withdrawn"
        GRANT_EXPIRED = "grant.expired", "Temporary grant ended"
        EXCEPTION_APPROVED = "exception.approved", "Exception approved"
        EXCEPTION_DENIED = "exception.denied", "Exception denied"
        EXCEPTION_WITHDRAWN = "exception.withdrawn", "Exception withdrawn"
        USAGE_CORRECTED = "usage.corrected", "Usage corrected"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="quota_audit_entries",
        help_text="Empty for the portal itself (expiry, usage re-count).",
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_audit_entries")
    action = models.CharField(max_length=30, choices=Action.choices)
    gpu_class = models.CharField(max_length=60, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    request = models.ForeignKey(
        QuotaRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    exception = models.ForeignKey(
        QuotaException, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["team", "-at"])]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.team} {self.action} {self.gpu_class}"

    @property
    def actor_name(self) -> str:
        return self.actor.username if self.actor_id else "portal"


class QuotaDrift(models.Model):
    """A re-count found ``Quota.used`` differing from what active workloads hold; it was corrected."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_drifts")
    gpu_class = models.CharField(max_length=60)
    recorded = models.DecimalField(**GPU_AMOUNT, help_text="Quota.used before the correction.")
    expected = models.DecimalField(**GPU_AMOUNT, help_text="The sum of the active workloads' charges.")
    detected_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-detected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.team}: {self.gpu_class} recorded {self.recorded}, expected {self.expected}"

    @property
    def difference(self) -> Decimal:
        return self.recorded - self.expected
