"""Team presets: a request saved under a name, to start new workloads from.

A preset holds request fields only, never a decision: it is validated when saved (so a
team admin learns at once that it is wrong) and again, like any request, when a
workload is made from it (the catalog or the registry allow-list may have changed).
The workload name is not stored: it must be unique among the team's live workloads,
so every use of a preset picks its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.http import Http404

from jobs import lifecycle
from jobs.models import Preset, Workload
from jobs.specs import SpecError
from portal.access import can_manage_team, visible_teams

# Not part of a preset: the kind is the preset's own column, the name is chosen per use.
NOT_STORED = ("kind", "name")
MAX_PRESET_NAME = 100
PLACEHOLDER_NAME = "preset"


def presets_for(user, kind: str | None = None):
    """The presets of the user's teams (every team's for platform admins)."""
    qs = Preset.objects.filter(team__in=visible_teams(user)).select_related("team", "created_by")
    return qs.filter(kind=kind) if kind else qs


def preset_for(user, pk: int) -> Preset:
    """The preset if it belongs to one of the user's teams; otherwise 404, so it does not leak."""
    preset = presets_for(user).filter(pk=pk).first()
    if preset is None:
        raise Http404("No such preset.")
    return preset


def save_preset(user, team, name: str, data: Mapping) -> Preset:
    """Validate ``data`` as a request of ``team`` and store it as the team's preset ``name``.

    Raises ``PermissionDenied`` unless the user manages the team, and ``SpecError`` for a
    bad request, a missing name or a name the team already uses (key ``preset_name``).
    """
    if not can_manage_team(user, team):
        raise PermissionDenied("Only a team admin can save presets.")
    name = (name or "").strip()
    if not name:
        raise SpecError({"preset_name": ["give the preset a name, e.g. 'PyTorch notebook on a 1g.10gb slice'"]})
    if len(name) > MAX_PRESET_NAME:
        raise SpecError({"preset_name": [f"must be at most {MAX_PRESET_NAME} characters"]})
    # A preset has no workload name (each use picks one), but validation wants one.
    spec = lifecycle.validate({**data, "name": data.get("name") or PLACEHOLDER_NAME}, team)
    request = _stored_request(data, spec)
    try:
        with transaction.atomic():
            return Preset.objects.create(team=team, name=name, kind=spec.kind, request=request, created_by=user)
    except IntegrityError:
        raise SpecError({"preset_name": [f"team {team.slug} already has a preset named '{name}'"]}) from None


def save_from_workload(user, workload: Workload, name: str) -> Preset:
    return save_preset(user, workload.team, name, lifecycle.request_data(workload))


def delete_preset(user, preset: Preset) -> None:
    if not can_manage_team(user, preset.team):
        raise PermissionDenied("Only a team admin can delete presets.")
    preset.delete()


def _stored_request(data: Mapping, spec) -> dict:
    """The request as the API would send it: lists for command/args, a mapping for env.

    The form sends command and args as text (split by the spec) and env as a list of
    name/value pairs (so the spec can report a variable set twice); the spec's parsed
    values are stored instead, so a preset reads the same whichever front end saved it.
    """
    request = {k: v for k, v in data.items() if k not in NOT_STORED}
    if "command" in request:
        request["command"] = list(spec.command)
    if "args" in request:
        request["args"] = list(spec.args)
    if "env" in request:
        request["env"] = dict(spec.env)
    return request
