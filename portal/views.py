from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import defaults
from django.views.decorators.http import require_GET, require_POST

from portal import notices
from portal.access import team_for
from portal.forms import LoginForm
from portal.models import ApiToken, Offering

NOTICES_PAGE_SIZE = 50


class LoginView(auth_views.LoginView):
    """Django's login page; a login refused for too many failures answers 429 with Retry-After."""

    authentication_form = LoginForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.refusal is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.refusal.retry_after)
        return response


@login_required
def home(request):
    offerings = Offering.objects.filter(is_active=True).order_by("kind", "slug")
    return render(request, "portal/home.html", {"offerings": offerings})


@login_required
@require_POST
def switch_team(request):
    team = team_for(request.user, request.POST.get("team", ""))
    request.session["team"] = team.slug
    next_url = request.POST.get("next") or "/"
    # Django's check, not a prefix test: browsers read "/\\evil.example" as "//evil.example".
    safe = url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure())
    if not safe:
        next_url = "/"
    return redirect(next_url)


@login_required
def profile(request):
    new_secret = None
    if request.method == "POST":
        name = request.POST.get("name", "").strip()
        if not name:
            messages.error(request, "Token name: give the token a name, e.g. 'ci-pipeline'.")
        elif len(name) > 100:
            messages.error(request, "Token name: at most 100 characters.")
        else:
            _, new_secret = ApiToken.issue(request.user, name)
    tokens = request.user.api_tokens.all()
    return render(request, "portal/profile.html", {"tokens": tokens, "new_secret": new_secret})


@login_required
@require_POST
def revoke_token(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.success(request, f"Token '{token.name}' revoked.")
    return redirect("profile")


@login_required
@require_GET
def notice_list(request):
    """The user's inbox: every notice the portal sent them, newest first, unread ones marked."""
    page = Paginator(notices.inbox(request.user), NOTICES_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "portal/notices.html", {"page": page})


@login_required
@require_POST
def notice_read(request):
    """Mark notices read: the ticked ones (``notice``, repeatable) or all of them (``all``).

    With ``next`` (a notice's portal link), go there afterwards: "open" marks it read on
    the way. Ids of other people's notices change nothing and say nothing.
    """
    raw = request.POST.getlist("notice")
    try:
        ids = [int(value) for value in raw]
    except ValueError:
        return HttpResponseBadRequest("notice: must be the id of one of your notices (a whole number)")
    if request.POST.get("all"):
        changed = notices.mark_read(request.user)
    elif ids:
        changed = notices.mark_read(request.user, ids)
    else:
        messages.info(request, "Nothing to mark as read: tick a notice, or use Mark all as read.")
        return redirect("notice-list")
    next_url = request.POST.get("next") or ""
    if next_url and url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        return redirect(next_url)
    if changed:
        messages.success(request, f"Marked {changed} notice{'' if changed == 1 else 's'} as read.")
    return redirect("notice-list")


def not_found(request, exception):
    """A URL that names nothing: the API's error format under /api/, the portal's 404 page elsewhere.

    API clients parse every answer as JSON; a path argument the URL patterns refuse (an id
    that is not a number) would otherwise get them an HTML page.
    """
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
