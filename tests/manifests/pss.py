"""The Kubernetes *restricted* Pod Security Standard (policy version "latest"), as a checker.

Each rule of the baseline and restricted profiles that a pod spec can break is a
function here; ``restricted_violations`` lists what a pod breaks, ``assert_restricted``
fails with that list. Rules are written from the published standard, so the checker
stays independent of the builders it checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

# Volume sources the restricted profile allows.
ALLOWED_VOLUME_SOURCES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
# Baseline: sysctls known to be namespaced and isolated.
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
ALLOWED_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
ALLOWED_SECCOMP = frozenset({"RuntimeDefault", "Localhost"})
ALLOWED_APPARMOR = frozenset({"RuntimeDefault", "Localhost"})


def _containers(pod: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod.get(field) or []:
            yield f"{field}[{c.get('name', '?')}]", c


def restricted_violations(pod: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> list[str]:
    problems: list[str] = []
    psc = pod.get("securityContext") or {}
    containers = list(_containers(pod))
    if not pod.get("containers"):
        problems.append("the pod has no containers")

    # Baseline: host namespaces, host processes, host paths, host ports.
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            problems.append(f"{flag} must not be true")
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        problems.append("securityContext.windowsOptions.hostProcess must not be true")
    for volume in pod.get("volumes") or []:
        sources = set(volume) - {"name"}
        if "hostPath" in sources:
            problems.append(f"volume {volume.get('name')}: hostPath volumes are forbidden")
        elif not sources <= ALLOWED_VOLUME_SOURCES:
            problems.append(f"volume {volume.get('name')}: type {sorted(sources)} is not allowed")
        elif not sources:
            problems.append(f"volume {volume.get('name')}: no volume source")

    # Baseline: sysctls, SELinux, AppArmor, seccomp not unconfined.
    for sysctl in psc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            problems.append(f"sysctl {sysctl.get('name')} is not in the safe set")
    problems += _selinux("securityContext", psc)
    problems += _apparmor("securityContext", psc)
    for key, value in (annotations or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            problems.append(f"annotation {key}={value} sets an AppArmor profile other than default or localhost")

    # Restricted: run as non-root, with a non-zero uid.
    pod_non_root = psc.get("runAsNonRoot") is True
    if psc.get("runAsUser") == 0:
        problems.append("securityContext.runAsUser must not be 0")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in ALLOWED_SECCOMP:
        problems.append(f"securityContext.seccompProfile.type {pod_seccomp} is not allowed")

    for where, c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            problems.append(f"{where}: privileged must not be true")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            problems.append(f"{where}: hostProcess must not be true")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                problems.append(f"{where}: hostPort {port['hostPort']} is forbidden")
        if sc.get("procMount", "Default") != "Default":
            problems.append(f"{where}: procMount must be Default")
        problems += _selinux(f"{where}.securityContext", sc)
        problems += _apparmor(f"{where}.securityContext", sc)
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{where}: allowPrivilegeEscalation must be false")
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            problems.append(f"{where}: runAsNonRoot must be true (on the container or the pod)")
        if sc.get("runAsUser") == 0:
            problems.append(f"{where}: runAsUser must not be 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp is None and pod_seccomp is None:
            problems.append(
                f"{where}: seccompProfile must be RuntimeDefault or Localhost (on the container or the pod)"
            )
        elif seccomp is not None and seccomp not in ALLOWED_SECCOMP:
            problems.append(f"{where}: seccompProfile.type {seccomp} is not allowed")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"{where}: capabilities must drop ALL")
        added = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            problems.append(f"{where}: capabilities may add only NET_BIND_SERVICE, not {sorted(added)}")
    return problems


def _selinux(where: str, sc: Mapping[str, Any]) -> list[str]:
    options = sc.get("seLinuxOptions") or {}
    problems = []
    if options.get("type", "") not in ALLOWED_SELINUX_TYPES:
        problems.append(f"{where}.seLinuxOptions.type {options['type']} is not allowed")
    for field in ("user", "role"):
        if options.get(field):
            problems.append(f"{where}.seLinuxOptions.{field} must not be set")
    return problems


def _apparmor(where: str, sc: Mapping[str, Any]) -> list[str]:
    profile = (sc.get("appArmorProfile") or {}).get("type")
    if profile is not None and profile not in ALLOWED_APPARMOR:
        return [f"{where}.appArmorProfile.type {profile} is not allowed"]
    return []


def assert_restricted(pod: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> None:
    problems = restricted_violations(pod, annotations)
    if problems:
        raise AssertionError("pod breaks the restricted Pod Security Standard:\n  " + "\n  ".join(problems))
