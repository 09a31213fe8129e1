from __future__ import annotations

from rest_framework import serializers

from portal.models import Membership, Offering, Team


class TeamSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="Your role in the team; null for platform admins outside it.")

    class Meta:
        model = Team
        fields = ["slug", "name", "namespace", "role"]
        read_only_fields = fields

    def get_role(self, team: Team) -> str | None:
        roles = self.context.get("roles", {})
        return roles.get(team.pk)


class OfferingSerializer(serializers.ModelSerializer):
    # A slug with dots (MIG profiles: a100-80gb-1g.10gb), which a SlugField's pattern refuses.
    slug = serializers.CharField(read_only=True, help_text="e.g. h100-80gb or a100-80gb-1g.10gb.")
    share_of_gpu = serializers.SerializerMethodField(help_text="Share of one physical GPU per unit, e.g. 0.142857.")

    class Meta:
        model = Offering
        fields = [
            "slug",
            "display_name",
            "kind",
            "gpu_model",
            "mig_profile",
            "gpu_memory_gib",
            "share_of_gpu",
            "request_mode",
            "resource_name",
            "dra_device_class",
            "price_per_hour",
        ]
        read_only_fields = fields

    def get_share_of_gpu(self, offering: Offering) -> float:
        return float(offering.share)


def roles_of(user) -> dict[int, str]:
    return dict(Membership.objects.filter(user=user).values_list("team_id", "role"))
