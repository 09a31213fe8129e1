"""What TrainJob and Volcano Job share: a PodGroup for the gang and a run clock.

The run clock starts when every pod of the workload is Running and stops after
``sandbox.local/duration-seconds`` (default 600) simulated seconds; then all
pods end Succeeded, or the run fails when ``sandbox.local/outcome`` says how: ``oom``,
``error`` (or ``Failed``) or ``preempted``. The first pod (by name) then fails that way,
with the status the kubelet and scheduler write (``kubelet.fail_pod``), and the others are
stopped (exit 143). A preempted pod ends the run as if its restarts were used up. When the pods
cannot form one distributed run (``sandbox.podenv.launch_problem``: torchrun's PET_*
variables or mpirun's ssh settings do not agree), they fail as soon as they all run, with
a ``DistributedLaunchFailed`` warning on the workload saying why.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from sandbox import quantity
from sandbox.clock import iso
from sandbox.controllers.base import PODS, Ctx
from sandbox.controllers.kubelet import duration_of, fail_pod, outcome_of, terminate_pod
from sandbox.podenv import launch_problem
from sandbox.podutil import is_terminal, owner_reference, pod_requests
from sandbox.scheduler import PODGROUPS

SANDBOX_PREFIX = "sandbox.local/"
LAUNCH_FAILED_REASON = "DistributedLaunchFailed"  # event on the job whose pods cannot form one run


def owned_pods(ctx: Ctx, owner: dict[str, Any]) -> list[dict[str, Any]]:
    uid = owner["metadata"]["uid"]
    return [
        p
        for p in ctx.items(PODS, owner["metadata"]["namespace"])
        if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
    ]


def sandbox_annotations(owner: dict[str, Any]) -> dict[str, str]:
    """Sandbox knobs (duration, outcome, activity) travel from the workload to its pods."""
    return {k: v for k, v in (owner["metadata"].get("annotations") or {}).items() if k.startswith(SANDBOX_PREFIX)}


def total_requests(pods: list[dict[str, Any]]) -> dict[str, str]:
    total: dict[str, Fraction] = {}
    for pod in pods:
        for k, v in pod_requests(pod).items():
            total[k] = total.get(k, Fraction(0)) + v
    return {k: quantity.format_quantity(v, k) for k, v in sorted(total.items())}


def ensure_podgroup(
    ctx: Ctx,
    owner: dict[str, Any],
    name: str,
    min_member: int,
    queue: str,
    min_resources: dict[str, str],
    labels: dict[str, str],
    priority_class: str | None,
    manager: str,
) -> dict[str, Any]:
    ns = owner["metadata"]["namespace"]
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue, "minResources": min_resources}
    if priority_class:
        spec["priorityClassName"] = priority_class
    existing = ctx.get(PODGROUPS, ns, name)
    if existing is None:
        return ctx.create(
            PODGROUPS,
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [owner_reference(owner)],
                },
                "spec": spec,
                "status": {"phase": "Pending"},
            },
            manager,
        )
    merged = {**(existing.get("spec") or {}), **spec}
    if merged != existing.get("spec"):
        return ctx.replace(PODGROUPS, {**existing, "spec": merged}, manager)
    return existing


def run_clock(
    ctx: Ctx, owner: dict[str, Any], pods: list[dict[str, Any]], expected: int, deadline: float | None = None
) -> dict[str, Any]:
    """Advance the workload's run; returns its record ``{"active_since", "started"?, "finished"?, "outcome"?}``.

    ``outcome`` is "Succeeded", "Failed" (the outcome annotation) or "DeadlineExceeded" when
    ``deadline`` seconds passed since the workload became active (like a Job's
    activeDeadlineSeconds, counted from creation or from resuming, not from running).
    """
    runs = ctx.memo("runs")
    uid = owner["metadata"]["uid"]
    run = runs.setdefault(uid, {})
    run.setdefault("active_since", ctx.now)
    if run.get("outcome"):
        return run
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if deadline is not None and ctx.now >= run["active_since"] + deadline:
        for pod in live:
            if not is_terminal(pod):
                terminate_pod(
                    ctx, pod, False, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
                )
        run["finished"] = ctx.now
        run["outcome"] = "DeadlineExceeded"
        return run
    if (
        "started" not in run
        and len(live) >= expected
        and expected > 0
        and all(p.get("status", {}).get("phase") == "Running" for p in live)
    ):
        run["started"] = ctx.now
        # What torchrun or mpirun would trip over in its first seconds ends the run here.
        problem = launch_problem(live, ctx.get)
        if problem:
            for pod in live:
                terminate_pod(ctx, pod, False, container_message=problem)
            ctx.event(owner, "Warning", LAUNCH_FAILED_REASON, problem, "sandbox")
            run["finished"] = ctx.now
            run["outcome"] = "Failed"
            run["problem"] = problem
            return run
    if "started" in run and ctx.now >= run["started"] + duration_of(owner):
        how = outcome_of(owner)
        running = sorted((p for p in live if not is_terminal(p)), key=lambda p: p["metadata"]["name"])
        for i, pod in enumerate(running):
            if not how:
                terminate_pod(ctx, pod, True)
            else:
                # One pod fails as told; its controller then stops the others.
                fail_pod(ctx, pod, how if i == 0 else "stopped")
        run["finished"] = ctx.now
        run["outcome"] = "Failed" if how else "Succeeded"
    return run


def pause_clock(ctx: Ctx, owner: dict[str, Any]) -> None:
    """A suspended workload starts over when it resumes (its pods were deleted)."""
    runs = ctx.memo("runs")
    run = runs.get(owner["metadata"]["uid"])
    if run is not None and not run.get("outcome"):
        del runs[owner["metadata"]["uid"]]


def run_times(run: dict[str, Any]) -> tuple[str | None, str | None]:
    return (iso(run["started"]) if "started" in run else None, iso(run["finished"]) if "finished" in run else None)
