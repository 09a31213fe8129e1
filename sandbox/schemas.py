"""Validation of custom resources against upstream CRD schemas, read at run time.

The schemas come from a folder scanned recursively for ``CustomResourceDefinition``
documents (YAML, or JSON files): by default ``sandbox/crds/``, the upstream schemas the
sandbox ships (see PROVENANCE.md there; ``scripts/vendor_crds.py`` refreshes them),
or another folder given as ``--crd-dir``. Custom resources are validated on create,
replace, patch and apply against the ``openAPIV3Schema`` of the version used, with
``jsonschema`` (draft 4, which matches OpenAPI v3's keywords). The structural-schema
extensions are converted as the real API server interprets them:

- objects reject unknown fields (strict field validation) unless they carry
  ``x-kubernetes-preserve-unknown-fields``; the root ``metadata`` is only checked to
  be an object (name and labels are validated by the API layer);
- ``x-kubernetes-int-or-string`` accepts an integer or a string;
- ``x-kubernetes-embedded-resource`` allows apiVersion, kind and metadata;
- ``nullable`` allows null; ``format`` is not enforced (int32/int64/date-time are
  informational for us); ``default`` values are applied before validation;
- ``x-kubernetes-validations`` (CEL rules) are NOT evaluated: a known gap.

A ``validation_patches.yaml`` (JSON6902) next to a CRD is applied to it, as upstream
kustomize does for the Kubeflow Notebook CRD.

Parsing 7 MB of YAML takes over a second, so parsed CRDs are cached per process and
on disk (JSON keyed by path, size and mtime), and loading runs in a background thread
so the server starts at once; the first validation waits for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft4Validator

from sandbox.errors import cause
from sandbox.kinds import Kind
from sandbox.patches import clone, json_patch

log = logging.getLogger("sandbox.schemas")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CACHE_VERSION = 2


# The upstream CRD schemas the sandbox ships, so that a plain clone validates too.
SHIPPED_CRD_DIR = Path(__file__).resolve().parent / "crds"


def cache_dir() -> Path:
    return Path(os.environ.get("SANDBOX_CACHE_DIR") or Path(tempfile.gettempdir()) / "gpu-portal-sandbox-cache")


# Scanning -------------------------------------------------------------------------------


def _trim(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc.get("spec") or {}
    return {
        "group": spec.get("group", ""),
        "plural": (spec.get("names") or {}).get("plural", ""),
        "kind": (spec.get("names") or {}).get("kind", ""),
        "versions": [
            {"name": v.get("name"), "schema": ((v.get("schema") or {}).get("openAPIV3Schema"))}
            for v in spec.get("versions") or []
        ],
    }


def _read_yaml_cached(path: Path) -> list[dict[str, Any]]:
    """CRD documents (trimmed) or JSON6902 operations found in ``path``, via the disk cache."""
    st = path.stat()
    key = hashlib.sha1(f"{_CACHE_VERSION}|{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    cached = cache_dir() / f"{key}.json"
    try:
        return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    text = path.read_text(errors="replace")
    found: list[dict[str, Any]] = []
    if "CustomResourceDefinition" in text and path.suffix == ".json":
        try:
            doc = json.loads(text)
        except ValueError as exc:
            log.warning("skipping %s: not valid JSON (%s)", path, exc)
        else:
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append({"crd": _trim(doc)})
    elif "CustomResourceDefinition" in text:
        try:
            for doc in yaml.load_all(text, Loader=_Loader):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    found.append({"crd": _trim(doc)})
        except yaml.YAMLError as exc:
            log.warning("skipping %s: not valid YAML (%s)", path, exc)
    elif path.name.startswith("validation_patch"):
        try:
            ops = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError:
            ops = None
        if isinstance(ops, list):
            found.append({"patch": ops})
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(found))
        os.replace(tmp, cached)
    except OSError:
        pass
    return found


def _apply_patch(crd: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply JSON6902 ops written against the full CRD to our trimmed copy."""
    doc = {"spec": {"versions": [{"schema": {"openAPIV3Schema": v["schema"]}} for v in crd["versions"]]}}
    for op in ops:
        try:
            doc = json_patch(doc, [op])
        except Exception:  # noqa: BLE001 - upstream kustomize "replace" also creates the key
            if op.get("op") == "replace":
                try:
                    doc = json_patch(doc, [{**op, "op": "add"}])
                except Exception:  # noqa: BLE001
                    log.warning("could not apply CRD patch op %s", op.get("path"))
    for v, patched in zip(crd["versions"], doc["spec"]["versions"], strict=True):
        v["schema"] = patched["schema"]["openAPIV3Schema"]
    return crd


class Catalog:
    """All CRD schemas found in one folder; built once per process per folder."""

    def __init__(self, root: Path):
        self.root = root
        self.schemas: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._validators: dict[tuple[str, str, str], CrdSchema] = {}
        self._lock = threading.Lock()
        self.ready = threading.Event()
        self.error: str | None = None

    def load(self) -> None:
        try:
            crds_by_dir: dict[Path, list[dict[str, Any]]] = {}
            patches: list[tuple[Path, list[dict[str, Any]]]] = []
            for path in sorted(self.root.rglob("*")):
                if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
                    continue
                for item in _read_yaml_cached(path):
                    if "crd" in item:
                        crds_by_dir.setdefault(path.parent, []).append(item["crd"])
                    else:
                        patches.append((path.parent, item["patch"]))
            for folder, ops in patches:
                for crd in crds_by_dir.get(folder, []):
                    _apply_patch(crd, ops)
            for crds in crds_by_dir.values():
                for crd in crds:
                    for v in crd["versions"]:
                        if v["schema"]:
                            self.schemas[(crd["group"], v["name"], crd["plural"])] = v["schema"]
        except Exception as exc:  # noqa: BLE001 - reported, and validation is skipped
            self.error = f"{type(exc).__name__}: {exc}"
            log.exception("loading CRD schemas from %s failed", self.root)
        finally:
            self.ready.set()

    def schema_for(self, kind: Kind, version: str) -> CrdSchema | None:
        self.ready.wait()
        key = (kind.group, version, kind.plural)
        with self._lock:
            if key not in self._validators:
                raw = self.schemas.get(key)
                self._validators[key] = CrdSchema(raw) if raw else None  # type: ignore[assignment]
            return self._validators[key]


_CATALOGS: dict[Path, Catalog] = {}
_CATALOGS_LOCK = threading.Lock()


def catalog_for(crd_dir: str | Path | None) -> Catalog | None:
    """The (cached) catalog for ``crd_dir``; starts loading it in the background."""
    if not crd_dir:
        return None
    root = Path(crd_dir).resolve()
    if not root.is_dir():
        return None
    with _CATALOGS_LOCK:
        catalog = _CATALOGS.get(root)
        if catalog is None:
            catalog = _CATALOGS[root] = Catalog(root)
            threading.Thread(target=catalog.load, name="sandbox-crd-loader", daemon=True).start()
    return catalog


# Conversion to JSON Schema ----------------------------------------------------------------

_COPY = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
)


def convert(s: dict[str, Any], root: bool = False, junctor: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    nullable = bool(s.get("nullable"))
    preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
    if s.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}] + ([{"type": "null"}] if nullable else [])
    elif "type" in s:
        out["type"] = [s["type"], "null"] if nullable else s["type"]
    for key in _COPY:
        if key in s:
            out[key] = s[key]
    if "enum" in s:
        out["enum"] = list(s["enum"]) + ([None] if nullable and None not in s["enum"] else [])
    if s.get("required"):
        out["required"] = list(s["required"])
    props = dict(s.get("properties") or {})
    if s.get("x-kubernetes-embedded-resource"):
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props.setdefault("metadata", {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    if root:
        props["metadata"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if props:
        out["properties"] = {k: convert(v) for k, v in props.items()}
    if "items" in s and isinstance(s["items"], dict):
        out["items"] = convert(s["items"])
    additional = s.get("additionalProperties")
    if isinstance(additional, dict):
        out["additionalProperties"] = convert(additional)
    elif isinstance(additional, bool):
        out["additionalProperties"] = additional
    for key in ("allOf", "anyOf", "oneOf"):
        if key in s:
            branches = [convert(b, junctor=True) for b in s[key]]
            if key == "anyOf" and "anyOf" in out:
                out.setdefault("allOf", []).append({"anyOf": branches})
            else:
                out[key] = branches
    if "not" in s:
        out["not"] = convert(s["not"], junctor=True)
    is_object = s.get("type") == "object" or (props and "type" not in s)
    if is_object and not preserve and additional is None and not junctor:
        out["additionalProperties"] = False
    return out


def _apply_defaults(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = clone(sub["default"])
            if k in value:
                _apply_defaults(sub, value[k])
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for v in value.values():
                _apply_defaults(additional, v)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _apply_defaults(schema["items"], item)


def _field(path: deque | list) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _show(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= 80 else text[:77] + "..."


_TYPE_NAMES = {
    "dict": "object",
    "list": "array",
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "NoneType": "null",
}


class CrdSchema:
    def __init__(self, raw: dict[str, Any]):
        self.raw = raw
        self.validator = Draft4Validator(convert(raw, root=True))

    def default(self, obj: dict[str, Any]) -> None:
        props = self.raw.get("properties") or {}
        for key, value in obj.items():
            if key != "metadata" and key in props:
                _apply_defaults(props[key], value)

    def prune_unknown(self, obj: dict[str, Any]) -> list[str]:
        """Drop fields the schema does not declare (fieldValidation Warn/Ignore); returns their paths."""
        dropped = []
        for err in list(self.validator.iter_errors(obj)):
            if err.validator != "additionalProperties" or not isinstance(err.instance, dict):
                continue
            known = err.schema.get("properties") or {}
            for key in [k for k in err.instance if k not in known]:
                err.instance.pop(key, None)
                dropped.append(_field(list(err.absolute_path) + [key]))
        return sorted(dropped)

    def validate(self, obj: dict[str, Any]) -> list[dict[str, str]]:
        causes: list[dict[str, str]] = []
        for err in self.validator.iter_errors(obj):
            causes.extend(_causes(err))
        unique = {(c["field"], c["message"]): c for c in causes}
        return sorted(unique.values(), key=lambda c: (c["field"], c["message"]))


def _causes(err: Any) -> list[dict[str, str]]:
    field = _field(err.absolute_path)
    v, value = err.validator, err.instance
    if v == "additionalProperties" and isinstance(value, dict):
        known = err.schema.get("properties") or {}
        out = []
        for key in value:
            if key not in known:
                f = f"{field}.{key}" if field else key
                out.append(cause(f, f'unknown field "{f}"', "FieldValueInvalid"))
        return out
    if v == "required":
        m = re.search(r"'(.+?)' is a required property", err.message)
        missing = m.group(1) if m else "?"
        return [cause(f"{field}.{missing}" if field else missing, "Required value", "FieldValueRequired")]
    if v == "type":
        expected = err.validator_value
        expected = expected[0] if isinstance(expected, list) else expected
        return [
            cause(
                field,
                f'Invalid value: "{_TYPE_NAMES.get(type(value).__name__, "unknown")}": '
                f"{field} in body must be of type {expected}: {_show(value)}",
                "FieldValueTypeInvalid",
            )
        ]
    if v == "enum":
        supported = ", ".join(_show(x) for x in err.validator_value if x is not None)
        return [
            cause(field, f"Unsupported value: {_show(value)}: supported values: {supported}", "FieldValueNotSupported")
        ]
    if v in ("anyOf", "oneOf") and any(b.get("type") == "integer" for b in err.validator_value):
        return [
            cause(
                field,
                f"Invalid value: {_show(value)}: {field} in body must be of type integer or string",
                "FieldValueTypeInvalid",
            )
        ]
    messages = {
        "minimum": f"should be greater than or equal to {err.validator_value}",
        "maximum": f"should be less than or equal to {err.validator_value}",
        "minItems": f"should have at least {err.validator_value} items",
        "maxItems": f"should have at most {err.validator_value} items",
        "minLength": f"should be at least {err.validator_value} chars long",
        "maxLength": f"should be at most {err.validator_value} chars long",
        "pattern": f"should match '{err.validator_value}'",
    }
    detail = messages.get(v, err.message)
    shown = len(value) if v in ("minItems", "maxItems") and isinstance(value, list) else _show(value)
    return [cause(field, f"Invalid value: {shown}: {field} in body {detail}")]
