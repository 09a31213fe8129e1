"""The KServe InferenceService controller (predictor only), in both of KServe v0.20's modes.

The mode is the ``serving.kserve.io/deploymentMode`` annotation, else ``deploy`` in
``kserve/inferenceservice-config`` (upstream ships "Serverless", i.e. Knative).

* Knative: each distinct predictor spec is a revision ``<name>-predictor-0000N``; its pods
  are ``<name>-predictor-<hash>-<random>`` (``minReplicas`` of them, default 1). When the
  spec changes and ``canaryTrafficPercent`` is set, the previous rolled-out revision keeps
  its pods and traffic is split; without it (or at 100) the new revision takes all traffic
  once ready and the old pods go. Status: ``components.predictor`` revisions and traffic.
* Standard: a Deployment per predictor (``_reconcile_standard``), with v0.20's
  ``spec.canary`` as extra Deployments; status as KServe's ``PropagateRawStatus`` writes it,
  plus ``canaryStatuses``.

Pods come from ``spec.predictor.model`` (modelFormat + storageUri -> a serving runtime image
with KServe's storage-initializer, see ``storage_initializer``) or from custom
``containers``. Both modes report ``url``, ``address``, ``PredictorReady``, ``IngressReady``
and ``Ready`` conditions and ``modelStatus``; a pod the API refuses (Pod Security, quota)
shows in the conditions' message. ``webhook`` plays KServe's validating webhook (mode,
``spec.canary``) and, for Knative mode, Knative's field mask (``sandbox.knative``).

Not simulated: transformers, explainers, autoscaling beyond minReplicas, scale to zero.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

from sandbox import knative
from sandbox.controllers.base import PODS, Ctx, set_condition
from sandbox.controllers.batch import owned_pods, sandbox_annotations
from sandbox.errors import ApiError, cause, invalid
from sandbox.kinds import Kind
from sandbox.patches import clone
from sandbox.podutil import owner_reference
from sandbox.store import Store

ISVCS = "serving.kserve.io/inferenceservices"
STORAGE_CONTAINERS = "serving.kserve.io/clusterstoragecontainers"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"
# KServe v0.20 rewrites the legacy names (constants.go ParseDeploymentMode).
_MODE_ALIASES = {"Serverless": "Knative", "RawDeployment": "Standard"}
_MODES = ("Knative", "Standard", "ModelMesh")
KSERVE_NAMESPACE, KSERVE_CONFIG = "kserve", "inferenceservice-config"
# Fields of a model spec that are not container fields.
_MODEL_ONLY = ("modelFormat", "storageUri", "runtime", "protocolVersion", "storage")
MANAGER = "kserve-controller-manager"
RUNTIME_IMAGES = {
    "sklearn": "kserve/sklearnserver:v0.15.0",
    "xgboost": "kserve/xgbserver:v0.15.0",
    "lightgbm": "kserve/lgbserver:v0.15.0",
    "pytorch": "pytorch/torchserve-kfs:0.9.0",
    "tensorflow": "tensorflow/serving:2.6.2",
    "onnx": "nvcr.io/nvidia/tritonserver:24.08-py3",
    "triton": "nvcr.io/nvidia/tritonserver:24.08-py3",
    "huggingface": "kserve/huggingfaceserver:v0.15.0",
    "vllm": "kserve/huggingfaceserver:v0.15.0-gpu",
    "pmml": "kserve/pmmlserver:v0.15.0",
    "paddle": "kserve/paddleserver:v0.15.0",
}
_FRAMEWORKS = (
    "sklearn",
    "xgboost",
    "lightgbm",
    "pytorch",
    "tensorflow",
    "onnx",
    "triton",
    "huggingface",
    "pmml",
    "paddle",
)
# Predictor fields that are not pod spec fields (or do not make a new revision).
_NOT_POD = {
    "model",
    "containers",
    "minReplicas",
    "maxReplicas",
    "canaryTrafficPercent",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "autoScaling",
    "containerConcurrency",
    "timeout",
    "batcher",
    "logger",
    "labels",
    "annotations",
    "deploymentStrategy",
    "storageUris",
    "workerSpec",
    "storageContainerName",
    "serviceAccount",
    "name",
    *_FRAMEWORKS,
}
_SCALING = {
    "canaryTrafficPercent",
    "minReplicas",
    "maxReplicas",
    "scaleTarget",
    "scaleMetric",
    "scaleMetricType",
    "autoScaling",
}
HASH_LABEL = "pod-template-hash"


def _config(store: Store, key: str) -> dict[str, Any]:
    """One JSON section of ``kserve/inferenceservice-config`` ({} when absent or unreadable)."""
    cm = store.get("/configmaps", KSERVE_NAMESPACE, KSERVE_CONFIG)
    raw = ((cm or {}).get("data") or {}).get(key)
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def deployment_mode(store: Store, isvc: dict[str, Any]) -> str:
    """Knative, Standard or ModelMesh: the annotation, else the installation's default.

    With no annotation KServe takes ``deploy.defaultDeploymentMode`` from its ConfigMap, which
    upstream ships as "Serverless" (Knative); a cluster without the ConfigMap is treated the same.
    """
    raw = ((isvc.get("metadata") or {}).get("annotations") or {}).get(MODE_ANNOTATION)
    if not raw:
        raw = _config(store, "deploy").get("defaultDeploymentMode") or "Serverless"
    return _MODE_ALIASES.get(raw, raw)


def _pod_containers(predictor: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    containers = [
        (f"{path}.containers[{i}]", c) for i, c in enumerate(predictor.get("containers") or []) if isinstance(c, dict)
    ]
    containers += [
        (f"{path}.initContainers[{i}]", c)
        for i, c in enumerate(predictor.get("initContainers") or [])
        if isinstance(c, dict)
    ]
    model = predictor.get("model")
    if isinstance(model, dict):
        containers.append((f"{path}.model", {k: v for k, v in model.items() if k not in _MODEL_ONLY}))
    return containers


def _canary_problems(isvc: dict[str, Any], annotation: str | None) -> list[dict[str, str]]:
    """KServe v0.20's rules for ``spec.canary`` (Standard-mode canaries), worded by the sandbox."""
    spec = isvc.get("spec") or {}
    canaries = spec.get("canary")
    if not canaries:
        return []
    if annotation != "Standard":
        # Checked literally on the object: a Standard install default is not enough.
        return [
            cause(
                "spec.canary",
                f"Forbidden: canary is only supported with {MODE_ANNOTATION}: Standard set on the InferenceService",
                "FieldValueForbidden",
            )
        ]
    predictor = spec.get("predictor") or {}
    out = []
    if not (predictor.get("model") or {}).get("storageUri"):
        why = "Required value: a canary needs the stable model's storageUri"
        out.append(cause("spec.predictor.model.storageUri", why))
    names: set[str] = set()
    total = 0
    stable_min = predictor.get("minReplicas") if predictor.get("minReplicas") is not None else 1
    for i, canary in enumerate(canaries):
        where = f"spec.canary[{i}]"
        cp = canary.get("predictor") or {}
        cname = cp.get("name") or ""
        if not cname:
            out.append(cause(f"{where}.predictor.name", "Required value: every canary needs a name"))
        elif cname in names or cname == predictor.get("name"):
            out.append(cause(f"{where}.predictor.name", f'Duplicate value: "{cname}"'))
        names.add(cname)
        for key in ("workerSpec", "maxReplicas", "scaleTarget", "scaleMetric", "autoScaling"):
            if key in cp:
                out.append(cause(f"{where}.predictor.{key}", "Forbidden: a canary runs a fixed number of replicas"))
        if cp.get("minReplicas") is not None and cp["minReplicas"] > stable_min:
            out.append(
                cause(
                    f"{where}.predictor.minReplicas",
                    f"Invalid value: {cp['minReplicas']}: must not exceed the stable predictor's ({stable_min})",
                )
            )
        total += int(canary.get("trafficPercent") or 0)
    if total > 100:
        why = f"Invalid value: {total}: the canaries' trafficPercent add up to more than 100"
        out.append(cause("spec.canary", why))
    return out


def webhook(store: Store, isvc: dict[str, Any], old: dict[str, Any] | None, kind: Kind) -> None:
    """KServe's validating webhook, and Knative's as it would judge the Knative Service.

    On a real cluster a Knative-mode predictor that Knative's field mask refuses is accepted
    by KServe and fails later, when KServe creates the Knative Service (the InferenceService
    then never gets ready). The sandbox refuses it at once with 422 naming the field and the
    ``config-features`` flag it needs, so the mistake surfaces where the portal applies it.
    """
    if kind.key != ISVCS:
        return
    name = isvc["metadata"].get("name", "")
    raw = (isvc["metadata"].get("annotations") or {}).get(MODE_ANNOTATION)
    field = f"metadata.annotations[{MODE_ANNOTATION}]"
    if raw and _MODE_ALIASES.get(raw, raw) not in _MODES:
        supported = 'supported values: "Knative", "Standard"'
        raise invalid(kind, name, [cause(field, f'Unsupported value: "{raw}": {supported}')])
    mode = deployment_mode(store, isvc)
    recorded = (isvc.get("status") or {}).get("deploymentMode")
    if old is not None and recorded and _MODE_ALIASES.get(recorded, recorded) != mode:
        raise invalid(kind, name, [cause(field, f"deploymentMode cannot be changed from {recorded} to {mode}")])
    canary_causes = _canary_problems(isvc, raw)
    if canary_causes:
        raise invalid(kind, name, canary_causes)
    if mode != "Knative":
        return
    features = knative.features(
        (store.get("/configmaps", knative.CONFIG_NAMESPACE, knative.CONFIG_NAME) or {}).get("data")
    )
    causes = []
    for component in ("predictor", "transformer", "explainer"):
        spec = (isvc.get("spec") or {}).get(component)
        if not isinstance(spec, dict):
            continue
        path = f"spec.{component}"
        pod_fields = {k: v for k, v in spec.items() if k not in _NOT_POD}
        for where, why in knative.violations(pod_fields, _pod_containers(spec, path), features, path):
            causes.append(cause(where, f"must not set the field(s) in Knative mode: {why}", "FieldValueForbidden"))
    if causes:
        raise invalid(kind, name, causes)


def _revision_hash(predictor: dict[str, Any]) -> str:
    spec = {k: v for k, v in predictor.items() if k not in _SCALING}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]


def _containers(ctx: Ctx, isvc: dict[str, Any], predictor: dict[str, Any]) -> tuple[list, list]:
    """The pod's containers and init containers, as KServe's pod mutator leaves them.

    A model's ``storageUri`` (or a custom container's ``STORAGE_URI`` variable) gets KServe's
    storage-initializer init container (``storage_initializer``), which downloads the model
    into ``/mnt/models`` before the server starts.
    """
    name = isvc["metadata"]["name"]
    if predictor.get("containers"):
        containers = clone(predictor["containers"])
        if containers and not containers[0].get("name"):
            containers[0]["name"] = "kserve-container"
        storage = next((e.get("value") for e in containers[0].get("env") or [] if e.get("name") == "STORAGE_URI"), None)
        if not storage:
            return containers, []
        containers[0].setdefault("volumeMounts", []).append(
            {"name": "kserve-provision-location", "mountPath": "/mnt/models", "readOnly": True}
        )
        return containers, [storage_initializer(ctx.store, storage)]
    model = clone(
        predictor.get("model")
        or next(({**predictor[f], "modelFormat": {"name": f}} for f in _FRAMEWORKS if f in predictor), {})
    )
    fmt = ((model.get("modelFormat") or {}).get("name") or "sklearn").lower()
    storage = model.pop("storageUri", None)
    for key in _MODEL_ONLY:
        model.pop(key, None)
    container = {
        "name": "kserve-container",
        "image": model.pop("image", None) or RUNTIME_IMAGES.get(fmt, RUNTIME_IMAGES["sklearn"]),
        "args": model.pop("args", None) or [f"--model_name={name}", "--model_dir=/mnt/models", "--http_port=8080"],
        "ports": [{"containerPort": 8080, "name": "http1", "protocol": "TCP"}],
        **model,
    }
    init = []
    if storage:
        container.setdefault("env", []).append({"name": "STORAGE_URI", "value": storage})
        container.setdefault("volumeMounts", []).append(
            {"name": "kserve-provision-location", "mountPath": "/mnt/models", "readOnly": True}
        )
        init.append(storage_initializer(ctx.store, storage))
    return [container], init


def _matches(csc: dict[str, Any], uri: str) -> bool:
    spec = csc.get("spec") or {}
    if spec.get("workloadType", "initContainer") != "initContainer":
        return False
    for fmt in spec.get("supportedUriFormats") or []:
        if fmt.get("prefix") and uri.startswith(fmt["prefix"]):
            return True
        if fmt.get("regex"):
            try:
                if re.match(fmt["regex"], uri):
                    return True
            except re.error:
                continue
    return False


def storage_initializer(store: Store, uri: str) -> dict[str, Any]:
    """KServe's storage-initializer init container for ``uri``, as v0.20's pod mutator builds it.

    Image and cpu/memory come from ``storageInitializer`` in ``kserve/inferenceservice-config``
    (pkg/utils/storage.go CreateInitContainerWithConfig); then the first
    ``ClusterStorageContainer`` whose ``supportedUriFormats`` match the URI is merged over it
    (storage_initializer_injector.go). KServe itself sets no ``securityContext``: the
    container has one only if that ClusterStorageContainer gives it, so in a namespace that
    enforces the restricted Pod Security Standard the pod is refused unless the cluster's
    storage container is configured for it (README, "KServe").
    """
    config = _config(store, "storageInitializer")
    container: dict[str, Any] = {
        "name": "storage-initializer",
        "image": config.get("image") or "kserve/storage-initializer:latest",
        "args": [uri, "/mnt/models"],
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {
            "requests": {"cpu": config.get("cpuRequest", "100m"), "memory": config.get("memoryRequest", "100Mi")},
            "limits": {"cpu": config.get("cpuLimit", "1"), "memory": config.get("memoryLimit", "1Gi")},
        },
        "volumeMounts": [{"name": "kserve-provision-location", "mountPath": "/mnt/models"}],
    }
    for csc in sorted(store.items(STORAGE_CONTAINERS, None), key=lambda o: o["metadata"]["name"]):
        if _matches(csc, uri):
            patch = {k: v for k, v in ((csc.get("spec") or {}).get("container") or {}).items() if k != "name"}
            container = _merge(container, patch)
            break
    return container


def _build_pod(ctx: Ctx, isvc: dict[str, Any], revision: dict[str, Any]) -> dict[str, Any]:
    meta = isvc["metadata"]
    name, ns = meta["name"], meta["namespace"]
    component = revision.get("component", "predictor")  # Standard-mode canaries: "<canary name>-predictor"
    predictor = revision["predictor"]
    containers, init = _containers(ctx, isvc, predictor)
    spec = {k: clone(v) for k, v in predictor.items() if k not in _NOT_POD}
    spec["containers"] = containers
    if init:
        spec["initContainers"] = init + (spec.get("initContainers") or [])
        spec.setdefault("volumes", []).append({"name": "kserve-provision-location", "emptyDir": {}})
    if predictor.get("serviceAccount") and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = predictor["serviceAccount"]
    labels = {
        **(predictor.get("labels") or {}),
        "app": f"isvc.{name}-{component}",
        "component": "predictor",
        "serving.kserve.io/inferenceservice": name,
        HASH_LABEL: revision["hash"],
    }
    annotations = {**(predictor.get("annotations") or {}), **sandbox_annotations(isvc)}
    if revision.get("name"):
        annotations["serving.kserve.io/revision"] = revision["name"]  # Knative mode
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{component}-{revision['hash']}-{ctx.api.random_suffix()}",
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": spec,
    }


def _ready(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def reconcile(ctx: Ctx) -> None:
    memo = ctx.memo("inference")
    for isvc in ctx.items(ISVCS):
        meta = isvc["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        if deployment_mode(ctx.store, isvc) == "Standard":
            _reconcile_standard(ctx, isvc)
        else:
            _reconcile_knative(ctx, isvc, memo)


def _reconcile_knative(ctx: Ctx, isvc: dict[str, Any], memo: dict[str, Any]) -> None:
    """Knative mode: each predictor spec is a revision; ``canaryTrafficPercent`` splits traffic."""
    meta = isvc["metadata"]
    name, ns = meta["name"], meta["namespace"]
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    state = memo.setdefault(meta["uid"], {"revisions": [], "rolled": None, "previous": None})
    digest = _revision_hash(predictor)
    revisions = state["revisions"]
    if not revisions or revisions[-1]["hash"] != digest:
        number = len(revisions) + 1
        revisions.append({"name": f"{name}-predictor-{number:05d}", "hash": digest, "predictor": clone(predictor)})
    latest = revisions[-1]
    canary = predictor.get("canaryTrafficPercent")
    replicas = max(1, int(predictor.get("minReplicas") if predictor.get("minReplicas") is not None else 1))
    pods = [p for p in owned_pods(ctx, isvc) if not p["metadata"].get("deletionTimestamp")]
    by_hash: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_hash.setdefault((pod["metadata"].get("labels") or {}).get(HASH_LABEL, ""), []).append(pod)
    latest_ready = sum(1 for p in by_hash.get(latest["hash"], []) if _ready(p))
    split = canary is not None and 0 <= int(canary) < 100 and state["rolled"] not in (None, latest["name"])
    if latest_ready >= 1 and not split and state["rolled"] != latest["name"]:
        state["previous"], state["rolled"] = state["rolled"], latest["name"]  # promote the new revision
    keep = {latest["hash"]}
    failure = ""
    if split:
        rolled = next((r for r in revisions if r["name"] == state["rolled"]), None)
        if rolled:
            keep.add(rolled["hash"])
    elif latest_ready < 1 and state["rolled"]:
        rolled = next((r for r in revisions if r["name"] == state["rolled"]), None)
        if rolled:
            keep.add(rolled["hash"])  # keep serving until the new revision is ready
    for digest_, group in by_hash.items():
        if digest_ not in keep:
            for pod in group:
                ctx.delete(PODS, ns, pod["metadata"]["name"])
    for revision in revisions:
        if revision["hash"] not in keep:
            continue
        have = [p for p in by_hash.get(revision["hash"], []) if p.get("status", {}).get("phase") != "Failed"]
        for _ in range(replicas - len(have)):
            try:
                ctx.create(PODS, _build_pod(ctx, isvc, revision), MANAGER)
            except ApiError as exc:
                failure = f'Revision "{revision["name"]}" failed with message: {exc.message}.'
                ctx.warn(isvc, "InternalError", f"fails to create predictor pod: {exc.message}", MANAGER)
                break
    pods = [p for p in owned_pods(ctx, isvc) if not p["metadata"].get("deletionTimestamp")]
    ready_by_hash: dict[str, int] = {}
    for pod in pods:
        if _ready(pod):
            h = (pod["metadata"].get("labels") or {}).get(HASH_LABEL, "")
            ready_by_hash[h] = ready_by_hash.get(h, 0) + 1
    latest_ready = ready_by_hash.get(latest["hash"], 0)
    status = _status(ctx, isvc, state, latest, latest_ready, split, canary, failure)
    ctx.set_status(ISVCS, isvc, status, MANAGER)


def _status(
    ctx: Ctx,
    isvc: dict[str, Any],
    state: dict[str, Any],
    latest: dict[str, Any],
    latest_ready: int,
    split: bool,
    canary: Any,
    failure: str = "",
) -> dict[str, Any]:
    meta = isvc["metadata"]
    name, ns = meta["name"], meta["namespace"]
    old = isvc.get("status") or {}
    ready = latest_ready >= 1 or (split and state["rolled"] is not None)
    if split:
        traffic = [
            {"revisionName": latest["name"], "percent": int(canary), "latestRevision": True, "tag": "latest"},
            {"revisionName": state["rolled"], "percent": 100 - int(canary), "latestRevision": False, "tag": "prev"},
        ]
    elif state["rolled"]:
        traffic = [
            {"revisionName": state["rolled"], "percent": 100, "latestRevision": state["rolled"] == latest["name"]}
        ]
    else:
        traffic = []
    predictor_status: dict[str, Any] = {
        "latestCreatedRevision": latest["name"],
        "url": f"http://{name}-predictor.{ns}.example.com",
        "address": {"url": f"http://{name}-predictor.{ns}.svc.cluster.local"},
        "traffic": traffic,
    }
    if latest_ready:
        predictor_status["latestReadyRevision"] = latest["name"]
    elif (old.get("components") or {}).get("predictor", {}).get("latestReadyRevision"):
        predictor_status["latestReadyRevision"] = old["components"]["predictor"]["latestReadyRevision"]
    if state["rolled"]:
        predictor_status["latestRolledoutRevision"] = state["rolled"]
    if state["previous"]:
        predictor_status["previousRolledoutRevision"] = state["previous"]
    conditions = old.get("conditions") or []
    status_word = "True" if ready else "False"
    reason = "" if ready else ("RevisionFailed" if failure else "RevisionMissing")
    message = "" if ready else (failure or f'Revision "{latest["name"]}" has no ready pods')
    for type_ in ("IngressReady", "PredictorReady", "Ready"):
        conditions = set_condition(conditions, type_, status_word, reason, message, ctx.now_iso)
    conditions = [{k: v for k, v in c.items() if v != ""} for c in conditions]
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "deploymentMode": "Knative",
        "components": {"predictor": predictor_status},
        "conditions": sorted(conditions, key=lambda c: c["type"]),
        "modelStatus": {
            "states": {"activeModelState": "Loaded" if ready else "Pending", "targetModelState": "Loaded"},
            "transitionStatus": "UpToDate" if latest_ready else "InProgress",
            "copies": {"failedCopies": 0, "totalCopies": latest_ready},
        },
    }
    if ready:
        status["url"] = f"http://{name}.{ns}.example.com"
        status["address"] = {"url": f"http://{name}-predictor.{ns}.svc.cluster.local"}
    return status


# -- Standard mode ------------------------------------------------------------------------------


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` (maps deeply, anything else replaced), as KServe's mergo does."""
    out = clone(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = clone(value)
    return out


def _reconcile_standard(ctx: Ctx, isvc: dict[str, Any]) -> None:
    """Standard mode: one Deployment per predictor (the stable one and each ``spec.canary``).

    A Deployment is simulated as its pods, labelled ``app=isvc.<name>-<component>`` and
    ``pod-template-hash``: a changed spec starts new pods and the old ones go once a new one
    is ready (a rolling update). Each canary is its stable predictor with the canary's
    predictor merged over it and runs ``minReplicas`` or ``ceil(stable minReplicas *
    trafficPercent / 100)`` pods, taken from the stable Deployment (which keeps at least 1).
    ``canaryTrafficPercent`` does nothing in this mode, as in KServe.
    """
    meta = isvc["metadata"]
    ns = meta["namespace"]
    spec = isvc.get("spec") or {}
    predictor = spec.get("predictor") or {}
    stable_min = int(predictor["minReplicas"]) if predictor.get("minReplicas") is not None else 1
    groups: list[dict[str, Any]] = []
    canary_total = 0
    for canary in spec.get("canary") or []:
        canary_predictor = canary.get("predictor") or {}
        merged = _merge(predictor, {k: v for k, v in canary_predictor.items() if k != "name"})
        percent = int(canary.get("trafficPercent") or 0)
        if canary_predictor.get("minReplicas") is not None:
            replicas = int(canary_predictor["minReplicas"])
        else:
            replicas = math.ceil(stable_min * percent / 100)
        canary_total += replicas
        groups.append(
            {
                "component": f"{canary_predictor.get('name', 'canary')}-predictor",
                "canary": canary_predictor.get("name", "canary"),
                "percent": percent,
                "hash": _revision_hash(merged),
                "predictor": merged,
                "replicas": replicas,
            }
        )
    stable_name = f"{predictor['name']}-predictor" if predictor.get("name") else "predictor"
    stable = {
        "component": stable_name,
        "hash": _revision_hash(predictor),
        "predictor": predictor,
        "replicas": max(1, stable_min - canary_total),
    }
    seen = ctx.memo("inference-standard").setdefault(meta["uid"], [])
    if not seen or seen[-1] != stable["hash"]:
        seen.append(stable["hash"])
    stable["revision"] = len(seen)
    groups.insert(0, stable)
    pods = [p for p in owned_pods(ctx, isvc) if not p["metadata"].get("deletionTimestamp")]

    def app(pod: dict[str, Any]) -> str:
        return (pod["metadata"].get("labels") or {}).get("app", "")

    def digest(pod: dict[str, Any]) -> str:
        return (pod["metadata"].get("labels") or {}).get(HASH_LABEL, "")

    wanted = {f"isvc.{meta['name']}-{g['component']}": g for g in groups}
    for pod in pods:
        group = wanted.get(app(pod))
        if group is None:
            ctx.delete(PODS, ns, pod["metadata"]["name"])  # a canary that was promoted or rolled back
        elif digest(pod) != group["hash"]:
            current_ready = any(_ready(p) and digest(p) == group["hash"] for p in pods if app(p) == app(pod))
            if current_ready or group["replicas"] == 0:
                ctx.delete(PODS, ns, pod["metadata"]["name"])  # rolling update: the new pods serve
    failed_to_create = ""
    for label, group in wanted.items():
        have = [
            p
            for p in pods
            if app(p) == label and digest(p) == group["hash"] and p.get("status", {}).get("phase") != "Failed"
        ]
        for _ in range(group["replicas"] - len(have)):
            try:
                ctx.create(PODS, _build_pod(ctx, isvc, group), MANAGER)
            except ApiError as exc:
                failed_to_create = exc.message
                ctx.warn(isvc, "InternalError", f"fails to create predictor pod: {exc.message}", MANAGER)
                break
    pods = [p for p in owned_pods(ctx, isvc) if not p["metadata"].get("deletionTimestamp")]
    ready = {label: sum(1 for p in pods if app(p) == label and _ready(p)) for label in wanted}
    ctx.set_status(ISVCS, isvc, _standard_status(ctx, isvc, groups, ready, failed_to_create), MANAGER)


def _standard_status(
    ctx: Ctx, isvc: dict[str, Any], groups: list[dict[str, Any]], ready: dict[str, int], failure: str
) -> dict[str, Any]:
    meta = isvc["metadata"]
    name, ns = meta["name"], meta["namespace"]
    old = isvc.get("status") or {}
    stable, canaries = groups[0], groups[1:]
    stable_ready = ready.get(f"isvc.{name}-{stable['component']}", 0) >= 1
    conditions = old.get("conditions") or []
    # PredictorReady is the stable Deployment's Available condition (KServe PropagateRawStatus).
    if stable_ready:
        reason, message = "MinimumReplicasAvailable", "Deployment has minimum availability."
    elif failure:
        reason, message = "FailedCreate", failure
    else:
        reason, message = "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
    word = "True" if stable_ready else "False"
    conditions = set_condition(conditions, "PredictorReady", word, reason, message, ctx.now_iso)
    for type_ in ("IngressReady", "Ready"):
        conditions = set_condition(
            conditions, type_, word, "" if stable_ready else reason, "" if stable_ready else message, ctx.now_iso
        )
    status: dict[str, Any] = {
        "observedGeneration": meta.get("generation", 1),
        "deploymentMode": "Standard",
        # the Deployment's deployment.kubernetes.io/revision: one more for each new pod template
        "components": {"predictor": {"latestCreatedRevision": str(stable["revision"])}},
    }
    if canaries:
        statuses = [
            {
                "name": c["canary"],
                "ready": ready.get(f"isvc.{name}-{c['component']}", 0) >= min(c["replicas"], 1),
                "trafficPercent": c["percent"],
            }
            for c in canaries
        ]
        all_ready = all(c["ready"] for c in statuses)
        conditions = set_condition(
            conditions,
            "CanaryPredictorReady",
            "True" if all_ready else "False",
            "AllCanariesReady" if all_ready else "CanaryNotReady",
            "" if all_ready else "a canary Deployment has no ready pods",
            ctx.now_iso,
        )
        status["canaryStatuses"] = statuses
    else:
        conditions = [c for c in conditions if c.get("type") != "CanaryPredictorReady"]
    status["conditions"] = sorted(
        ({k: v for k, v in c.items() if v != ""} for c in conditions), key=lambda c: c["type"]
    )
    status["modelStatus"] = {
        "states": {"activeModelState": "Loaded" if stable_ready else "Pending", "targetModelState": "Loaded"},
        "transitionStatus": "UpToDate" if stable_ready else "InProgress",
        "copies": {"failedCopies": 0, "totalCopies": ready.get(f"isvc.{name}-{stable['component']}", 0)},
    }
    if stable_ready:
        predictor_url = f"http://{name}-{stable['component']}.{ns}.svc.cluster.local"
        status["components"]["predictor"]["url"] = predictor_url
        status["url"] = f"http://{name}-{ns}.example.com"
        status["address"] = {"url": f"http://{name}-{stable['component']}.{ns}.svc.cluster.local"}
    return status
