"""Why pending work is not running yet, and what its owner can do, in plain language.

Derived only from what the portal already knows about a workload: its state, how it was
admitted (an exception asked for, or burst work held back by the budget), the last
message of the scheduler or of the queue (``cluster_message``, kept current by the
reconcile), its place in the team's queue, and the cluster's size (``jobs.fit``). Pure:
the views pass the queue position in, so the list page computes every position in one
query.

The scheduler's own words stay on the detail page next to this; the explanation only
sorts them into the few situations a user can act on differently:

* the team's queue is full (its running work uses its quota in the cluster): wait, or
  stop something;
* no node has room now (every fitting node is busy): wait, or ask for less;
* no node can take it at all right now (cordoned, tainted): tell a platform admin;
* the image cannot be pulled, or the container keeps crashing: fix the request;
* the cluster could never hold it (it shrank since the request): stop it and ask for less.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs import fit

QUEUE_FULL = ("queue resource quota insufficient", "insufficient unused quota", "exceeded quota")
QUEUE_BROKEN = ("doesn't exist", "is inactive", "not found", "is closed", "doesn't match clusterqueue")
BUSY = ("insufficient ", "cannot allocate all claims", "no preemption victims")
NO_NODE = ("nodes are available", "nodes are unavailable")
GANG_FORMING = ("waiting for the rest of the gang",)
IMAGE = ("errimagepull", "imagepullbackoff", "invalidimagename")
CRASHING = ("crashloopbackoff",)


@dataclass(frozen=True)
class Waiting:
    short: str  # a few words for the list
    reason: str  # one or two sentences: why it is not running
    action: str = ""  # what the owner can do; "" when there is nothing but to wait


def explain(workload: Any, queue_position: int | None = None) -> Waiting | None:
    """Why ``workload`` waits, or None when it does not (running, finished, stopped)."""
    state = str(workload.state)
    if state not in ("pending_approval", "queued", "submitted"):
        return None
    team = workload.team.slug
    offering = workload.offering
    never = fit.problems_of(workload, offering)
    if never:
        return Waiting(
            "Can never run",
            f"The cluster could never hold this request as it is now: {fit.summary(never)}.",
            "Stop it and request a smaller shape (fewer GPUs per replica or fewer replicas), or another offering.",
        )
    if state == "pending_approval":
        if workload.wants_exception:
            return Waiting(
                "Awaiting approval",
                f"Over {team}'s quota: waiting for a platform admin to approve the exception.",
                "You get a notice when it is decided. To run sooner, stop other work of the team, or ask a team "
                "admin for a larger quota.",
            )
        return Waiting(
            "Awaiting approval (budget)",
            f"{team} has spent this month's budget, so burst work above its guaranteed quota waits for a "
            "platform admin's approval.",
            "You get a notice when it is decided. Work within the guaranteed quota still starts at once.",
        )
    if state == "queued":
        if workload.submit_attempts > 1:
            return Waiting(
                "Being submitted",
                f"The cluster did not take it yet; the portal keeps trying (attempt {workload.submit_attempts}).",
                "Nothing to do; if it stays here for long, tell a platform admin.",
            )
        return Waiting("Being submitted", "Waiting to be submitted to the cluster.")
    return _submitted(workload, queue_position, team, offering)


def _submitted(workload: Any, position: int | None, team: str, offering: Any) -> Waiting:
    message = (workload.cluster_message or "").lower()
    place = f"number {position} in {team}'s queue" if position else ""
    in_queue = f" It is {place}." if place else ""
    short_place = f"#{position} in queue · " if position else ""
    burst = (
        " It runs as burst work above the team's guarantee, so guaranteed work goes first."
        if workload.admission == "preemptible"
        else ""
    )
    if any(s in message for s in IMAGE):
        return Waiting(
            "Image cannot be pulled",
            "The node cannot pull the container image.",
            "Check the image name and tag, and that the registry lets the cluster pull it; then request it again.",
        )
    if any(s in message for s in CRASHING):
        return Waiting(
            "Keeps crashing",
            "The container starts and exits again and again.",
            "Read the logs on this page, fix the command or image, and request it again.",
        )
    if any(s in message for s in QUEUE_BROKEN):
        return Waiting(
            f"{short_place}Queue not ready",
            f"{team}'s queue in the cluster is missing or closed, so nothing of the team is scheduled.",
            "Tell a platform admin; the portal re-applies the team's queue by itself within minutes.",
        )
    if any(s in message for s in QUEUE_FULL):
        return Waiting(
            f"{short_place}Team queue full",
            f"{team}'s work already running uses the team's quota in the cluster.{in_queue}{burst}",
            "It starts by itself when other work of the team finishes; stop work you no longer need to start it "
            "sooner.",
        )
    if any(s in message for s in GANG_FORMING):
        return Waiting(f"{short_place}Starting pods", "The pods of the training run are being created.")
    if any(s in message for s in BUSY):
        free = ""
        if getattr(offering, "free_units", None) is not None and getattr(offering, "total_units", None):
            free = f" ({offering.free_units} of {offering.total_units} free when last counted)"
        return Waiting(
            f"{short_place}No free {offering.slug}",
            f"No node has enough free {offering.slug} for it right now{free}; other work is using them."
            f"{in_queue}{burst}",
            "It starts by itself when they free up. A smaller request (fewer GPUs or replicas) or another "
            "offering may start sooner.",
        )
    if any(s in message for s in NO_NODE):
        return Waiting(
            f"{short_place}No node available",
            f"No node that offers {offering.slug} can take work right now (cordoned, tainted or not ready).{in_queue}",
            "Tell a platform admin if it stays like this; it starts by itself once a node is back.",
        )
    return Waiting(
        f"{short_place}Waiting for the scheduler",
        f"Submitted; waiting for the scheduler to place it.{in_queue}{burst}",
    )
