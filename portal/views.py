from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views import defaults
from django.views.decorators.http import require_POST

from portal.access import team_for
from portal.forms import LoginForm
from portal.models import ApiToken, Offering


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


def not_found(request, exception):
    """A URL that names nothing: the API's error format under /api/, the portal's 404 page elsewhere.

    API clients parse every answer as JSON; a path argument the URL patterns refuse (an id
    that is not a number) would otherwise get them an HTML page.
    """
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)
