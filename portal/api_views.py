from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets

from portal.access import visible_teams
from portal.models import Offering
from portal.serializers import OfferingSerializer, TeamSerializer, roles_of


@extend_schema(tags=["teams"])
class TeamViewSet(viewsets.ReadOnlyModelViewSet):
    """Your teams (every team, for platform admins)."""

    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self):
        return visible_teams(self.request.user).order_by("slug")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["roles"] = roles_of(self.request.user)
        return context


@extend_schema(tags=["catalog"])
class OfferingViewSet(viewsets.ReadOnlyModelViewSet):
    """What you can request: full GPUs, MIG slices, shared GPUs and CPU only."""

    serializer_class = OfferingSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[a-z0-9.-]+"
    queryset = Offering.objects.filter(is_active=True).order_by("kind", "slug")
