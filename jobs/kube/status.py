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

A failed training run also says why (``Failure``, from ``failure_of``): the pod that failed
first, its node, container and exit code, and the class of failure: OOMKilled, preempted
(the DisruptionTarget condition Kubernetes puts on a pod it preempts or evicts) or an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from jobs.kube.labels import NOTEBOOK_STOPPED_ANNOTATION

FAILURE_CLASSES = ("oom", "error", "preempted")


@dataclass(frozen=True)
class Failure:
    """Why a run failed, from the pod that failed first.

    ``failure_class``: "oom" (a container was OOMKilled), "preempted" (the pod carries
    Kubernetes' DisruptionTarget condition: the scheduler preempted it, or an eviction or a
    node drain took it) or "error" (a container exited non-zero, or the pod failed for
    another reason such as its deadline). ``reason`` is Kubernetes' word for it (OOMKilled,
    Error, PreemptionByScheduler, DeadlineExceeded ...).
    """

    failure_class: str
    pod: str = ""
    node: str = ""
    container: str = ""
    exit_code: int | None = None
    reason: str = ""
    message: str = ""

    def as_dict(self) -> dict:
        return {
            "class": self.failure_class,
            "pod": self.pod,
            "node": self.node,
            "container": self.container,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "message": self.message,
        }

    def summary(self) -> str:
        """One line for a timeline or a log: what failed, where."""
        what = {"oom": "ran out of memory", "preempted": "was preempted", "error": "failed"}[self.failure_class]
        where = f" on node {self.node}" if self.node else ""
        code = f", exit code {self.exit_code}" if self.exit_code is not None else ""
        return f"Pod {self.pod}{where} {what} ({self.reason or self.failure_class}{code})."


@dataclass(frozen=True)
class TrafficShare:
    """One target of an endpoint's traffic: the stable model version or a canary."""

    role: str  # "stable" | "canary"
    percent: int
    revision: str = ""  # Knative: the revision; Standard: the canary's name ("" for the stable Deployment)
    ready: bool = True


@dataclass(frozen=True)
class Observed:
    phase: str  # "missing" | "pending" | "running" | "succeeded" | "failed" | "stopped"
    message: str = ""
    url: str = ""
    started_at: datetime | None = None
    failure: Failure | None = None  # set when phase is "failed" and a pod says why
    traffic: tuple[TrafficShare, ...] = ()  # endpoints: how requests are split, as KServe reports it
    replicas: int | None = None  # endpoints: predictor pods holding GPUs (``gpu_replicas``); None for other kinds


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


_CLASS_ORDER = {"preempted": 0, "oom": 1, "error": 2}
_SIGTERM_EXIT = 143  # how a container ends when its controller stops it after another pod failed


def _terminations(status: dict) -> list[tuple[str, dict]]:
    """(container, terminated state) of every container that ended, current or previous run."""
    found = []
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        for state_key in ("state", "lastState"):
            terminated = (cs.get(state_key) or {}).get("terminated")
            if terminated:
                found.append((cs.get("name", ""), terminated))
                break
    return found


def _pod_failure(pod: dict) -> tuple[tuple, Failure] | None:
    """The failure one pod shows, with a sort key (when, class, was it only stopped)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, node = meta.get("name", ""), spec.get("nodeName", "")
    ended = [(c, t) for c, t in _terminations(status) if t.get("reason") == "OOMKilled" or t.get("exitCode")]
    oom = [(c, t) for c, t in ended if t.get("reason") == "OOMKilled"]
    container, term = (oom or ended or [("", {})])[0]
    exit_code = term.get("exitCode") if term else None
    disrupted = _condition(pod, "DisruptionTarget")
    if disrupted and disrupted.get("status") == "True":
        failure = Failure(
            "preempted",
            name,
            node,
            container,
            exit_code,
            disrupted.get("reason") or "DisruptionTarget",
            disrupted.get("message") or "",
        )
        when = disrupted.get("lastTransitionTime") or term.get("finishedAt") or ""
    elif term:
        # A pod-level reason (DeadlineExceeded, Evicted) says more than the container's "Error".
        pod_reason = "" if oom else status.get("reason", "")
        failure = Failure(
            "oom" if oom else "error",
            name,
            node,
            container,
            exit_code,
            pod_reason or term.get("reason") or "Error",
            (status.get("message", "") if pod_reason else term.get("message") or "").strip(),
        )
        when = term.get("finishedAt") or ""
    elif status.get("phase") == "Failed":
        failure = Failure("error", name, node, "", None, status.get("reason") or "Failed", status.get("message") or "")
        when = ""
    else:
        return None
    # Ties (pods ended in the same second) go to the cause, not to a pod its controller stopped.
    return (when or "~", _CLASS_ORDER[failure.failure_class], exit_code == _SIGTERM_EXIT), failure


def failure_of(pods: Sequence[dict]) -> Failure | None:
    """Why a failed run failed: the pod that failed first (by when its container ended or
    it was marked for disruption), or None when no pod shows a failure (they are gone)."""
    found = [f for f in (_pod_failure(p) for p in pods) if f is not None]
    return min(found, key=lambda f: f[0])[1] if found else None


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
            return Observed("pending", waiting, url=seen.url, replicas=seen.replicas)
    return seen


def _derive(kind: str, main: dict, pods: Sequence[dict], expected_pods: int) -> Observed:
    seen = _derive_phase(kind, main, pods, expected_pods)
    if seen.phase == "failed" and kind in ("TrainJob", "Job", "JobSet"):
        return replace(seen, failure=failure_of(pods))
    return seen


def _derive_phase(kind: str, main: dict, pods: Sequence[dict], expected_pods: int) -> Observed:
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
    status = nb.get("status") or {}
    ready = status.get("readyReplicas") or 0
    if ready >= 1 or any(_is_true(p, "Ready") for p in pods):
        return Observed("running", "Notebook is running.", started_at=_running_since(pods))
    # The controller copies its container's state: the reason survives a pod we did not list.
    waiting = (status.get("containerState") or {}).get("waiting") or {}
    from_controller = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ") if waiting.get("reason") else ""
    return Observed("pending", pending_reason(pods) or from_controller)


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
        running = (job.get("status") or {}).get("running") or len(pods)
        return Observed("running", f"All {running} pods are running.", started_at=_running_since(pods))
    return Observed("pending", pending_reason(pods) or (f"Volcano job is {phase.lower()}." if phase else ""))


def _inference_service(isvc: dict, pods: Sequence[dict]) -> Observed:
    """KServe's Ready condition; while not ready, the pods' reason or the condition's message.

    An endpoint that was ready stays running while a new version rolls out (Knative keeps the
    previous revision serving; a Deployment rolls), so only ``Ready`` decides.
    """
    url = (isvc.get("status") or {}).get("url") or ""
    traffic = traffic_split(isvc)
    replicas = gpu_replicas(pods)
    if _is_true(isvc, "Ready"):
        return Observed(
            "running",
            "Endpoint is ready.",
            url=url,
            started_at=_running_since(pods),
            traffic=traffic,
            replicas=replicas,
        )
    ready = _condition(isvc, "Ready") or _condition(isvc, "PredictorReady")
    message = pending_reason(pods) or (ready or {}).get("message") or ""
    return Observed("pending", message, url=url, traffic=traffic, replicas=replicas)


_DONE_PHASES = ("Succeeded", "Failed")


def gpu_replicas(pods: Sequence[dict]) -> int:
    """How many of an endpoint's predictor pods hold GPUs now: those bound to a node and not
    finished, stable and canary revisions alike (KServe labels both ``component: predictor``).

    A pod holds its devices from the moment the scheduler binds it (while its image pulls or
    its model downloads, before it is Running or ready) until it ends; a terminating pod
    still holds them. An unscheduled pod holds nothing. Pods of another component (a
    transformer or explainer, which the portal does not create) are not counted.
    """
    count = 0
    for pod in pods:
        component = ((pod.get("metadata") or {}).get("labels") or {}).get("component", "predictor")
        if component != "predictor" or not (pod.get("spec") or {}).get("nodeName"):
            continue
        if (pod.get("status") or {}).get("phase") not in _DONE_PHASES:
            count += 1
    return count


def traffic_split(isvc: dict) -> tuple[TrafficShare, ...]:
    """How an InferenceService's predictor traffic is split, from its status.

    * Knative mode: ``components.predictor.traffic``; with ``canaryTrafficPercent`` two
      targets, the latest revision (the canary, ``latestRevision: true``) and the previous
      rolled-out one (stable, tag ``prev``). A revision is ready when it is the latest ready
      one or no longer the latest (it served before).
    * Standard mode (KServe v0.20 ``spec.canary``): ``canaryStatuses`` give each canary's
      name, share and readiness; the stable Deployment has the rest (all of it without
      canaries) and is ready when ``PredictorReady`` is.
    """
    status = isvc.get("status") or {}
    predictor = (status.get("components") or {}).get("predictor") or {}
    targets = [t for t in predictor.get("traffic") or [] if isinstance(t, dict) and t.get("percent") is not None]
    if targets:
        latest_ready = predictor.get("latestReadyRevision") or ""
        split = len(targets) > 1
        shares = []
        for t in targets:
            canary = split and bool(t.get("latestRevision"))
            revision = t.get("revisionName") or ""
            ready = revision == latest_ready or not t.get("latestRevision")
            shares.append(TrafficShare("canary" if canary else "stable", int(t["percent"]), revision, ready))
        return tuple(sorted(shares, key=lambda share: share.role != "stable"))
    canaries = [c for c in status.get("canaryStatuses") or [] if isinstance(c, dict)]
    if canaries:
        rest = 100 - sum(int(c.get("trafficPercent") or 0) for c in canaries)
        stable = TrafficShare("stable", max(rest, 0), "", _is_true(isvc, "PredictorReady"))
        return (
            stable,
            *(
                TrafficShare("canary", int(c.get("trafficPercent") or 0), str(c.get("name", "")), bool(c.get("ready")))
                for c in canaries
            ),
        )
    if status.get("deploymentMode") in ("Standard", "RawDeployment") and status.get("conditions"):
        return (TrafficShare("stable", 100, "", _is_true(isvc, "PredictorReady")),)  # one Deployment
    return ()
