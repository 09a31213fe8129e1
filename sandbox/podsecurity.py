"""Pod Security admission: the ``baseline`` and ``restricted`` levels, per namespace.

A namespace labelled ``pod-security.kubernetes.io/enforce: baseline|restricted`` gets
its pods checked at creation, and a violating pod is rejected with 403 and a message
worded like the real admission plugin's (``violates PodSecurity "restricted:latest":
...``). This matters because the portal's team namespaces enforce ``restricted``: a
manifest that would fail on a real cluster must fail in the sandbox too. The
``warn``/``audit`` labels and version pinning are ignored (every check is "latest").
"""

from __future__ import annotations

from typing import Any

from sandbox import errors
from sandbox.kinds import Kind
from sandbox.store import Store

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
_BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
_RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (spec.get("initContainers") or []) + (spec.get("containers") or []) if isinstance(c, dict)]


def _names(names: list[str]) -> str:
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"container {quoted}" if len(names) == 1 else f"containers {quoted}"


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    out = []
    hosts = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
    if hosts:
        out.append(f"host namespaces ({', '.join(hosts)})")
    containers = _containers(spec)
    privileged = [c.get("name", "") for c in containers if (c.get("securityContext") or {}).get("privileged")]
    if privileged:
        out.append(f"privileged ({_names(privileged)} must not set securityContext.privileged=true)")
    for c in containers:
        added = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        extra = sorted(set(added) - _BASELINE_CAPABILITIES)
        if extra:
            caps = ", ".join(f'"{a}"' for a in extra)
            out.append(
                f'non-default capabilities (container "{c.get("name")}" must not include {caps} in '
                "securityContext.capabilities.add)"
            )
    host_path = [v.get("name", "") for v in spec.get("volumes") or [] if isinstance(v, dict) and "hostPath" in v]
    if host_path:
        out.append(f"hostPath volumes ({', '.join(f'volume {chr(34)}{n}{chr(34)}' for n in host_path)})")
    for c in containers:
        ports = [str(p.get("hostPort")) for p in c.get("ports") or [] if isinstance(p, dict) and p.get("hostPort")]
        if ports:
            out.append(f'hostPort (container "{c.get("name")}" uses hostPort {", ".join(ports)})')
    if ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append('seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")')
    return out


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    out = baseline_violations(spec)
    pod_sc = spec.get("securityContext") or {}
    containers = _containers(spec)
    bad_volumes = [
        (v.get("name", ""), next((k for k in v if k != "name"), "?"))
        for v in spec.get("volumes") or []
        if isinstance(v, dict) and not (set(v) - {"name"}) <= _RESTRICTED_VOLUMES
    ]
    if bad_volumes:
        listed = ", ".join(f'volume "{n}" uses restricted volume type "{t}"' for n, t in bad_volumes)
        out.append(f"restricted volume types ({listed})")
    escalating = [
        c.get("name", "")
        for c in containers
        if (c.get("securityContext") or {}).get("allowPrivilegeEscalation") is not False
    ]
    if escalating:
        out.append(
            f"allowPrivilegeEscalation != false ({_names(escalating)} must set "
            "securityContext.allowPrivilegeEscalation=false)"
        )
    unrestricted = []
    for c in containers:
        caps = (c.get("securityContext") or {}).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []) or set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            unrestricted.append(c.get("name", ""))
    if unrestricted:
        out.append(
            f'unrestricted capabilities ({_names(unrestricted)} must set securityContext.capabilities.drop=["ALL"])'
        )
    explicit_false = [
        c.get("name", "") for c in containers if (c.get("securityContext") or {}).get("runAsNonRoot") is False
    ]
    unset = [c.get("name", "") for c in containers if (c.get("securityContext") or {}).get("runAsNonRoot") is None]
    if explicit_false or (pod_sc.get("runAsNonRoot") is not True and unset):
        names = explicit_false or unset
        out.append(f"runAsNonRoot != true (pod or {_names(names)} must set securityContext.runAsNonRoot=true)")
    root = [c.get("name", "") for c in containers if (c.get("securityContext") or {}).get("runAsUser") == 0]
    if pod_sc.get("runAsUser") == 0 or root:
        who = "pod" if pod_sc.get("runAsUser") == 0 else _names(root)
        out.append(f"runAsUser=0 ({who} must not set runAsUser=0)")
    ok_types = ("RuntimeDefault", "Localhost")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")

    def seccomp_ok(container: dict[str, Any]) -> bool:
        own = (container.get("securityContext") or {}).get("seccompProfile")
        return (own or {}).get("type") in ok_types if own else pod_seccomp in ok_types

    missing = [c.get("name", "") for c in containers if not seccomp_ok(c)]
    if missing:
        out.append(
            f"seccompProfile (pod or {_names(missing)} must set securityContext.seccompProfile.type to "
            '"RuntimeDefault" or "Localhost")'
        )
    return out


def admit(store: Store, pod: dict[str, Any], kind: Kind) -> None:
    namespace = store.get("/namespaces", "", pod["metadata"].get("namespace", ""))
    level = ((namespace or {}).get("metadata", {}).get("labels") or {}).get(ENFORCE_LABEL, "privileged")
    if level not in ("baseline", "restricted"):
        return
    spec = pod.get("spec") or {}
    violations = restricted_violations(spec) if level == "restricted" else baseline_violations(spec)
    if violations:
        raise errors.forbidden(
            kind, pod["metadata"].get("name", ""), f'violates PodSecurity "{level}:latest": ' + ", ".join(violations)
        )
