"""What state a workload is in, derived from the objects the cluster reports.

Pure functions: the reconcile lists each kind once, groups the objects by the
workload-id label and hands each workload's objects here. Status fields are the ones
the upstream controllers write (Kubeflow notebook controller, Trainer, Volcano, JobSet,
KServe); pods fill in what a controller does not say, such as why nothing is running
yet (the scheduler's message on the pod's PodScheduled condition).

On a Kueue cluster, work waits for admission before the scheduler ever sees it (a
suspended TrainJob or JobSet has no pods; a gated pod is not scheduled), so the reason
comes from Kueue's Workloads instead: their ``QuotaReserved`` condition says what does
not fit ("couldn't assign flavors to pod set node: insufficient unused quota for
nvidia.com/gpu in flavor gpu-h100-80gb, 2 more needed").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from jobs.kube.labels import NOTEBOOK_STOPPED_ANNOTATION


@dataclass(frozen=True)
class Observed:
    phase: str  # "missing" | "pending" | "running" | "succeeded" | "failed" | "stopped"
    message: str = ""
    url: str = ""
    started_at: datetime | None = None


def _condition(obj: dict, type_: str) -> dict | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return cond
    return None


def _is_true(obj: dict, type_: str) -> bool:
    cond = _condition(obj, type_)
    return bool(cond and cond.get("status") == "True")


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def pending_reason(pods: Sequence[dict]) -> str:
    """Why pods are not running: the scheduler's words, or the container's waiting reason."""
    for pod in pods:
        cond = _condition(pod, "PodScheduled")
        if cond and cond.get("status") == "False" and cond.get("message"):
            return cond["message"]
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (status.get("state") or {}).get("waiting")
            if waiting and waiting.get("reason"):
                return f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    for pod in pods:
        # Started but failing its readiness probe: a notebook whose URL does not answer yet.
        cond = _condition(pod, "Ready")
        if (pod.get("status") or {}).get("phase") == "Running" and cond and cond.get("status") == "False":
            detail = cond.get("message") or cond.get("reason") or "not ready"
            return f"Started but not ready ({detail}); the Kubernetes events say why."
    return ""


def _running_since(pods: Sequence[dict]) -> datetime | None:
    times = [_parse_time((p.get("status") or {}).get("startTime")) for p in pods]
    times = [t for t in times if t]
    return max(times) if times else None


def _all_running(pods: Sequence[dict], expected: int) -> bool:
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    return len(running) >= max(expected, 1)


def queue_reason(queued: Sequence[dict]) -> str:
    """Why Kueue has not admitted the workload: the message of a Workload whose quota is not
    reserved, or "" when every Workload is admitted (or there are none)."""
    for wl in queued:
        if _is_true(wl, "Finished"):
            continue
        cond = _condition(wl, "QuotaReserved")
        if not (cond and cond.get("status") == "True"):
            return (cond or {}).get("message") or "Waiting for Kueue to admit the workload."
    return ""


def derive(
    kind: str, main: dict | None, pods: Sequence[dict], expected_pods: int = 1, queued: Sequence[dict] = ()
) -> Observed:
    """The phase of one workload from its main object, its pods and its Kueue Workloads.

    ``queued``: the Workloads Kueue made for it (none on a Volcano cluster); while one waits
    for quota, its message is the pending reason.
    """
    if main is None:
        return Observed("missing")
    seen = _derive(kind, main, pods, expected_pods)
    if seen.phase == "pending" and queued:
        waiting = queue_reason(queued)
        if waiting:
            return Observed("pending", waiting, url=seen.url)
    return seen


def _derive(kind: str, main: dict, pods: Sequence[dict], expected_pods: int) -> Observed:
    if kind == "Notebook":
        return _notebook(main, pods)
    if kind == "StatefulSet":
        return _statefulset(main, pods)
    if kind == "TrainJob":
        return _trainjob(main, pods, expected_pods)
    if kind == "Job":
        return _volcano_job(main, pods, expected_pods)
    if kind == "JobSet":
        return _jobset(main, pods, expected_pods)
    if kind == "InferenceService":
        return _inference_service(main, pods)
    raise ValueError(f"no status derivation for kind {kind!r}")


def _notebook(nb: dict, pods: Sequence[dict]) -> Observed:
    if NOTEBOOK_STOPPED_ANNOTATION in (nb["metadata"].get("annotations") or {}):
        return Observed("stopped")
    ready = (nb.get("status") or {}).get("readyReplicas") or 0
    if ready >= 1 or any(_is_true(p, "Ready") for p in pods):
        return Observed("running", "Notebook is running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods))


def _statefulset(sts: dict, pods: Sequence[dict]) -> Observed:
    """A notebook on a DRA offering runs as a plain StatefulSet; stopped means 0 replicas."""
    if (sts.get("spec") or {}).get("replicas") == 0:
        return Observed("stopped")
    if ((sts.get("status") or {}).get("readyReplicas") or 0) >= 1 or any(_is_true(p, "Ready") for p in pods):
        return Observed("running", "Notebook is running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods))


def _trainjob(job: dict, pods: Sequence[dict], expected: int) -> Observed:
    for type_, phase in (("Complete", "succeeded"), ("Failed", "failed")):
        cond = _condition(job, type_)
        if cond and cond.get("status") == "True":
            return Observed(phase, cond.get("message") or cond.get("reason", ""), started_at=_running_since(pods))
    if _is_true(job, "Suspended"):
        return Observed("pending", "Waiting in the queue (suspended until admitted).")
    if pods and _all_running(pods, expected):
        return Observed("running", f"All {len(pods)} nodes are running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods))


def _jobset(js: dict, pods: Sequence[dict], expected: int) -> Observed:
    """JobSet's conditions: Completed or Failed end it; Suspended while Kueue holds it back."""
    for type_, phase in (("Completed", "succeeded"), ("Failed", "failed")):
        cond = _condition(js, type_)
        if cond and cond.get("status") == "True":
            return Observed(phase, cond.get("message") or cond.get("reason", ""), started_at=_running_since(pods))
    if (js.get("spec") or {}).get("suspend") or _is_true(js, "Suspended"):
        return Observed("pending", "Waiting in the queue (suspended until admitted).")
    if pods and _all_running(pods, expected):
        return Observed("running", f"All {len(pods)} pods are running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods))


_VOLCANO_DONE = {"Completed": "succeeded", "Failed": "failed", "Aborted": "failed", "Terminated": "failed"}


def _volcano_job(job: dict, pods: Sequence[dict], expected: int) -> Observed:
    state = (job.get("status") or {}).get("state") or {}
    phase = state.get("phase", "")
    if phase in _VOLCANO_DONE:
        message = state.get("message") or state.get("reason") or f"Volcano job {phase.lower()}."
        return Observed(_VOLCANO_DONE[phase], message, started_at=_running_since(pods))
    if phase == "Running" or (pods and _all_running(pods, expected)):
        return Observed("running", f"All {len(pods)} pods are running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods) or (f"Volcano job is {phase.lower()}." if phase else ""))


def _inference_service(isvc: dict, pods: Sequence[dict]) -> Observed:
    url = (isvc.get("status") or {}).get("url") or ""
    if _is_true(isvc, "Ready"):
        return Observed("running", "Endpoint is ready.", url=url, started_at=_running_since(pods))
    ready = _condition(isvc, "Ready")
    message = pending_reason(pods) or (ready or {}).get("message") or ""
    return Observed("pending", message, url=url)
