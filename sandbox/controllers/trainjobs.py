"""The Kubeflow Trainer (v2) TrainJob controller, without JobSet in between.

1. Resolve ``spec.runtimeRef`` (ClusterTrainingRuntime by default, or a namespaced
   TrainingRuntime). Missing: condition ``Created=False/JobsBuildFailed``, no pods.
2. ``spec.suspend``: delete the pods, ``Suspended=True``; resuming sets it False.
3. Build the trainer pod from the runtime's trainer replicatedJob (the one labelled
   ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``, else ``node``), then
   ``spec.runtimePatches`` (v2.3) or ``spec.podSpecOverrides`` (older API), then
   ``spec.trainer`` (image, command, args, env, resourcesPerNode) and the torch
   ``PET_*`` variables as Trainer v2.3's torch plugin sets them (PET_NODE_RANK a fieldRef
   to the completion-index annotation, PET_MASTER_PORT 29500, the port opened).
4. With ``podGroupPolicy.volcano`` in the runtime, create a PodGroup named after the
   TrainJob (minMember = numNodes, queue from the TrainJob's label or annotation
   ``scheduling.volcano.sh/queue-name``, else ``default``) and hand the pods to the
   Volcano scheduler, which places all of them or none.
5. Create ``numNodes`` pods ``<job>-node-0-<i>-<random>`` owned by the TrainJob;
   run them for the simulated duration; write ``Created``, ``Complete``/``Failed``
   conditions (JobSet's reasons) and ``jobsStatus``.
"""

from __future__ import annotations

from typing import Any

from sandbox.controllers.base import PODS, Ctx, condition, set_condition
from sandbox.controllers.batch import (
    ensure_podgroup,
    owned_pods,
    pause_clock,
    run_clock,
    sandbox_annotations,
    total_requests,
)
from sandbox.errors import ApiError
from sandbox.patches import clone, strategic_merge_patch
from sandbox.podutil import GROUP_ANNOTATION, QUEUE_ANNOTATION, is_terminal, owner_reference

TRAINJOBS = "trainer.kubeflow.org/trainjobs"
CLUSTER_RUNTIMES = "trainer.kubeflow.org/clustertrainingruntimes"
RUNTIMES = "trainer.kubeflow.org/trainingruntimes"
MANAGER = "trainer-controller-manager"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
TORCH_MASTER_PORT = 29500  # Trainer's constants.ContainerTrainerPort


def _trainer_job(runtime: dict[str, Any]) -> dict[str, Any]:
    jobs = ((((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")) or []
    for rj in jobs:
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(ANCESTOR_LABEL) == "trainer":
            return rj
    for rj in jobs:
        if rj.get("name") == "node":
            return rj
    return (
        jobs[-1]
        if jobs
        else {
            "name": "node",
            "template": {
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch:latest"}]}}}
            },
        }
    )


def queue_name(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return (
        (meta.get("labels") or {}).get(QUEUE_ANNOTATION)
        or (meta.get("annotations") or {}).get(QUEUE_ANNOTATION)
        or "default"
    )


def build_pod(
    tj: dict[str, Any], runtime: dict[str, Any], index: int, num_nodes: int, gang: bool, suffix: str
) -> dict[str, Any]:
    meta, spec = tj["metadata"], tj.get("spec") or {}
    name, ns = meta["name"], meta["namespace"]
    rj = _trainer_job(runtime)
    rj_name = rj.get("name", "node")
    template = clone(((rj.get("template") or {}).get("spec") or {}).get("template") or {})
    pod_meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    labels = dict(pod_meta.get("labels") or {})
    annotations = dict(pod_meta.get("annotations") or {})
    for patch in spec.get("runtimePatches") or []:
        for prj in (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
            "replicatedJobs"
        ) or []:
            if prj.get("name") != rj_name:
                continue
            ptemplate = (((prj.get("template") or {}).get("spec") or {}).get("template")) or {}
            labels.update((ptemplate.get("metadata") or {}).get("labels") or {})
            annotations.update((ptemplate.get("metadata") or {}).get("annotations") or {})
            pod_spec = strategic_merge_patch(pod_spec, ptemplate.get("spec") or {})
    for override in spec.get("podSpecOverrides") or []:
        if rj_name in {t.get("name") for t in override.get("targetJobs") or []}:
            pod_spec = strategic_merge_patch(pod_spec, {k: v for k, v in override.items() if k != "targetJobs"})
    containers = pod_spec.setdefault("containers", [])
    if not containers:
        containers.append({"name": "node", "image": "pytorch/pytorch:latest"})
    container = next((c for c in containers if c.get("name") == "node"), containers[0])
    trainer = spec.get("trainer") or {}
    for field in ("image", "command", "args"):
        if trainer.get(field):
            container[field] = clone(trainer[field])
    if trainer.get("env"):
        container["env"] = strategic_merge_patch(container.get("env") or [], clone(trainer["env"]))
    if trainer.get("resourcesPerNode"):
        container["resources"] = clone(trainer["resourcesPerNode"])
    ml_policy = (runtime.get("spec") or {}).get("mlPolicy") or {}
    if "torch" in ml_policy:
        proc = trainer.get("numProcPerNode") or (ml_policy.get("torch") or {}).get("numProcPerNode") or "auto"
        pet = [
            {"name": "PET_NNODES", "value": str(num_nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(proc)},
            # As Trainer's torch plugin: the rank from the Job controller's index annotation.
            {
                "name": "PET_NODE_RANK",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_LABEL}']"}},
            },
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{rj_name}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(TORCH_MASTER_PORT)},
        ]
        container["env"] = strategic_merge_patch(container.get("env") or [], pet)
        ports = [p for p in container.get("ports") or [] if p.get("containerPort") != TORCH_MASTER_PORT]
        container["ports"] = [*ports, {"containerPort": TORCH_MASTER_PORT, "protocol": "TCP"}]
    labels.update(
        {
            JOBSET_LABEL: name,
            "jobset.sigs.k8s.io/replicatedjob-name": rj_name,
            "jobset.sigs.k8s.io/job-index": "0",
            INDEX_LABEL: str(index),
            "trainer.kubeflow.org/trainjob-name": name,
        }
    )
    annotations.update(sandbox_annotations(tj))
    annotations[INDEX_LABEL] = str(index)  # the Job controller writes the index as label and annotation
    if gang:
        annotations[GROUP_ANNOTATION] = name
        annotations[QUEUE_ANNOTATION] = queue_name(tj)
        pod_spec["schedulerName"] = "volcano"
    pod_spec.setdefault("restartPolicy", "OnFailure")
    pod_spec["hostname"] = f"{name}-{rj_name}-0-{index}"
    pod_spec["subdomain"] = name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{rj_name}-0-{index}-{suffix}",
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(tj)],
        },
        "spec": pod_spec,
    }


def _resolve_runtime(ctx: Ctx, tj: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    ref = (tj.get("spec") or {}).get("runtimeRef") or {}
    kind = ref.get("kind") or "ClusterTrainingRuntime"
    name = ref.get("name", "")
    if kind == "ClusterTrainingRuntime":
        runtime = ctx.get(CLUSTER_RUNTIMES, "", name)
    elif kind == "TrainingRuntime":
        runtime = ctx.get(RUNTIMES, tj["metadata"]["namespace"], name)
    else:
        return None, f"unsupported runtime kind {kind!r}"
    return runtime, f'{kind}.trainer.kubeflow.org "{name}" not found'


def reconcile(ctx: Ctx) -> None:
    for tj in ctx.items(TRAINJOBS):
        meta, spec = tj["metadata"], tj.get("spec") or {}
        if meta.get("deletionTimestamp"):
            continue
        if spec.get("managedBy") not in (None, "trainer.kubeflow.org/trainjob-controller"):
            continue
        status = dict(tj.get("status") or {})
        conditions = list(status.get("conditions") or [])
        if any((condition(tj, t) or {}).get("status") == "True" for t in ("Complete", "Failed")):
            continue
        runtime, missing = _resolve_runtime(ctx, tj)
        if runtime is None:
            conditions = set_condition(
                conditions, "Created", "False", "JobsBuildFailed", f"Failed to build Jobs: {missing}", ctx.now_iso
            )
            ctx.set_status(TRAINJOBS, tj, {**status, "conditions": conditions}, MANAGER)
            continue
        pods = owned_pods(ctx, tj)
        rj_name = _trainer_job(runtime).get("name", "node")
        if spec.get("suspend"):
            pause_clock(ctx, tj)
            for pod in pods:
                if not is_terminal(pod):
                    ctx.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"])
            conditions = set_condition(
                conditions, "Suspended", "True", "Suspended", "TrainJob is suspended", ctx.now_iso
            )
            jobs = [{"name": rj_name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 1}]
            ctx.set_status(TRAINJOBS, tj, {**status, "conditions": conditions, "jobsStatus": jobs}, MANAGER)
            continue
        if (condition(tj, "Suspended") or {}).get("status") == "True":
            conditions = set_condition(conditions, "Suspended", "False", "Resumed", "TrainJob is resumed", ctx.now_iso)
        num_nodes = int(
            (spec.get("trainer") or {}).get("numNodes")
            or ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes")
            or 1
        )
        gang = "volcano" in (((runtime.get("spec") or {}).get("podGroupPolicy")) or {})
        existing = {(p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-completion-index") for p in pods}
        runs = ctx.memo("runs").get(meta["uid"], {})
        planned = [build_pod(tj, runtime, i, num_nodes, gang, ctx.api.random_suffix()) for i in range(num_nodes)]
        if gang:
            ensure_podgroup(
                ctx,
                tj,
                meta["name"],
                num_nodes,
                queue_name(tj),
                total_requests(planned),
                {"jobset.sigs.k8s.io/jobset-name": meta["name"]},
                planned[0]["spec"].get("priorityClassName"),
                MANAGER,
            )
        if "started" not in runs:
            for i, pod in enumerate(planned):
                if str(i) in existing:
                    continue
                try:
                    ctx.create(PODS, pod, "job-controller")
                except ApiError as exc:
                    ctx.warn(tj, "FailedCreate", f"Error creating: {exc.message}", "job-controller")
                    break
        pods = owned_pods(ctx, tj)
        conditions = set_condition(
            conditions, "Created", "True", "JobsCreationSucceeded", "Succeeded to create Jobs", ctx.now_iso
        )
        deadline = spec.get("activeDeadlineSeconds")
        run = run_clock(ctx, tj, pods, num_nodes, float(deadline) if deadline else None)
        pods = owned_pods(ctx, tj)
        phases = [p.get("status", {}).get("phase") for p in pods]
        outcome = run.get("outcome")
        if outcome == "Succeeded":
            conditions = set_condition(
                conditions, "Complete", "True", "AllJobsCompleted", "jobset completed successfully", ctx.now_iso
            )
            ctx.event(tj, "Normal", "Completed", "TrainJob completed successfully", MANAGER)
        elif outcome == "DeadlineExceeded":
            conditions = set_condition(
                conditions,
                "Failed",
                "True",
                "DeadlineExceeded",
                "TrainJob exceeded its activeDeadlineSeconds",
                ctx.now_iso,
            )
            ctx.event(tj, "Warning", "DeadlineExceeded", "TrainJob was active longer than specified deadline", MANAGER)
        elif outcome == "Failed":
            conditions = set_condition(
                conditions, "Failed", "True", "FailedJobs", "jobset failed due to one or more job failures", ctx.now_iso
            )
            ctx.event(tj, "Warning", "Failed", "TrainJob failed: one or more job failures", MANAGER)
        ready = 1 if num_nodes and phases.count("Running") >= num_nodes else 0
        jobs = [
            {
                "name": rj_name,
                "ready": ready,
                "succeeded": 1 if outcome == "Succeeded" else 0,
                "failed": 1 if outcome in ("Failed", "DeadlineExceeded") else 0,
                "active": 0 if outcome else (1 if pods else 0),
                "suspended": 0,
            }
        ]
        ctx.set_status(TRAINJOBS, tj, {**status, "conditions": conditions, "jobsStatus": jobs}, MANAGER)
