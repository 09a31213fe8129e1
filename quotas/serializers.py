"""API representations of quotas, quota requests, exceptions and the audit log.

Read-only except the bodies of a new quota request and of a decision; what they mean is
checked in ``quotas.requests`` and ``quotas.approvals``, not here.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema_serializer
from rest_framework import serializers

from quotas.models import AuditEntry, QuotaException, QuotaRequest

AMOUNT = {"max_digits": 12, "decimal_places": 6, "coerce_to_string": True}


class QuotaRowSerializer(serializers.Serializer):
    gpu_class = serializers.CharField(
        help_text="A GPU model (H100-80GB), a MIG profile (A100-80GB/1g.10gb), or cpu or memory."
    )
    used = serializers.DecimalField(
        **AMOUNT, help_text="Held by admitted work now, in GPUs (slices for a profile), cores (cpu) or GiB (memory)."
    )
    guaranteed = serializers.DecimalField(**AMOUNT, help_text="Work within this runs at guaranteed priority.")
    limit = serializers.DecimalField(**AMOUNT, help_text="Work above the guarantee and within this is preemptible.")
    pending = serializers.DecimalField(**AMOUNT, help_text="Asked for by workloads waiting for an exception.")
    free = serializers.DecimalField(**AMOUNT, help_text="limit - used, at least 0.")
    overage = serializers.DecimalField(**AMOUNT, help_text="Allowed above the limit (approved exceptions).")
    requested_limit = serializers.DecimalField(**AMOUNT, allow_null=True, help_text="Of a pending quota request.")
    expires_at = serializers.DateTimeField(allow_null=True, help_text="A temporary grant is in force until then.")


class TeamQuotaSerializer(serializers.Serializer):
    team = serializers.CharField()
    rows = QuotaRowSerializer(many=True)


class QuotaSetSerializer(serializers.Serializer):
    """A platform admin sets one class of a team's quota directly (audited like every change)."""

    gpu_class = serializers.CharField(max_length=60)
    guaranteed = serializers.DecimalField(max_digits=10, decimal_places=4)
    limit = serializers.DecimalField(max_digits=10, decimal_places=4)
    count_mig_slices = serializers.BooleanField(required=False, allow_null=True, default=None)
    reason = serializers.CharField(help_text="Why; goes into the audit log, which the team's admins read.")


class QuotaRequestSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    decision = serializers.CharField(
        read_only=True,
        help_text="Approved, Denied, Withdrawn or Pending. An ended temporary grant (state expired) was Approved.",
    )
    status = serializers.CharField(
        read_only=True,
        help_text="The decision in words with who and when, e.g. 'Approved by admin on 2026-12-03 10:15 UTC'.",
    )

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "team",
            "gpu_class",
            "guaranteed",
            "limit",
            "until",
            "justification",
            "requested_by",
            "requested_at",
            "state",
            "decision",
            "status",
            "decided_by",
            "decided_at",
            "comment",
            "expires_at",
            "restore_guaranteed",
            "restore_limit",
            "ended_at",
        ]
        read_only_fields = fields


@extend_schema_serializer(
    examples=[
        OpenApiExample(
            "Four more H100s for a month",
            value={
                "team": "nlp",
                "gpu_class": "H100-80GB",
                "limit": "12",
                "until": "2026-12-31",
                "justification": "Fine-tuning the 70B model before the release.",
            },
            request_only=True,
        )
    ]
)
class QuotaRequestCreateSerializer(serializers.Serializer):
    """A new request. Give ``guaranteed``, ``limit`` or both; the other keeps its value."""

    team = serializers.SlugField(help_text="Slug of a team you are a team admin of.")
    gpu_class = serializers.CharField(max_length=60)
    guaranteed = serializers.DecimalField(max_digits=10, decimal_places=4, required=False, allow_null=True)
    limit = serializers.DecimalField(max_digits=10, decimal_places=4, required=False, allow_null=True)
    until = serializers.DateField(
        required=False, allow_null=True, help_text="Temporary through this day; empty: permanent."
    )
    justification = serializers.CharField(help_text="What the GPUs are for.")


class DecisionSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="", help_text="Sent to the requester.")


class QuotaExceptionSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    status = serializers.CharField(
        read_only=True,
        help_text="The decision in words with who and when, e.g. 'Denied by admin on 2026-12-03 10:15 UTC'.",
    )

    class Meta:
        model = QuotaException
        fields = [
            "id",
            "team",
            "workload_id",
            "gpu_class",
            "amount",
            "reason",
            "requested_by",
            "requested_at",
            "decision",
            "status",
            "decided_by",
            "decided_at",
            "comment",
        ]
        read_only_fields = fields


class AuditEntrySerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    actor = serializers.SerializerMethodField(help_text="Username, or 'portal' for the portal itself.")

    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "at",
            "actor",
            "team",
            "action",
            "gpu_class",
            "before",
            "after",
            "reason",
            "request",
            "exception",
        ]
        read_only_fields = fields

    def get_actor(self, entry: AuditEntry) -> str:
        return entry.actor_name
