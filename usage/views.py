"""Usage pages: the team dashboard, the cluster view, and the workload fragment."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, render

from jobs.models import Workload
from portal.access import is_platform_admin, team_for, visible_teams
from portal.models import Offering
from usage import reports, spend

RANGES = (1, 7, 30, 90)


def _current_team(request):
    slug = request.GET.get("team") or request.session.get("team")
    if slug:
        try:
            return team_for(request.user, slug)
        except Http404:
            if request.GET.get("team"):
                raise
    return visible_teams(request.user).first()


@login_required
def dashboard(request):
    team = _current_team(request)
    context = reports.team_dashboard(team) if team is not None else {"team": None}
    return render(request, "usage/dashboard.html", context)


@login_required
def cluster(request):
    if not is_platform_admin(request.user):
        raise Http404("No such page.")
    try:
        days = int(request.GET.get("days", 7))
    except ValueError:
        days = 7
    days = days if days in RANGES else 7
    context = reports.cluster_view(days=days)
    context["ranges"] = RANGES
    return render(request, "usage/cluster.html", context)


@login_required
def workload_usage(request, pk: int):
    """The workload page's usage fragment; polled every 10 s while the workload is live.

    Answers 286 (htmx: stop polling) once the workload is no longer live.
    """
    workload = get_object_or_404(
        Workload.objects.visible_to(request.user).select_related("team", "offering", "created_by"), pk=pk
    )
    context = reports.workload_usage(workload)
    response = render(request, "usage/_workload_usage.html", context)
    if request.htmx and not context["live"]:
        response.status_code = 286
    return response


@login_required
def estimate(request):
    """The request form's cost estimate, as an htmx fragment (jobs does not import usage).

    ``?offering=<slug>&units=<n>&max_runtime_seconds=<s>``; the form can fetch it with
    ``hx-get`` on change of those fields.
    """
    offering = Offering.objects.filter(slug=request.GET.get("offering", ""), is_active=True).first()
    try:
        units = int(request.GET.get("units") or 1)
        runtime = int(request.GET.get("max_runtime_seconds") or 0) or None
    except ValueError:
        return HttpResponseBadRequest("units and max_runtime_seconds must be whole numbers")
    if offering is None or units < 1 or (runtime is not None and runtime < 0):
        return render(request, "usage/_estimate.html", {"estimate": None})
    return render(
        request,
        "usage/_estimate.html",
        {"estimate": spend.estimate(offering, units, runtime), "offering": offering, "units": units},
    )
