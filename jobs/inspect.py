"""Live details of one workload read from the cluster for its page: events and logs.

These are read on demand (one page view, one API call), never stored: the cluster is
the source of truth for them and they can be large. Failures are reported, not raised,
so a cluster hiccup degrades the page instead of breaking it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs import cluster_status
from jobs.kube.errors import ClusterError
from jobs.kube.labels import workload_selector
from jobs.models import Workload

EVENTS = "Kubernetes events"
LOGS = "logs"


@dataclass
class Live:
    events: list[dict] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    error: str = ""


def _event_row(event: dict) -> dict:
    return {
        "type": event.get("type", ""),
        "reason": event.get("reason", ""),
        "message": event.get("message", ""),
        "count": event.get("count") or 1,
        "last_seen": event.get("lastTimestamp") or event.get("eventTime") or "",
        "object": f"{(event.get('involvedObject') or {}).get('kind', '')}/"
        f"{(event.get('involvedObject') or {}).get('name', '')}",
    }


def live_details(workload: Workload, cluster=None) -> Live:
    """Kubernetes events of the workload's objects and pods, newest last.

    Without ``cluster``, the process's shared page client (short timeouts); a cluster
    that is not answering gives ``error``, a sentence for users, never the exception.
    """
    live = Live()
    if workload.state in ("pending_approval", "rejected") and not workload.submitted_at:
        return live
    if cluster is None:
        cluster, live.error = cluster_status.page_cluster(EVENTS)
        if cluster is None:
            return live
    try:
        pods = cluster.pods_for(workload.team.namespace, workload_selector(workload.pk))
        live.pods = sorted(p["metadata"]["name"] for p in pods)
        names = {workload.name, *live.pods}
        events = []
        for name in sorted(names):
            events.extend(cluster.events_for(workload.team.namespace, name))
        events.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        live.events = [_event_row(e) for e in events[-50:]]
    except ClusterError as exc:
        live.error = cluster_status.unavailable(exc, EVENTS)
    else:
        cluster_status.answered()
    return live


def logs(workload: Workload, cluster, *, pod: str | None = None, tail_lines: int = 200) -> tuple[str, str, list[str]]:
    """(pod name, log text, all pod names) of the workload's first pod or the one asked for."""
    pods = sorted(
        p["metadata"]["name"] for p in cluster.pods_for(workload.team.namespace, workload_selector(workload.pk))
    )
    if not pods:
        return "", "", []
    chosen = pod if pod in pods else pods[0]
    return chosen, cluster.pod_logs(workload.team.namespace, chosen, tail_lines=tail_lines), pods
