"""REST API for quotas, quota requests, exceptions and the audit log.

Thin: ``quotas.requests`` files and withdraws, ``quotas.approvals`` decides, and the
querysets are the ones the pages use (``visible_to``, ``audit.entries_for``). A team
the caller is not in is a 404; a team the caller is in, but may not act for, a 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.access import is_platform_admin, team_for
from quotas import approvals, audit
from quotas.models import QuotaException, QuotaRequest
from quotas.requests import QuotaInputError, file_request, known_gpu_classes, set_quota, withdraw_request
from quotas.serializers import (
    AuditEntrySerializer,
    DecisionSerializer,
    QuotaExceptionSerializer,
    QuotaRequestCreateSerializer,
    QuotaRequestSerializer,
    QuotaRowSerializer,
    QuotaSetSerializer,
    TeamQuotaSerializer,
)
from quotas.usage import team_quota

DECISION_RESPONSES = {
    400: OpenApiTypes.OBJECT,
    403: OpenApiTypes.OBJECT,
    404: OpenApiTypes.OBJECT,
    409: OpenApiTypes.OBJECT,
}


def _decided(call):
    """Run a decision; turn its refusals into HTTP answers with the reason in ``detail``."""
    try:
        return call()
    except DjangoPermissionDenied as exc:
        raise PermissionDenied(str(exc) or None) from None
    except approvals.SelfDecision as exc:
        raise PermissionDenied(str(exc)) from None
    except approvals.AlreadyDecided as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    except approvals.DecisionError as exc:
        raise ValidationError({"detail": str(exc)}) from None


@extend_schema(tags=["quotas"])
class TeamQuotaView(APIView):
    """A team's quota per GPU class: used, guaranteed, limit, pending and free; platform admins set it."""

    serializer_class = TeamQuotaSerializer

    @extend_schema(responses={200: TeamQuotaSerializer, 404: OpenApiTypes.OBJECT})
    def get(self, request, slug: str):
        return Response(self._rows(team_for(request.user, slug)))

    @extend_schema(
        request=QuotaSetSerializer,
        responses={200: TeamQuotaSerializer, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
        description="Set one GPU class of the team's quota (platform admins). A limit below what is running "
        "keeps that work running (as overage) and refuses new work until usage is back under it.",
    )
    def post(self, request, slug: str):
        team = team_for(request.user, slug)
        if not is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins set quotas; team admins file a quota request.")
        body = QuotaSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if data["gpu_class"] not in known_gpu_classes(team):
            raise ValidationError({"gpu_class": [f"no GPU class {data['gpu_class']!r} is on offer"]})
        try:
            set_quota(
                team,
                data["gpu_class"],
                data["guaranteed"],
                data["limit"],
                request.user,
                data["reason"],
                count_mig_slices=data.get("count_mig_slices"),
            )
        except QuotaInputError as exc:
            raise ValidationError(exc.errors) from None
        return Response(self._rows(team))

    @staticmethod
    def _rows(team) -> dict:
        rows = team_quota(team)
        return {
            "team": team.slug,
            "rows": QuotaRowSerializer(
                [
                    {
                        "gpu_class": r.gpu_class,
                        "used": r.used,
                        "guaranteed": r.guaranteed,
                        "limit": r.limit,
                        "pending": r.pending,
                        "free": r.free,
                        "overage": r.overage,
                        "requested_limit": r.requested_limit,
                        "expires_at": r.expires_at,
                    }
                    for r in rows
                ],
                many=True,
            ).data,
        }


@extend_schema(tags=["quotas"])
class QuotaRequestViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    """Requests for more (or less) quota: team admins file them, platform admins decide them."""

    serializer_class = QuotaRequestSerializer

    def get_queryset(self):
        qs = QuotaRequest.objects.visible_to(self.request.user).select_related("team", "requested_by", "decided_by")
        params = self.request.query_params
        if self.action == "list":
            if params.get("team"):
                qs = qs.filter(team__slug=params["team"])
            if params.get("state"):
                qs = qs.filter(state__in=params["state"].split(","))
            if params.get("gpu_class"):
                qs = qs.filter(gpu_class=params["gpu_class"])
        return qs.order_by("-requested_at", "-id")

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="team slug"),
            OpenApiParameter(
                "state", str, description="pending, approved, denied, withdrawn, expired (comma-separated)"
            ),
            OpenApiParameter("gpu_class", str),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=QuotaRequestCreateSerializer,
        responses={201: QuotaRequestSerializer, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
        description="File a request for one GPU class (team admins of the team only). 400 names each bad field.",
    )
    def create(self, request, *args, **kwargs):
        body = QuotaRequestCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            team = team_for(request.user, data["team"])
        except Http404:
            raise ValidationError({"team": [f"you are not in a team named '{data['team']}'"]}) from None
        try:
            created = file_request(
                request.user,
                team,
                gpu_class=data["gpu_class"],
                guaranteed=data.get("guaranteed"),
                limit=data.get("limit"),
                until=data.get("until"),
                justification=data["justification"],
            )
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from None
        except QuotaInputError as exc:
            raise ValidationError(exc.errors) from None
        return Response(
            QuotaRequestSerializer(self.get_queryset().get(pk=created.pk)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        request=DecisionSerializer,
        responses={**DECISION_RESPONSES, 200: QuotaRequestSerializer},
        description="Approve and apply the request (platform admins; never the requester). 409 if already decided.",
    )
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._decide(request, approve=True)

    @extend_schema(
        request=DecisionSerializer,
        responses={**DECISION_RESPONSES, 200: QuotaRequestSerializer},
        description="Deny the request (platform admins; never the requester). 409 if already decided.",
    )
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        return self._decide(request, approve=False)

    @extend_schema(
        request=None, responses={200: QuotaRequestSerializer, 403: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT}
    )
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """Take back a pending request (the requester or a team admin)."""
        quota_request = self.get_object()
        try:
            withdrawn = withdraw_request(request.user, quota_request)
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from None
        if not withdrawn:
            return Response({"detail": f"Request #{quota_request.pk} is no longer pending."}, status=409)
        return Response(QuotaRequestSerializer(self.get_queryset().get(pk=quota_request.pk)).data)

    def _decide(self, request, *, approve: bool):
        quota_request = self.get_object()
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = _decided(
            lambda: approvals.decide_request(
                request.user, quota_request.pk, approve=approve, comment=body.validated_data["comment"]
            )
        )
        if isinstance(result, Response):
            return result
        return Response(QuotaRequestSerializer(self.get_queryset().get(pk=quota_request.pk)).data)


@extend_schema(tags=["quotas"])
class QuotaExceptionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Workloads asking to run above their team's limit, and the decisions on them."""

    serializer_class = QuotaExceptionSerializer

    def get_queryset(self):
        user = self.request.user
        qs = QuotaException.objects.select_related("team", "requested_by", "decided_by")
        if not user.is_authenticated:
            return qs.none()
        if not is_platform_admin(user):
            qs = qs.filter(team__memberships__user=user)
        params = self.request.query_params
        if self.action == "list":
            if params.get("team"):
                qs = qs.filter(team__slug=params["team"])
            if params.get("decision"):
                qs = qs.filter(decision__in=params["decision"].split(","))
        return qs.order_by("-requested_at", "-id")

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="team slug"),
            OpenApiParameter("decision", str, description="pending, approved, denied, withdrawn (comma-separated)"),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=DecisionSerializer, responses={**DECISION_RESPONSES, 200: QuotaExceptionSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """Let the workload run above the limit (platform admins; never the requester)."""
        return self._decide(request, approve=True)

    @extend_schema(request=DecisionSerializer, responses={**DECISION_RESPONSES, 200: QuotaExceptionSerializer})
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        """Refuse it; the workload is rejected (platform admins; never the requester)."""
        return self._decide(request, approve=False)

    def _decide(self, request, *, approve: bool):
        exception = self.get_object()
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = _decided(
            lambda: approvals.decide_exception(
                request.user, exception.pk, approve=approve, comment=body.validated_data["comment"]
            )
        )
        if isinstance(result, Response):
            return result
        return Response(QuotaExceptionSerializer(self.get_queryset().get(pk=exception.pk)).data)


@extend_schema(tags=["quotas"])
class AuditEntryViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Every quota change and decision: all of them for platform admins, their teams' for team admins."""

    serializer_class = AuditEntrySerializer

    def get_queryset(self):
        return audit.entries_for(self.request.user, self.request.query_params)

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="team slug"),
            OpenApiParameter("gpu_class", str),
            OpenApiParameter("action", str, description="e.g. quota.changed, request.approved, grant.expired"),
        ],
        responses={200: AuditEntrySerializer(many=True), 403: OpenApiTypes.OBJECT},
    )
    def list(self, request, *args, **kwargs):
        if not audit.may_read(request.user):
            raise PermissionDenied("Only team admins and platform admins read the audit log.")
        return super().list(request, *args, **kwargs)
