"""Server-side apply and ``metadata.managedFields``, approximated.

The real API server tracks ownership per field with structured-merge-diff. This is a
deliberately smaller model that keeps the behaviour clients depend on:

- a field set is the set of leaf paths of an object (maps are walked, lists and
  scalars are leaves, i.e. every list is "atomic"); in metadata only labels,
  annotations, ownerReferences and finalizers are tracked;
- each manager has one entry per (operation, subresource) with the paths it owns,
  stored as ``fieldsV1`` (``{"f:spec": {"f:replicas": {}}}``) in managedFields;
- apply: a path another manager owns with a different value is a conflict (409 unless
  ``force``); paths this manager applied before but no longer applies are removed
  unless someone else owns them; the configuration is merged into the live object;
- update/patch/create: the writer takes ownership of every path whose value changed,
  and other managers lose those paths (no conflicts, as in Kubernetes).

Trade-off accepted: treating lists as atomic means two managers that apply different
containers of the same pod conflict, where the real server would merge by name.
"""

from __future__ import annotations

from typing import Any

from sandbox.errors import ApiError
from sandbox.patches import clone

Path = tuple[str, ...]
TRACKED_METADATA = ("labels", "annotations", "ownerReferences", "finalizers")
_MISSING = object()


def field_paths(obj: dict[str, Any], scope: str) -> set[Path]:
    """Leaf paths of ``obj``. ``scope``: "main" (no status), "status" (status only) or "all"."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            if scope == "status" or not isinstance(value, dict):
                continue
            for mk in TRACKED_METADATA:
                if mk not in value:
                    continue
                if mk in ("labels", "annotations") and isinstance(value[mk], dict) and value[mk]:
                    out.update(("metadata", mk, lk) for lk in value[mk])
                else:
                    out.add(("metadata", mk))
            continue
        if (key == "status") != (scope == "status") and scope != "all":
            continue
        _walk(value, (key,), out)
    return out


def _walk(value: Any, prefix: Path, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _walk(v, prefix + (k,), out)
    else:
        out.add(prefix)


def get_path(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def has_path(obj: Any, path: Path) -> bool:
    return get_path(obj, path) is not _MISSING


def delete_path(obj: dict[str, Any], path: Path) -> None:
    """Remove ``path`` in place and prune maps it leaves empty (below the top level)."""
    chain = [obj]
    node: Any = obj
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
        chain.append(node)
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for depth in range(len(path) - 1, 1, -1):
        parent, child_key = chain[depth - 1], path[depth - 1]
        if isinstance(parent.get(child_key), dict) and not parent[child_key]:
            del parent[child_key]
        else:
            break


def display(path: Path) -> str:
    return "." + ".".join(path)


# fieldsV1 ------------------------------------------------------------------------------


def encode_fields(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault("f:" + part, {})
    return root


def decode_fields(fields: dict[str, Any] | None) -> set[Path]:
    out: set[Path] = set()

    def walk(node: dict[str, Any], prefix: Path) -> None:
        children = [k for k in node if k.startswith("f:")]
        if not children or any(not k.startswith(("f:", ".")) for k in node):
            # a leaf, or a list tracked by key/value (k:/v:/i:) which we treat as atomic
            if prefix:
                out.add(prefix)
            if not children:
                return
        for k in children:
            walk(node[k] if isinstance(node[k], dict) else {}, prefix + (k[2:],))

    if isinstance(fields, dict):
        walk(fields, ())
    return out


class Entry:
    __slots__ = ("manager", "operation", "api_version", "time", "subresource", "paths", "_prefixes")

    def __init__(self, manager: str, operation: str, api_version: str, time: str, subresource: str, paths: set[Path]):
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.time = time
        self.subresource = subresource
        self.paths = paths
        self._prefixes: set[Path] | None = None

    @property
    def prefixes(self) -> set[Path]:
        if self._prefixes is None:
            self._prefixes = {p[:i] for p in self.paths for i in range(1, len(p) + 1)}
        return self._prefixes

    def overlaps(self, path: Path) -> bool:
        """Does this entry own ``path``, a parent of it, or something below it?"""
        if path in self.prefixes:
            return True
        return any(path[:i] in self.paths for i in range(1, len(path)))

    def discard(self, doomed: set[Path]) -> None:
        if doomed:
            self.paths = self.paths - doomed
            self._prefixes = None

    def render(self) -> dict[str, Any]:
        out = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(self.paths),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def parse_entries(obj: dict[str, Any]) -> list[Entry]:
    entries = []
    for raw in obj.get("metadata", {}).get("managedFields") or []:
        if not isinstance(raw, dict) or not raw.get("manager"):
            continue
        entries.append(
            Entry(
                raw["manager"],
                raw.get("operation", "Update"),
                raw.get("apiVersion", ""),
                raw.get("time", ""),
                raw.get("subresource", ""),
                decode_fields(raw.get("fieldsV1")),
            )
        )
    return entries


def render_entries(entries: list[Entry]) -> list[dict[str, Any]]:
    return [e.render() for e in entries if e.paths]


def _find(entries: list[Entry], manager: str, operation: str, subresource: str) -> Entry | None:
    for e in entries:
        if e.manager == manager and e.operation == operation and e.subresource == subresource:
            return e
    return None


def record_write(
    entries: list[Entry],
    old: dict[str, Any] | None,
    new: dict[str, Any],
    manager: str,
    scope: str,
    api_version: str,
    now: str,
    subresource: str = "",
) -> list[Entry]:
    """Ownership after a create/update/patch by ``manager``: it takes every changed path."""
    new_paths = field_paths(new, scope)
    changed = new_paths if old is None else {p for p in new_paths if get_path(old, p) != get_path(new, p)}
    if not changed and old is not None:
        # nothing this writer changed; still drop ownership of fields that vanished
        for e in entries:
            e.discard({q for q in e.paths if _in_scope(q, scope) and not has_path(new, q)})
        return [e for e in entries if e.paths]
    changed = _Touch(changed)
    mine = _find(entries, manager, "Update", subresource)
    if mine is None:
        mine = Entry(manager, "Update", api_version, now, subresource, set())
        entries = entries + [mine]
    for e in entries:
        if e is mine:
            continue
        e.discard({q for q in e.paths if _in_scope(q, scope) and (not has_path(new, q) or changed.touches(q))})
    mine.paths = {p for p in (mine.paths | changed.paths) if has_path(new, p)}
    mine._prefixes = None
    mine.time, mine.api_version = now, api_version
    return [e for e in entries if e.paths]


class _Touch:
    """A set of paths that can say whether another path equals, contains or lies in one."""

    def __init__(self, paths: set[Path]):
        self.paths = paths
        self.prefixes = {p[:i] for p in paths for i in range(1, len(p) + 1)}

    def touches(self, q: Path) -> bool:
        return q in self.prefixes or any(q[:i] in self.paths for i in range(1, len(q)))


def _in_scope(path: Path, scope: str) -> bool:
    if scope == "all":
        return True
    return (path[0] == "status") == (scope == "status")


def _merge(live: Any, config: Any) -> Any:
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for k, v in config.items():
            out[k] = _merge(live.get(k), v)
        return out
    return clone(config)


def apply(
    live: dict[str, Any],
    config: dict[str, Any],
    manager: str,
    force: bool,
    scope: str,
    api_version: str,
    now: str,
    subresource: str = "",
) -> tuple[dict[str, Any], list[Entry]]:
    """Apply ``config`` as ``manager`` to ``live``; returns the new object and its entries.

    1. Compute the configuration's field set.
    2. Find conflicts: paths owned by another manager whose live value differs.
       Without ``force`` that is a 409; with it, the others lose those paths.
    3. Remove paths this manager applied last time but not now, unless co-owned.
    4. Merge the configuration into the live object.
    5. Replace this manager's Apply entry with the new field set.
    """
    entries = parse_entries(live)
    cfg_paths = field_paths(config, scope)
    others = [e for e in entries if e.manager != manager]
    conflicts: list[tuple[str, str, Path]] = []
    for e in others:
        if not any(_in_scope(q, scope) for q in e.paths):
            continue
        for p in sorted(cfg_paths):
            if e.overlaps(p) and get_path(live, p) != get_path(config, p):
                conflicts.append((e.manager, e.api_version, p))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    if conflicts:
        doomed = _Touch({p for _, _, p in conflicts})
        for e in others:
            e.discard({q for q in e.paths if doomed.touches(q)})

    mine = _find(entries, manager, "Apply", subresource)
    result = clone(live)
    if mine is not None:
        cfg_prefixes = {p[:i] for p in cfg_paths for i in range(1, len(p) + 1)}
        for r in sorted(mine.paths - cfg_paths, key=len, reverse=True):
            if r in cfg_prefixes or any(r[:i] in cfg_paths for i in range(1, len(r))):
                continue
            if any(e.overlaps(r) for e in entries if e is not mine):
                continue
            delete_path(result, r)

    for key, value in config.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            if scope == "status":
                continue
            meta = dict(result.get("metadata") or {})
            for mk in TRACKED_METADATA:
                if mk in value:
                    meta[mk] = _merge(meta.get(mk), value[mk])
            result["metadata"] = meta
            continue
        if (key == "status") != (scope == "status") and scope != "all":
            continue
        result[key] = _merge(result.get(key), value)

    if mine is None:
        mine = Entry(manager, "Apply", api_version, now, subresource, set())
        entries.append(mine)
    mine.paths = cfg_paths
    mine._prefixes = None
    mine.time, mine.api_version = now, api_version
    for e in entries:
        if e is not mine:
            e.discard({q for q in e.paths if _in_scope(q, scope) and not has_path(result, q)})
    return result, [e for e in entries if e.paths]


def _conflict_error(conflicts: list[tuple[str, str, Path]]) -> ApiError:
    n = len(conflicts)
    causes = [
        {"reason": "FieldManagerConflict", "message": f'conflict with "{m}" using {v}', "field": display(p)}
        for m, v, p in conflicts
    ]
    if n == 1:
        m, v, p = conflicts[0]
        message = f'Apply failed with 1 conflict: conflict with "{m}" using {v}: {display(p)}'
    else:
        by_manager: dict[tuple[str, str], list[str]] = {}
        for m, v, p in conflicts:
            by_manager.setdefault((m, v), []).append(display(p))
        lines = []
        for (m, v), fields in by_manager.items():
            word = "conflicts" if len(fields) > 1 else "conflict"
            lines.append(f'{word} with "{m}" using {v}:\n' + "\n".join(f"- {f}" for f in fields))
        message = f"Apply failed with {n} conflicts: " + "\n".join(lines)
    return ApiError(409, message, "Conflict", details={"causes": causes})
