"""Volcano Job policies for the pods Volcano's scheduler evicts (preempt, reclaim).

Volcano's Job controller turns an evicted pod into the ``PodEvicted`` event and runs the
action the job's ``spec.policies`` (or the evicted pod's task's ``policies``) give it. The
portal's Volcano Jobs say ``PodEvicted -> RestartJob``: a gang that lost one pod cannot go
on, so every pod goes and the job starts over, its pods waiting for the queue again.

The scheduler (``sandbox/scheduler.py``) records each eviction of a Job's pod in the memo
``evicted`` (pod uid -> the Job's uid and the pod's task); this step, run before the Job
controller:

1. finds the policy for ``PodEvicted`` (or ``*``), the task's before the job's;
2. ``RestartJob``: records Volcano's ``ExecuteAction`` event, deletes the job's remaining
   pods and clears its run, so the Job controller creates them again this pass; after
   ``spec.maxRetry`` (default 3) restarts the run ends Failed instead;
3. any other action, or none: nothing more happens here (the pod stays gone).
"""

from __future__ import annotations

from typing import Any

from sandbox.controllers.base import PODS, Ctx
from sandbox.controllers.batch import owned_pods
from sandbox.scheduler import EVICTED

VCJOBS = "batch.volcano.sh/jobs"
MANAGER = "volcano-controllers"
DEFAULT_MAX_RETRY = 3


def _action(job: dict[str, Any], task_name: str) -> str:
    spec = job.get("spec") or {}
    task = next((t for t in spec.get("tasks") or [] if t.get("name") == task_name), {})
    for policies in (task.get("policies") or [], spec.get("policies") or []):
        for policy in policies:
            events = [policy.get("event"), *(policy.get("events") or [])]
            if "PodEvicted" in events or "*" in events:
                return policy.get("action", "")
    return ""


def reconcile(ctx: Ctx) -> None:
    evicted = ctx.memo(EVICTED)
    if not evicted:
        return
    jobs = {job["metadata"]["uid"]: job for job in ctx.items(VCJOBS)}
    restarts = ctx.memo("restarts")  # job uid -> restarts so far
    runs = ctx.memo("runs")
    handled: set[str] = set()
    for pod_uid, entry in list(evicted.items()):
        del evicted[pod_uid]
        job = jobs.get(entry.get("job", ""))
        if job is None or job["metadata"]["uid"] in handled:
            continue
        if _action(job, entry.get("task", "")) != "RestartJob":
            continue
        uid = job["metadata"]["uid"]
        handled.add(uid)
        ctx.event(job, "Normal", "ExecuteAction", "Start to execute action RestartJob ", MANAGER)
        for pod in owned_pods(ctx, job):
            ctx.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
        restarts[uid] = restarts.get(uid, 0) + 1
        if restarts[uid] > int((job.get("spec") or {}).get("maxRetry") or DEFAULT_MAX_RETRY):
            runs[uid] = {"active_since": ctx.now, "finished": ctx.now, "outcome": "Failed"}
        else:
            runs.pop(uid, None)  # the Job controller creates the pods again and the run restarts
