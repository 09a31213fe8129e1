"""Light defaulting and validation of built-in kinds.

Only what catches real mistakes in generated manifests: object names, label syntax,
pod containers (name and image, unique names, valid quantities, extended resources
requested whole and equal to their limits), pod update immutability, quota and DRA
selector syntax. The API server's defaults that clients read back (pod restart
policy, scheduler name, tolerations, phase, ...) are filled in as Kubernetes does.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sandbox import quantity
from sandbox.cel import CelError, check_claim_spec, compile_expression
from sandbox.errors import cause
from sandbox.kinds import Kind
from sandbox.selectors import match_selector_object

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_NATIVE = ("cpu", "memory", "ephemeral-storage", "storage")
_LABEL_NAMED = {"/namespaces", "/services"}  # kinds whose names must be DNS labels


def _qualified_name_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return None


def validate_metadata(kind: Kind, meta: dict[str, Any]) -> list[dict[str, str]]:
    causes = []
    name = meta.get("name", "")
    if kind.key in _LABEL_NAMED:
        if len(name) > 63 or not _LABEL.match(name):
            causes.append(
                cause(
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must '
                    "consist of lower case alphanumeric characters or '-', and must start and end "
                    "with an alphanumeric character",
                )
            )
    elif len(name) > 253 or not _SUBDOMAIN.match(name):
        causes.append(
            cause(
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
                "with an alphanumeric character",
            )
        )
    for key, value in (meta.get("labels") or {}).items():
        problem = _qualified_name_problem(str(key))
        if problem:
            causes.append(cause("metadata.labels", f'Invalid value: "{key}": {problem}'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                cause(
                    "metadata.labels",
                    f'Invalid value: "{value}": a valid label must be an empty '
                    "string or consist of alphanumeric characters, '-', '_' or '.', and must start "
                    "and end with an alphanumeric character",
                )
            )
    for key, value in (meta.get("annotations") or {}).items():
        problem = _qualified_name_problem(str(key))
        if problem:
            causes.append(cause("metadata.annotations", f'Invalid value: "{key}": {problem}'))
        if not isinstance(value, str):
            causes.append(cause(f"metadata.annotations[{key}]", "Invalid value: annotation values must be strings"))
    return causes


# Pods ----------------------------------------------------------------------------------------


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    return "Always" if ":" not in tail or tail.endswith(":latest") else "IfNotPresent"


def default_pod(pod: dict[str, Any], priority: int | None) -> None:
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
    spec.setdefault("serviceAccount", spec["serviceAccountName"])
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec["priority"] = priority if priority is not None else spec.get("priority", 0)
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if not isinstance(c, dict):
            continue
        if isinstance(c.get("image"), str):
            c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        resources = c.setdefault("resources", {})
        if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
            requests = resources.setdefault("requests", {})
            for name, value in resources["limits"].items():
                requests.setdefault(name, value)
    tolerations = spec.setdefault("tolerations", [])
    keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if key not in keys:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(pod))


def qos_class(pod: dict[str, Any]) -> str:
    containers = pod.get("spec", {}).get("containers") or []
    requests_any, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for name in ("cpu", "memory"):
            if name not in lim or str(req.get(name, lim.get(name))) != str(lim.get(name)):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _validate_container(c: Any, field: str, names: set[str]) -> list[dict[str, str]]:
    if not isinstance(c, dict):
        return [cause(field, "Invalid value: must be an object")]
    causes = []
    name = c.get("name")
    if not name:
        causes.append(cause(f"{field}.name", "Required value", "FieldValueRequired"))
    elif not isinstance(name, str) or len(name) > 63 or not _LABEL.match(name):
        causes.append(
            cause(
                f"{field}.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 label must consist '
                "of lower case alphanumeric characters or '-'",
            )
        )
    elif name in names:
        causes.append(cause(f"{field}.name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
    else:
        names.add(name)
    if not c.get("image"):
        causes.append(cause(f"{field}.image", "Required value", "FieldValueRequired"))
    res = c.get("resources") or {}
    parsed: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for section in ("requests", "limits"):
        for rname, value in (res.get(section) or {}).items():
            try:
                q = quantity.parse(value)
            except quantity.QuantityError as exc:
                causes.append(cause(f"{field}.resources.{section}[{rname}]", f"Invalid value: {value!r}: {exc}"))
                continue
            if q < 0:
                causes.append(
                    cause(
                        f"{field}.resources.{section}[{rname}]",
                        f'Invalid value: "{value}": must be greater than or equal to 0',
                    )
                )
            parsed[section][rname] = q
            if rname not in _NATIVE and "/" in rname and q.denominator != 1:
                causes.append(
                    cause(f"{field}.resources.{section}[{rname}]", f'Invalid value: "{value}": must be an integer')
                )
    for rname, q in parsed["requests"].items():
        lim = parsed["limits"].get(rname)
        if rname not in _NATIVE and "/" in rname and not rname.startswith("requests."):
            if lim is None:
                causes.append(
                    cause(
                        f"{field}.resources.limits",
                        "Required value: Limit must be set for non overcommitable resources",
                        "FieldValueRequired",
                    )
                )
            elif lim != q:
                causes.append(
                    cause(
                        f"{field}.resources.requests[{rname}]",
                        f'Invalid value: "{res["requests"][rname]}": must be equal to {rname} limit '
                        f"of {res['limits'][rname]}",
                    )
                )
        elif lim is not None and q > lim:
            causes.append(
                cause(
                    f"{field}.resources.requests",
                    f'Invalid value: "{res["requests"][rname]}": must '
                    f"be less than or equal to {rname} limit of {res['limits'][rname]}",
                )
            )
    return causes


def validate_pod_spec(spec: Any, field: str = "spec") -> list[dict[str, str]]:
    if not isinstance(spec, dict):
        return [cause(field, "Required value", "FieldValueRequired")]
    causes = []
    containers = spec.get("containers")
    if not containers or not isinstance(containers, list):
        causes.append(cause(f"{field}.containers", "Required value", "FieldValueRequired"))
        containers = []
    names: set[str] = set()
    for i, c in enumerate(containers):
        causes.extend(_validate_container(c, f"{field}.containers[{i}]", names))
    for i, c in enumerate(spec.get("initContainers") or []):
        causes.extend(_validate_container(c, f"{field}.initContainers[{i}]", names))
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in ("Always", "OnFailure", "Never"):
        causes.append(
            cause(
                f"{field}.restartPolicy",
                f'Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"',
                "FieldValueNotSupported",
            )
        )
    claim_names = set()
    for i, rc in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(rc, dict) or not rc.get("name"):
            causes.append(cause(f"{field}.resourceClaims[{i}].name", "Required value", "FieldValueRequired"))
            continue
        claim_names.add(rc["name"])
        if bool(rc.get("resourceClaimName")) == bool(rc.get("resourceClaimTemplateName")):
            causes.append(
                cause(
                    f"{field}.resourceClaims[{i}]",
                    "Invalid value: must specify exactly one of `resourceClaimName`, `resourceClaimTemplateName`",
                )
            )
    for i, c in enumerate(containers):
        for j, claim in enumerate(((c or {}).get("resources") or {}).get("claims") or []):
            if isinstance(claim, dict) and claim.get("name") not in claim_names:
                causes.append(
                    cause(
                        f"{field}.containers[{i}].resources.claims[{j}]",
                        f'Not found: "{claim.get("name")}"',
                        "FieldValueNotFound",
                    )
                )
    return causes


# Fields a pod update may change (everything else in spec is immutable).
_POD_MUTABLE = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")


def validate_pod_update(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, str]]:
    def frozen(pod: dict[str, Any]) -> dict[str, Any]:
        spec = {k: v for k, v in pod.get("spec", {}).items() if k not in _POD_MUTABLE}
        spec["containers"] = [{k: v for k, v in c.items() if k != "image"} for c in spec.get("containers") or []]
        spec["initContainers"] = [
            {k: v for k, v in c.items() if k != "image"} for c in spec.get("initContainers") or []
        ]
        return spec

    if frozen(old) != frozen(new):
        return [
            cause(
                "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                "to 1 if it was previously negative)",
                "FieldValueForbidden",
            )
        ]
    return []


# Quantities ----------------------------------------------------------------------------------

kind_pods = Kind("", ("v1",), "pods", "Pod", True)  # stands for a pod template inside another kind


def _stringify(section: Any) -> None:
    if isinstance(section, dict):
        for k, v in section.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                section[k] = quantity.format_quantity(quantity.parse(v), k)


def normalize_quantities(kind: Kind, obj: dict[str, Any]) -> None:
    """Built-in kinds store quantities as strings (typed clients insist on it)."""
    key = kind.key
    if key == "/pods" or kind is kind_pods:
        spec = obj.get("spec") or {}
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            if isinstance(c, dict) and isinstance(c.get("resources"), dict):
                _stringify(c["resources"].get("requests"))
                _stringify(c["resources"].get("limits"))
        _stringify(spec.get("overhead"))
    elif key == "apps/statefulsets":
        template = (obj.get("spec") or {}).get("template") or {}
        normalize_quantities(kind_pods, template)
    elif key == "/resourcequotas":
        _stringify((obj.get("spec") or {}).get("hard"))
    elif key == "/persistentvolumeclaims":
        resources = (obj.get("spec") or {}).get("resources") or {}
        _stringify(resources.get("requests"))
        _stringify(resources.get("limits"))
    elif key == "/nodes":
        _stringify((obj.get("status") or {}).get("capacity"))
        _stringify((obj.get("status") or {}).get("allocatable"))


# Dispatch ------------------------------------------------------------------------------------


def validate(kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None) -> list[dict[str, str]]:
    causes = validate_metadata(kind, obj.get("metadata") or {})
    key = kind.key
    if key == "/pods":
        causes += validate_pod_spec(obj.get("spec"))
        if old is not None:
            causes += validate_pod_update(old, obj)
    elif key == "apps/statefulsets":
        spec = obj.get("spec") or {}
        template = spec.get("template") or {}
        causes += validate_pod_spec(template.get("spec"), "spec.template.spec")
        selector = spec.get("selector")
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not selector:
            causes.append(cause("spec.selector", "Required value", "FieldValueRequired"))
        elif not match_selector_object(selector, labels):
            causes.append(
                cause(
                    "spec.template.metadata.labels",
                    f"Invalid value: {json.dumps(labels)}: `selector` does not match template `labels`",
                )
            )
        if old is not None and (old.get("spec") or {}).get("selector") != selector:
            causes.append(
                cause(
                    "spec",
                    "Forbidden: updates to statefulset spec for fields other than 'replicas', "
                    "'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' "
                    "and 'minReadySeconds' are forbidden",
                    "FieldValueForbidden",
                )
            )
    elif key == "/resourcequotas":
        for name, value in ((obj.get("spec") or {}).get("hard") or {}).items():
            if not quantity.is_valid(value):
                causes.append(cause(f"spec.hard[{name}]", f"Invalid value: {value!r}: must be a quantity"))
    elif key == "/configmaps":
        for section in ("data", "binaryData"):
            for k in obj.get(section) or {}:
                if not re.match(r"^[-._a-zA-Z0-9]+$", k):
                    causes.append(
                        cause(
                            f"{section}[{k}]",
                            f'Invalid value: "{k}": a valid config key must '
                            "consist of alphanumeric characters, '-', '_' or '.'",
                        )
                    )
    elif key == "resource.k8s.io/resourceclaims":
        causes += [cause(f, m) for f, m in check_claim_spec(obj.get("spec") or {}, "spec")]
    elif key == "resource.k8s.io/resourceclaimtemplates":
        causes += [cause(f, m) for f, m in check_claim_spec((obj.get("spec") or {}).get("spec") or {}, "spec.spec")]
    elif key == "resource.k8s.io/deviceclasses":
        for i, sel in enumerate((obj.get("spec") or {}).get("selectors") or []):
            expr = ((sel or {}).get("cel") or {}).get("expression", "")
            try:
                compile_expression(expr)
            except CelError as exc:
                causes.append(cause(f"spec.selectors[{i}].cel.expression", str(exc)))
    elif key == "scheduling.k8s.io/priorityclasses" and not isinstance(obj.get("value"), int):
        causes.append(cause("value", "Required value", "FieldValueRequired"))
    return causes
