"""Every state change of a workload, readable top to bottom.

The HTML views, the API, the admin console and the Celery tasks all call these
functions; none of them changes ``Workload.state`` on its own. Each change is a
compare-and-set (``UPDATE ... WHERE state IN (expected)``), so when two changes race
(two stops, a stop and a submit) exactly one wins and the loser does nothing. Each
change is written to the workload's timeline in the same transaction, and the quota a
workload holds is released in the transaction that ends its activity.

States::

    pending_approval ──approve──► queued ──submit──► submitted ──observe──► running
          │deny                     │ 422                │                     │
          ▼                         ▼                    ▼                     ▼
       rejected                   failed        succeeded / failed / stopped (user, deadline, idle)
                                                 stopped ──start (notebooks)──► queued
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, replace
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import Http404
from django.utils import timezone

from jobs import fit
from jobs.kube.manifests import MPI_LAUNCHER_RESOURCES
from jobs.kube.status import Observed
from jobs.models import ACTIVE_STATES, LIVE_STATES, Kind, State, Workload, WorkloadEvent
from jobs.specs import (
    SpecError,
    TeamQuota,
    TeamRef,
    WorkloadSpec,
    endpoint_deployment_mode,
    parse_quantity,
    validate_request,
)
from portal.access import can_use_team
from portal.cluster_profile import current_profile
from portal.models import Offering, Team
from quotas import admission, compute
from quotas.compute import Compute

log = logging.getLogger(__name__)


# --- building the pure spec from a row ------------------------------------------------


def team_ref(team: Team) -> TeamRef:
    return TeamRef(slug=team.slug, namespace=team.namespace)


def active_offerings() -> dict[str, Offering]:
    return {o.slug: o for o in Offering.objects.filter(is_active=True)}


def validate(data: Mapping, team: Team, workload_id: int = 0, *, check_fit: bool = True) -> WorkloadSpec:
    """The one validation of a request, shared by the form, the API and the preview.

    A valid request is then checked against the cluster's size (``jobs.fit``): one the
    cluster could never hold is refused here, before it is admitted and holds quota.
    ``check_fit=False`` is for changes to work that already runs (a rollout), which a
    shrunken cluster must not block.
    """
    spec = validate_request(
        data,
        team=team_ref(team),
        offerings=active_offerings(),
        allowed_registries=settings.ALLOWED_IMAGE_REGISTRIES,
        workload_id=workload_id,
    )
    if workload_id == 0 and spec.canary_traffic_percent is not None:
        raise SpecError(
            {
                "canary_traffic_percent": [
                    "a new endpoint has no earlier model version to share traffic with; once it runs, roll out "
                    "a new version as a canary from the endpoint's page (or POST /api/v1/workloads/<id>/rollout/)"
                ]
            }
        )
    if check_fit and (errors := fit.problems_of(spec, spec.offering)):
        raise SpecError(errors)
    # The preview shows what this cluster's backend would get.
    return replace(spec, queueing=queueing(), deployment_mode=_deployment_mode(spec))


def _deployment_mode(spec: WorkloadSpec, stored: str = "") -> str:
    """An endpoint's KServe mode: the one it was created with, else what the cluster profile says now.

    KServe refuses to change the mode of an existing InferenceService ("deploymentMode cannot be
    changed"), so a later change of the profile only applies to new endpoints.
    """
    if spec.kind != Kind.ENDPOINT:
        return spec.deployment_mode
    return stored or endpoint_deployment_mode(spec.offering, spec.gpus_per_replica, kserve_deployment_mode())


def request_data(workload: Workload) -> dict:
    """The request fields of a stored workload, in the shape ``validate_request`` takes."""
    data = {
        "kind": workload.kind,
        "name": workload.name,
        "offering": workload.offering.slug,
        "gpus_per_replica": workload.gpus_per_replica,
        "image": workload.image,
        "command": list(workload.command),
        "args": list(workload.args),
        "env": dict(workload.env),
        "labels": dict(workload.labels),
        "annotations": dict(workload.annotations),
        "cpu": workload.cpu,
        "memory": workload.memory,
    }
    if workload.kind == Kind.NOTEBOOK:
        data["workspace_gib"] = workload.workspace_gib
    elif workload.kind == Kind.TRAINING:
        data["framework"] = workload.framework
        data["replicas"] = workload.replicas
        data["max_runtime_seconds"] = workload.max_runtime_seconds
    else:
        data["min_replicas"] = workload.replicas
        data["max_replicas"] = workload.max_replicas
        data["model_format"] = workload.model_format
        data["storage_uri"] = workload.storage_uri
    return {k: v for k, v in data.items() if v not in (None, "")}


def spec_of(workload: Workload) -> WorkloadSpec:
    """The builders' input for a stored workload, with the portal's decisions applied."""
    spec = validate_request(
        request_data(workload),
        team=team_ref(workload.team),
        offerings={workload.offering.slug: workload.offering},
        # Stored requests were validated against the allow-list when they were made;
        # a registry removed later must not strand running work.
        allowed_registries=None,
        workload_id=workload.pk,
    )
    return replace(
        spec,
        priority_class=workload.priority_class or admission.PRIORITY_GUARANTEED,
        stopped=workload.state == State.STOPPED,
        queueing=queueing(),
        deployment_mode=_deployment_mode(spec, workload.deployment_mode),
        # A canary exists only when a rollout gave both its model version and its share.
        canary_storage_uri=workload.canary_storage_uri if workload.canary_traffic_percent is not None else "",
        canary_traffic_percent=workload.canary_traffic_percent if workload.canary_storage_uri else None,
    )


def queueing() -> str:
    """The cluster's queueing backend, "volcano" or "kueue", as the cluster profile says.

    The one place jobs asks; the builders get the answer in their input (``spec.queueing``,
    ``TeamQuota.queueing``) and never read settings themselves.
    """
    from quotas.cluster import queueing_backend

    return queueing_backend()


def kserve_deployment_mode() -> str:
    """The cluster's KServe mode for endpoints, "Standard" or "Knative", as the cluster profile says."""
    profile = current_profile(settings.CLUSTER_PROFILE)
    return profile.kserve_deployment_mode if profile else "Standard"


# --- recording ------------------------------------------------------------------------


def record(workload: Workload, message: str, *, actor=None, from_state: str = "", to_state: str = "") -> None:
    WorkloadEvent.objects.create(
        workload=workload, actor=actor, from_state=from_state, to_state=to_state, message=message
    )


def _move(workload: Workload, expected: Iterable[str], new: str, message: str, *, actor=None, **fields) -> bool:
    """Compare-and-set ``workload`` from one of ``expected`` to ``new``; False if someone else won."""
    expected = [str(s) for s in expected]
    old = workload.state
    changed = Workload.objects.filter(pk=workload.pk, state__in=expected).update(
        state=new, updated_at=timezone.now(), **fields
    )
    if not changed:
        return False
    current = Workload.objects.only("state").get(pk=workload.pk)
    workload.refresh_from_db()
    record(workload, message, actor=actor, from_state=old if old in expected else "", to_state=current.state)
    return True


def _release(workload: Workload) -> None:
    admission.release(workload.team, workload.quota_class, workload.quota_charge)
    compute.release(workload.team, Compute(workload.cpu_charge, workload.memory_charge))


def resources_of(workload: Workload | WorkloadSpec) -> Compute:
    """The CPU and memory of all of a workload's pods, as the builders make them (for its quota).

    Each replica is a pod (an endpoint counts its maximum, as for GPUs; a torch job's
    master is its first replica); an MPI job adds its launcher pod.
    """
    pods = workload.max_replicas if workload.kind == Kind.ENDPOINT else workload.replicas
    # Rows made outside validation (Django admin, old rows) may have none: they hold none.
    cpu = parse_quantity(workload.cpu) * pods if workload.cpu else 0
    memory = parse_quantity(workload.memory) * pods if workload.memory else 0
    if workload.kind == Kind.TRAINING and workload.framework == "mpi":
        cpu += parse_quantity(MPI_LAUNCHER_RESOURCES["cpu"])
        memory += parse_quantity(MPI_LAUNCHER_RESOURCES["memory"])
    return Compute.of(cpu, memory)


def _held(decision) -> dict:
    """The workload fields saying what it holds of CPU and memory after ``decision``."""
    held = decision.compute or Compute()
    return {"cpu_charge": held.cpu, "memory_charge": held.memory}


def _enqueue(task_name: str, workload_id: int) -> None:
    from jobs import tasks  # the tasks module imports this one

    task = getattr(tasks, task_name)
    transaction.on_commit(lambda: task.delay(workload_id))


# --- requests -------------------------------------------------------------------------


def request_workload(user, team: Team, data: Mapping, *, wants_exception: bool = False, reason: str = "") -> Workload:
    """A user asks for a workload: validate, admit against quota, record, submit after commit.

    Raises ``SpecError`` (field → messages) for bad input and ``admission.QuotaRefused``
    when it does not fit and no exception was asked for. Nothing is saved in either case.
    """
    if not can_use_team(user, team):
        raise Http404("No such team.")
    spec = validate(data, team)
    if Workload.objects.filter(team=team, name=spec.name, state__in=LIVE_STATES, deleted_at__isnull=True).exists():
        raise SpecError({"name": [f"team {team.slug} already has a live workload named '{spec.name}'"]})
    offering = Offering.objects.get(slug=spec.offering.slug)
    try:
        with transaction.atomic():
            decision = admission.admit(
                team, offering, _units(spec), wants_exception=wants_exception, resources=resources_of(spec)
            )
            workload = Workload.objects.create(
                team=team,
                created_by=user,
                offering=offering,
                state=State.PENDING_APPROVAL if decision.pending_approval else State.QUEUED,
                admission=decision.admission,
                quota_class=decision.charge.gpu_class if decision.charge else "",
                quota_charge=decision.charge.amount if decision.charge and not decision.pending_approval else 0,
                **_held(decision),
                priority_class=decision.priority_class,
                wants_exception=wants_exception and decision.pending_approval,
                exception_reason=reason if decision.pending_approval else "",
                **_fields_of(spec),
            )
            record(workload, f"Requested by {user.username}. {decision.message}", actor=user, to_state=workload.state)
            if decision.pending_approval:
                admission.ask_exception(team, workload.pk, decision.charge, user, reason)
            if workload.state == State.QUEUED:
                _enqueue("submit_workload", workload.pk)
    except IntegrityError as exc:
        if "unique_live_name_per_team" in str(exc):
            raise SpecError({"name": [f"team {team.slug} already has a live workload named '{spec.name}'"]}) from None
        raise
    return workload


def never_fit(workload_ids: Iterable[int]) -> dict[int, str]:
    """Why each of these workloads could never run on the cluster as it is now (``jobs.fit``).

    For the approvals console: work that was accepted before the check existed, or before
    the cluster shrank, still waits for a decision there.
    """
    rows = Workload.objects.filter(pk__in=list(workload_ids)).select_related("offering")
    found = {w.pk: fit.problems_of(w, w.offering) for w in rows}
    return {pk: fit.summary(errors) for pk, errors in found.items() if errors}


def _units(spec: WorkloadSpec) -> int:
    replicas = spec.max_replicas if spec.kind == Kind.ENDPOINT else spec.replicas
    return spec.gpus_per_replica * replicas


def _fields_of(spec: WorkloadSpec) -> dict:
    return {
        "kind": spec.kind,
        "name": spec.name,
        "gpus_per_replica": spec.gpus_per_replica,
        "replicas": spec.replicas,
        "max_replicas": spec.max_replicas,
        "framework": spec.framework,
        "image": spec.image,
        "command": list(spec.command),
        "args": list(spec.args),
        "env": dict(spec.env),
        "labels": dict(spec.labels),
        "annotations": dict(spec.annotations),
        "cpu": spec.cpu,
        "memory": spec.memory,
        "workspace_gib": spec.workspace_gib,
        "max_runtime_seconds": spec.max_runtime_seconds,
        "model_format": spec.model_format,
        "storage_uri": spec.storage_uri,
        "canary_traffic_percent": spec.canary_traffic_percent,
        "deployment_mode": spec.deployment_mode if spec.kind == Kind.ENDPOINT else "",
    }


# --- submission (Celery) ----------------------------------------------------------------


def submit(workload_id: int, cluster) -> bool:
    """Apply a queued workload's objects to the cluster. Idempotent; True when it moved on.

    Server-side apply with deterministic names makes a retry apply the same objects
    again. A permanent refusal from the API server (422, 403) fails the workload with the
    server's causes; transient errors propagate so the task retries with backoff.
    """
    from jobs.kube.errors import ClusterError
    from jobs.kube.manifests import team_objects, workload_objects

    workload = Workload.objects.select_related("team", "offering").filter(pk=workload_id).first()
    if workload is None or workload.state != State.QUEUED or workload.deleted_at:
        return False
    Workload.objects.filter(pk=workload.pk).update(submit_attempts=workload.submit_attempts + 1)
    objects = workload_objects(spec_of(workload))
    try:
        cluster.apply_all(team_objects(team_ref(workload.team), team_quota_map(workload.team)))
        cluster.apply_all(objects)
    except ClusterError as exc:
        if exc.transient:
            raise
        fail(workload, f"The cluster refused the workload: {exc}")
        return False
    moved = _move(
        workload,
        [State.QUEUED],
        State.SUBMITTED,
        f"Submitted to the cluster ({', '.join(o['kind'] for o in objects)}).",
        submitted_at=timezone.now(),
        applied_manifests=objects,
    )
    if not moved:
        # Someone stopped or deleted it while we were applying: take back what we applied.
        _enqueue("teardown_workload", workload.pk)
    return moved


def team_quota_map(team: Team) -> Mapping:
    """Resource name → (guaranteed, limit) for the team's namespace quota and Volcano queue.

    On a Kueue cluster, a ``TeamQuota`` of the same amounts that also carries the team's
    Kueue objects (the ResourceFlavors its ClusterQueue names, the ClusterQueue and the
    LocalQueue), which ``team_objects`` applies instead of the Volcano Queue. Every caller
    (submit, reapply, apply_team) applies them the same way.
    """
    from quotas.cluster import team_resource_quota

    amounts = team_resource_quota(team)
    if queueing() != "kueue":
        return amounts
    from quotas import kueue

    return TeamQuota(amounts, "kueue", tuple(kueue.team_kueue_objects(team, with_flavors=True)))


def fail(workload: Workload, message: str) -> bool:
    moved = _move(workload, ACTIVE_STATES, State.FAILED, message, finished_at=timezone.now(), state_reason=message)
    if moved:
        _release(workload)
        _enqueue("teardown_workload", workload.pk)
    return moved


# --- user actions --------------------------------------------------------------------


def stop(user, workload: Workload, reason: str = "") -> bool:
    """Stop a live workload. A notebook keeps its object and volume and can be started again."""
    message = reason or (f"Stopped by {user.username}." if user else "Stopped.")
    with transaction.atomic():
        if workload.state == State.PENDING_APPROVAL:
            from quotas.approvals import withdraw_exception

            withdraw_exception(workload.pk, actor=user)  # nobody needs to decide it any more
        moved = _move(
            workload,
            [State.PENDING_APPROVAL, *ACTIVE_STATES],
            State.STOPPED,
            message,
            actor=user,
            finished_at=timezone.now(),
            state_reason=message,
        )
        if moved:
            _release(workload)
            _enqueue("teardown_workload", workload.pk)
    return moved


def start(user, workload: Workload) -> bool:
    """Start a stopped notebook again; it is admitted against quota like a new request."""
    if workload.kind != Kind.NOTEBOOK:
        raise SpecError({"state": ["only notebooks can be started again; submit a new request instead"]})
    with transaction.atomic():
        decision = admission.admit(
            workload.team, workload.offering, workload.gpu_units, resources=resources_of(workload)
        )
        if decision.pending_approval:  # nothing was charged; a restart does not wait for approval
            raise admission.QuotaRefused(decision.message)
        moved = _move(
            workload,
            [State.STOPPED],
            State.QUEUED,
            f"Started by {user.username}. {decision.message}",
            actor=user,
            admission=decision.admission,
            quota_class=decision.charge.gpu_class if decision.charge else "",
            quota_charge=decision.charge.amount if decision.charge else 0,
            **_held(decision),
            priority_class=decision.priority_class,
            finished_at=None,
            started_at=None,
            state_reason="",
        )
        if not moved:
            transaction.set_rollback(True)  # give back the quota admit() took
            return False
        _enqueue("submit_workload", workload.pk)
    return True


def delete(user, workload: Workload) -> None:
    """Delete a workload: stop it if needed, hide it, and remove its cluster objects.

    The row stays (soft delete) so that spend and audit history keep their subject.
    """
    with transaction.atomic():
        if workload.state in (State.PENDING_APPROVAL, *ACTIVE_STATES):
            stop(user, workload, f"Deleted by {user.username}.")
        Workload.objects.filter(pk=workload.pk, deleted_at__isnull=True).update(deleted_at=timezone.now())
        record(workload, f"Deleted by {user.username}.", actor=user)
        _enqueue("teardown_workload", workload.pk)


def teardown(workload_id: int, cluster) -> None:
    """Bring the cluster in line with a workload that should not run. Idempotent.

    A stopped notebook keeps its Notebook object with Kubeflow's stopped annotation
    (and its workspace); everything else is deleted. 404s count as done.
    """
    from jobs.kube.manifests import workload_objects

    workload = Workload.objects.select_related("team", "offering").filter(pk=workload_id).first()
    if workload is None or (workload.state in ACTIVE_STATES and not workload.deleted_at):
        return
    objects = workload_objects(spec_of(workload))
    if workload.kind == Kind.NOTEBOOK and workload.state == State.STOPPED and not workload.deleted_at:
        cluster.apply_all(objects)  # carries kubeflow-resource-stopped; the controller removes the pod
        return
    for obj in reversed(objects):
        meta = obj["metadata"]
        cluster.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))


# --- what the cluster says --------------------------------------------------------------


def observe(workload: Workload, seen: Observed) -> bool:
    """Move a submitted or running workload to what the cluster reports. True if it changed."""
    now = timezone.now()
    if seen.phase == "running" and not seen.url and workload.kind == Kind.NOTEBOOK:
        # Notebooks have no URL in their status; Kubeflow's gateway serves them by path.
        url = settings.NOTEBOOK_URL_TEMPLATE.format(namespace=workload.team.namespace, name=workload.name)
        seen = replace(seen, url=url)
    if seen.phase == "running" and workload.state == State.SUBMITTED:
        return _move(
            workload,
            [State.SUBMITTED],
            State.RUNNING,
            seen.message or "Running.",
            started_at=seen.started_at or now,
            url=seen.url,
            cluster_phase=seen.phase,
            cluster_message="",
            cluster_traffic=[asdict(share) for share in seen.traffic],
        )
    if seen.phase in ("succeeded", "failed") and workload.state in (State.SUBMITTED, State.RUNNING):
        new = State.SUCCEEDED if seen.phase == "succeeded" else State.FAILED
        # The controller says that it failed, the failed pod says why; both go on the timeline.
        reason = " ".join(m for m in (seen.message, seen.failure.summary() if seen.failure else "") if m)
        with transaction.atomic():
            moved = _move(
                workload,
                [State.SUBMITTED, State.RUNNING],
                new,
                reason or new.label,
                finished_at=now,
                started_at=workload.started_at or seen.started_at or now,
                cluster_phase=seen.phase,
                cluster_message=seen.message,
                state_reason=reason,
                failure=seen.failure.as_dict() if seen.failure else {},
            )
            if moved:
                _release(workload)
        return moved
    # No state change: keep what the page shows (the scheduler's reason, the URL, the traffic) current.
    updates = {}
    traffic = [asdict(share) for share in seen.traffic]
    if workload.kind == Kind.ENDPOINT and traffic != workload.cluster_traffic:
        updates["cluster_traffic"] = traffic
    if seen.message != workload.cluster_message:
        updates["cluster_message"] = seen.message
    if seen.phase != workload.cluster_phase:
        updates["cluster_phase"] = seen.phase
    if seen.url and seen.url != workload.url:
        updates["url"] = seen.url
    if updates:
        Workload.objects.filter(pk=workload.pk).update(**updates)
        for key, value in updates.items():
            setattr(workload, key, value)
    return False


def enforce_deadline(workload: Workload, now: datetime) -> bool:
    """Stop a workload that has run past its maximum runtime."""
    if not workload.max_runtime_seconds or workload.state != State.RUNNING or not workload.started_at:
        return False
    if (now - workload.started_at).total_seconds() < workload.max_runtime_seconds:
        return False
    hours = workload.max_runtime_seconds / 3600
    return stop(None, workload, f"Stopped at its maximum runtime of {hours:g} h.")


def reapply(workload: Workload, cluster) -> None:
    """Apply a submitted or running workload's objects again (they vanished from the cluster)."""
    from jobs.kube.manifests import team_objects, workload_objects

    cluster.apply_all(team_objects(team_ref(workload.team), team_quota_map(workload.team)))
    cluster.apply_all(workload_objects(spec_of(workload)))
    record(workload, "Its objects had vanished from the cluster; applied them again.")


# --- quota exceptions -------------------------------------------------------------------


def exception_decided(exception, approved: bool, actor) -> bool:
    """A platform admin approved or denied the exception a pending workload waits for.

    Called (through ``quotas.signals.exception_decided``) in the transaction that records
    the decision, so the workload and the quota move together or not at all.
    """
    workload = Workload.objects.filter(pk=exception.workload_id).select_related("team").first()
    if workload is None:
        return False
    if approved:
        held = resources_of(workload)
        moved = _move(
            workload,
            [State.PENDING_APPROVAL],
            State.QUEUED,
            f"Exception approved by {actor.username}." + (f" {exception.comment}" if exception.comment else ""),
            actor=actor,
            admission="exception",
            quota_class=exception.gpu_class,
            quota_charge=exception.amount,
            cpu_charge=held.cpu,
            memory_charge=held.memory,
        )
        if moved:
            # Its CPU and memory were checked when it was requested; approved, it may exceed them.
            compute.charge(workload.team, held, allow_overage=True)
            _enqueue("submit_workload", workload.pk)
        return moved
    message = f"Exception denied by {actor.username}." + (f" {exception.comment}" if exception.comment else "")
    return _move(
        workload,
        [State.PENDING_APPROVAL],
        State.REJECTED,
        message,
        actor=actor,
        finished_at=timezone.now(),
        state_reason=message,
    )


def recount_quota_usage() -> None:
    """Correct each quota's ``used`` from what active workloads hold (drift shown to admins)."""
    from django.db.models import Sum

    from quotas.usage import recount

    def held():
        rows = (
            Workload.objects.active()
            .exclude(quota_class="")
            .values("team_id", "quota_class")
            .annotate(total=Sum("quota_charge"))
            .values_list("team_id", "quota_class", "total")
        )
        totals = {(team_id, gpu_class): total for team_id, gpu_class, total in rows}
        held = Workload.objects.active().values("team_id").annotate(cpu=Sum("cpu_charge"), memory=Sum("memory_charge"))
        for row in held:
            totals[(row["team_id"], compute.CPU)] = row["cpu"]
            totals[(row["team_id"], compute.MEMORY)] = row["memory"]
        return totals

    recount(held)  # a callable: read while the quota rows are locked


def apply_team(team_id: int, cluster) -> None:
    """The team's cluster objects (namespace, queue, quota, policies) as its quota says now.

    The queue is the team's Volcano Queue, or on a Kueue cluster its ClusterQueue and
    LocalQueue (see ``team_quota_map``).
    """
    from jobs.kube.manifests import team_objects

    team = Team.objects.filter(pk=team_id).first()
    if team is not None:
        cluster.apply_all(team_objects(team_ref(team), team_quota_map(team)))


# --- new model versions of an endpoint ---------------------------------------------------


def rollout(user, workload: Workload, storage_uri: str, canary_traffic_percent: int | None) -> Workload:
    """Deploy a new model version over a live endpoint: to all traffic, or as a canary.

    Without a percentage the new version replaces the current one (a promotion at once). With
    one, the current version keeps serving and the new one gets that share of the traffic
    (``promote`` or ``rollback`` ends the canary); a second rollout replaces the canary. How
    KServe splits traffic depends on the endpoint's mode (``jobs.kube.manifests``). Validated
    like a new request; applied by a task.

    While a canary lasts it runs pods beside the endpoint's own (``canary_replicas``): in
    Knative mode a second revision scaling up to ``max_replicas``; in Standard mode a fixed
    ``ceil(min_replicas * percent / 100)``. They are admitted against the team's quota when
    the canary starts (``QuotaRefused`` with the numbers when they do not fit; nothing changes
    then) and given back when it ends. Both go through ``quota_charge``, so stopping the
    endpoint, the usage re-count and the quota bars all count them. The extra pods run with
    the endpoint's priority class, so they are admitted only within the limit.
    """
    _require_live_endpoint(workload)
    errors: dict[str, list[str]] = {}
    try:
        data = {**request_data(workload), "storage_uri": storage_uri}
        spec = validate(data, workload.team, workload.pk, check_fit=False)
    except SpecError as exc:
        errors.update(exc.errors)
    try:
        percent = _canary_percent(canary_traffic_percent)
    except SpecError as exc:
        errors.update(exc.errors)
    if errors:
        raise SpecError(errors)
    if percent is not None and not spec.model_format and spec.deployment_mode != "Knative":
        # KServe's Standard-mode canary (spec.canary) needs a predictor model to merge over.
        raise SpecError(
            {
                "canary_traffic_percent": [
                    "a canary of an endpoint that runs its own server image is not possible in KServe's "
                    "Standard mode; roll it out to all traffic instead (leave the share empty)"
                ]
            }
        )
    if percent is not None and spec.storage_uri == workload.storage_uri:
        raise SpecError({"storage_uri": ["is the version that already serves; a canary needs a new version"]})
    if percent is None:
        changes = {"storage_uri": spec.storage_uri, "canary_storage_uri": "", "canary_traffic_percent": None}
        note = f"{user.username} rolled out {spec.storage_uri} to all traffic."
    else:
        changes = {"canary_storage_uri": spec.storage_uri, "canary_traffic_percent": percent}
        note = (
            f"{user.username} rolled out {spec.storage_uri} to {percent}% of the traffic (canary); "
            f"{workload.storage_uri} serves the rest."
        )
    return _change_model(user, workload, changes, note)


def promote(user, workload: Workload) -> Workload:
    """The canary's model version takes all traffic and becomes the endpoint's model."""
    _require_live_endpoint(workload)
    if not workload.canary_storage_uri:
        raise SpecError({"canary": ["this endpoint has no canary to promote"]})
    changes = {"storage_uri": workload.canary_storage_uri, "canary_storage_uri": "", "canary_traffic_percent": None}
    note = f"{user.username} promoted the canary {workload.canary_storage_uri} to all traffic."
    return _change_model(user, workload, changes, note, expect_canary=workload.canary_storage_uri)


def rollback(user, workload: Workload) -> Workload:
    """The canary goes; the current model version takes all traffic again."""
    _require_live_endpoint(workload)
    if not workload.canary_storage_uri:
        raise SpecError({"canary": ["this endpoint has no canary to roll back"]})
    changes = {"canary_storage_uri": "", "canary_traffic_percent": None}
    note = (
        f"{user.username} rolled back the canary {workload.canary_storage_uri}; "
        f"{workload.storage_uri} serves all traffic."
    )
    return _change_model(user, workload, changes, note, expect_canary=workload.canary_storage_uri)


def _require_live_endpoint(workload: Workload) -> None:
    if workload.kind != Kind.ENDPOINT or workload.state not in (State.SUBMITTED, State.RUNNING):
        raise SpecError({"state": ["only a submitted or running endpoint can change its model version"]})


def _canary_percent(value) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise SpecError({"canary_traffic_percent": [f"must be a whole number from 0 to 100, not {value!r}"]})
    return value


def _change_model(user, workload: Workload, changes: dict, note: str, expect_canary: str | None = None) -> Workload:
    """Lock the endpoint, admit or give back its canary's pods, set the model fields, record
    why, and apply after commit."""
    with transaction.atomic():
        live = Workload.objects.select_for_update().select_related("team", "offering")
        live = live.filter(pk=workload.pk, state__in=[State.SUBMITTED, State.RUNNING])
        if expect_canary is not None:
            live = live.filter(canary_storage_uri=expect_canary)  # a promote and a rollback race: one wins
        current = live.first()
        if current is None:
            raise SpecError({"state": ["the endpoint changed meanwhile; reload and try again"]})
        canary_replicas = _canary_replicas(current, changes.get("canary_traffic_percent"))
        quota_note, delta = _charge_canary(current, canary_replicas - current.canary_replicas)
        Workload.objects.filter(pk=current.pk).update(
            **changes,
            canary_replicas=canary_replicas,
            quota_charge=F("quota_charge") + delta,
            updated_at=timezone.now(),
        )
        workload.refresh_from_db()
        record(workload, note + quota_note, actor=user)
        _enqueue("apply_workload", workload.pk)
    return workload


def _canary_replicas(workload: Workload, percent: int | None) -> int:
    """Pods a canary of ``percent`` runs beside the endpoint's own (0 without a canary).

    Knative: the canary is a second revision that scales up to ``max_replicas``. Standard
    (KServe v0.20 ``spec.canary``): a Deployment of ``ceil(min_replicas * percent / 100)``
    pods; KServe takes them off the stable Deployment's minimum, but the stable one may still
    scale up to ``max_replicas``, so they count on top.
    """
    if percent is None:
        return 0
    if (workload.deployment_mode or "Standard") == "Knative":
        return workload.max_replicas
    return math.ceil(workload.replicas * percent / 100)


def _charge_canary(workload: Workload, more_replicas: int) -> tuple[str, Decimal]:
    """Admit (or give back) ``more_replicas`` canary replicas; (timeline note, change of quota_charge)."""
    units = abs(more_replicas) * workload.gpus_per_replica
    if not units:
        return "", Decimal(0)
    if more_replicas > 0:
        charge = admission.admit_extra(
            workload.team,
            workload.offering,
            workload.quota_class,
            units,
            f"a canary beside {workload.name} (up to {more_replicas} more replicas)",
        )
        if charge is None:
            return "", Decimal(0)
        return (
            f" Its canary may run {more_replicas} more replicas: {admission.fmt(charge.amount)} {charge.gpu_class} "
            "more are held until it is promoted.",
            charge.amount,
        )
    charge = admission.extra_charge(workload.offering, workload.quota_class, units)
    if charge is None:
        return "", Decimal(0)
    admission.release(workload.team, charge.gpu_class, charge.amount)
    return (
        f" The previous version's replicas go: {admission.fmt(charge.amount)} {charge.gpu_class} released.",
        -charge.amount,
    )


def apply_current(workload_id: int, cluster) -> bool:
    """Apply a live workload's objects as its row says now (after a rollout). Idempotent."""
    workload = Workload.objects.select_related("team", "offering").filter(pk=workload_id).first()
    if workload is None or workload.deleted_at or workload.state not in (State.SUBMITTED, State.RUNNING):
        return False
    from jobs.kube.errors import ClusterError

    objects = workload_objects_of(workload)
    try:
        cluster.apply_all(objects)
    except ClusterError as exc:
        if exc.transient:
            raise
        # The cluster keeps serving what it had; the timeline says why the change did not happen.
        record(workload, f"The cluster refused the change: {exc}")
        return False
    Workload.objects.filter(pk=workload.pk).update(applied_manifests=objects)
    return True


def workload_objects_of(workload: Workload) -> list[dict]:
    from jobs.kube.manifests import workload_objects

    return workload_objects(spec_of(workload))
