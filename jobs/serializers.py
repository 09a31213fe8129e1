"""API representations of workloads. Validation lives in ``jobs.specs``, not here."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from jobs import scale
from jobs.kube.status import FAILURE_CLASSES
from jobs.models import Workload, WorkloadEvent
from jobs.specs import ALL_FIELDS

REQUEST_EXAMPLES = [
    OpenApiExample(
        "Notebook on a MIG slice",
        value={
            "team": "vision",
            "kind": "notebook",
            "name": "explore-resnet",
            "offering": "a100-80gb-1g.10gb",
            "gpus_per_replica": 1,
            "image": "quay.io/jupyter/pytorch-notebook:2024-12-02",
            "workspace_gib": 20,
        },
        request_only=True,
    ),
    OpenApiExample(
        "Two-node PyTorch training run",
        value={
            "team": "nlp",
            "kind": "training",
            "name": "bert-finetune",
            "offering": "h100-80gb",
            "framework": "torch",
            "replicas": 2,
            "gpus_per_replica": 8,
            "image": "nvcr.io/nvidia/pytorch:24.10-py3",
            "command": ["torchrun", "train.py"],
            "max_runtime_seconds": 14400,
        },
        request_only=True,
    ),
    OpenApiExample(
        "Inference endpoint on a shared L4",
        value={
            "team": "nlp",
            "kind": "endpoint",
            "name": "sentiment",
            "offering": "l4-shared",
            "gpus_per_replica": 1,
            "model_format": "sklearn",
            "storage_uri": "s3://models/sentiment/v3",
            "min_replicas": 1,
            "max_replicas": 3,
        },
        request_only=True,
    ),
]


@extend_schema_serializer(examples=REQUEST_EXAMPLES)
class WorkloadRequestSerializer(serializers.Serializer):
    """The request body. Fields are checked by ``jobs.specs.validate_request``; any other
    field (``privileged``, ``hostPath``, ``serviceAccountName`` ...) is refused by name."""

    team = serializers.SlugField(help_text="Slug of one of your teams.")
    kind = serializers.ChoiceField(choices=["notebook", "training", "endpoint"])
    name = serializers.CharField(max_length=40, help_text="DNS label, unique among the team's live workloads.")
    offering = serializers.CharField(help_text="Offering slug, see /api/v1/offerings/.")
    gpus_per_replica = serializers.IntegerField(required=False)
    image = serializers.CharField(required=False)
    command = serializers.ListField(child=serializers.CharField(), required=False)
    args = serializers.ListField(child=serializers.CharField(), required=False)
    env = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    labels = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    annotations = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False)
    cpu = serializers.CharField(required=False, help_text="Kubernetes quantity per replica, e.g. '4'.")
    memory = serializers.CharField(required=False, help_text="Kubernetes quantity per replica, e.g. '16Gi'.")
    workspace_gib = serializers.IntegerField(required=False, help_text="Notebook home volume size.")
    framework = serializers.ChoiceField(choices=["torch", "mpi", "custom"], required=False)
    replicas = serializers.IntegerField(required=False, help_text="Training: number of nodes.")
    max_runtime_seconds = serializers.IntegerField(required=False)
    min_replicas = serializers.IntegerField(required=False)
    max_replicas = serializers.IntegerField(required=False)
    model_format = serializers.CharField(required=False)
    storage_uri = serializers.CharField(required=False)
    wants_exception = serializers.BooleanField(
        required=False, help_text="Over quota: wait for a platform admin's approval instead of being refused."
    )
    exception_reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)


assert set(WorkloadRequestSerializer().fields) - {"team", "wants_exception", "exception_reason"} <= ALL_FIELDS


class WorkloadEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", default=None)

    class Meta:
        model = WorkloadEvent
        fields = ["at", "actor", "from_state", "to_state", "message"]
        read_only_fields = fields


class FailureSerializer(serializers.Serializer):
    """Why a failed run failed: the pod that failed first, where it ran and how it ended."""

    # "class" is a keyword, so the field is declared through the class namespace.
    locals()["class"] = serializers.ChoiceField(
        choices=FAILURE_CLASSES,
        help_text="oom: a container was OOMKilled; preempted: the pod was preempted or evicted "
        "(DisruptionTarget); error: a container exited non-zero or the pod failed otherwise.",
    )
    exit_code = serializers.IntegerField(allow_null=True, help_text="The failed container's exit code.")
    pod = serializers.CharField()
    node = serializers.CharField(help_text="The node the pod ran on.")
    container = serializers.CharField()
    reason = serializers.CharField(help_text="Kubernetes' reason: OOMKilled, Error, PreemptionByScheduler ...")
    message = serializers.CharField(help_text="The container's termination message or the preemption message.")


class WorkloadSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    created_by = serializers.CharField(source="created_by.username")
    offering = serializers.CharField(source="offering.slug")
    # Empty until the workload serves something, so not a "uri" in the schema.
    url = serializers.CharField(read_only=True, help_text="Where it is served once running; empty until then.")
    failure = serializers.SerializerMethodField(help_text="Why the run failed; null unless it failed and a pod said.")

    class Meta:
        model = Workload
        fields = [
            "id",
            "team",
            "kind",
            "name",
            "state",
            "state_reason",
            "offering",
            "gpus_per_replica",
            "replicas",
            "max_replicas",
            "framework",
            "image",
            "admission",
            "priority_class",
            "quota_class",
            "quota_charge",
            "cluster_phase",
            "cluster_message",
            "failure",
            "url",
            "created_by",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(FailureSerializer(allow_null=True))
    def get_failure(self, workload: Workload) -> dict | None:
        return FailureSerializer(workload.failure).data if workload.failure else None


class EndpointChargeSerializer(serializers.Serializer):
    """An endpoint's quota reservation next to what it is charged for (offering units: GPUs, slices)."""

    reserved_replicas = serializers.IntegerField(
        help_text="Replicas quota holds: max_replicas plus a canary's, so scaling up is never refused by quota."
    )
    reserved_units = serializers.IntegerField(help_text="Units quota holds: reserved_replicas × gpus_per_replica.")
    charged_replicas = serializers.IntegerField(
        help_text="Replicas running now, which spend charges (0 unless running)."
    )
    charged_units = serializers.IntegerField(help_text="Units charged now: charged_replicas × gpus_per_replica.")
    observed = serializers.BooleanField(
        help_text="False while the cluster has not reported a replica count: min_replicas is charged then."
    )


class WorkloadDetailSerializer(WorkloadSerializer):
    timeline = WorkloadEventSerializer(source="events", many=True, read_only=True)
    endpoint_charge = serializers.SerializerMethodField(
        help_text="Endpoints: reserved in quota (max replicas) and charged for what runs now; null for other kinds."
    )

    class Meta(WorkloadSerializer.Meta):
        fields = [
            *WorkloadSerializer.Meta.fields,
            "command",
            "args",
            "env",
            "labels",
            "annotations",
            "cpu",
            "memory",
            "workspace_gib",
            "max_runtime_seconds",
            "model_format",
            "storage_uri",
            "canary_storage_uri",
            "canary_traffic_percent",
            "canary_replicas",
            "deployment_mode",
            "endpoint_charge",
            "timeline",
        ]
        read_only_fields = fields

    @extend_schema_field(EndpointChargeSerializer(allow_null=True))
    def get_endpoint_charge(self, workload: Workload) -> dict | None:
        charge = scale.endpoint_charge(workload)
        return charge.as_dict() if charge else None
