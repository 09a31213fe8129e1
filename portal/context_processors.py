from __future__ import annotations

from django.urls import NoReverseMatch, reverse

from portal.access import is_platform_admin, visible_teams
from portal.notices import unread_count

# (label, URL name, platform admins only). Sections appear once their pages exist.
NAV = [
    ("Workloads", "workload-list", False),
    ("Presets", "preset-list", False),
    ("Quotas", "quota-overview", False),
    ("Usage", "usage-dashboard", False),
    ("Approvals", "approvals-console", True),
]


def _nav_items(request, admin: bool) -> list[dict]:
    items = []
    current = request.resolver_match.url_name if request.resolver_match else None
    for label, name, admin_only in NAV:
        if admin_only and not admin:
            continue
        try:
            url = reverse(name)
        except NoReverseMatch:
            continue
        items.append({"label": label, "url": url, "active": current == name})
    return items


def shell(request):
    """What the navigation needs on every page: the user's teams and the current one."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    admin = is_platform_admin(user)
    teams = list(visible_teams(user).only("slug", "name"))
    current_slug = request.session.get("team")
    current = next((t for t in teams if t.slug == current_slug), teams[0] if teams else None)
    return {
        "nav_teams": teams,
        "current_team": current,
        "is_platform_admin": admin,
        "nav_items": _nav_items(request, admin),
        # Cached (portal.notices): on every page without costing every page a query.
        "unread_notices": unread_count(user),
    }
