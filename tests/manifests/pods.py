"""Find the pods inside the objects the builders return, as the controllers would make them.

A CR describes its pods in its own way; to hold every pod to the restricted standard and to
core Kubernetes validation, each is turned back into the pod spec the controller creates:

* Notebook: ``spec.template.spec``; the controller copies the Notebook's labels and
  annotations (except those containing "notebook" or "kubectl") onto the pod.
* Volcano Job: each task's template.
* JobSet: each replicated job's pod template (the Job controller adds only labels and env).
* TrainJob: the ClusterTrainingRuntime's ``node`` template, merged with the TrainJob's
  ``runtimePatches`` and ``trainer`` fields the way Trainer merges them.
* InferenceService: the predictor's pod-spec fields plus its model or custom container.
* ClusterTrainingRuntime: its template.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from jobs.kube.manifests import cluster_training_runtimes


@dataclass
class Pod:
    where: str
    spec: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    def as_object(self) -> dict[str, Any]:
        """The pod as a core ``v1/Pod`` for kubernetes-validate."""
        metadata: dict[str, Any] = {"name": "pod", "namespace": "ns", "labels": self.labels}
        if self.annotations:
            metadata["annotations"] = self.annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": self.spec}


# InferenceService component fields that are not PodSpec fields.
_COMPONENT_FIELDS = frozenset(
    {
        "minReplicas",
        "maxReplicas",
        "canaryTrafficPercent",
        "labels",
        "annotations",
        "model",
        "containers",
        "scaleTarget",
        "scaleMetric",
        "scaleMetricType",
        "containerConcurrency",
        "timeout",
        "batcher",
        "logger",
        "storageUris",
        "autoScaling",
        "deploymentStrategy",
        "workerSpec",
        "storageContainerName",
        "sklearn",
        "xgboost",
        "tensorflow",
        "pytorch",
        "triton",
        "onnx",
        "huggingface",
        "pmml",
        "lightgbm",
        "paddle",
        "name",
    }
)


def pods_of(obj: dict[str, Any]) -> list[Pod]:
    kind = obj["kind"]
    meta = obj["metadata"]
    if kind == "Notebook":
        annotations = {
            k: v for k, v in meta.get("annotations", {}).items() if "notebook" not in k and "kubectl" not in k
        }
        return [Pod("Notebook", obj["spec"]["template"]["spec"], dict(meta.get("labels", {})), annotations)]
    if kind == "Job" and obj["apiVersion"].startswith("batch.volcano.sh/"):
        return [
            Pod(
                f"Job task {t['name']}",
                t["template"]["spec"],
                dict(t["template"].get("metadata", {}).get("labels", {})),
            )
            for t in obj["spec"]["tasks"]
        ]
    if kind == "JobSet":
        return [
            Pod(
                f"JobSet job {rj['name']}",
                rj["template"]["spec"]["template"]["spec"],
                dict(rj["template"]["spec"]["template"].get("metadata", {}).get("labels", {})),
            )
            for rj in obj["spec"]["replicatedJobs"]
        ]
    if kind == "StatefulSet":
        template = obj["spec"]["template"]
        return [
            Pod(
                "StatefulSet",
                template["spec"],
                dict(template["metadata"].get("labels", {})),
                dict(template["metadata"].get("annotations", {})),
            )
        ]
    if kind == "TrainJob":
        return [trainjob_pod(obj)]
    if kind == "InferenceService":
        return [predictor_pod(obj)]
    if kind == "ClusterTrainingRuntime":
        return [
            Pod(
                f"runtime job {rj['name']}",
                rj["template"]["spec"]["template"]["spec"],
                dict(rj["template"]["spec"]["template"].get("metadata", {}).get("labels", {})),
            )
            for rj in obj["spec"]["template"]["spec"]["replicatedJobs"]
        ]
    return []


def _merge_named(base: list[dict], patch: list[dict], key: str) -> list[dict]:
    merged = {item[key]: copy.deepcopy(item) for item in base}
    for item in patch:
        merged[item[key]] = {**merged.get(item[key], {}), **copy.deepcopy(item)}
    return list(merged.values())


def trainjob_pod(train_job: dict[str, Any]) -> Pod:
    """Rebuild the pod Trainer creates: runtime template, then runtimePatches, then trainer."""
    ref = train_job["spec"]["runtimeRef"]
    runtimes = {r["metadata"]["name"]: r for q in ("volcano", "kueue") for r in cluster_training_runtimes(q)}
    assert ref["name"] in runtimes, f"TrainJob refers to unknown runtime {ref['name']}"
    runtime = runtimes[ref["name"]]
    (rj,) = [j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"]
    template = copy.deepcopy(rj["template"]["spec"]["template"])
    pod, labels = template["spec"], dict(template.get("metadata", {}).get("labels", {}))
    for patch in train_job["spec"].get("runtimePatches", []):
        for rjp in patch["trainingRuntimeSpec"]["template"].get("spec", {}).get("replicatedJobs", []):
            if rjp["name"] != "node":
                continue
            pod_template = rjp.get("template", {}).get("spec", {}).get("template", {})
            labels.update(pod_template.get("metadata", {}).get("labels", {}))
            pod_patch = pod_template.get("spec", {})
            for key, value in pod_patch.items():
                if key == "containers":
                    for cpatch in value:
                        (container,) = [c for c in pod["containers"] if c["name"] == cpatch["name"]]
                        for ckey, cvalue in cpatch.items():
                            if ckey == "env":
                                container["env"] = _merge_named(container.get("env", []), cvalue, "name")
                            elif ckey == "volumeMounts":
                                container["volumeMounts"] = _merge_named(
                                    container.get("volumeMounts", []), cvalue, "mountPath"
                                )
                            elif ckey == "securityContext":
                                container["securityContext"] = {**container.get("securityContext", {}), **cvalue}
                elif key == "volumes":
                    pod["volumes"] = _merge_named(pod.get("volumes", []), value, "name")
                elif key in ("securityContext", "nodeSelector"):
                    pod[key] = {**pod.get(key, {}), **value}
                else:
                    pod[key] = copy.deepcopy(value)
    trainer = train_job["spec"]["trainer"]
    (node,) = [c for c in pod["containers"] if c["name"] == "node"]
    for key in ("image", "command", "args"):
        if key in trainer:
            node[key] = copy.deepcopy(trainer[key])
    if "env" in trainer:
        node["env"] = _merge_named(node.get("env", []), trainer["env"], "name")
    if "resourcesPerNode" in trainer:
        node["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    return Pod("TrainJob node", pod, labels)


def predictor_pod(isvc: dict[str, Any]) -> Pod:
    predictor = isvc["spec"]["predictor"]
    pod = {k: copy.deepcopy(v) for k, v in predictor.items() if k not in _COMPONENT_FIELDS}
    if "model" in predictor:
        model = copy.deepcopy(predictor["model"])
        model.pop("modelFormat", None)
        model.pop("storageUri", None)
        model.pop("runtime", None)
        model["name"] = "kserve-container"
        model.setdefault("image", "runtime-provided.example/server:1")
        pod["containers"] = [model]
    else:
        pod["containers"] = copy.deepcopy(predictor["containers"])
    return Pod(
        "InferenceService predictor", pod, dict(predictor.get("labels", {})), dict(predictor.get("annotations", {}))
    )
