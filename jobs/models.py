"""Workloads (notebooks, training runs, endpoints) and their timelines."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from portal.models import Offering, Team


class State(models.TextChoices):
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    QUEUED = "queued", "Queued"
    SUBMITTED = "submitted", "Submitted"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    STOPPED = "stopped", "Stopped"
    REJECTED = "rejected", "Rejected"


# Work that holds quota and should have objects in the cluster.
ACTIVE_STATES = (State.QUEUED, State.SUBMITTED, State.RUNNING)
# A workload that may still come back (a stopped notebook keeps its name and volume).
LIVE_STATES = (State.PENDING_APPROVAL, *ACTIVE_STATES, State.STOPPED)
FINISHED_STATES = (State.SUCCEEDED, State.FAILED, State.REJECTED)


class Kind(models.TextChoices):
    NOTEBOOK = "notebook", "Notebook"
    TRAINING = "training", "Training run"
    ENDPOINT = "endpoint", "Inference endpoint"


class Admission(models.TextChoices):
    NONE = "", "Not admitted"
    GUARANTEED = "guaranteed", "Guaranteed"
    PREEMPTIBLE = "preemptible", "Preemptible (burst)"
    EXCEPTION = "exception", "Approved exception"


class WorkloadQuerySet(models.QuerySet):
    def visible_to(self, user) -> WorkloadQuerySet:
        """One queryset for the HTML pages and the API: the user's teams' workloads."""
        if not user.is_authenticated:
            return self.none()
        qs = self.filter(deleted_at__isnull=True)
        if user.is_staff:
            return qs
        return qs.filter(team__memberships__user=user)

    def active(self) -> WorkloadQuerySet:
        return self.filter(state__in=ACTIVE_STATES, deleted_at__isnull=True)


class Workload(models.Model):
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="workloads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="workloads")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=40)
    offering = models.ForeignKey(Offering, on_delete=models.PROTECT, related_name="workloads")
    gpus_per_replica = models.PositiveIntegerField(default=1)
    replicas = models.PositiveIntegerField(
        default=1, help_text="Nodes of a training run; minimum replicas of an endpoint."
    )
    max_replicas = models.PositiveIntegerField(default=1)
    framework = models.CharField(max_length=20, blank=True)
    image = models.CharField(max_length=500, blank=True)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    cpu = models.CharField(max_length=20, blank=True)
    memory = models.CharField(max_length=20, blank=True)
    workspace_gib = models.PositiveIntegerField(null=True, blank=True)
    max_runtime_seconds = models.PositiveIntegerField(null=True, blank=True)
    model_format = models.CharField(max_length=40, blank=True)
    storage_uri = models.CharField(max_length=500, blank=True)
    # Endpoints: a canary is the model version ``canary_storage_uri`` taking
    # ``canary_traffic_percent`` of the traffic while ``storage_uri`` serves the rest.
    canary_storage_uri = models.CharField(max_length=500, blank=True)
    canary_traffic_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    # Endpoints: KServe's deployment mode chosen at creation ("Standard" or "Knative"); KServe
    # never lets it change afterwards.
    deployment_mode = models.CharField(max_length=16, blank=True)
    # Replicas a canary revision may run beside the endpoint's own while a canary rollout
    # lasts (KServe keeps both revisions); counted in quota_charge until it is promoted.
    canary_replicas = models.PositiveIntegerField(default=0)

    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED, db_index=True)
    state_reason = models.TextField(blank=True)
    # Admission: what the request holds of the team's quota, and at which priority.
    admission = models.CharField(max_length=20, choices=Admission.choices, blank=True)
    quota_class = models.CharField(max_length=60, blank=True)
    quota_charge = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    # What it holds of the team's CPU (cores) and memory (GiB) quotas, all pods (quotas.compute).
    cpu_charge = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    memory_charge = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    priority_class = models.CharField(max_length=63, blank=True)
    wants_exception = models.BooleanField(default=False)
    exception_reason = models.TextField(blank=True)

    # What the cluster says, as last observed by the reconcile.
    cluster_phase = models.CharField(max_length=40, blank=True)
    cluster_message = models.TextField(blank=True)
    # Why a failed run failed, stored when it fails (its pods are gone soon after): the pod
    # that failed first ({"class": "oom"|"error"|"preempted", "pod", "node", "container",
    # "exit_code", "reason", "message"}, jobs.kube.status.Failure.as_dict); {} otherwise.
    failure = models.JSONField(default=dict, blank=True)
    url = models.URLField(blank=True, max_length=500)
    applied_manifests = models.JSONField(default=list, blank=True)
    # Endpoints: the traffic split KServe reports ([{role, percent, revision, ready}], stable first).
    cluster_traffic = models.JSONField(default=list, blank=True)
    submit_attempts = models.PositiveIntegerField(default=0)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=Q(state__in=[s.value for s in LIVE_STATES]) & Q(deleted_at__isnull=True),
                name="unique_live_name_per_team",
            ),
        ]
        indexes = [models.Index(fields=["team", "state"])]

    def __str__(self) -> str:
        return f"{self.team}/{self.name}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_finished(self) -> bool:
        return self.state in FINISHED_STATES or self.deleted_at is not None

    @property
    def gpu_units(self) -> int:
        """Units of the offering this workload holds at most (endpoints can scale to max):
        what admission reserves in quota.

        Not a canary's replicas: quota counts them (``canary_replicas`` in ``quota_charge``)
        while the canary lasts. Spend does not charge an endpoint this: it charges the
        replicas that ran (``WorkloadScale``, ``usage.spend``).
        """
        replicas = self.max_replicas if self.kind == Kind.ENDPOINT else self.replicas
        return self.gpus_per_replica * replicas


class WorkloadEvent(models.Model):
    """One line of a workload's timeline: a state change or something worth knowing."""

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(default=timezone.now)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20, blank=True)
    message = models.TextField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.workload}: {self.message}"


class Preset(models.Model):
    """A team's saved request, e.g. 'PyTorch notebook on a 1g.10gb slice'."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="presets")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    request = models.JSONField(help_text="The request fields, validated like any request when used.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_preset_name_per_team")]

    def __str__(self) -> str:
        return f"{self.team}: {self.name}"


class WorkloadScale(models.Model):
    """How many replicas an endpoint ran from ``started_at`` on, until the next row.

    Written by the reconcile only when the count it observes changes (``jobs.scale``), so a
    steady endpoint adds no rows. ``replicas`` counts the predictor pods holding GPUs
    (stable and canary), capped at what quota reserved when it was observed (``max_replicas``
    plus the canary's replicas): pods a rolling update surges beyond that are KServe's, not
    the team's. Spend prices an endpoint's minutes from these rows (``usage.spend``).
    """

    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="scales")
    started_at = models.DateTimeField()
    replicas = models.PositiveIntegerField()

    class Meta:
        ordering = ["workload", "started_at", "id"]
        indexes = [models.Index(fields=["workload", "started_at"])]

    def __str__(self) -> str:
        return f"{self.workload_id}: {self.replicas} from {self.started_at:%Y-%m-%d %H:%M:%S}"
