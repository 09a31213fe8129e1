"""Plausible container logs, generated on demand from the pod and the simulated clock.

Nothing is stored: line ``i`` of a container is a deterministic function of the seed,
the pod and ``i``, and a container that has run for longer has more lines (one per
15 simulated seconds). Training pods print loss curves, notebooks print Jupyter
server lines, predictors print request lines.
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime
from typing import Any

from sandbox import errors
from sandbox.clock import parse_iso
from sandbox.podutil import workload_of

LINE_SECONDS = 15
MAX_LINES = 5000


def _unit(*parts: object) -> float:
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _stamp(at: float, precise: bool = False) -> str:
    dt = datetime.fromtimestamp(at, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z" if precise else dt.strftime("%Y-%m-%d %H:%M:%S")


def _line(kind: str, pod: dict[str, Any], container: str, i: int, at: float, seed: int) -> str:
    meta = pod["metadata"]
    name, ns = meta["name"], meta.get("namespace", "")
    u = _unit(seed, meta.get("uid"), container, i)
    if kind in ("trainjob", "vcjob"):
        if i == 0:
            return f"[rank0] initialising process group (backend=nccl), world size from PET_NNODES on {name}"
        step = i * 50
        loss = 2.6 * math.exp(-i / 120.0) + 0.15 + 0.05 * u
        return (
            f"[rank0] epoch {1 + i // 40} step {step} loss {loss:.4f} lr {3e-4 * math.exp(-i / 400):.2e} "
            f"throughput {850 + 120 * u:.1f} samples/s"
        )
    if kind == "notebook":
        if i == 0:
            return (
                f"[I {_stamp(at)}.000 ServerApp] Jupyter Server 2.14.2 is running at: "
                f"http://{name}:8888/notebook/{ns}/{name.rsplit('-', 1)[0]}/lab"
            )
        if u < 0.3:
            return f"[I {_stamp(at)}.{int(u * 1000):03d} ServerApp] Saving file at /home/jovyan/analysis.ipynb"
        return f"[I {_stamp(at)}.{int(u * 1000):03d} KernelManager] Kernel busy: executing cell [{i}]"
    if kind == "inference":
        if i == 0:
            return "INFO:     Uvicorn running on http://0.0.0.0:8080 (Press CTRL+C to quit)"
        ms = 8 + 40 * u
        return (
            f'INFO:     10.244.{int(u * 250)}.{i % 250}:{40000 + i % 20000} - "POST /v1/models/model:predict '
            f'HTTP/1.1" 200 OK ({ms:.1f} ms)'
        )
    return f"sandbox: container {container} is running (tick {i})"


def pod_log(
    pod: dict[str, Any], container: str | None, now: float, seed: int, tail: int | None, timestamps: bool
) -> str:
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    names = [c.get("name") for c in spec.get("containers") or []]
    init_names = [c.get("name") for c in spec.get("initContainers") or []]
    if container is None:
        if len(names) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {meta['name']}, choose one of: [{' '.join(names)}]"
            )
        container = names[0]
    if container not in names and container not in init_names:
        raise errors.bad_request(f"container {container} is not valid for pod {meta['name']}")
    state: dict[str, Any] = {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            state = cs.get("state") or {}
    if not spec.get("nodeName") or not state or "waiting" in state:
        raise errors.bad_request(
            f'container "{container}" in pod "{meta["name"]}" is waiting to start: ContainerCreating'
        )
    running = state.get("running") or state.get("terminated") or {}
    start = parse_iso(running.get("startedAt")) or now
    end = parse_iso(state.get("terminated", {}).get("finishedAt")) or now
    count = min(int(max(0.0, end - start) // LINE_SECONDS) + 1, MAX_LINES)
    kind = workload_of(pod) if container not in init_names else ""
    first = max(0, count - tail) if tail is not None and tail >= 0 else 0
    lines = []
    for i in range(first, count):
        at = start + i * LINE_SECONDS
        text = _line(kind, pod, container, i, at, seed)
        lines.append(f"{_stamp(at, precise=True)} {text}" if timestamps else text)
    terminated = state.get("terminated")
    if terminated:
        code = terminated.get("exitCode", 0)
        lines.append("training finished, exiting" if code == 0 else f"error: process exited with code {code}")
    if tail is not None and tail >= 0:
        lines = lines[-tail:] if tail else []
    return "".join(line + "\n" for line in lines)
