"""Validate generated objects against upstream truth.

* ``validate_custom(obj)``: the object's CRD from ``../shared/reference`` (the version the
  object names), its ``openAPIV3Schema`` turned into a JSON Schema that refuses unknown
  fields the way the API server does with strict field validation (and the way pruning
  would silently drop them otherwise), plus the CRD's CEL rules that can fire on create.
* ``validate_core(obj)``: ``kubernetes_validate`` strict schemas for Kubernetes 1.34.

The CRDs exist only in the project workspace (``<repo>/../shared/reference``); tests
that need them use ``requires_reference`` or the ``crd_reference`` fixture and are
skipped, with the reason, in a bare clone.

How the structural schema becomes a JSON Schema:

* an object with ``properties`` (or with none at all) and neither ``additionalProperties``
  nor ``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties: false``
  (inside ``anyOf``/``allOf``/``oneOf``/``not`` nothing is added: those only constrain);
* ``x-kubernetes-int-or-string`` accepts an integer or a string;
* ``nullable`` adds ``null`` to the type;
* ``x-kubernetes-embedded-resource`` allows ``apiVersion``, ``kind`` and ``metadata``;
* the top-level ``metadata`` is checked only for the types of name, namespace, labels and
  annotations (the API server validates ObjectMeta itself; ``validate_core`` covers it
  for core objects);
* ``x-kubernetes-list-type`` set/map uniqueness is checked, and ``format`` int32/int64
  ranges;
* CEL rules (``x-kubernetes-validations``) are evaluated by hand-written equivalents of
  the rules these CRDs contain; transition rules (``oldSelf``) never apply on create;
  a rule without an equivalent makes validation fail, so a gap cannot pass silently.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE = REPO_ROOT.parent / "shared" / "reference"
SKIP_REASON = "../shared/reference is absent (upstream CRD schemas are only in the project workspace)"
KUBERNETES_VERSION = "1.34"

requires_reference = pytest.mark.skipif(not REFERENCE.is_dir(), reason=SKIP_REASON)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SchemaViolation(AssertionError):
    """An object that the API server (or its CRD) would refuse; the message lists every path."""


@pytest.fixture(scope="session")
def crd_reference() -> Path:
    if not REFERENCE.is_dir():
        pytest.skip(SKIP_REASON)
    return REFERENCE


def reference_available() -> bool:
    return REFERENCE.is_dir()


# -- loading -------------------------------------------------------------------------------


@functools.cache
def _crd_files() -> dict[tuple[str, str], Path]:
    """(group, kind) -> CRD file, found by reading file headers, not by parsing every file."""
    index: dict[tuple[str, str], Path] = {}
    for path in sorted(REFERENCE.rglob("*.yaml")):
        text = path.read_text()
        if "kind: CustomResourceDefinition" not in text:
            continue
        group = re.search(r"^  group: (\S+)$", text, re.M)
        kind = re.search(r"^    kind: (\S+)$", text, re.M)
        if group and kind:
            index[(group[1], kind[1])] = path
    return index


def _apply_json_patch(doc: dict, ops: list[dict]) -> None:
    """The two JSON Patch operations upstream uses on the Notebook CRD: add and replace."""
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"unsupported JSON patch op {op['op']}")
        if isinstance(target, list):
            target[int(last)] = op["value"]
        else:
            target[last] = op["value"]


@functools.cache
def load_crd(group: str, kind: str) -> dict:
    """The CRD as upstream installs it (the Notebook CRD with its validation patches)."""
    files = _crd_files()
    if (group, kind) not in files:
        raise KeyError(f"no CRD for {kind}.{group} in {REFERENCE}")
    path = files[(group, kind)]
    crd = yaml.load(path.read_text(), Loader=_Loader)
    patches = path.parent / "validation_patches.yaml"
    if group == "kubeflow.org" and kind == "Notebook" and patches.exists():
        _apply_json_patch(crd, yaml.load(patches.read_text(), Loader=_Loader))
    return crd


def crd_version_schema(api_version: str, kind: str) -> dict:
    group, _, version = api_version.rpartition("/")
    crd = load_crd(group, kind)
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            if not v.get("served", False):
                raise SchemaViolation(f"{kind}.{group}/{version} is not served")
            return v["schema"]["openAPIV3Schema"]
    raise SchemaViolation(f"{kind}.{group} has no version {version}")


# -- structural schema -> JSON Schema --------------------------------------------------------

_KEEP = {
    "type",
    "required",
    "enum",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "multipleOf",
}
_META_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def to_json_schema(node: Any, *, in_logic: bool = False) -> Any:
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {k: copy.deepcopy(v) for k, v in node.items() if k in _KEEP}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    for logic in ("anyOf", "allOf", "oneOf"):
        if logic in node and not node.get("x-kubernetes-int-or-string"):
            out[logic] = [to_json_schema(branch, in_logic=True) for branch in node[logic]]
    if "not" in node:
        out["not"] = to_json_schema(node["not"], in_logic=True)
    properties = dict(node.get("properties", {}))
    if node.get("x-kubernetes-embedded-resource"):
        properties.setdefault("apiVersion", {"type": "string"})
        properties.setdefault("kind", {"type": "string"})
        properties.setdefault("metadata", {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    if properties:
        out["properties"] = {k: to_json_schema(v, in_logic=in_logic) for k, v in properties.items()}
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = to_json_schema(node["additionalProperties"], in_logic=in_logic)
    elif "additionalProperties" in node:
        out["additionalProperties"] = node["additionalProperties"]
    elif (
        not in_logic
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and (properties or node.get("type") == "object")
    ):
        out["additionalProperties"] = False
    if "items" in node:
        out["items"] = to_json_schema(node["items"], in_logic=in_logic)
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks("int32")
def _int32(value: object) -> bool:
    return not isinstance(value, int) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    raw = crd_version_schema(api_version, kind)
    schema = to_json_schema(raw)
    schema["properties"]["metadata"] = _META_SCHEMA
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": kind}
    schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema, format_checker=_FORMATS)


# -- CEL rules ------------------------------------------------------------------------------

_RFC1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
KNOWN_CEL: dict[str, Callable[[Any], bool]] = {
    "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')": lambda s: bool(
        _RFC1035.fullmatch(s["metadata"]["name"])
    ),
    "size(self.metadata.name) <= 63": lambda s: len(s["metadata"]["name"]) <= 63,
    "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)].filter(x, x).size() <= 1": (
        lambda s: sum(k in s for k in ("torch", "mpi", "jax", "xgboost", "flux")) <= 1
    ),
    "self >= 1": lambda s: s >= 1,
    "!self.exists(c, c == 'node')": lambda s: "node" not in s,
    (
        "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
        "self.replicatedJobs.exists(x, has(x.dependsOn)))"
    ): lambda s: (
        not (
            s.get("startupPolicy", {}).get("startupPolicyOrder") == "InOrder"
            and any("dependsOn" in j for j in s.get("replicatedJobs", []))
        )
    ),
    "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)": lambda s: all(
        not t.get("metadata", {}).get("namespace") for t in s.get("templates", [])
    ),
    "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')": lambda s: (
        s == "" or bool(re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://.+", s))
    ),
    "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']": lambda s: (
        s in ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
    ),
    # Kueue v1beta2: ClusterQueue and ResourceFlavor.
    (
        "!has(self.cohortName) && has(self.resourceGroups) ? self.resourceGroups.all(rg, rg.flavors.all(f, "
        "f.resources.all(r, !has(r.borrowingLimit)))) : true"
    ): lambda s: (
        "cohortName" in s
        or all(
            "borrowingLimit" not in r for g in s.get("resourceGroups", []) for f in g["flavors"] for r in f["resources"]
        )
    ),
    "self.flavors.all(x, size(x.resources) == size(self.coveredResources))": lambda s: all(
        len(f["resources"]) == len(s["coveredResources"]) for f in s["flavors"]
    ),
    (
        "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
        "self.borrowWithinCohort.policy != 'Never')"
    ): lambda s: (
        not (
            s.get("reclaimWithinCohort", "Never") == "Never"
            and "borrowWithinCohort" in s
            and s["borrowWithinCohort"].get("policy", "Never") != "Never"
        )
    ),
    (
        "!has(self.preference) || (self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')"
    ): lambda s: "preference" not in s or (s.get("whenCanBorrow") == s.get("whenCanPreempt") == "TryNextFlavor"),
    "!has(self.topologyName) || self.nodeLabels.size() >= 1": lambda s: (
        "topologyName" not in s or len(s.get("nodeLabels", {})) >= 1
    ),
    # Kueue v1beta2: the Workload (as the sandbox's Kueue writes it).
    (
        "has(self.status) && has(self.status.conditions) && self.status.conditions.exists(c, c.type == "
        "'QuotaReserved' && c.status == 'True') && has(self.status.admission) ? size(self.spec.podSets) == "
        "size(self.status.admission.podSetAssignments) : true"
    ): lambda s: (
        not (
            any(
                c["type"] == "QuotaReserved" and c["status"] == "True"
                for c in s.get("status", {}).get("conditions", [])
            )
            and "admission" in s.get("status", {})
        )
        or len(s["spec"]["podSets"]) == len(s["status"]["admission"]["podSetAssignments"])
    ),
    "!has(self.priorityClassRef) || has(self.priority)": lambda s: "priorityClassRef" not in s or "priority" in s,
    "(self.group == 'kueue.x-k8s.io') ? self.kind == 'WorkloadPriorityClass' : true": lambda s: (
        s["group"] != "kueue.x-k8s.io" or s["kind"] == "WorkloadPriorityClass"
    ),
    "(self.group == 'scheduling.k8s.io') ? self.kind == 'PriorityClass' : true": lambda s: (
        s["group"] != "scheduling.k8s.io" or s["kind"] == "PriorityClass"
    ),
    "has(self.minCount) ? self.minCount <= self.count : true": lambda s: (
        "minCount" not in s or s["minCount"] <= s["count"]
    ),
    (
        "!has(self.clusterName) || (!has(self.nominatedClusterNames) || (has(self.nominatedClusterNames) && "
        "size(self.nominatedClusterNames) == 0))"
    ): lambda s: "clusterName" not in s or not s.get("nominatedClusterNames"),
}


def _walk_rules(schema: dict, value: Any, path: str, problems: list[str]) -> None:
    for rule in schema.get("x-kubernetes-validations", []):
        expression = " ".join(rule["rule"].split())
        if "oldSelf" in expression:
            continue  # transition rules only run on update
        check = KNOWN_CEL.get(expression)
        if check is None:
            problems.append(f"{path or '<root>'}: CEL rule with no equivalent in tests/kube_schemas.py: {expression}")
        elif not check(value):
            problems.append(f"{path or '<root>'}: {rule.get('message') or expression}")
    list_type = schema.get("x-kubernetes-list-type")
    if isinstance(value, list) and list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = set()
        for item in value:
            key = repr(tuple(item.get(k) for k in keys)) if list_type == "map" else repr(item)
            if key in seen:
                problems.append(f"{path}: duplicate entry {key} in a list of type {list_type}")
            seen.add(key)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = properties.get(k) if k in properties else (extra if isinstance(extra, dict) else None)
            if sub is not None:
                _walk_rules(sub, v, f"{path}.{k}" if path else k, problems)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk_rules(schema["items"], item, f"{path}[{i}]", problems)


# -- public checks ---------------------------------------------------------------------------


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _leaf_errors(error: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
    if error.context:
        for sub in error.context:
            yield from _leaf_errors(sub)
    else:
        yield error


def custom_problems(obj: dict) -> list[str]:
    """Every reason the API server would refuse ``obj`` under its CRD (empty when none)."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    validator = _validator(api_version, kind)
    problems = [f"{_path(e)}: {e.message}" for e in sorted(validator.iter_errors(obj), key=_path)]
    _walk_rules(crd_version_schema(api_version, kind), obj, "", problems)
    return problems


def validate_custom(obj: dict) -> None:
    """Raise ``SchemaViolation`` naming each bad path when ``obj`` does not fit its CRD."""
    problems = custom_problems(obj)
    if problems:
        name = obj.get("metadata", {}).get("name", "?")
        raise SchemaViolation(f"{obj.get('kind')} {name!r}:\n  " + "\n  ".join(problems))


def validate_core(obj: dict) -> None:
    """Raise ``SchemaViolation`` unless kubernetes-validate (strict, 1.34) accepts ``obj``."""
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "<root>"
        name = obj.get("metadata", {}).get("name", "?")
        raise SchemaViolation(f"{obj.get('kind')} {name!r}: {where}: {exc.message}") from None


def is_core(obj: dict) -> bool:
    """Core and built-in API groups are checked by kubernetes-validate, the rest by their CRD."""
    group = obj["apiVersion"].rpartition("/")[0]
    return "." not in group or (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io"))


def validate_any(obj: dict) -> None:
    if is_core(obj):
        validate_core(obj)
    else:
        validate_custom(obj)
