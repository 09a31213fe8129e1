"""Patch formats: JSON merge patch, JSON patch and an approximation of strategic merge.

Strategic merge is approximated: maps merge as in a merge patch; lists whose items
are all maps with a ``name`` (containers, env, volumes, ports) or a ``type``
(conditions) merge item by item on that key; every other list is replaced. That
covers what clients send in practice; exotic ``$patch``/``$retainKeys`` directives
are not supported (``$patch: delete`` on a keyed list item is).
"""

from __future__ import annotations

from typing import Any

from sandbox.errors import ApiError


def clone(value: Any) -> Any:
    """Deep copy of JSON-like data; much faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_key(items: list[Any]) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in ("name", "type"):
        if all(key in i for i in items):
            return key
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if isinstance(patch, list):
        key = _merge_key(patch)
        if key is None or not isinstance(target, list) or (target and _merge_key(target) != key):
            return clone(patch)
        merged = [clone(i) for i in target]
        index = {i[key]: n for n, i in enumerate(merged)}
        for item in patch:
            directive = item.get("$patch")
            if directive == "delete":
                if item[key] in index:
                    merged[index[item[key]]] = None
                continue
            item = {k: v for k, v in item.items() if k != "$patch"}
            if item[key] in index:
                n = index[item[key]]
                merged[n] = strategic_merge_patch(merged[n], item)
            else:
                index[item[key]] = len(merged)
                merged.append(clone(item))
        return [i for i in merged if i is not None]
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


# JSON patch (RFC 6902) -----------------------------------------------------------------


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str]) -> Any:
    node = doc
    for p in parts:
        if isinstance(node, dict):
            if p not in node:
                raise ApiError(422, f"doc is missing path: /{'/'.join(parts)}")
            node = node[p]
        elif isinstance(node, list):
            try:
                node = node[int(p)]
            except (ValueError, IndexError):
                raise ApiError(422, f"doc is missing path: /{'/'.join(parts)}") from None
        else:
            raise ApiError(422, f"doc is missing path: /{'/'.join(parts)}")
    return node


def _get(doc: Any, parts: list[str]) -> Any:
    return _container(doc, parts)


def _remove(doc: Any, parts: list[str]) -> Any:
    parent = _container(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise ApiError(422, f"unable to remove nonexistent key: {last}")
        return parent.pop(last)
    try:
        return parent.pop(int(last))
    except (ValueError, IndexError):
        raise ApiError(422, f"unable to remove index {last}") from None


def _add(doc: Any, parts: list[str], value: Any, replace: bool = False) -> Any:
    if not parts:
        return clone(value)
    parent = _container(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, f"replace operation does not apply: doc is missing key: /{'/'.join(parts)}")
        parent[last] = clone(value)
    elif isinstance(parent, list):
        if last == "-":
            parent.append(clone(value))
        else:
            try:
                idx = int(last)
            except ValueError:
                raise ApiError(422, f"invalid array index {last!r}") from None
            if replace:
                if idx >= len(parent):
                    raise ApiError(422, f"replace operation does not apply: index {idx} out of range")
                parent[idx] = clone(value)
            elif idx > len(parent):
                raise ApiError(422, f"add operation does not apply: index {idx} out of range")
            else:
                parent.insert(idx, clone(value))
    else:
        raise ApiError(422, f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "json patch must be a list of operations")
    doc = clone(doc)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise ApiError(400, f"invalid json patch operation: {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, op.get("value"))
        elif kind == "replace":
            doc = _add(doc, parts, op.get("value"), replace=True)
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise ApiError(422, f"testing value {op['path']} failed")
        elif kind == "move":
            value = _remove(doc, _pointer(op["from"]))
            doc = _add(doc, parts, value)
        elif kind == "copy":
            doc = _add(doc, parts, _get(doc, _pointer(op["from"])))
        else:
            raise ApiError(400, f"unknown json patch operation {kind!r}")
    return doc
