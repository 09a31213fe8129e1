"""The JobSet controller (``jobset.x-k8s.io/v1alpha2``), enough for the portal's JobSets.

1. ``spec.suspend``: no pods (running ones are deleted) and ``Suspended=True``; resuming
   (Kueue does, once it admits the JobSet) sets it False and starts the run over.
2. The headless Service ``<network.subdomain or name>`` (``publishNotReadyAddresses`` as
   asked), owned by the JobSet.
3. Pods for each replicated job: ``replicas`` Indexed Jobs of ``parallelism`` pods
   ``<jobset>-<job>-<j>-<i>-<random>`` owned by the JobSet (the Jobs in between are
   skipped, as the TrainJob controller skips its JobSet), with JobSet's and the Job
   controller's labels, the completion-index annotation and ``JOB_COMPLETION_INDEX``, and
   the host name ``<jobset>-<job>-<j>-<i>`` in the subdomain.
4. One run clock for the whole JobSet: it starts when every pod runs and ends after the
   simulated duration (``sandbox.local/duration-seconds``); pods end Succeeded (or
   Failed with ``sandbox.local/outcome: Failed``), or all of them fail when a pod's
   ``activeDeadlineSeconds`` passes. Conditions ``Completed``/``Failed`` with JobSet's
   reasons, and ``replicatedJobsStatus``.
"""

from __future__ import annotations

from typing import Any

from sandbox.controllers.base import PODS, Ctx, condition, set_condition
from sandbox.controllers.batch import owned_pods, pause_clock, run_clock, sandbox_annotations
from sandbox.errors import ApiError
from sandbox.patches import clone
from sandbox.podutil import is_terminal, owner_reference

JOBSETS = "jobset.x-k8s.io/jobsets"
SERVICES = "/services"
MANAGER = "jobset-controller-manager"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"


def _job_pods(rj: dict[str, Any]) -> tuple[int, int, dict[str, Any]]:
    """(Jobs, pods per Job, pod template) of a replicated job."""
    job = (rj.get("template") or {}).get("spec") or {}
    parallelism = int(job.get("parallelism") if job.get("parallelism") is not None else 1)
    completions = job.get("completions")
    per_job = min(parallelism, int(completions)) if completions is not None else parallelism
    return int(rj.get("replicas") or 1), per_job, job.get("template") or {}


def planned_pods(js: dict[str, Any], suffix: str = "") -> list[dict[str, Any]]:
    """Every pod the JobSet runs, as the Job controller would create them (also for Kueue's pod sets)."""
    meta, spec = js["metadata"], js.get("spec") or {}
    name, ns = meta["name"], meta["namespace"]
    network = spec.get("network") or {}
    subdomain = network.get("subdomain") or name
    dns = network.get("enableDNSHostnames", True)
    pods = []
    for rj in spec.get("replicatedJobs") or []:
        rj_name = rj.get("name") or "job"
        jobs, per_job, template = _job_pods(rj)
        for j in range(jobs):
            job_name = f"{name}-{rj_name}-{j}"
            for i in range(per_job):
                pod_meta = clone(template.get("metadata") or {})
                pod_spec = clone(template.get("spec") or {})
                labels = {
                    **(pod_meta.get("labels") or {}),
                    JOBSET_LABEL: name,
                    "jobset.sigs.k8s.io/replicatedjob-name": rj_name,
                    "jobset.sigs.k8s.io/job-index": str(j),
                    "batch.kubernetes.io/job-name": job_name,
                    "job-name": job_name,
                    INDEX_KEY: str(i),
                }
                annotations = {**(pod_meta.get("annotations") or {}), INDEX_KEY: str(i), **sandbox_annotations(js)}
                for c in pod_spec.get("containers") or []:
                    env = [e for e in c.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                    c["env"] = [*env, {"name": "JOB_COMPLETION_INDEX", "value": str(i)}]
                if dns:
                    pod_spec["hostname"] = f"{job_name}-{i}"
                    pod_spec["subdomain"] = subdomain
                pods.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"{job_name}-{i}-{suffix}" if suffix else f"{job_name}-{i}",
                            "namespace": ns,
                            "labels": labels,
                            "annotations": annotations,
                            "ownerReferences": [owner_reference(js)],
                        },
                        "spec": pod_spec,
                    }
                )
    return pods


def _ensure_service(ctx: Ctx, js: dict[str, Any]) -> None:
    network = (js.get("spec") or {}).get("network") or {}
    if not network.get("enableDNSHostnames", True):
        return
    name = network.get("subdomain") or js["metadata"]["name"]
    ns = js["metadata"]["namespace"]
    if ctx.get(SERVICES, ns, name) is not None:
        return
    try:
        ctx.create(
            SERVICES,
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {JOBSET_LABEL: js["metadata"]["name"]},
                    "ownerReferences": [owner_reference(js)],
                },
                "spec": {
                    "clusterIP": "None",
                    "selector": {JOBSET_LABEL: js["metadata"]["name"]},
                    "publishNotReadyAddresses": bool(network.get("publishNotReadyAddresses", True)),
                },
            },
            MANAGER,
        )
    except ApiError as exc:
        ctx.warn(js, "FailedCreate", f"Error creating the headless service: {exc.message}", MANAGER)


def _deadline(js: dict[str, Any]) -> float | None:
    deadlines = [
        float(d)
        for rj in (js.get("spec") or {}).get("replicatedJobs") or []
        for d in (
            (((rj.get("template") or {}).get("spec") or {}).get("activeDeadlineSeconds")),
            ((((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "activeDeadlineSeconds"
            ),
        )
        if d
    ]
    return min(deadlines) if deadlines else None


def _jobs_status(js: dict[str, Any], pods: list[dict[str, Any]], outcome: str | None, suspended: bool) -> list:
    out = []
    for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
        rj_name = rj.get("name") or "job"
        jobs, per_job, _ = _job_pods(rj)
        mine = [
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/replicatedjob-name") == rj_name
        ]
        running = sum(1 for p in mine if p.get("status", {}).get("phase") == "Running")
        out.append(
            {
                "name": rj_name,
                "ready": jobs if per_job and running >= per_job * jobs else 0,
                "succeeded": jobs if outcome == "Succeeded" else 0,
                "failed": jobs if outcome in ("Failed", "DeadlineExceeded") else 0,
                "active": 0 if outcome or suspended else (jobs if mine else 0),
                "suspended": jobs if suspended else 0,
            }
        )
    return out


def reconcile(ctx: Ctx) -> None:
    for js in ctx.items(JOBSETS):
        meta, spec = js["metadata"], js.get("spec") or {}
        if meta.get("deletionTimestamp"):
            continue
        if spec.get("managedBy") not in (None, "jobset.sigs.k8s.io/jobset-controller"):
            continue
        if any((condition(js, t) or {}).get("status") == "True" for t in ("Completed", "Failed")):
            continue
        status = dict(js.get("status") or {})
        conditions = list(status.get("conditions") or [])
        pods = owned_pods(ctx, js)
        if spec.get("suspend"):
            pause_clock(ctx, js)
            for pod in pods:
                if not is_terminal(pod):
                    ctx.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            conditions = set_condition(
                conditions, "Suspended", "True", "SuspendedJobs", "jobset is suspended", ctx.now_iso
            )
            jobs = _jobs_status(js, [], None, True)
            ctx.set_status(JOBSETS, js, {**status, "conditions": conditions, "replicatedJobsStatus": jobs}, MANAGER)
            continue
        if (condition(js, "Suspended") or {}).get("status") == "True":
            conditions = set_condition(conditions, "Suspended", "False", "ResumeJobs", "jobset is resumed", ctx.now_iso)
        _ensure_service(ctx, js)
        planned = planned_pods(js)
        runs = ctx.memo("runs").get(meta["uid"], {})
        if "started" not in runs:
            existing = {
                p["metadata"]["name"].rsplit("-", 1)[0] for p in pods if not p["metadata"].get("deletionTimestamp")
            }
            for pod in planned:
                if pod["metadata"]["name"] in existing:
                    continue
                pod["metadata"]["name"] = f"{pod['metadata']['name']}-{ctx.api.random_suffix()}"
                try:
                    ctx.create(PODS, pod, "job-controller")
                except ApiError as exc:
                    ctx.warn(js, "FailedCreate", f"Error creating: {exc.message}", "job-controller")
                    break
        pods = owned_pods(ctx, js)
        run = run_clock(ctx, js, pods, len(planned), _deadline(js))
        pods = owned_pods(ctx, js)
        outcome = run.get("outcome")
        if outcome == "Succeeded":
            conditions = set_condition(
                conditions, "Completed", "True", "AllJobsCompleted", "jobset completed successfully", ctx.now_iso
            )
            ctx.event(js, "Normal", "AllJobsCompleted", "jobset completed successfully", MANAGER)
        elif outcome in ("Failed", "DeadlineExceeded"):
            message = "jobset failed due to one or more job failures"
            if outcome == "DeadlineExceeded":
                message += " (a Job was active longer than its deadline)"
            conditions = set_condition(conditions, "Failed", "True", "FailedJobs", message, ctx.now_iso)
            ctx.event(js, "Warning", "FailedJobs", message, MANAGER)
        jobs = _jobs_status(js, pods, outcome, False)
        ctx.set_status(JOBSETS, js, {**status, "conditions": conditions, "replicatedJobsStatus": jobs}, MANAGER)
