"""What each team may use of each GPU class."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from portal.models import Team

GPU_AMOUNT = {"max_digits": 12, "decimal_places": 6}


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
