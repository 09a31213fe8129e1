"""Browser pages of quotas: the overview, the approvals console and the audit log.

Thin: ``quotas.requests`` files and withdraws, ``quotas.approvals`` decides,
``quotas.usage`` counts, ``quotas.cluster`` previews. One view serves the full page or,
for htmx, the fragment it swaps (STYLE.md, idea 9). Fragment targets:
``#team-<slug>`` (a team's card on the overview, replaced after a request or a
withdrawal), ``#pending`` (the console's list, replaced after a decision) and
``#audit-table``.
"""

from __future__ import annotations

from collections import defaultdict
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from portal.access import can_manage_team, is_platform_admin, team_for, visible_teams
from portal.models import Membership, Offering, Team
from quotas import approvals, audit, cluster
from quotas.admission import fmt
from quotas.forms import DecisionForm, QuotaRequestForm, QuotaSetForm
from quotas.models import AuditEntry, Decision, QuotaDrift, QuotaException, QuotaRequest, RequestState
from quotas.requests import QuotaInputError, file_request, set_quota, withdraw_request
from quotas.usage import quota_rows

AUDIT_PAGE_SIZE = 50
HISTORY_PER_TEAM = 5
RECENT_REQUESTS_PER_TEAM = 10
DECISION_ACTIONS = [
    AuditEntry.Action.REQUEST_APPROVED,
    AuditEntry.Action.REQUEST_DENIED,
    AuditEntry.Action.EXCEPTION_APPROVED,
    AuditEntry.Action.EXCEPTION_DENIED,
    AuditEntry.Action.GRANT_EXPIRED,
    AuditEntry.Action.QUOTA_CHANGED,
]


def _fragment(request) -> bool:
    """An htmx swap wants the fragment; a history restore (back button) wants the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _render(request, full: str, fragment: str, context: dict, status: int = 200):
    response = render(request, fragment if _fragment(request) else full, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def _require_platform_admin(user) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied("Only platform admins use the approvals console.")


# -- the overview: every team's quota, and requests for more ---------------------------------------


def _team_cards(user, teams: list[Team], forms: dict[int, QuotaRequestForm] | None = None) -> list[dict]:
    """One card per team: its rows, whether the user may ask for more, its recent requests."""
    rows = quota_rows(teams)
    roles = dict(Membership.objects.filter(user=user, team__in=teams).values_list("team_id", "role"))
    admin = is_platform_admin(user)
    recent: dict[int, list[QuotaRequest]] = defaultdict(list)
    for r in (
        QuotaRequest.objects.filter(team__in=teams)
        .select_related("requested_by", "decided_by")
        .order_by("-requested_at", "-id")[: RECENT_REQUESTS_PER_TEAM * max(len(teams), 1)]
    ):
        if len(recent[r.team_id]) < RECENT_REQUESTS_PER_TEAM:
            recent[r.team_id].append(r)
    cards = []
    for team in teams:
        manages = admin or roles.get(team.pk) == Membership.TEAM_ADMIN
        form = (forms or {}).get(team.pk) or (QuotaRequestForm(team=team) if manages else None)
        cards.append(
            {"team": team, "rows": rows[team.pk], "manages": manages, "form": form, "requests": recent[team.pk]}
        )
    return cards


@login_required
@require_GET
def quota_overview(request):
    teams = list(visible_teams(request.user).order_by("slug"))
    context = {"cards": _team_cards(request.user, teams), "may_read_audit": audit.may_read(request.user)}
    return render(request, "quotas/overview.html", context)


@login_required
@require_GET
def quota_bars(request):
    """One team's quota bars as a fragment, for the dashboard and the request forms."""
    team = team_for(request.user, request.GET.get("team", ""))
    rows = quota_rows([team])[team.pk]
    return render(request, "quotas/bars_fragment.html", {"team": team, "rows": rows})


def _card_response(request, team: Team, form: QuotaRequestForm | None = None, status: int = 200):
    card = _team_cards(request.user, [team], {team.pk: form} if form else None)[0]
    return _render(request, "quotas/card_page.html", "quotas/_team_card.html", {"card": card}, status=status)


@login_required
@require_POST
def quota_request_create(request):
    team = team_for(request.user, request.POST.get("team", ""))
    if not can_manage_team(request.user, team):
        raise PermissionDenied(f"Only team admins of {team.slug} may ask for more quota.")
    form = QuotaRequestForm(request.POST, team=team)
    if form.is_valid():
        data = form.cleaned_data
        try:
            created = file_request(
                request.user,
                team,
                gpu_class=data["gpu_class"],
                guaranteed=data["guaranteed"],
                limit=data["limit"],
                until=data["until"],
                justification=data["justification"],
            )
        except QuotaInputError as exc:
            form.show_errors(exc)
        else:
            messages.success(request, f"Request #{created.pk} filed; the platform admins will decide it.")
            if _fragment(request):
                return _card_response(request, team)
            return redirect("quota-overview")
    # htmx swaps only 2xx answers, so the form with its errors comes back as 200 there.
    return _card_response(request, team, form, status=200 if _fragment(request) else 400)


@login_required
@require_POST
def quota_request_withdraw(request, pk: int):
    quota_request = get_object_or_404(QuotaRequest.objects.visible_to(request.user).select_related("team"), pk=pk)
    if withdraw_request(request.user, quota_request):
        messages.success(request, f"Request #{pk} withdrawn.")
    else:
        messages.error(request, f"Request #{pk} is no longer pending.")
    if _fragment(request):
        return _card_response(request, quota_request.team)
    return redirect("quota-overview")


# -- the approvals console --------------------------------------------------------------------------


def _pending_context(result: approvals.BatchResult | None = None, form: DecisionForm | None = None) -> dict:
    """Everything pending, each team's usage and recent decisions, in a fixed number of queries."""
    requests = list(
        QuotaRequest.objects.filter(state=RequestState.PENDING)
        .select_related("team", "requested_by")
        .order_by("requested_at", "id")
    )
    exceptions = list(
        QuotaException.objects.filter(decision=Decision.PENDING)
        .select_related("team", "requested_by")
        .order_by("requested_at", "id")
    )
    teams = {r.team_id: r.team for r in requests} | {e.team_id: e.team for e in exceptions}
    rows = quota_rows(teams.values())
    history: dict[int, list[AuditEntry]] = defaultdict(list)
    for entry in (
        AuditEntry.objects.filter(team_id__in=teams, action__in=DECISION_ACTIONS)
        .select_related("actor")
        .order_by("-at", "-id")[: HISTORY_PER_TEAM * max(len(teams), 1) * 4]
    ):
        if len(history[entry.team_id]) < HISTORY_PER_TEAM:
            history[entry.team_id].append(entry)
    never_fits = approvals.never_fits(e.workload_id for e in exceptions)
    totals = approvals.cluster_totals(Offering.objects.filter(is_active=True)) if requests else {}
    return {
        "requests": [
            {
                "item": r,
                "rows": rows[r.team_id],
                "history": history[r.team_id],
                "beyond_cluster": approvals.beyond_cluster(r, totals),
            }
            for r in requests
        ],
        "exceptions": [
            {
                "item": e,
                "rows": rows[e.team_id],
                "history": history[e.team_id],
                "link": _workload_link(e.workload_id),
                "never_fits": never_fits.get(e.workload_id, ""),
            }
            for e in exceptions
        ],
        "pending_count": len(requests) + len(exceptions),
        "result": result,
        "form": form or DecisionForm(initial={"decision": "approve"}),
    }


def _workload_link(workload_id: int) -> str:
    try:
        return reverse("workload-detail", args=[workload_id])
    except NoReverseMatch:
        return ""


@login_required
@require_GET
def approvals_console(request):
    _require_platform_admin(request.user)
    context = _pending_context()
    context["drifts"] = QuotaDrift.objects.select_related("team")[:20]
    context["set_form"] = QuotaSetForm()
    return _render(request, "quotas/approvals.html", "quotas/_pending.html", context)


@login_required
@require_POST
def approvals_set_quota(request):
    """A platform admin sets a quota directly; the console shows the form again on errors."""
    _require_platform_admin(request.user)
    form = QuotaSetForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            change = set_quota(
                data["team"], data["gpu_class"], data["guaranteed"], data["limit"], request.user, data["reason"]
            )
        except QuotaInputError as exc:
            form.show_errors(exc)
        else:
            quota = change.quota
            if not change.changed:
                messages.info(request, f"{data['team'].slug} already had these values; nothing changed.")
            else:
                messages.success(
                    request,
                    f"{data['team'].slug}: {data['gpu_class']} set to {fmt(quota.guaranteed)} guaranteed, "
                    f"limit {fmt(quota.limit)}.",
                )
            if quota.overage > 0:
                messages.warning(
                    request,
                    f"{data['team'].slug} uses {fmt(quota.used)} {data['gpu_class']}, above the new limit: "
                    "running work goes on, new work is refused until usage is back under it.",
                )
            return redirect("approvals-console")
    context = _pending_context()
    context["drifts"] = QuotaDrift.objects.select_related("team")[:20]
    context["set_form"] = form
    return render(request, "quotas/approvals.html", context, status=400)


@login_required
@require_POST
def approvals_decide(request):
    _require_platform_admin(request.user)
    form = DecisionForm(request.POST)
    result = None
    if form.is_valid():
        data = form.cleaned_data
        result = approvals.decide_many(
            request.user,
            request_ids=data["request_ids"],
            exception_ids=data["exception_ids"],
            approve=data["decision"] == "approve",
            comment=data["comment"],
        )
        form = None
        if not _fragment(request):
            verb = "Approved" if data["decision"] == "approve" else "Denied"
            if result.decided:
                messages.success(request, f"{verb}: {', '.join(result.decided)}.")
            for error in result.errors:
                messages.error(request, error)
            return redirect("approvals-console")
    elif not _fragment(request):
        for error in form.non_field_errors():
            messages.error(request, error)
        return redirect("approvals-console")
    context = _pending_context(result, form)
    return _render(request, "quotas/approvals.html", "quotas/_pending.html", context)


def _preview_response(request, subject: str, preview: cluster.Preview):
    context = {"subject": subject, "preview": preview}
    return _render(request, "quotas/preview.html", "quotas/_preview.html", context)


@login_required
@require_GET
def request_preview(request, pk: int):
    _require_platform_admin(request.user)
    quota_request = get_object_or_404(QuotaRequest.objects.select_related("team"), pk=pk)
    preview = cluster.preview_request(quota_request, queueing=cluster.queueing_backend())
    return _preview_response(request, f"Quota request #{pk} ({quota_request.team.slug})", preview)


@login_required
@require_GET
def exception_preview(request, pk: int):
    _require_platform_admin(request.user)
    exception = get_object_or_404(QuotaException.objects.select_related("team"), pk=pk)
    preview = cluster.preview_exception(exception, queueing=cluster.queueing_backend())
    return _preview_response(request, f"Exception for workload {exception.workload_id}", preview)


# -- the audit log -----------------------------------------------------------------------------------


def _audit_filters(request) -> dict[str, str]:
    return {k: request.GET.get(k, "").strip() for k in ("team", "gpu_class", "action")}


@login_required
@require_GET
def audit_log(request):
    if not audit.may_read(request.user):
        raise PermissionDenied("Only team admins and platform admins read the audit log.")
    filters = _audit_filters(request)
    page = Paginator(audit.entries_for(request.user, filters), AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    context = {
        "page": page,
        "filters": filters,
        "query": query,
        "actions": AuditEntry.Action.choices,
        "teams": visible_teams(request.user).order_by("slug")
        if is_platform_admin(request.user)
        else Team.objects.filter(memberships__user=request.user, memberships__role=Membership.TEAM_ADMIN).order_by(
            "slug"
        ),
    }
    return _render(request, "quotas/audit.html", "quotas/_audit_table.html", context)


class _Rows:
    """``csv.writer`` writes into this; each row becomes one chunk of the streamed response."""

    def __init__(self):
        self.chunks: list[str] = []

    def write(self, value: str) -> None:
        self.chunks.append(value)


def _csv_chunks(entries):
    buffer = _Rows()
    audit.write_header(buffer)
    yield from buffer.chunks
    for entry in entries.iterator(chunk_size=1000):
        buffer.chunks.clear()
        audit.write_rows([entry], buffer)
        yield from buffer.chunks


@login_required
@require_GET
def audit_export(request):
    if not audit.may_read(request.user):
        raise PermissionDenied("Only team admins and platform admins read the audit log.")
    entries = audit.entries_for(request.user, _audit_filters(request))
    response = StreamingHttpResponse(_csv_chunks(entries), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="quota-audit-{stamp}.csv"'
    return response
