"""The one place that decides who may see or do what.

Roles: a platform admin is a staff user and sees every team; a team admin manages
their team (presets, quota requests); a member uses their team's resources. Objects
of a team the user is not in are reported as missing (404), never as forbidden, so
their existence does not leak.
"""

from __future__ import annotations

from django.http import Http404

from portal.models import Membership, Team


def is_platform_admin(user) -> bool:
    return bool(user.is_authenticated and user.is_staff)


def visible_teams(user):
    return Team.objects.visible_to(user)


def team_for(user, slug: str) -> Team:
    """The team named ``slug`` if the user may see it, else 404."""
    team = visible_teams(user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    return team


def role_in(user, team: Team) -> str | None:
    membership = Membership.objects.filter(user=user, team=team).only("role").first()
    return membership.role if membership else None


def can_use_team(user, team: Team) -> bool:
    """May create and act on workloads in the team."""
    return role_in(user, team) is not None or is_platform_admin(user)


def can_manage_team(user, team: Team) -> bool:
    return role_in(user, team) == Membership.TEAM_ADMIN or is_platform_admin(user)
