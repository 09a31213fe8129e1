"""Objects in memory, the resourceVersion counter, and the event log watches read.

Objects are plain dicts indexed by (kind key, namespace, name). A stored dict is
never mutated: every write stores a new dict, so readers may serialize a reference
they took under the lock after releasing it. One re-entrant lock guards all writes;
the controller loop holds it for a whole pass, which keeps controllers simple and
race-free at the cost of briefly delaying API writes (a pass takes milliseconds).

The event log keeps the last ``window`` changes. A watch from a resourceVersion
older than the log's start gets "410 Gone" like a real server after etcd compaction;
``compact()`` drops the log on demand so tests can provoke that.
"""

from __future__ import annotations

import json
import os
import threading
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Any, NamedTuple

from sandbox.kinds import Registry

STATE_VERSION = 1


class Change(NamedTuple):
    rv: int
    key: str
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


class Store:
    def __init__(self, registry: Registry, window: int = 20000):
        self.registry = registry
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = 0
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k.key: {} for k in registry.kinds}
        self.by_uid: dict[str, tuple[str, str, str]] = {}
        self._sorted: dict[str, list[tuple[str, str]]] = {}  # kind key -> sorted (namespace, name); rebuilt lazily
        self.window = window
        self._log: list[Change] = []
        self._log_rvs: list[int] = []
        self.compacted_rv = 0
        self.internal: dict[str, Any] = {}  # controllers' memory (device assignments, revisions, ...)
        self.watch_epoch = 0  # bumped to cut every open watch
        self.closed = False

    # reads ------------------------------------------------------------------------------

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects[key].get((namespace, name))

    def items(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        objs = self.objects[key]
        if namespace is None:
            return list(objs.values())
        return [o for (ns, _), o in objs.items() if ns == namespace]

    def sorted_keys(self, key: str) -> list[tuple[str, str]]:
        keys = self._sorted.get(key)
        if keys is None:
            keys = self._sorted[key] = sorted(self.objects[key])
        return keys

    def sorted_items(
        self, key: str, namespace: str | None = None, after: tuple[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Objects in (namespace, name) order, optionally only those after ``after``."""
        objs = self.objects[key]
        keys = self.sorted_keys(key)
        if namespace is not None:
            # (ns, "") sorts before every name in ns; (ns + "\0", "") after all of them
            keys = keys[bisect_left(keys, (namespace, "")) : bisect_left(keys, (namespace + "\0", ""))]
        if after is not None:
            keys = keys[bisect_right(keys, after) :]
        return [objs[k] for k in keys]

    def by_uid_get(self, uid: str) -> dict[str, Any] | None:
        where = self.by_uid.get(uid)
        return self.objects[where[0]].get((where[1], where[2])) if where else None

    # writes (caller holds the lock) -----------------------------------------------------------

    def commit(self, key: str, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """Store ``obj`` (a fresh dict the caller no longer touches) with a new resourceVersion."""
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        if old is None:
            self._sorted.pop(key, None)
        self.objects[key][(ns, meta["name"])] = obj
        self.by_uid[meta["uid"]] = (key, ns, meta["name"])
        self._record(Change(self.rv, key, "MODIFIED" if old else "ADDED", obj, old))
        return obj

    def remove(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        ns = meta.get("namespace", "")
        self.objects[key].pop((ns, meta["name"]), None)
        self._sorted.pop(key, None)
        self.by_uid.pop(meta.get("uid", ""), None)
        self.rv += 1
        gone = {**obj, "metadata": {**meta, "resourceVersion": str(self.rv)}}
        self._record(Change(self.rv, key, "DELETED", gone, obj))
        return gone

    def _record(self, change: Change) -> None:
        self._log.append(change)
        self._log_rvs.append(change.rv)
        if len(self._log) > 2 * self.window:
            cut = len(self._log) - self.window
            self.compacted_rv = self._log_rvs[cut - 1]
            del self._log[:cut]
            del self._log_rvs[:cut]
        self.changed.notify_all()

    # watches ----------------------------------------------------------------------------------

    def changes_after(self, rv: int) -> list[Change] | None:
        """Changes newer than ``rv``, or None when ``rv`` is older than the retained log."""
        if rv < self.compacted_rv:
            return None
        return self._log[bisect_right(self._log_rvs, rv) :]

    def compact(self) -> None:
        with self.lock:
            self._log.clear()
            self._log_rvs.clear()
            self.compacted_rv = self.rv

    def cut_watches(self) -> None:
        with self.lock:
            self.watch_epoch += 1
            self.changed.notify_all()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.changed.notify_all()

    # persistence ------------------------------------------------------------------------------

    def save(self, path: Path, extra: dict[str, Any]) -> None:
        """Write the state atomically (temp file + rename)."""
        with self.lock:
            objects = {key: list(objs.values()) for key, objs in self.objects.items() if objs}
            internal = json.dumps(self.internal)
            rv = self.rv
        state = {"version": STATE_VERSION, "rv": rv, "objects": objects, **extra}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "w") as f:
            text = json.dumps(state, separators=(",", ":"))
            f.write(text[:-1] + ',"internal":' + internal + "}")
        os.replace(tmp, path)

    def load(self, path: Path) -> dict[str, Any]:
        state = json.loads(path.read_text())
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"{path}: state version {state.get('version')} is not {STATE_VERSION}")
        with self.lock:
            self.rv = int(state["rv"])
            for key, objs in state.get("objects", {}).items():
                if key not in self.objects:
                    continue  # a kind this build no longer serves
                self._sorted.pop(key, None)
                for obj in objs:
                    meta = obj["metadata"]
                    self.objects[key][(meta.get("namespace", ""), meta["name"])] = obj
                    self.by_uid[meta["uid"]] = (key, meta.get("namespace", ""), meta["name"])
            self.internal = state.get("internal") or {}
            self.compacted_rv = self.rv  # the event log did not survive the restart
        return state
