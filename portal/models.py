"""Teams, who is in them, API tokens, and the GPU catalog users choose from."""

from __future__ import annotations

import hashlib
import secrets
from fractions import Fraction

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

dns_label = RegexValidator(
    r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
    "Use lowercase letters, digits and '-', starting and ending with a letter or digit.",
)


class TeamQuerySet(models.QuerySet):
    def visible_to(self, user) -> TeamQuerySet:
        """The teams a user may see: their own, or all of them for platform admins."""
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(memberships__user=user).distinct()


class Team(models.Model):
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=40, unique=True, validators=[dns_label])
    namespace = models.CharField(
        max_length=63, unique=True, validators=[dns_label], help_text="Kubernetes namespace the team owns."
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def save(self, *args, **kwargs):
        if not self.namespace:
            self.namespace = f"{settings.TEAM_NAMESPACE_PREFIX}{self.slug}"
        super().save(*args, **kwargs)


class Membership(models.Model):
    MEMBER = "member"
    TEAM_ADMIN = "team_admin"
    ROLES = [(MEMBER, "Member"), (TEAM_ADMIN, "Team admin")]

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=ROLES, default=MEMBER)
    # Memberships from single sign-on are re-synchronised at each login; local ones stay.
    source = models.CharField(max_length=10, choices=[("local", "Local"), ("sso", "Single sign-on")], default="local")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]
        ordering = ["team__slug", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 is stored; the secret is shown once."""

    PREFIX = "gpp_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12, help_text="The first characters, to recognise a token.")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @staticmethod
    def hash(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def issue(cls, user, name: str) -> tuple[ApiToken, str]:
        secret = cls.PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(user=user, name=name, key_hash=cls.hash(secret), hint=secret[:10])
        return token, secret


class Offering(models.Model):
    """What a user chooses: a full GPU, a MIG slice, a shared GPU, or CPU only.

    Rows are loaded from the cluster profile (``load_catalog``); platform admins may
    change the display name, price and availability in Django admin. The fields the
    manifest builders read (request mode, resource, selectors, tolerations) mirror
    ``portal.cluster_profile.Offering`` so both can be passed to them.
    """

    KINDS = [("gpu", "Full GPU"), ("mig", "MIG slice"), ("shared", "Shared GPU"), ("cpu", "CPU only")]

    slug = models.SlugField(max_length=63, unique=True)
    display_name = models.CharField(max_length=100)
    kind = models.CharField(max_length=10, choices=KINDS)
    gpu_model = models.CharField(max_length=40, blank=True)
    mig_profile = models.CharField(max_length=20, blank=True)
    pool = models.CharField(max_length=63)
    request_mode = models.CharField(max_length=20)
    resource_name = models.CharField(max_length=100, blank=True)
    dra_device_class = models.CharField(max_length=100, blank=True)
    dra_selector = models.TextField(blank=True)
    node_selector = models.JSONField(default=dict, blank=True)
    node_affinity = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    share_numerator = models.PositiveIntegerField(default=1)
    share_denominator = models.PositiveIntegerField(default=1)
    gpu_memory_gib = models.PositiveIntegerField(default=0)
    price_per_hour = models.DecimalField(max_digits=10, decimal_places=4)
    price_set_by_admin = models.BooleanField(
        default=False, help_text="When set, reloading the cluster profile keeps this price."
    )
    is_active = models.BooleanField(default=True)
    # What the cluster has of this offering, as last observed (jobs.capacity).
    total_units = models.PositiveIntegerField(null=True, blank=True)
    free_units = models.PositiveIntegerField(null=True, blank=True)
    capacity_observed_at = models.DateTimeField(null=True, blank=True)
    # Units each node of the offering holds at most, largest first (jobs.capacity); what
    # jobs.fit checks a request against. Null: never observed, or not countable.
    node_units = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["kind", "slug"]

    def __str__(self) -> str:
        return self.display_name

    @property
    def share(self) -> Fraction:
        """Share of one physical GPU that one unit holds (1/7 for an A100 1g.10gb)."""
        return Fraction(self.share_numerator, self.share_denominator)

    @property
    def is_gpu(self) -> bool:
        return self.kind != "cpu"


class Notice(models.Model):
    """A message for one user in the portal (decisions, warnings); also sent by email."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices")
    created_at = models.DateTimeField(default=timezone.now)
    subject = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=300, blank=True, help_text="A portal path to open, e.g. /workloads/12/.")
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "read_at"])]

    def __str__(self) -> str:
        return f"{self.user}: {self.subject}"
