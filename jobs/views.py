"""Browser pages for workloads and team presets.

Thin: ``jobs.forms`` turns input into requests, ``jobs.lifecycle`` makes every change,
``jobs.presets`` keeps presets, ``jobs.inspect`` reads the cluster. One view serves a
full page or, for htmx, the fragment it polls or swaps (STYLE.md, idea 9). Every
workload is looked up through ``Workload.objects.visible_to`` (the API's queryset), so a
workload of another team is a 404 here as there.

Fragment targets: ``#workload-table`` (list, replaced whole: its poll URL carries the
filters), ``#workload-live`` (detail, inner content polled every 3 s; HTTP 286 ends the
poll once the workload is over), ``#workload-logs`` and ``#workload-manifests`` (detail,
each replaced whole and polled while the workload is live; the poll sends a digest of
what it shows and gets 204, no swap, while nothing changed, so an opened manifest or a
scrolled log is not reset every few seconds), ``#offering-picker`` and ``#preview-panel``
on the request form.
"""

from __future__ import annotations

import hashlib
import json
import logging

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from jobs import cluster_status, inspect, lifecycle, presets, scale, waiting
from jobs.filters import filter_workloads
from jobs.forms import WorkloadRequestForm, cost_estimate, initial_from_request, offering_rows
from jobs.kube.errors import ClusterError
from jobs.models import ACTIVE_STATES, Kind, State, Workload, WorkloadEvent
from jobs.specs import SpecError
from portal.access import can_manage_team, team_for, visible_teams
from quotas.admission import QuotaRefused

log = logging.getLogger(__name__)

PAGE_SIZE = 50
LOG_TAIL_DEFAULT = 200
LOG_TAIL_MAX = 5000
READING_ORDER = {k: i for i, k in enumerate(("apiVersion", "kind", "metadata", "name", "namespace", "spec"))}
KIND_TITLES = {Kind.NOTEBOOK: "notebook", Kind.TRAINING: "training run", Kind.ENDPOINT: "inference endpoint"}


def _fragment(request) -> bool:
    """An htmx swap wants the fragment; a history restore (back button) wants the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render(request, full: str, fragment: str, context: dict, status: int = 200):
    response = render(request, fragment if _fragment(request) else full, context, status=status)
    # One URL, two representations: caches must key on the htmx header.
    patch_vary_headers(response, ("HX-Request",))
    return response


def _workloads(user):
    return Workload.objects.visible_to(user).select_related("team", "offering", "created_by")


def _workload(user, pk: int) -> Workload:
    return get_object_or_404(_workloads(user), pk=pk)


def _kind(kind: str) -> str:
    if kind not in Kind.values:
        raise Http404("No such kind of workload.")
    return kind


# -- list ----------------------------------------------------------------------------------


@login_required
@require_GET
def workload_list(request):
    qs = filter_workloads(_workloads(request.user), request.GET)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    page.object_list = list(page.object_list)
    positions = queue_positions(page.object_list)
    for w in page.object_list:
        w.waiting = waiting.explain(w, positions.get(w.pk))
    context = {
        "page": page,
        "filters": {key: request.GET.get(key, "") for key in ("team", "kind", "state")},
        "kinds": Kind.choices,
        "states": State.choices,
        "kind_titles": KIND_TITLES,
    }
    return _render(request, "jobs/workload_list.html", "jobs/_workload_table.html", context)


# -- request form ----------------------------------------------------------------------------


def _default_team_slug(request, form: WorkloadRequestForm) -> str:
    teams = list(form.fields["team"].queryset.values_list("slug", flat=True))
    current = request.session.get("team")
    return current if current in teams else (teams[0] if teams else "")


def _form_context(request, kind: str, form: WorkloadRequestForm, **extra) -> dict:
    teams = form.fields["team"].queryset
    team = teams.filter(slug=form["team"].value() or "").first() or teams.first()
    rows = offering_rows(team)
    chosen = form["offering"].value() or ""
    offering = next((r.offering for r in rows if r.offering.slug == chosen), None)
    values = form.data if form.is_bound else form.initial
    return {
        "kind": kind,
        "kind_title": KIND_TITLES[kind],
        "form": form,
        "team": team,
        "rows": rows,
        "chosen": chosen,
        "estimate": cost_estimate(kind, offering, values),
        "presets": presets.presets_for(request.user, kind),
        "can_save_preset": any(can_manage_team(request.user, t) for t in teams),
        **extra,
    }


@login_required
def workload_new(request, kind: str):
    kind = _kind(kind)
    if request.htmx and request.htmx.target == "offering-picker":
        # The team select changed: show what that team has left of each offering.
        team = team_for(request.user, request.GET.get("team", ""))
        context = {"rows": offering_rows(team), "chosen": request.GET.get("offering", ""), "team": team}
        return render(request, "jobs/_offering_picker.html", context)

    if request.method == "POST":
        form = WorkloadRequestForm(kind, request.user, request.POST)
        action = request.POST.get("action", "create")
        if action == "save-preset":
            preset = form.save_preset()
            if preset is not None:
                messages.success(request, f"Saved preset '{preset.name}' for team {preset.team.slug}.")
                return redirect(f"{reverse('workload-new', args=[kind])}?preset={preset.pk}")
        elif action == "create":
            workload = form.submit()
            if workload is not None:
                return redirect("workload-detail", pk=workload.pk)
        # "refresh" (no JavaScript: show the chosen team's quota) re-renders the input as it is.
        return render(request, "jobs/workload_form.html", _form_context(request, kind, form))

    initial: dict = {}
    preset = None
    if request.GET.get("preset"):
        preset = presets.preset_for(request.user, _int_or_404(request.GET["preset"]))
        if preset.kind != kind:
            return redirect(f"{reverse('workload-new', args=[preset.kind])}?preset={preset.pk}")
        initial = {**initial_from_request(preset.request), "team": preset.team.slug}
    elif request.GET.get("from"):
        source = _workload(request.user, _int_or_404(request.GET["from"]))
        if source.kind != kind:
            raise Http404("That workload is of another kind.")
        data = lifecycle.request_data(source)
        data.pop("name", None)
        initial = {**initial_from_request(data), "team": source.team.slug}
    form = WorkloadRequestForm(kind, request.user, initial=initial)
    if "team" not in initial:
        form.initial["team"] = _default_team_slug(request, form)
    return render(request, "jobs/workload_form.html", _form_context(request, kind, form, preset=preset))


def _int_or_404(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise Http404("Not a valid id.") from None


@login_required
@require_POST
def workload_preview(request):
    """The objects a request would become, as YAML, or its errors. Never creates anything."""
    kind = request.POST.get("kind", "")
    if kind not in Kind.values:
        return HttpResponseBadRequest("kind must be one of notebook, training, endpoint")
    form = WorkloadRequestForm(kind, request.user, request.POST)
    objects = form.preview()
    preview_yaml = yaml.safe_dump_all(objects, sort_keys=False) if objects is not None else ""
    if _fragment(request):
        return render(request, "jobs/_preview.html", {"form": form, "preview_yaml": preview_yaml})
    context = _form_context(request, kind, form, preview_yaml=preview_yaml, previewed=True)
    return render(request, "jobs/workload_form.html", context)


# -- one workload ---------------------------------------------------------------------------


def queue_position(workload: Workload) -> int | None:
    """1-based place among the team's submitted, not yet running workloads, by submission time.

    One COUNT query: the workloads submitted before this one (ties broken by id).
    """
    if workload.state != State.SUBMITTED or workload.submitted_at is None:
        return None
    ahead = (
        Workload.objects.filter(team_id=workload.team_id, state=State.SUBMITTED, deleted_at__isnull=True)
        .filter(Q(submitted_at__lt=workload.submitted_at) | Q(submitted_at=workload.submitted_at, pk__lt=workload.pk))
        .count()
    )
    return ahead + 1


def queue_positions(workloads: list[Workload]) -> dict[int, int]:
    """``queue_position`` of each submitted workload in the list, in one query for the list page.

    Reads the submitted workloads of the listed ones' teams (ids and times only) and
    numbers them per team in the same order as ``queue_position``.
    """
    teams = {w.team_id for w in workloads if w.state == State.SUBMITTED and w.submitted_at}
    if not teams:
        return {}
    queued = (
        Workload.objects.filter(team_id__in=teams, state=State.SUBMITTED, deleted_at__isnull=True)
        .exclude(submitted_at__isnull=True)
        .order_by("team_id", "submitted_at", "pk")
        .values_list("pk", "team_id")
    )
    positions: dict[int, int] = {}
    counts: dict[int, int] = {}
    for pk, team_id in queued:
        counts[team_id] = counts.get(team_id, 0) + 1
        positions[pk] = counts[team_id]
    return positions


def keeps_polling(workload: Workload) -> bool:
    """Whether the page should keep asking: a stopped notebook can start again, other stops are final."""
    if workload.is_finished:
        return False
    return not (workload.state == State.STOPPED and workload.kind != Kind.NOTEBOOK)


def _timeline(workload: Workload) -> list[WorkloadEvent]:
    events = list(WorkloadEvent.objects.filter(workload=workload).select_related("actor").order_by("at", "id"))
    labels = dict(State.choices)
    for event in events:
        event.to_label = labels.get(event.to_state, event.to_state)
    return events


def _manifests_yaml(objects: list[dict]) -> str:
    """YAML of stored objects in the order people read manifests (JSONB does not keep key order)."""

    def ordered(value):
        if isinstance(value, dict):
            keys = sorted(value, key=lambda k: (READING_ORDER.get(k, len(READING_ORDER)), k))
            return {k: ordered(value[k]) for k in keys}
        if isinstance(value, list):
            return [ordered(v) for v in value]
        return value

    return yaml.safe_dump_all([ordered(o) for o in objects], sort_keys=False)


def _live_context(workload: Workload) -> dict:
    position = queue_position(workload)
    return {
        "workload": workload,
        "timeline": _timeline(workload),
        "queue_position": position,
        "waiting": waiting.explain(workload, position),
        "live": inspect.live_details(workload),
        "polling": keeps_polling(workload),
    }


def _digest(*parts: object) -> str:
    """A short fingerprint of what a polled panel shows, so an unchanged panel is not swapped."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unchanged(request, digest: str, polling: bool) -> HttpResponse | None:
    """204 (htmx swaps nothing and keeps polling) when the poll already shows ``digest``."""
    if polling and _fragment(request) and request.GET.get("seen") == digest:
        response = HttpResponse(status=204)
        patch_vary_headers(response, ("HX-Request",))
        return response
    return None


def _manifests_context(workload: Workload) -> dict:
    manifests_yaml = _manifests_yaml(workload.applied_manifests) if workload.applied_manifests else ""
    return {
        "workload": workload,
        "manifests_yaml": manifests_yaml,
        "manifests_digest": _digest(manifests_yaml),
        "polling": keeps_polling(workload),
    }


@login_required
@require_GET
def workload_detail(request, pk: int):
    workload = _workload(request.user, pk)
    context = {
        **_live_context(workload),
        **_manifests_context(workload),
        "request_fields": {
            key: json.dumps(value) if isinstance(value, list | dict) else value
            for key, value in lifecycle.request_data(workload).items()
            if value not in ([], {})
        },
        "can_stop": workload.state in (State.PENDING_APPROVAL, *ACTIVE_STATES),
        "can_start": workload.kind == Kind.NOTEBOOK and workload.state == State.STOPPED,
        "can_manage": can_manage_team(request.user, workload.team),
        "kind_title": KIND_TITLES[workload.kind],
        **_traffic_context(workload),
        "endpoint_charge": scale.endpoint_charge(workload),
    }
    return render(request, "jobs/workload_detail.html", context)


def _traffic_context(workload: Workload) -> dict:
    """An endpoint's traffic rows: what KServe reports, each with the model version it serves.

    Until the cluster reports a split that matches the requested canary (the task applies it
    after the page's POST), the requested split is shown and says so.
    """
    if workload.kind != Kind.ENDPOINT:
        return {}
    observed = [dict(share) for share in workload.cluster_traffic or []]
    wants_canary = bool(workload.canary_storage_uri) and workload.canary_traffic_percent is not None
    has_canary = any(share.get("role") == "canary" for share in observed)
    requested = wants_canary != has_canary
    if requested:
        percent = workload.canary_traffic_percent or 0
        observed = [{"role": "stable", "percent": 100 - percent, "revision": "", "ready": None}]
        if wants_canary:
            observed.append({"role": "canary", "percent": percent, "revision": "", "ready": None})
    for share in observed:
        share["model"] = workload.canary_storage_uri if share.get("role") == "canary" else workload.storage_uri
    return {
        "traffic_rows": observed,
        "traffic_requested": requested,
        "traffic_by_replicas": workload.deployment_mode != "Knative" and len(observed) > 1,
    }


@login_required
@require_GET
def workload_live(request, pk: int):
    """The polled part of the detail page; 286 tells htmx to stop once the workload is over."""
    workload = _workload(request.user, pk)
    if not _fragment(request):
        return redirect("workload-detail", pk=pk)
    context = _live_context(workload)
    response = render(request, "jobs/_workload_live.html", context, status=200 if context["polling"] else 286)
    patch_vary_headers(response, ("HX-Request",))
    return response


@login_required
@require_GET
def cluster_banner(request):
    """The banner every page polls: the cached cluster status, never a cluster call."""
    response = render(request, "jobs/_cluster_banner.html", cluster_status.banner(request))
    patch_vary_headers(response, ("HX-Request",))
    return response


@login_required
@require_GET
def workload_manifests(request, pk: int):
    """The "Manifests applied" panel, polled while the workload is live (it fills in at submission)."""
    workload = _workload(request.user, pk)
    if not _fragment(request):
        return redirect("workload-detail", pk=pk)
    context = _manifests_context(workload)
    if (unchanged := _unchanged(request, context["manifests_digest"], context["polling"])) is not None:
        return unchanged
    # The swapped-in panel has no poll once the workload is over; 286 says so to htmx as well.
    response = render(request, "jobs/_workload_manifests.html", context, status=200 if context["polling"] else 286)
    patch_vary_headers(response, ("HX-Request",))
    return response


@login_required
@require_GET
def workload_logs(request, pk: int):
    workload = _workload(request.user, pk)
    try:
        tail = min(max(int(request.GET.get("tail", LOG_TAIL_DEFAULT)), 1), LOG_TAIL_MAX)
    except ValueError:
        tail = LOG_TAIL_DEFAULT
    context = {
        "workload": workload,
        "tail": tail,
        # Kept while the cluster does not answer, so the poll goes on asking for the same pod.
        "pod": request.GET.get("pod", "")[:253],
        "pods": [],
        "log": "",
        "error": "",
        "polling": keeps_polling(workload),
    }
    cluster, context["error"] = cluster_status.page_cluster(inspect.LOGS)
    if cluster is not None:
        try:
            pod, text, pods = inspect.logs(workload, cluster, pod=request.GET.get("pod") or None, tail_lines=tail)
        except ClusterError as exc:
            context["error"] = cluster_status.unavailable(exc, inspect.LOGS)
        else:
            cluster_status.answered()
            context.update(pod=pod, pods=pods, log=text)
    context["logs_digest"] = _digest(context["pod"], context["pods"], context["log"], context["error"], tail)
    if (unchanged := _unchanged(request, context["logs_digest"], context["polling"])) is not None:
        return unchanged
    return _render(request, "jobs/workload_logs.html", "jobs/_workload_logs.html", context)


# -- actions: each a POST, confirmed (a JavaScript confirm, or a confirm page without it) ----


ACTIONS = {
    "stop": ("Stop", "Stop {name}? Its GPUs are released; a notebook keeps its workspace."),
    "start": ("Start", "Start {name} again? It is admitted against your team's quota like a new request."),
    "delete": ("Delete", "Delete {name}? It is stopped if needed and removed from the lists and the cluster."),
}


def _unconfirmed(request, workload: Workload, action: str):
    if request.POST.get("confirmed") == "yes":
        return None
    label, question = ACTIONS[action]
    context = {"workload": workload, "action": action, "label": label, "question": question.format(name=workload)}
    return render(request, "jobs/confirm.html", context)


@login_required
@require_POST
def workload_stop(request, pk: int):
    workload = _workload(request.user, pk)
    if (page := _unconfirmed(request, workload, "stop")) is not None:
        return page
    if lifecycle.stop(request.user, workload):
        messages.success(request, f"{workload} is stopping.")
    else:
        messages.error(request, f"A {workload.get_state_display().lower()} workload cannot be stopped.")
    return redirect("workload-detail", pk=pk)


@login_required
@require_POST
def workload_start(request, pk: int):
    workload = _workload(request.user, pk)
    if (page := _unconfirmed(request, workload, "start")) is not None:
        return page
    try:
        started = lifecycle.start(request.user, workload)
    except SpecError as exc:
        messages.error(request, " ".join(m for ms in exc.errors.values() for m in ms))
    except QuotaRefused as exc:
        messages.error(request, str(exc))
    else:
        if started:
            messages.success(request, f"{workload} is starting.")
        else:
            messages.error(request, "Only a stopped notebook can be started.")
    return redirect("workload-detail", pk=pk)


# Human names of the fields a model-version change can complain about (the API keeps the keys).
_ROLLOUT_FIELDS = {
    "storage_uri": "New model version",
    "canary_traffic_percent": "Canary traffic percent",
    "canary": "Canary",
    "state": "Endpoint",
}


def _rollout_error(exc: SpecError) -> str:
    return " ".join(
        f"{_ROLLOUT_FIELDS.get(field, field.replace('_', ' ').capitalize())}: {message}"
        for field, messages in exc.errors.items()
        for message in messages
    )


@login_required
@require_POST
def workload_rollout(request, pk: int):
    """A new model version over a live endpoint: all traffic, or a canary share."""
    workload = _workload(request.user, pk)
    raw_percent = request.POST.get("canary_traffic_percent", "").strip()
    try:
        percent = int(raw_percent) if raw_percent else None
    except ValueError:
        messages.error(request, f"Canary traffic percent: must be a whole number from 0 to 100, not {raw_percent!r}")
        return redirect("workload-detail", pk=pk)
    try:
        lifecycle.rollout(request.user, workload, request.POST.get("storage_uri", "").strip(), percent)
    except SpecError as exc:
        messages.error(request, _rollout_error(exc))
    except QuotaRefused as exc:
        messages.error(request, f"Not rolled out: {exc}")
    else:
        share = "all traffic" if percent is None else f"{percent}% of the traffic as a canary"
        messages.success(request, f"{workload} is rolling out the new model version to {share}.")
    return redirect("workload-detail", pk=pk)


@login_required
@require_POST
def workload_promote(request, pk: int):
    """The canary's model version takes all traffic."""
    return _canary_action(request, pk, lifecycle.promote, "{} is promoting its canary to all traffic.")


@login_required
@require_POST
def workload_rollback(request, pk: int):
    """The canary goes; the current model version takes all traffic again."""
    return _canary_action(request, pk, lifecycle.rollback, "{} is rolling back its canary.")


def _canary_action(request, pk: int, change, done: str):
    workload = _workload(request.user, pk)
    try:
        change(request.user, workload)
    except SpecError as exc:
        messages.error(request, _rollout_error(exc))
    else:
        messages.success(request, done.format(workload))
    return redirect("workload-detail", pk=pk)


@login_required
@require_POST
def workload_delete(request, pk: int):
    workload = _workload(request.user, pk)
    if (page := _unconfirmed(request, workload, "delete")) is not None:
        return page
    lifecycle.delete(request.user, workload)
    messages.success(request, f"Deleted {workload}.")
    return redirect("workload-list")


@login_required
@require_POST
def workload_save_preset(request, pk: int):
    """A team admin keeps this workload's request as a preset (others get 403: they see the team)."""
    workload = _workload(request.user, pk)
    try:
        preset = presets.save_from_workload(request.user, workload, request.POST.get("preset_name", ""))
    except SpecError as exc:
        messages.error(request, "Not saved: " + "; ".join(f"{k}: {' '.join(m)}" for k, m in exc.errors.items()))
    else:
        messages.success(request, f"Saved preset '{preset.name}' for team {preset.team.slug}.")
    return redirect("workload-detail", pk=pk)


# -- presets --------------------------------------------------------------------------------


@login_required
@require_GET
def preset_list(request):
    teams = list(visible_teams(request.user))
    managed = {t.pk for t in teams if can_manage_team(request.user, t)}
    context = {"presets": presets.presets_for(request.user), "managed": managed, "kind_titles": KIND_TITLES}
    return render(request, "jobs/preset_list.html", context)


@login_required
@require_POST
def preset_delete(request, pk: int):
    preset = presets.preset_for(request.user, pk)
    if request.POST.get("confirmed") != "yes":
        context = {
            "preset": preset,
            "label": "Delete",
            "question": f"Delete the preset '{preset.name}' of team {preset.team.slug}?",
        }
        return render(request, "jobs/confirm.html", context)
    presets.delete_preset(request.user, preset)
    messages.success(request, f"Deleted preset '{preset.name}'.")
    return redirect("preset-list")
