"""Label and field selectors, as the API server parses them from query strings.

Label selectors support equality (``a=b``, ``a==b``, ``a!=b``) and set-based
requirements (``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``). Field selectors
support ``=``, ``==`` and ``!=`` on the fields the real server allows for each kind;
anything else is a 400, as it is on a real cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.errors import bad_request
from sandbox.kinds import Kind

_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects that lack the key, as in Kubernetes
        return not present or labels[self.key] not in self.values


LabelSelector = tuple[Requirement, ...]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return ()
    reqs = []
    for part in _split_top_level(text):
        m = _SET_RE.match(part)
        if m:
            key, op, raw = m.group(1), m.group(2), m.group(3)
            values = frozenset(v.strip() for v in raw.split(",") if v.strip())
            reqs.append(_requirement(key, op, values, text))
            continue
        if part.startswith("!"):
            reqs.append(_requirement(part[1:].strip(), "!", frozenset(), text))
            continue
        for op in ("!=", "==", "="):
            if op in part:
                key, _, value = part.partition(op)
                reqs.append(_requirement(key.strip(), "!=" if op == "!=" else "=", frozenset([value.strip()]), text))
                break
        else:
            reqs.append(_requirement(part, "exists", frozenset(), text))
    return tuple(reqs)


def _requirement(key: str, op: str, values: frozenset[str], text: str) -> Requirement:
    if not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in selector {text!r}")
    for v in values:
        if len(v) > 63 or not _VALUE.match(v):
            raise bad_request(f"unable to parse requirement: invalid label value {v!r} in selector {text!r}")
    return Requirement(key, op, values)


def labels_match(selector: LabelSelector, labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in selector)


def match_selector_object(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """A ``metav1.LabelSelector`` object (matchLabels + matchExpressions). Empty matches all."""
    if not selector:
        return True
    labels = labels or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = expr.get("operator")
        values = frozenset(expr.get("values") or [])
        mapped = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(op)
        if mapped is None or not Requirement(expr.get("key", ""), mapped, values).matches(labels):
            return False
    return True


# Field selectors ---------------------------------------------------------------------

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_FIELDS_BY_KIND: dict[str, tuple[str, ...]] = {
    "/pods": (
        "status.phase",
        "spec.nodeName",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.restartPolicy",
        "status.podIP",
        "status.nominatedNodeName",
        "spec.hostNetwork",
    ),
    "/events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "/nodes": ("spec.unschedulable",),
    "/namespaces": ("status.phase",),
    "/secrets": ("type",),
}

FieldSelector = tuple[tuple[str, bool, str], ...]  # (path, equal?, value)


def parse_field_selector(text: str | None, kind: Kind) -> FieldSelector:
    if not text or not text.strip():
        return ()
    allowed = _COMMON_FIELDS + _FIELDS_BY_KIND.get(kind.key, ())
    out = []
    for part in re.split(r"(?<!\\),", text):
        part = part.strip()
        if not part:
            continue
        for op in ("!=", "==", "="):
            if op in part:
                path, _, value = part.partition(op)
                path = path.strip()
                if path not in allowed:
                    raise bad_request(f"field label not supported: {path}")
                out.append((path, op != "!=", value.strip().replace("\\,", ",")))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
    return tuple(out)


def _field_value(obj: dict[str, Any], path: str) -> str:
    if path == "source":
        return (obj.get("source") or {}).get("component", "")
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def fields_match(selector: FieldSelector, obj: dict[str, Any]) -> bool:
    return all((_field_value(obj, path) == value) == equal for path, equal, value in selector)


def make_filter(
    label_selector: str | None, field_selector: str | None, kind: Kind
) -> Callable[[dict[str, Any]], bool] | None:
    labels = parse_label_selector(label_selector)
    fields = parse_field_selector(field_selector, kind)
    if not labels and not fields:
        return None

    def accept(obj: dict[str, Any]) -> bool:
        return labels_match(labels, obj["metadata"].get("labels")) and fields_match(fields, obj)

    return accept
