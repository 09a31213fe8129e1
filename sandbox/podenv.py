"""What a pod's containers see in their environment, and whether a distributed run can start.

``resolve_env`` resolves a container's ``env`` as the kubelet does when the container
starts: literal values with ``$(VAR)`` references to variables defined earlier in the list
(``$$`` escapes), and ``fieldRef``s to the pod's metadata, spec and status. ConfigMap and
Secret references are resolved from the store when a lookup is given.

``launch_problem`` is what a real run would trip over in its first seconds, checked on the
pods of one training job when they all run:

* torch (a container carries any of torchrun's ``PET_*`` variables): every node needs
  PET_NNODES (= the number of nodes), PET_NPROC_PER_NODE, PET_NODE_RANK (the ranks
  0..n-1, each once), PET_MASTER_ADDR (the host name of rank 0) and PET_MASTER_PORT, the
  same on every node. Without them torchrun starts n single-node runs, or waits for a
  rendezvous that never completes.
* MPI (a container has ``MPI_HOST``, the launcher): every host in MPI_HOST is a worker,
  mpirun's ssh arguments (``OMPI_MCA_plm_rsh_args``) name the port the workers' sshd
  listens on (the port their containers declare, as Volcano's mpi plugin ``--port`` does;
  22 when none is declared), and, where Volcano's ssh plugin mounted the keys, the key
  (``-i``) and config (``-F``) it mounted (ssh looks only in ``~/.ssh`` by itself).

Returns "" when the run can start, else one sentence naming the pod and the variable.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

TORCH_VARS = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
SSH_ARGS_VARS = ("OMPI_MCA_plm_rsh_args", "PRTE_MCA_plm_ssh_args")
DEFAULT_SSH_PORT = 22

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")

Lookup = Callable[[str, str, str], "dict[str, Any] | None"]  # (resource key, namespace, name) -> object


def field_value(pod: dict[str, Any], path: str) -> str | None:
    """The value of a downward-API fieldRef, or None for a path the kubelet would refuse."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    if path not in simple:
        return None
    return str(simple[path] or "")


def _expand(value: str, seen: dict[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return seen[name] if name in seen else match.group(0)  # unknown references stay as written

    return _REF.sub(sub, value)


def resolve_env(pod: dict[str, Any], container: dict[str, Any], lookup: Lookup | None = None) -> dict[str, str]:
    """The container's environment as the process sees it (variables that fail to resolve are absent)."""
    seen: dict[str, str] = {}
    ns = (pod.get("metadata") or {}).get("namespace", "")
    for entry in container.get("env") or []:
        name = entry.get("name")
        if not name:
            continue
        if "valueFrom" not in entry:
            seen[name] = _expand(str(entry.get("value") or ""), seen)
            continue
        source = entry["valueFrom"] or {}
        value: str | None = None
        if "fieldRef" in source:
            value = field_value(pod, (source["fieldRef"] or {}).get("fieldPath", ""))
        elif lookup is not None and ("configMapKeyRef" in source or "secretKeyRef" in source):
            ref = source.get("configMapKeyRef") or source.get("secretKeyRef") or {}
            key = "/configmaps" if "configMapKeyRef" in source else "/secrets"
            obj = lookup(key, ns, ref.get("name", "")) or {}
            value = (obj.get("data") or {}).get(ref.get("key", ""))
        if value is not None:
            seen[name] = value
    return seen


def _host_names(pod: dict[str, Any]) -> set[str]:
    """Names under which other pods of the job reach this one (headless Service DNS)."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    hostname, subdomain, ns = spec.get("hostname"), spec.get("subdomain"), meta.get("namespace", "")
    names = {(pod.get("status") or {}).get("podIP") or ""} - {""}
    if hostname and subdomain:
        fqdn = f"{hostname}.{subdomain}"
        names |= {fqdn, f"{fqdn}.{ns}", f"{fqdn}.{ns}.svc", f"{fqdn}.{ns}.svc.cluster.local"}
    return names


def _pod_name(pod: dict[str, Any]) -> str:
    return (pod.get("metadata") or {}).get("name", "?")


def _runs_torch(container: dict[str, Any]) -> bool:
    # Only the PET_* variables mark a torch node: a custom program may call torchrun on
    # one node per pod on purpose, which is legal (and not distributed).
    return any(str(e.get("name", "")).startswith("PET_") for e in container.get("env") or [])


def torch_problem(pods: list[dict[str, Any]], lookup: Lookup | None = None) -> str:
    """Why torchrun on these pods (all nodes of one run) would not form one job; "" if it would."""
    nodes = []
    for pod in pods:
        container = next((c for c in (pod.get("spec") or {}).get("containers") or [] if _runs_torch(c)), None)
        if container is not None:
            nodes.append((pod, resolve_env(pod, container, lookup)))
    if not nodes:
        return ""
    n = len(nodes)
    for pod, env in nodes:
        missing = [v for v in TORCH_VARS if not env.get(v)]
        if missing:
            return f"pod {_pod_name(pod)} has no {', '.join(missing)}: torchrun would run it as a job of its own"
    for var in ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_MASTER_ADDR", "PET_MASTER_PORT"):
        values = {env[var] for _, env in nodes}
        if len(values) > 1:
            return f"the nodes disagree on {var} ({', '.join(sorted(values))})"
    env0 = nodes[0][1]
    if env0["PET_NNODES"] != str(n):
        return f"PET_NNODES is {env0['PET_NNODES']} but the run has {n} nodes"
    proc = env0["PET_NPROC_PER_NODE"]
    if proc not in ("auto", "cpu", "gpu") and not (proc.isdigit() and int(proc) >= 1):
        return f"PET_NPROC_PER_NODE is {proc!r}, not a positive number, auto, cpu or gpu"
    port = env0["PET_MASTER_PORT"]
    if not (port.isdigit() and 0 < int(port) < 65536):
        return f"PET_MASTER_PORT is {port!r}, not a port number"
    ranks = [env["PET_NODE_RANK"] for _, env in nodes]
    if not all(r.isdigit() for r in ranks) or sorted(int(r) for r in ranks) != list(range(n)):
        return f"the node ranks are {', '.join(sorted(ranks))}, not 0 to {n - 1} once each"
    master = next(pod for pod, env in nodes if int(env["PET_NODE_RANK"]) == 0)
    if env0["PET_MASTER_ADDR"] not in _host_names(master):
        return f"PET_MASTER_ADDR {env0['PET_MASTER_ADDR']} is not the host name of rank 0 ({_pod_name(master)})"
    return ""


def _ssh_options(args: str) -> dict[str, str]:
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    options: dict[str, str] = {}
    for i, word in enumerate(words):
        if word in ("-p", "-i", "-F") and i + 1 < len(words):
            options[word] = words[i + 1]
        elif word.startswith("-o") and "Port=" in word:
            options.setdefault("-p", word.split("Port=", 1)[1])
    return options


def _declared_ports(pod: dict[str, Any]) -> set[int]:
    return {
        int(p["containerPort"])
        for c in (pod.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("containerPort")
    }


def _mounted_key_dir(pod: dict[str, Any]) -> str:
    """Where Volcano's ssh plugin mounted the job's key pair and config (a Secret volume with
    ``.ssh/id_rsa`` mounted with subPath ``.ssh``), or "" when nothing was mounted."""
    spec = pod.get("spec") or {}
    secrets = {
        v.get("name"): v["secret"]
        for v in spec.get("volumes") or []
        if v.get("secret") and any(i.get("path") == ".ssh/id_rsa" for i in v["secret"].get("items") or [])
    }
    for c in spec.get("containers") or []:
        for m in c.get("volumeMounts") or []:
            if m.get("name") in secrets and m.get("subPath") == ".ssh":
                return str(m.get("mountPath", ""))
    return ""


def mpi_problem(pods: list[dict[str, Any]], lookup: Lookup | None = None) -> str:
    """Why mpirun in the launcher (the pod with MPI_HOST) could not reach the workers; "" if it could."""
    launchers = []
    for pod in pods:
        for c in (pod.get("spec") or {}).get("containers") or []:
            env = resolve_env(pod, c, lookup)
            if "MPI_HOST" in env:
                launchers.append((pod, env))
    if not launchers:
        return ""
    by_host: dict[str, dict[str, Any]] = {}
    for pod in pods:
        for name in _host_names(pod):
            by_host[name] = pod
    for launcher, env in launchers:
        workers = []
        for host in [h for h in env["MPI_HOST"].split(",") if h]:
            if host not in by_host:
                return f"MPI_HOST of {_pod_name(launcher)} names {host}, which is no pod of the job"
            workers.append(by_host[host])
        ssh_args = next((env[v] for v in SSH_ARGS_VARS if env.get(v)), "")
        options = _ssh_options(ssh_args)
        dialled = options.get("-p", str(DEFAULT_SSH_PORT))
        for worker in workers:
            ports = _declared_ports(worker)
            listening = ports or {DEFAULT_SSH_PORT}
            if not dialled.isdigit() or int(dialled) not in listening:
                return (
                    f"mpirun in {_pod_name(launcher)} connects to ssh port {dialled} "
                    f"but {_pod_name(worker)}'s sshd listens on {', '.join(map(str, sorted(listening)))}"
                    " (set -p in OMPI_MCA_plm_rsh_args)"
                )
        key_dir = _mounted_key_dir(launcher)
        if key_dir:
            for flag, file_name in (("-i", "id_rsa"), ("-F", "config")):
                want = f"{key_dir.rstrip('/')}/{file_name}"
                if options.get(flag) != want:
                    return (
                        f"mpirun in {_pod_name(launcher)} does not use {want}, which Volcano's ssh plugin "
                        f"mounted (set {flag} {want} in OMPI_MCA_plm_rsh_args)"
                    )
    return ""


def launch_problem(pods: list[dict[str, Any]], lookup: Lookup | None = None) -> str:
    return torch_problem(pods, lookup) or mpi_problem(pods, lookup)
