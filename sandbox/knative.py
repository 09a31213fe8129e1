"""Knative Serving's pod-template field mask, as its webhook applies it (knative-v1.21.1).

KServe in Knative mode turns a predictor into a Knative Service, and Knative's validating
webhook accepts only the pod fields its field mask copies; some of them only while a
feature flag in ConfigMap ``knative-serving/config-features`` is ``enabled`` (or
``allowed``). Anything else fails with "must not set the field(s)". The table below
follows ``../shared/reference/knative-serving/podspec-fieldmask.csv`` (Knative's
``pkg/apis/serving/fieldmask.go`` and ``k8s_validation.go``); a test checks that it
agrees with the CSV row by row.

``violations(predictor, features, path)`` returns ``(field path, why)`` for every field of
a predictor that Knative would refuse. Flags missing from the ConfigMap take their
upstream defaults (``FLAG_DEFAULTS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ALWAYS, FLAG, NEVER, CONDITIONAL = "always", "flag", "never", "conditional"
# Flags whose field validation needs exactly "enabled" ("allowed" is not enough).
EXACTLY_ENABLED = {
    "kubernetes.podspec-init-containers",
    "kubernetes.podspec-volumes-emptydir",
    "kubernetes.podspec-persistent-volume-claim",
    "kubernetes.podspec-volumes-hostpath",
    "kubernetes.podspec-volumes-csi",
    "kubernetes.podspec-volumes-image",
    "kubernetes.podspec-volumes-mount-propagation",
    "kubernetes.containerspec-addcapabilities",
}
FLAG_DEFAULTS = {
    "secure-pod-defaults": "disabled",
    "multi-container": "enabled",
    "multi-container-probing": "disabled",
    "kubernetes.podspec-affinity": "disabled",
    "kubernetes.podspec-topologyspreadconstraints": "disabled",
    "kubernetes.podspec-hostaliases": "disabled",
    "kubernetes.podspec-nodeselector": "disabled",
    "kubernetes.podspec-tolerations": "disabled",
    "kubernetes.podspec-fieldref": "disabled",
    "kubernetes.podspec-runtimeclassname": "disabled",
    "kubernetes.podspec-dnspolicy": "disabled",
    "kubernetes.podspec-dnsconfig": "disabled",
    "kubernetes.podspec-securitycontext": "disabled",
    "kubernetes.podspec-shareprocessnamespace": "disabled",
    "kubernetes.podspec-hostipc": "disabled",
    "kubernetes.podspec-hostpid": "disabled",
    "kubernetes.podspec-hostnetwork": "disabled",
    "kubernetes.podspec-priorityclassname": "disabled",
    "kubernetes.podspec-schedulername": "disabled",
    "kubernetes.containerspec-addcapabilities": "disabled",
    "kubernetes.podspec-volumes-emptydir": "enabled",
    "kubernetes.podspec-volumes-image": "disabled",
    "kubernetes.podspec-volumes-hostpath": "disabled",
    "kubernetes.podspec-volumes-csi": "disabled",
    "kubernetes.podspec-init-containers": "disabled",
    "kubernetes.podspec-persistent-volume-claim": "disabled",
    "kubernetes.podspec-persistent-volume-write": "disabled",
    "kubernetes.podspec-volumes-mount-propagation": "disabled",
}

# (status, flag) per field; fields not listed are "never" (Knative: "must not set the field(s)").
POD_SPEC: dict[str, tuple[str, str]] = {
    "volumes": (ALWAYS, ""),
    "initContainers": (FLAG, "kubernetes.podspec-init-containers"),
    "containers": (ALWAYS, ""),
    "dnsPolicy": (FLAG, "kubernetes.podspec-dnspolicy"),
    "nodeSelector": (FLAG, "kubernetes.podspec-nodeselector"),
    "serviceAccountName": (ALWAYS, ""),
    "automountServiceAccountToken": (CONDITIONAL, ""),  # only false
    "hostNetwork": (FLAG, "kubernetes.podspec-hostnetwork"),
    "hostPID": (FLAG, "kubernetes.podspec-hostpid"),
    "hostIPC": (FLAG, "kubernetes.podspec-hostipc"),
    "shareProcessNamespace": (FLAG, "kubernetes.podspec-shareprocessnamespace"),
    "securityContext": (FLAG, "kubernetes.podspec-securitycontext"),
    "imagePullSecrets": (ALWAYS, ""),
    "affinity": (FLAG, "kubernetes.podspec-affinity"),
    "schedulerName": (FLAG, "kubernetes.podspec-schedulername"),
    "tolerations": (FLAG, "kubernetes.podspec-tolerations"),
    "hostAliases": (FLAG, "kubernetes.podspec-hostaliases"),
    "priorityClassName": (FLAG, "kubernetes.podspec-priorityclassname"),
    "dnsConfig": (FLAG, "kubernetes.podspec-dnsconfig"),
    "runtimeClassName": (FLAG, "kubernetes.podspec-runtimeclassname"),
    "enableServiceLinks": (ALWAYS, ""),
    "topologySpreadConstraints": (FLAG, "kubernetes.podspec-topologyspreadconstraints"),
}
CONTAINER: dict[str, tuple[str, str]] = {
    "name": (ALWAYS, ""),
    "image": (ALWAYS, ""),
    "command": (ALWAYS, ""),
    "args": (ALWAYS, ""),
    "workingDir": (ALWAYS, ""),
    "ports": (ALWAYS, ""),
    "envFrom": (ALWAYS, ""),
    "env": (ALWAYS, ""),
    "resources": (ALWAYS, ""),
    "volumeMounts": (ALWAYS, ""),
    "livenessProbe": (ALWAYS, ""),
    "readinessProbe": (ALWAYS, ""),
    "startupProbe": (ALWAYS, ""),
    "terminationMessagePath": (ALWAYS, ""),
    "terminationMessagePolicy": (ALWAYS, ""),
    "imagePullPolicy": (ALWAYS, ""),
    "securityContext": (ALWAYS, ""),
}
POD_SECURITY_CONTEXT: dict[str, tuple[str, str]] = {
    "runAsUser": (FLAG, "kubernetes.podspec-securitycontext"),
    "runAsGroup": (FLAG, "kubernetes.podspec-securitycontext"),
    "runAsNonRoot": (FLAG, "kubernetes.podspec-securitycontext"),
    "fsGroup": (FLAG, "kubernetes.podspec-securitycontext"),
    "supplementalGroups": (FLAG, "kubernetes.podspec-securitycontext"),
    "seccompProfile": (CONDITIONAL, "kubernetes.podspec-securitycontext"),
}
SECURITY_CONTEXT: dict[str, tuple[str, str]] = {
    "capabilities": (CONDITIONAL, "kubernetes.containerspec-addcapabilities"),
    "privileged": (CONDITIONAL, ""),  # only false
    "runAsUser": (ALWAYS, ""),
    "runAsGroup": (ALWAYS, ""),
    "runAsNonRoot": (ALWAYS, ""),
    "readOnlyRootFilesystem": (ALWAYS, ""),
    "allowPrivilegeEscalation": (ALWAYS, ""),
    "seccompProfile": (ALWAYS, ""),
}
VOLUME_SOURCES: dict[str, tuple[str, str]] = {
    "secret": (ALWAYS, ""),
    "configMap": (ALWAYS, ""),
    "projected": (ALWAYS, ""),
    "emptyDir": (FLAG, "kubernetes.podspec-volumes-emptydir"),
    "persistentVolumeClaim": (FLAG, "kubernetes.podspec-persistent-volume-claim"),
    "hostPath": (FLAG, "kubernetes.podspec-volumes-hostpath"),
    "csi": (FLAG, "kubernetes.podspec-volumes-csi"),
    "image": (FLAG, "kubernetes.podspec-volumes-image"),
}
CONFIG_NAMESPACE, CONFIG_NAME = "knative-serving", "config-features"


def features(data: Mapping[str, Any] | None) -> dict[str, str]:
    """The effective flags: the ConfigMap's data over Knative's defaults (values lowercased)."""
    flags = dict(FLAG_DEFAULTS)
    for key, value in (data or {}).items():
        if key in FLAG_DEFAULTS and isinstance(value, str):
            flags[key] = value.strip().lower()
    return flags


def _on(flags: Mapping[str, str], flag: str) -> bool:
    value = flags.get(flag, "disabled")
    return value == "enabled" if flag in EXACTLY_ENABLED else value in ("enabled", "allowed")


def _because(flag: str) -> str:
    exactly = "exactly " if flag in EXACTLY_ENABLED else ""
    return f'needs {flag} {exactly}"enabled" in ConfigMap {CONFIG_NAMESPACE}/{CONFIG_NAME}'


def _check(
    obj: Mapping[str, Any], mask: Mapping[str, tuple[str, str]], flags: Mapping[str, str], path: str
) -> list[tuple[str, str]]:
    out = []
    for key in obj:
        status, flag = mask.get(key, (NEVER, ""))
        if status == NEVER:
            out.append((f"{path}.{key}", "Knative Serving never allows this field"))
        elif status == FLAG and not _on(flags, flag):
            out.append((f"{path}.{key}", _because(flag)))
    return out


def _container(c: Mapping[str, Any], flags: Mapping[str, str], path: str, init: bool) -> list[tuple[str, str]]:
    out = _check(c, CONTAINER, flags, path)
    if init:
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            if probe in c:
                out.append((f"{path}.{probe}", "init containers may not set probes"))
    resources = c.get("resources") or {}
    if isinstance(resources, dict):
        for key in resources:
            if key not in ("limits", "requests"):
                why = "DRA claims are never allowed" if key == "claims" else "Knative Serving never allows this field"
                out.append((f"{path}.resources.{key}", why))
    sc = c.get("securityContext") or {}
    if isinstance(sc, dict):
        for key in sc:
            status, _ = SECURITY_CONTEXT.get(key, (NEVER, ""))
            if status == NEVER:
                out.append((f"{path}.securityContext.{key}", "Knative Serving never allows this field"))
        if sc.get("privileged") not in (None, False):
            out.append((f"{path}.securityContext.privileged", "only false is allowed"))
        added = (sc.get("capabilities") or {}).get("add") if isinstance(sc.get("capabilities"), dict) else None
        if added and not _on(flags, "kubernetes.containerspec-addcapabilities"):
            secure = flags.get("secure-pod-defaults", "disabled").lower() in ("enabled", "allowrootbounded")
            if not (secure and list(added) == ["NET_BIND_SERVICE"]):
                out.append(
                    (f"{path}.securityContext.capabilities.add", _because("kubernetes.containerspec-addcapabilities"))
                )
    for i, mount in enumerate(c.get("volumeMounts") or []):
        if isinstance(mount, dict):
            for key in ("subPathExpr", "recursiveReadOnly"):
                if key in mount:
                    out.append((f"{path}.volumeMounts[{i}].{key}", "Knative Serving never allows this field"))
            if "mountPropagation" in mount and not _on(flags, "kubernetes.podspec-volumes-mount-propagation"):
                out.append(
                    (
                        f"{path}.volumeMounts[{i}].mountPropagation",
                        _because("kubernetes.podspec-volumes-mount-propagation"),
                    )
                )
    return out


def _pod_security_context(sc: Any, flags: Mapping[str, str], path: str) -> list[tuple[str, str]]:
    """The pod's securityContext: its listed sub-fields with the flag; without the flag, only a
    RuntimeDefault or Unconfined seccompProfile, and that only under secure-pod-defaults."""
    if not sc or not isinstance(sc, dict):
        return []
    flag = "kubernetes.podspec-securitycontext"
    flag_on = _on(flags, flag)
    secure = flags.get("secure-pod-defaults", "disabled").lower() in ("enabled", "allowrootbounded")
    if not flag_on and not secure:
        return [(path, _because(flag))]
    out = []
    for key, value in sc.items():
        status, _ = POD_SECURITY_CONTEXT.get(key, (NEVER, ""))
        if status == NEVER:
            out.append((f"{path}.{key}", "Knative Serving never allows this field"))
        elif not flag_on:
            seccomp = (value or {}).get("type") if key == "seccompProfile" and isinstance(value, dict) else None
            if seccomp not in ("RuntimeDefault", "Unconfined"):
                out.append((f"{path}.{key}", _because(flag)))
    return out


def violations(
    pod_fields: Mapping[str, Any],
    containers: list[tuple[str, Mapping[str, Any]]],
    flags: Mapping[str, str],
    path: str,
) -> list[tuple[str, str]]:
    """What Knative's webhook refuses in a pod template.

    ``pod_fields``: the PodSpec fields (an InferenceService predictor minus its component
    fields); ``containers``: (path, container) for every container, the model included;
    ``path``: where the pod fields live, e.g. ``spec.predictor``.
    """
    plain = {k: v for k, v in pod_fields.items() if k not in ("containers", "securityContext")}
    out = _check(plain, POD_SPEC, flags, path)
    if pod_fields.get("automountServiceAccountToken") not in (None, False):
        out.append((f"{path}.automountServiceAccountToken", "only false is allowed"))
    out.extend(_pod_security_context(pod_fields.get("securityContext"), flags, f"{path}.securityContext"))
    for i, volume in enumerate(pod_fields.get("volumes") or []):
        if not isinstance(volume, dict):
            continue
        for key in volume:
            if key == "name":
                continue
            status, flag = VOLUME_SOURCES.get(key, (NEVER, ""))
            if status == NEVER:
                out.append((f"{path}.volumes[{i}].{key}", "Knative Serving never allows this volume type"))
            elif status == FLAG and not _on(flags, flag):
                out.append((f"{path}.volumes[{i}].{key}", _because(flag)))
    for where, container in containers:
        out.extend(_container(container, flags, where, where.split(".")[-1].startswith("initContainers")))
    return out
