"""What a container's environment variables resolve to in a pod the sandbox created.

Written for the tests on their own (not ``sandbox.podenv``), so that a wrong resolver in
the sandbox cannot hide a wrong manifest: literal values, ``$(VAR)`` references to earlier
variables, and the downward-API ``fieldRef``s the builders use (labels, annotations, name,
namespace). A fieldRef to a missing label or annotation resolves to "" as in the kubelet.
"""

from __future__ import annotations

import re
from typing import Any

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _field(pod: dict[str, Any], path: str) -> str:
    meta = pod["metadata"]
    match = _SUBSCRIPT.match(path)
    if match:
        return (meta.get(match.group(1)) or {}).get(match.group(2), "")
    if path in ("metadata.name", "metadata.namespace"):
        return meta[path.split(".")[1]]
    raise AssertionError(f"the test resolver does not know fieldPath {path!r}")


def container_env(pod: dict[str, Any], container: str | None = None) -> dict[str, str]:
    """The env of ``container`` (default: the first) of ``pod`` as the process sees it."""
    containers = pod["spec"]["containers"]
    c = containers[0] if container is None else next(c for c in containers if c["name"] == container)
    env: dict[str, str] = {}
    for var in c.get("env") or []:
        if "valueFrom" in var:
            env[var["name"]] = _field(pod, var["valueFrom"]["fieldRef"]["fieldPath"])
        else:
            env[var["name"]] = _REF.sub(lambda m: env.get(m.group(1), m.group(0)), var.get("value", ""))
    return env


def fqdn(pod: dict[str, Any]) -> str:
    """``<hostname>.<subdomain>``: the name other pods of the job resolve through its headless Service."""
    return f"{pod['spec']['hostname']}.{pod['spec']['subdomain']}"
