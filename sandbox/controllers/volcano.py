"""Volcano: the Job controller, PodGroup status and Queue status.

A Volcano Job gets a PodGroup ``<job>-<uid>`` (minMember = ``spec.minAvailable``,
default all replicas; queue ``spec.queue``, default ``default``) and pods
``<job>-<task>-<i>`` carrying Volcano's labels and the ``scheduling.k8s.io/group-name``
annotation; the Volcano scheduler (in ``sandbox/scheduler.py``) places the gang.
The job plugins the portal uses (env, svc, mpi, ssh) change the pods as Volcano's do
(``_apply_plugins``). It runs for the simulated duration and ends Completed or Failed.

PodGroup phase: Pending (waiting for the queue), Inqueue (admitted, not yet
running), Running (at least minMember running), Completed. Queue status: state,
``allocated`` (requests of the running pods in the queue) and PodGroup counts.
"""

from __future__ import annotations

import base64
from fractions import Fraction
from typing import Any

from sandbox import quantity
from sandbox.controllers.base import PODS, Ctx, set_condition
from sandbox.controllers.batch import (
    ensure_podgroup,
    owned_pods,
    run_clock,
    sandbox_annotations,
    total_requests,
)
from sandbox.errors import ApiError
from sandbox.patches import clone
from sandbox.podutil import GROUP_ANNOTATION, QUEUE_ANNOTATION, holds_resources, owner_reference, pod_requests
from sandbox.scheduler import PODGROUPS, QUEUES, queue_of

VCJOBS = "batch.volcano.sh/jobs"
SECRETS = "/secrets"
MANAGER = "volcano-controllers"


def _flags(args: list[str], known: dict[str, str]) -> dict[str, str]:
    """Parse plugin arguments like Go's flag package (``--name=value`` or ``--name value``).

    As there, parsing stops at the first flag the plugin does not define: it and every
    argument after it are ignored (Volcano only logs the error), so ``known``'s defaults
    stay in force for them.
    """
    values = dict(known)
    i = 0
    while i < len(args):
        arg = str(args[i]).lstrip("-")
        name, has_value, value = arg.partition("=")
        if name not in known:
            break
        if not has_value and i + 1 < len(args):
            i += 1
            value = str(args[i])
        values[name] = value
        i += 1
    return values


def _plugins(job: dict[str, Any]) -> dict[str, list[str]]:
    return {k: list(v or []) for k, v in ((job.get("spec") or {}).get("plugins") or {}).items()}


def _mpi_hosts(job: dict[str, Any], task_name: str) -> str:
    name = job["metadata"]["name"]
    for task in (job.get("spec") or {}).get("tasks") or []:
        if task.get("name") == task_name:
            return ",".join(f"{name}-{task_name}-{i}.{name}" for i in range(int(task.get("replicas") or 1)))
    return ""


def _apply_plugins(job: dict[str, Any], task_name: str, index: int, pod_spec: dict[str, Any]) -> None:
    """What Volcano's job plugins add to a pod when the controller creates it (OnPodCreate).

    * env: VK_TASK_INDEX and VC_TASK_INDEX, appended to every container's env.
    * svc: host name ``<job>-<task>-<i>`` in the subdomain ``<job>`` (the headless Service).
    * mpi: MPI_HOST (the worker task's host names) on the master task, and the ``--port``
      (default 22) opened as ``mpijob-port`` on every container.
    * ssh: the Secret ``<job>-ssh`` (key pair, authorized_keys, ssh config) mounted at
      ``--ssh-key-file-path`` (default /root/.ssh) with subPath ``.ssh``. It defines no
      port flag: the config it writes names hosts only.
    """
    plugins = _plugins(job)
    name = job["metadata"]["name"]
    containers = pod_spec.get("containers") or []
    if "env" in plugins:
        for c in containers + (pod_spec.get("initContainers") or []):
            c["env"] = [
                *(c.get("env") or []),
                {"name": "VK_TASK_INDEX", "value": str(index)},
                {"name": "VC_TASK_INDEX", "value": str(index)},
            ]
    if "svc" in plugins:
        pod_spec.setdefault("hostname", f"{name}-{task_name}-{index}")
        pod_spec.setdefault("subdomain", name)
    if "mpi" in plugins:
        mpi = _flags(plugins["mpi"], {"master": "master", "worker": "worker", "port": "22"})
        for c in containers:
            if task_name == mpi["master"]:
                c["env"] = [*(c.get("env") or []), {"name": "MPI_HOST", "value": _mpi_hosts(job, mpi["worker"])}]
            if mpi["port"].isdigit() and not any(
                p.get("containerPort") == int(mpi["port"]) for p in c.get("ports") or []
            ):
                c["ports"] = [*(c.get("ports") or []), {"name": "mpijob-port", "containerPort": int(mpi["port"])}]
    if "ssh" in plugins:
        ssh = _flags(plugins["ssh"], {"ssh-key-file-path": "/root/.ssh", "ssh-private-key": "", "ssh-public-key": ""})
        secret = f"{name}-ssh"
        files = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
        pod_spec["volumes"] = [
            *(pod_spec.get("volumes") or []),
            {
                "name": secret,
                "secret": {
                    "secretName": secret,
                    "items": [{"key": f, "path": f".ssh/{f}"} for f in files],
                    "defaultMode": 0o600,
                },
            },
        ]
        for c in containers + (pod_spec.get("initContainers") or []):
            mount = {"name": secret, "mountPath": ssh["ssh-key-file-path"], "subPath": ".ssh"}
            c["volumeMounts"] = [*(c.get("volumeMounts") or []), mount]


def _ssh_config(job: dict[str, Any]) -> str:
    name = job["metadata"]["name"]
    config = "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
    for task in (job.get("spec") or {}).get("tasks") or []:
        for i in range(int(task.get("replicas") or 1)):
            host = f"{name}-{task.get('name')}-{i}"
            config += f"Host {host}\n  HostName {host}.{name}\n"
    return config


def _ensure_ssh_secret(ctx: Ctx, job: dict[str, Any]) -> None:
    """The ssh plugin's Secret (OnJobAdd). The key material is a simulation's, not a key."""
    if "ssh" not in _plugins(job):
        return
    meta = job["metadata"]
    name = f"{meta['name']}-ssh"
    if ctx.get(SECRETS, meta["namespace"], name) is not None:
        return

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    data = {
        "id_rsa": b64(f"sandbox private key of {meta['namespace']}/{meta['name']}\n"),
        "id_rsa.pub": b64(f"ssh-rsa sandbox-{meta['uid']}\n"),
        "authorized_keys": b64(f"ssh-rsa sandbox-{meta['uid']}\n"),
        "config": b64(_ssh_config(job)),
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner_reference(job)]},
        "type": "Opaque",
        "data": data,
    }
    try:
        ctx.create(SECRETS, secret, MANAGER)
    except ApiError as exc:
        ctx.warn(
            job, "PluginError", f"create secret for job <{meta['namespace']}/{meta['name']}>: {exc.message}", MANAGER
        )


def _pod(job: dict[str, Any], task: dict[str, Any], index: int, pg_name: str, queue: str) -> dict[str, Any]:
    meta, spec = job["metadata"], job.get("spec") or {}
    name, ns = meta["name"], meta["namespace"]
    template = clone(task.get("template") or {})
    pod_meta, pod_spec = template.get("metadata") or {}, template.get("spec") or {}
    task_name = task.get("name") or "task"
    labels = {
        **(pod_meta.get("labels") or {}),
        "volcano.sh/job-name": name,
        "volcano.sh/job-namespace": ns,
        "volcano.sh/queue-name": queue,
        "volcano.sh/task-spec": task_name,
        "volcano.sh/job-version": "0",
        "volcano.sh/task-index": str(index),
    }
    annotations = {
        **(pod_meta.get("annotations") or {}),
        GROUP_ANNOTATION: pg_name,
        QUEUE_ANNOTATION: queue,
        "volcano.sh/job-name": name,
        "volcano.sh/task-spec": task_name,
        "volcano.sh/job-version": "0",
        "volcano.sh/task-index": str(index),
        **sandbox_annotations(job),
    }
    pod_spec["schedulerName"] = spec.get("schedulerName") or "volcano"
    if spec.get("priorityClassName"):
        pod_spec.setdefault("priorityClassName", spec["priorityClassName"])
    pod_spec.setdefault("restartPolicy", "OnFailure")
    _apply_plugins(job, task_name, index, pod_spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{task_name}-{index}",
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(job)],
        },
        "spec": pod_spec,
    }


def reconcile_jobs(ctx: Ctx) -> None:
    for job in ctx.items(VCJOBS):
        meta, spec = job["metadata"], job.get("spec") or {}
        if meta.get("deletionTimestamp"):
            continue
        status = dict(job.get("status") or {})
        phase_now = (status.get("state") or {}).get("phase")
        if phase_now in ("Completed", "Failed", "Aborted", "Terminated"):
            continue
        tasks = spec.get("tasks") or []
        total = sum(int(t.get("replicas") or 1) for t in tasks)
        min_available = int(spec.get("minAvailable") or total)
        queue = spec.get("queue") or "default"
        pg_name = f"{meta['name']}-{meta['uid']}"
        planned = [_pod(job, t, i, pg_name, queue) for t in tasks for i in range(int(t.get("replicas") or 1))]
        ensure_podgroup(
            ctx, job, pg_name, min_available, queue, total_requests(planned), {}, spec.get("priorityClassName"), MANAGER
        )
        _ensure_ssh_secret(ctx, job)
        runs = ctx.memo("runs").get(meta["uid"], {})
        if "started" not in runs:
            for pod in planned:
                if ctx.get(PODS, meta["namespace"], pod["metadata"]["name"]) is None:
                    try:
                        ctx.create(PODS, pod, MANAGER)
                    except ApiError as exc:
                        ctx.warn(job, "FailedCreate", f"Error creating pods: {exc.message}", MANAGER)
                        break
        pods = owned_pods(ctx, job)
        run = run_clock(ctx, job, pods, total)
        pods = owned_pods(ctx, job)
        counts = {p: 0 for p in ("Pending", "Running", "Succeeded", "Failed")}
        per_task: dict[str, dict[str, int]] = {}
        for pod in pods:
            phase = pod.get("status", {}).get("phase", "Pending")
            counts[phase] = counts.get(phase, 0) + 1
            task = (pod["metadata"].get("labels") or {}).get("volcano.sh/task-spec", "")
            per_task.setdefault(task, {}).setdefault(phase, 0)
            per_task[task][phase] += 1
        outcome = run.get("outcome")
        if outcome:
            phase = "Completed" if outcome == "Succeeded" else "Failed"
        elif counts["Running"] >= min_available:
            phase = "Running"
        else:
            phase = "Pending"
        state = dict(status.get("state") or {})
        history = list(status.get("conditions") or [])
        if state.get("phase") != phase:
            state = {"phase": phase, "lastTransitionTime": ctx.now_iso}
            history.append({"status": phase, "lastTransitionTime": ctx.now_iso})
            if phase == "Completed":
                ctx.event(job, "Normal", "Completed", "Job completed", MANAGER)
        new_status = {
            **status,
            "state": state,
            "minAvailable": min_available,
            "pending": counts["Pending"],
            "running": counts["Running"],
            "succeeded": counts["Succeeded"],
            "failed": counts["Failed"],
            "taskStatusCount": {t: {"phase": c} for t, c in sorted(per_task.items())},
            "conditions": history,
            "version": 0,
            "retryCount": 0,
        }
        ctx.set_status(VCJOBS, job, new_status, MANAGER)


def reconcile_groups(ctx: Ctx) -> None:
    gangs = ctx.memo("gangs")
    members: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in ctx.items(PODS):
        group = (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
        if group:
            members.setdefault((pod["metadata"]["namespace"], group), []).append(pod)
    phases_by_queue: dict[str, dict[str, int]] = {}
    podgroups = {}
    for pg in ctx.items(PODGROUPS):
        key = (pg["metadata"]["namespace"], pg["metadata"]["name"])
        podgroups[key] = pg
        pods = members.get(key, [])
        phases = [p.get("status", {}).get("phase") for p in pods]
        running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
        min_member = int((pg.get("spec") or {}).get("minMember") or 1)
        problem = gangs.get(pg["metadata"]["uid"])
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        if pods and succeeded + failed == len(pods) and succeeded + failed >= min_member:
            phase = "Completed"
        elif running >= min_member:
            phase = "Running"
        elif problem and "queue" in problem.get("message", ""):
            phase = "Pending"
        elif bound or (pods and not problem):
            phase = "Inqueue"
        else:
            phase = "Pending"
        status = dict(pg.get("status") or {})
        conditions = list(status.get("conditions") or [])
        if problem and phase not in ("Running", "Completed"):
            conditions = set_condition(
                conditions,
                "Unschedulable",
                "True",
                problem["reason"],
                problem["message"],
                ctx.now_iso,
                transitionID=pg["metadata"]["uid"],
            )
        elif phase in ("Running", "Completed"):
            conditions = set_condition(
                conditions,
                "Scheduled",
                "True",
                "tasks in gang are ready to be scheduled",
                "",
                ctx.now_iso,
                transitionID=pg["metadata"]["uid"],
            )
            conditions = [c for c in conditions if c.get("type") != "Unschedulable"]
        new_status = {
            "phase": phase,
            "running": running,
            "succeeded": succeeded,
            "failed": failed,
            "conditions": conditions,
        }
        ctx.set_status(PODGROUPS, pg, new_status, "volcano-scheduler")
        queue = (pg.get("spec") or {}).get("queue") or "default"
        phases_by_queue.setdefault(queue, {}).setdefault(phase, 0)
        phases_by_queue[queue][phase] += 1
    allocated: dict[str, dict[str, Fraction]] = {}
    for pod in ctx.items(PODS):
        if not holds_resources(pod):
            continue
        queue = queue_of(pod, podgroups)
        if queue is None:
            continue
        bucket = allocated.setdefault(queue, {"cpu": Fraction(0), "memory": Fraction(0), "pods": Fraction(0)})
        bucket["pods"] += 1
        for k, v in pod_requests(pod).items():
            bucket[k] = bucket.get(k, Fraction(0)) + v
    for q in ctx.items(QUEUES):
        name = q["metadata"]["name"]
        old = q.get("status") or {}
        counts = phases_by_queue.get(name, {})
        used = allocated.get(name, {"cpu": Fraction(0), "memory": Fraction(0), "pods": Fraction(0)})
        status = {
            "state": old.get("state") if old.get("state") in ("Closed", "Closing") else "Open",
            "allocated": {k: quantity.format_quantity(v, k) for k, v in sorted(used.items())},
            "running": counts.get("Running", 0),
            "pending": counts.get("Pending", 0),
            "inqueue": counts.get("Inqueue", 0),
            "completed": counts.get("Completed", 0),
            "unknown": 0,
        }
        ctx.set_status(QUEUES, q, status, "volcano-controllers")
