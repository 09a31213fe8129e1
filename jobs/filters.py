"""Workload list filters, shared by the HTML list and the API list."""

from __future__ import annotations

from jobs.models import Kind, State


def filter_workloads(qs, params):
    team = params.get("team")
    if team:
        qs = qs.filter(team__slug=team)
    kind = params.get("kind")
    if kind in Kind.values:
        qs = qs.filter(kind=kind)
    states = [s for s in (params.get("state") or "").split(",") if s in State.values]
    if states:
        qs = qs.filter(state__in=states)
    return qs
