"""REST API for workloads. Thin: every change goes through ``jobs.lifecycle``."""

from __future__ import annotations

import yaml
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from jobs import cluster_status, inspect, lifecycle
from jobs.filters import filter_workloads
from jobs.kube.errors import ClusterError
from jobs.kube.manifests import workload_objects
from jobs.models import Workload, WorkloadEvent
from jobs.serializers import WorkloadDetailSerializer, WorkloadRequestSerializer, WorkloadSerializer
from jobs.specs import SpecError
from portal.access import team_for
from portal.schema import ErrorSerializer
from quotas.admission import QuotaRefused

CONTROL_FIELDS = ("team", "wants_exception", "exception_reason")


def split_request(data) -> tuple[str, dict, bool, str]:
    """(team slug, request fields, wants exception, reason) from a request body."""
    if not isinstance(data, dict):
        raise ValidationError({"detail": "The body must be a JSON object."})
    fields = {k: v for k, v in data.items() if k not in CONTROL_FIELDS}
    team = data.get("team")
    if not isinstance(team, str) or not team:
        raise ValidationError({"team": ["required: the slug of one of your teams"]})
    wants = data.get("wants_exception", False)
    if not isinstance(wants, bool):
        raise ValidationError({"wants_exception": ["must be true or false"]})
    reason = data.get("exception_reason", "")
    if not isinstance(reason, str):
        raise ValidationError({"exception_reason": ["must be a string"]})
    return team, fields, wants, reason


def _user_team(user, slug: str):
    try:
        return team_for(user, slug)
    except Exception:
        raise ValidationError({"team": [f"you are not in a team named '{slug}'"]}) from None


@extend_schema(tags=["workloads"])
class WorkloadViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Notebooks, training runs and inference endpoints of your teams."""

    serializer_class = WorkloadSerializer

    def get_queryset(self):
        qs = Workload.objects.visible_to(self.request.user).select_related("team", "created_by", "offering")
        if self.action == "list":
            return filter_workloads(qs, self.request.query_params)
        if self.action == "retrieve":
            return qs.prefetch_related(
                Prefetch("events", queryset=WorkloadEvent.objects.select_related("actor").order_by("at", "id"))
            )
        return qs

    def get_serializer_class(self):
        return WorkloadDetailSerializer if self.action == "retrieve" else WorkloadSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="team slug"),
            OpenApiParameter("kind", str, enum=["notebook", "training", "endpoint"]),
            OpenApiParameter("state", str, description="a state, or several separated by commas"),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(
        request=WorkloadRequestSerializer,
        responses={201: WorkloadDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="Request a workload. 201 with the workload (state `queued`, or `pending_approval` when an "
        "exception was asked for); 400 naming each bad field, or with the quota numbers when it does not fit.",
    )
    def create(self, request):
        slug, fields, wants, reason = split_request(request.data)
        team = _user_team(request.user, slug)
        try:
            workload = lifecycle.request_workload(request.user, team, fields, wants_exception=wants, reason=reason)
        except SpecError as exc:
            raise ValidationError(exc.errors) from None
        except QuotaRefused as exc:
            raise ValidationError({"quota": [str(exc)]}) from None
        workload = self.get_queryset().get(pk=workload.pk)
        return Response(WorkloadDetailSerializer(workload).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=WorkloadRequestSerializer,
        responses={
            200: inline_serializer(
                "Preview",
                {"objects": serializers.ListField(child=serializers.DictField()), "yaml": serializers.CharField()},
            )
        },
        description="The Kubernetes objects that would be applied for this request. Nothing is created.",
    )
    @action(detail=False, methods=["post"])
    def preview(self, request):
        slug, fields, _, _ = split_request(request.data)
        team = _user_team(request.user, slug)
        try:
            spec = lifecycle.validate(fields, team)
        except SpecError as exc:
            raise ValidationError(exc.errors) from None
        objects = workload_objects(spec)
        return Response({"objects": objects, "yaml": yaml.safe_dump_all(objects, sort_keys=False)})

    @extend_schema(request=None, responses={200: WorkloadDetailSerializer, 409: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        workload = self.get_object()
        if not lifecycle.stop(request.user, workload):
            return Response(
                {"detail": f"A {workload.get_state_display().lower()} workload cannot be stopped."},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(WorkloadDetailSerializer(self.get_queryset().get(pk=workload.pk)).data)

    @extend_schema(
        request=inline_serializer(
            "Rollout",
            {
                "storage_uri": serializers.CharField(help_text="the new model version, e.g. s3://models/x/v4"),
                "canary_traffic_percent": serializers.IntegerField(
                    required=False,
                    allow_null=True,
                    help_text="0-100: share of traffic for the new version; "
                    "omit or null to send it all traffic (promote)",
                ),
            },
        ),
        responses={200: WorkloadDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="Deploy a new model version over a live endpoint, as a canary or to all traffic. A canary "
        "runs beside the current version (up to max_replicas more pods), so its pods are admitted against the "
        "team's quota until it is promoted: 400 with the quota numbers when they do not fit.",
    )
    @action(detail=True, methods=["post"])
    def rollout(self, request, pk=None):
        workload = self.get_object()
        data = request.data if isinstance(request.data, dict) else {}
        storage_uri = data.get("storage_uri")
        if not isinstance(storage_uri, str) or not storage_uri:
            raise ValidationError({"storage_uri": ["required: the new model version's storage URI"]})
        try:
            lifecycle.rollout(request.user, workload, storage_uri, data.get("canary_traffic_percent"))
        except SpecError as exc:
            raise ValidationError(exc.errors) from None
        except QuotaRefused as exc:
            raise ValidationError({"quota": [str(exc)]}) from None
        return Response(WorkloadDetailSerializer(self.get_queryset().get(pk=workload.pk)).data)

    @extend_schema(
        request=None,
        responses={200: WorkloadDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="The endpoint's canary model version takes all traffic and becomes its model version.",
    )
    @action(detail=True, methods=["post"])
    def promote(self, request, pk=None):
        return self._canary_action(lifecycle.promote)

    @extend_schema(
        request=None,
        responses={200: WorkloadDetailSerializer, 400: OpenApiTypes.OBJECT},
        description="The endpoint's canary goes away; its current model version takes all traffic again.",
    )
    @action(detail=True, methods=["post"])
    def rollback(self, request, pk=None):
        return self._canary_action(lifecycle.rollback)

    def _canary_action(self, change):
        workload = self.get_object()
        try:
            change(self.request.user, workload)
        except SpecError as exc:
            raise ValidationError(exc.errors) from None
        return Response(WorkloadDetailSerializer(self.get_queryset().get(pk=workload.pk)).data)

    @extend_schema(request=None, responses={200: WorkloadDetailSerializer, 409: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        workload = self.get_object()
        try:
            started = lifecycle.start(request.user, workload)
        except SpecError as exc:
            return Response({"detail": " ".join(exc.errors.get("state", [])) or str(exc)}, status=409)
        except QuotaRefused as exc:
            raise ValidationError({"quota": [str(exc)]}) from None
        if not started:
            return Response({"detail": "Only a stopped notebook can be started."}, status=status.HTTP_409_CONFLICT)
        return Response(WorkloadDetailSerializer(self.get_queryset().get(pk=workload.pk)).data)

    @extend_schema(
        description="The workload with its timeline, its URL when running, and the Kubernetes events of its "
        "objects and pods (read live from the cluster; `events_error` says when the cluster did not answer)."
    )
    def retrieve(self, request, *args, **kwargs):
        workload = self.get_object()
        body = WorkloadDetailSerializer(workload).data
        live = inspect.live_details(workload)
        body.update(events=live.events, pods=live.pods, events_error=live.error)
        return Response(body)

    def perform_destroy(self, instance):
        lifecycle.delete(self.request.user, instance)

    @extend_schema(
        parameters=[
            OpenApiParameter("pod", str, description="pod name; the first pod by default"),
            OpenApiParameter("tail", int, description="lines from the end (default 200, at most 5000)"),
        ],
        responses={
            200: inline_serializer(
                "Logs",
                {
                    "pod": serializers.CharField(),
                    "pods": serializers.ListField(child=serializers.CharField()),
                    "log": serializers.CharField(),
                },
            ),
            400: ErrorSerializer,
            502: OpenApiResponse(ErrorSerializer, description="The cluster did not answer, or none is configured."),
        },
    )
    @action(detail=True, methods=["get"])
    def logs(self, request, pk=None):
        workload = self.get_object()
        try:
            tail = min(max(int(request.query_params.get("tail", 200)), 1), 5000)
        except ValueError:
            raise ValidationError({"tail": ["must be a whole number"]}) from None
        cluster, error = cluster_status.page_cluster(inspect.LOGS)
        if cluster is None:
            return Response({"detail": error}, status=status.HTTP_502_BAD_GATEWAY)
        try:
            pod, text, pods = inspect.logs(workload, cluster, pod=request.query_params.get("pod"), tail_lines=tail)
        except ClusterError as exc:
            error = cluster_status.unavailable(exc, inspect.LOGS)
            return Response({"detail": error}, status=status.HTTP_502_BAD_GATEWAY)
        cluster_status.answered()
        return Response({"pod": pod, "pods": pods, "log": text})
