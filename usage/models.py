"""What GPUs did and what they cost: rollups of GPU samples, budgets, idle policies.

Usage (activity, memory, power) is measured and stored as floats: it is a measurement,
not money. Money is never stored: it is computed from the workloads' start and finish
times and the offerings' prices (``usage.spend``) in ``Decimal``, so a price change or
a recomputed report never disagrees with a stored total.

Rollups, from fine to coarse (``usage.telemetry`` writes all of them in one
transaction per tick; ``usage.retention`` prunes them):

- ``GpuMinute``: one row per device series per minute (a GPU, a MIG instance, or one
  pod's share of a time-sliced GPU), attributed to a workload or unattributed. Activity
  is measured per GPU, so on a GPU shared by ``sharers`` pods each is attributed
  ``activity / sharers``.
- ``WorkloadDay``: per workload per day; kept forever (right-sizing, chargeback).
- ``TeamUsage``: per team (or unattributed) and GPU class, per hour and per day.
- ``DeviceReading``: the latest reading of every device, replaced each tick.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from jobs.models import Workload
from portal.models import Offering, Team


class GpuMinute(models.Model):
    """One device series in one minute.

    ``device`` is the GPU UUID, with ``/<GPU instance id>`` for a MIG instance. A
    time-sliced GPU has one series per pod, so (device, namespace, pod, minute) is the
    key. ``workload`` is empty for a pod the portal does not manage (unattributed).
    """

    minute = models.DateTimeField()
    device = models.CharField(max_length=120)
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    gpu_class = models.CharField(max_length=60)
    hostname = models.CharField(max_length=253, blank=True)
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    offering = models.ForeignKey(Offering, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    share = models.FloatField(help_text="Share of one physical GPU this series holds (1, 1/7, 1/4 ...).")
    activity = models.FloatField(help_text="Mean graphics-engine activity, 0..1.")
    fb_used_mib = models.PositiveIntegerField(help_text="Peak framebuffer memory used.")
    fb_total_mib = models.PositiveIntegerField(default=0)
    power_w = models.FloatField(default=0.0, help_text="Mean power draw of the device.")
    samples = models.PositiveIntegerField(default=1)
    sharers = models.PositiveSmallIntegerField(
        default=1,
        help_text="Pods seen on this physical GPU in this minute (time slicing). With more than one, "
        "activity is the whole GPU's, so it is split equally between them and says nothing about one pod.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["device", "namespace", "pod", "minute"], name="one_gpu_minute_per_series")
        ]
        indexes = [models.Index(fields=["workload", "minute"]), models.Index(fields=["minute"])]

    def __str__(self) -> str:
        return f"{self.device} {self.pod or '-'} {self.minute:%Y-%m-%d %H:%M}"


class WorkloadDay(models.Model):
    """A workload's measured usage in one day (UTC). Kept forever."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    offering = models.ForeignKey(Offering, null=True, on_delete=models.SET_NULL, related_name="+")
    gpu_class = models.CharField(max_length=60)
    device_minutes = models.PositiveIntegerField(default=0, help_text="Sampled device-minutes.")
    activity_minutes = models.FloatField(default=0.0, help_text="Sum of activity over sampled device-minutes.")
    peak_activity = models.FloatField(default=0.0, help_text="Highest one-minute activity of any device.")
    peak_fb_mib = models.PositiveIntegerField(default=0)
    energy_wh = models.FloatField(default=0.0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workload", "day"], name="one_usage_day_per_workload")]
        indexes = [models.Index(fields=["team", "day"])]

    def __str__(self) -> str:
        return f"workload {self.workload_id} on {self.day}"

    @property
    def mean_activity(self) -> float:
        return self.activity_minutes / self.device_minutes if self.device_minutes else 0.0


class Period(models.TextChoices):
    HOUR = "hour", "Hour"
    DAY = "day", "Day"


class TeamUsage(models.Model):
    """A team's (or the cluster's unattributed) GPU usage of one class in one hour or day.

    ``team_key`` is the team id, or 0 for pods the portal does not manage; it exists
    because a unique constraint treats NULLs as distinct, and the upsert needs a key.
    ``gpu_minutes`` weighs each device-minute by its share of a GPU (a 1g.10gb minute
    counts 1/7), so classes and slices add up to physical GPUs.
    """

    period = models.CharField(max_length=4, choices=Period.choices)
    start = models.DateTimeField()
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    team_key = models.BigIntegerField()
    gpu_class = models.CharField(max_length=60)
    device_minutes = models.PositiveIntegerField(default=0)
    gpu_minutes = models.FloatField(default=0.0)
    busy_gpu_minutes = models.FloatField(default=0.0, help_text="gpu_minutes weighted by activity.")
    peak_fb_mib = models.PositiveIntegerField(default=0)
    energy_wh = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["period", "start", "team_key", "gpu_class"], name="one_team_usage_row")
        ]
        indexes = [models.Index(fields=["period", "team_key", "start"])]

    def __str__(self) -> str:
        return f"{self.team_key or 'unattributed'} {self.gpu_class} {self.period} {self.start:%Y-%m-%d %H:%M}"


class DeviceReading(models.Model):
    """The latest reading of one device series; the whole table is replaced each tick."""

    at = models.DateTimeField()
    device = models.CharField(max_length=120)
    gpu_class = models.CharField(max_length=60)
    mig_profile = models.CharField(max_length=20, blank=True)
    hostname = models.CharField(max_length=253, blank=True)
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    workload = models.ForeignKey(Workload, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    share = models.FloatField(default=1.0)
    activity = models.FloatField()
    fb_used_mib = models.PositiveIntegerField(default=0)
    fb_total_mib = models.PositiveIntegerField(default=0)
    power_w = models.FloatField(default=0.0)

    class Meta:
        ordering = ["hostname", "device", "pod"]

    def __str__(self) -> str:
        return f"{self.device} {self.pod or 'free'}"


class NodeSeen(models.Model):
    """When the sampler first saw a GPU node: the cluster's cost of that node starts there.

    Before a node's first sample nothing says it existed (a cluster profile describes
    pools, not when their nodes came up), so charging it to "cluster idle" from the start
    of a report period invents cost: a 15-minute-old cluster showed weeks of idle GPUs.
    """

    hostname = models.CharField(max_length=253, unique=True)
    gpu_class = models.CharField(max_length=60, help_text="The class of its first sampled device.")
    first_sample_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} since {self.first_sample_at:%Y-%m-%d %H:%M}"


class BudgetPolicy(models.TextChoices):
    NOTIFY = "notify", "Notify only"
    APPROVAL = "approval", "Burst requests need approval at 100 %"


class Budget(models.Model):
    """A team's monthly GPU budget and how far it has been warned about this month."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="budget")
    monthly_amount = models.DecimalField(max_digits=12, decimal_places=2, validators=[MinValueValidator(Decimal(0))])
    policy = models.CharField(max_length=10, choices=BudgetPolicy.choices, default=BudgetPolicy.NOTIFY)
    # Warning state: the month (its first day) and the highest threshold announced in it.
    warned_month = models.DateField(null=True, blank=True)
    warned_percent = models.PositiveSmallIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.team}: {self.monthly_amount}/month ({self.policy})"


class IdlePolicy(models.Model):
    """A team's idle-notebook rule; teams without one use the platform defaults (settings)."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="idle_policy")
    enabled = models.BooleanField(default=True)
    threshold_percent = models.FloatField(default=5.0, validators=[MinValueValidator(0), MaxValueValidator(100)])
    idle_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(5)])
    grace_minutes = models.PositiveIntegerField(default=30, validators=[MinValueValidator(1)])

    class Meta:
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        return f"{self.team}: under {self.threshold_percent:g} % for {self.idle_minutes} min"


class IdleWarning(models.Model):
    """An idle notebook's pending stop: it will be stopped at ``stop_at`` unless it wakes up."""

    workload = models.OneToOneField(Workload, on_delete=models.CASCADE, related_name="idle_warning")
    warned_at = models.DateTimeField(default=timezone.now)
    stop_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"workload {self.workload_id} stops at {self.stop_at}"


class PortalCounter(models.Model):
    """A counter of the portal's own metrics, shared by every process through the database.

    ``count`` and ``total`` make a Prometheus summary (reconcile: runs and seconds) or a
    plain counter (task errors: ``count``). Updated with ``F()`` so writers never lose
    each other's increments.
    """

    name = models.CharField(max_length=60)
    label = models.CharField(max_length=100, blank=True)
    count = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)
    last = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "label"], name="one_portal_counter")]

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}} = {self.count}"


class WorkloadRun(models.Model):
    """One run of a workload (its pods running), kept because ``Workload`` remembers only the last.

    A stopped notebook started again gets new ``started_at``/``finished_at``; the spend of
    its earlier runs must not vanish with them. Written by ``usage.signals`` from the
    workload's timeline events.
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="usage_runs")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # Queue wait, both on the portal's clock: when this run was asked for (the request, or
    # the start of a stopped notebook) and when the portal saw it running. ``started_at``
    # is the pods' start time on the cluster's clock, so ``started_at - created_at`` mixes
    # two clocks (and an old pod's time) and can go negative.
    requested_at = models.DateTimeField(null=True, blank=True)
    running_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workload", "started_at"], name="one_run_per_start")]
        ordering = ["workload", "started_at"]

    def __str__(self) -> str:
        return f"workload {self.workload_id} {self.started_at} – {self.finished_at or 'now'}"
