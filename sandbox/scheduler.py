"""The scheduler: places pending pods on simulated nodes and assigns them devices.

For each pending pod without a node, in priority then age order:

1. Filter every node, stopping at the first failing check as kube-scheduler's filter
   plugins do: unschedulable node, taints vs tolerations, nodeSelector and required
   node affinity, free resources (cpu, memory, pods, extended resources), DRA claims.
2. Among nodes that fit, bin-pack: pick the most allocated node after placement (as
   Volcano's binpack plugin does; extended resources weigh double), ties by name.
3. Bind: set ``spec.nodeName``, assign concrete devices (whole GPU, MIG instance or
   time-slicing replica; DRA devices through the claim's ``status.allocation``) and
   record a ``Scheduled`` event. The kubelet step then starts the pod.
4. A pod that fits nowhere gets ``PodScheduled=False/Unschedulable`` and one
   ``FailedScheduling`` event worded like kube-scheduler's, updated (count,
   lastTimestamp) at most once a simulated minute instead of piling up.

Pods with ``schedulerName: volcano`` are gang-scheduled per PodGroup (annotation
``scheduling.k8s.io/group-name``): all pending members are placed or none, and only
if the queue's ``spec.capability`` leaves room for the whole gang.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from sandbox import cel, quantity
from sandbox.controllers.base import PODS, Ctx
from sandbox.podutil import (
    GROUP_ANNOTATION,
    QUEUE_ANNOTATION,
    container_requests,
    holds_resources,
    node_matches,
    pod_requests,
    tolerates,
)
from sandbox.world import DRA_DRIVER, Device

CLAIMS = "resource.k8s.io/resourceclaims"
DEVICE_CLASSES = "resource.k8s.io/deviceclasses"
PODGROUPS = "scheduling.volcano.sh/podgroups"
QUEUES = "scheduling.volcano.sh/queues"
RETRY_SECONDS = 60.0
_AFFINITY = "node(s) didn't match Pod's node affinity/selector"


@dataclass
class NodeState:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    unschedulable: bool
    alloc: dict[str, Fraction]
    used: dict[str, Fraction] = field(default_factory=dict)
    pods: int = 0
    free: dict[str, list[Device]] = field(default_factory=dict)  # extended resource -> free devices
    free_dra: list[Device] = field(default_factory=list)
    dra_total: int = 0

    def copy(self) -> NodeState:
        return NodeState(
            self.name,
            self.labels,
            self.taints,
            self.unschedulable,
            self.alloc,
            dict(self.used),
            self.pods,
            {k: list(v) for k, v in self.free.items()},
            list(self.free_dra),
            self.dra_total,
        )


@dataclass
class Placement:
    node: NodeState
    devices: dict[str, list[Device]]  # resource -> devices taken
    claims: dict[str, list[tuple[str, Device]]]  # claim name -> (request, device)


def queue_of(pod: dict[str, Any], podgroups: dict[tuple[str, str], dict[str, Any]]) -> str | None:
    if pod.get("spec", {}).get("schedulerName") != "volcano":
        return None
    meta = pod["metadata"]
    group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
    if group and (meta.get("namespace", ""), group) in podgroups:
        return podgroups[(meta.get("namespace", ""), group)].get("spec", {}).get("queue") or "default"
    return (meta.get("annotations") or {}).get(QUEUE_ANNOTATION) or "default"


class Scheduler:
    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.assignments = ctx.memo("assignments")  # pod uid -> {"node", "devices", "containers"}
        self.backoff = ctx.memo("scheduling")  # pod uid -> {"message", "at"}
        self.gangs = ctx.memo("gangs")  # podgroup uid -> {"reason", "message"}
        self.podgroups = {(pg["metadata"]["namespace"], pg["metadata"]["name"]): pg for pg in ctx.items(PODGROUPS)}
        self.queue_allocated: dict[str, dict[str, Fraction]] = {}
        self.nodes = self._node_states()

    # state ------------------------------------------------------------------------------------

    def _node_states(self) -> dict[str, NodeState]:
        ctx = self.ctx
        states: dict[str, NodeState] = {}
        for node in sorted(ctx.items("/nodes"), key=lambda n: n["metadata"]["name"]):
            name = node["metadata"]["name"]
            alloc = {}
            for k, v in (node.get("status", {}).get("allocatable") or {}).items():
                try:
                    alloc[k] = quantity.parse(v)
                except quantity.QuantityError:
                    continue
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in node.get("status", {}).get("conditions") or []
            )
            states[name] = NodeState(
                name,
                node["metadata"].get("labels") or {},
                node.get("spec", {}).get("taints") or [],
                bool(node.get("spec", {}).get("unschedulable")) or not ready,
                alloc,
            )
        used_devices: set[str] = set()
        for pod in ctx.items(PODS):
            if not holds_resources(pod):
                continue
            st = states.get(pod["spec"]["nodeName"])
            if st is not None:
                for k, v in pod_requests(pod).items():
                    st.used[k] = st.used.get(k, Fraction(0)) + v
                st.pods += 1
            assignment = self.assignments.get(pod["metadata"]["uid"])
            if assignment:
                used_devices.update(assignment.get("devices", []))
            queue = queue_of(pod, self.podgroups)
            if queue:
                bucket = self.queue_allocated.setdefault(queue, {})
                for k, v in pod_requests(pod).items():
                    bucket[k] = bucket.get(k, Fraction(0)) + v
        for claim in ctx.items(CLAIMS):
            for result in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []:
                used_devices.add(self._dra_device_id(result.get("pool", ""), result.get("device", "")))
        world = ctx.world
        for (node, resource), devices in world.by_resource.items():
            if node in states:
                states[node].free[resource] = [d for d in devices if d.id not in used_devices]
        for node, devices in world.dra_devices.items():
            if node in states:
                states[node].free_dra = [d for d in devices if d.id not in used_devices]
                states[node].dra_total = len(devices)
        return states

    def _dra_device_id(self, node: str, dra_name: str) -> str:
        for d in self.ctx.world.dra_devices.get(node, []):
            if d.dra_name == dra_name:
                return d.id
        return f"{node}/{dra_name}"

    # main loop --------------------------------------------------------------------------------

    def run(self) -> None:
        pending = [
            p
            for p in self.ctx.items(PODS)
            if p.get("status", {}).get("phase") == "Pending"
            and not p["spec"].get("nodeName")
            and not p["metadata"].get("deletionTimestamp")
            and not p["spec"].get("schedulingGates")
        ]
        pending.sort(
            key=lambda p: (
                -int(p["spec"].get("priority") or 0),
                p["metadata"]["creationTimestamp"],
                p["metadata"].get("namespace", ""),
                p["metadata"]["name"],
            )
        )
        gangs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        order: list[tuple[str, Any]] = []
        for pod in pending:
            group = (pod["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION)
            if pod["spec"].get("schedulerName") == "volcano" and group:
                key = (pod["metadata"]["namespace"], group)
                if key not in gangs:
                    gangs[key] = []
                    order.append(("gang", key))
                gangs[key].append(pod)
            else:
                order.append(("pod", pod))
        for what, item in order:
            if what == "gang":
                self._schedule_gang(item, gangs[item])
            else:
                self._schedule_pod(item)

    def _schedule_pod(self, pod: dict[str, Any]) -> None:
        queue = queue_of(pod, self.podgroups)
        if queue is not None:
            problem = self._queue_problem(queue, pod_requests(pod))
            if problem:
                self._unschedulable(pod, problem)
                return
        placement, reasons = self._place(pod, self.nodes)
        if placement is None:
            self._unschedulable(pod, self._fit_error(pod, reasons))
            return
        self._bind(pod, placement, queue)

    def _schedule_gang(self, key: tuple[str, str], pods: list[dict[str, Any]]) -> None:
        pg = self.podgroups.get(key)
        if pg is None:
            for pod in pods:
                self._unschedulable(pod, f'podgroup "{key[1]}" not found')
            return
        min_member = int(pg.get("spec", {}).get("minMember") or 1)
        members = [
            p
            for p in self.ctx.items(PODS, key[0])
            if (p["metadata"].get("annotations") or {}).get(GROUP_ANNOTATION) == key[1]
        ]
        bound = sum(1 for p in members if holds_resources(p))
        pg_uid = pg["metadata"]["uid"]
        not_ready = (
            f"{len(pods)}/{len(pods)} tasks in gang unschedulable: pod group is not ready, "
            f"{len(pods)} Pending, {min_member} minAvailable; Pending: {len(pods)} Unschedulable"
        )
        if bound + len(pods) < min_member:
            self.gangs[pg_uid] = {
                "reason": "NotEnoughTasks",
                "message": f"{bound + len(pods)}/{min_member} tasks created: waiting for the rest of the gang",
            }
            return
        queue = pg.get("spec", {}).get("queue") or "default"
        total: dict[str, Fraction] = {}
        for pod in pods:
            for k, v in pod_requests(pod).items():
                total[k] = total.get(k, Fraction(0)) + v
        problem = self._queue_problem(queue, total)
        if problem:
            self.gangs[pg_uid] = {"reason": "NotEnoughResources", "message": f"{not_ready}; {problem}"}
            for pod in pods:
                self._unschedulable(pod, f"{not_ready}; {problem}")
            return
        trial = {name: st.copy() for name, st in self.nodes.items()}
        placements = []
        for pod in pods:
            placement, reasons = self._place(pod, trial)
            if placement is None:
                message = f"{not_ready}; {self._fit_error(pod, reasons)}"
                self.gangs[pg_uid] = {"reason": "NotEnoughResources", "message": message}
                for p in pods:
                    self._unschedulable(p, message)
                return
            self._take(placement, pod)
            placements.append((pod, placement))
        self.gangs.pop(pg_uid, None)
        for pod, placement in placements:
            self._bind(pod, Placement(self.nodes[placement.node.name], placement.devices, placement.claims), queue)

    def _queue_problem(self, queue: str, need: dict[str, Fraction]) -> str | None:
        q = self.ctx.get(QUEUES, "", queue)
        if q is None:
            return f'queue "{queue}" not found'
        if (q.get("status") or {}).get("state") in ("Closed", "Closing"):
            return f'queue "{queue}" is closed'
        allocated = self.queue_allocated.get(queue, {})
        short = []
        for name, raw in sorted(((q.get("spec") or {}).get("capability") or {}).items()):
            try:
                cap = quantity.parse(raw)
            except quantity.QuantityError:
                continue
            want = need.get(name, Fraction(0))
            have = allocated.get(name, Fraction(0))
            if want and have + want > cap:
                short.append(
                    f"{name}: requested {quantity.format_quantity(want, name)}, allocated "
                    f"{quantity.format_quantity(have, name)}, capability {raw}"
                )
        if short:
            return f'queue resource quota insufficient: queue "{queue}": ' + "; ".join(short)
        return None

    # filtering and scoring --------------------------------------------------------------------

    def _place(self, pod: dict[str, Any], nodes: dict[str, NodeState]) -> tuple[Placement | None, dict[str, list[str]]]:
        requests = pod_requests(pod)
        claims = self._pod_claims(pod)
        reasons: dict[str, list[str]] = {}
        best: tuple[float, str, Placement] | None = None
        for name, st in nodes.items():
            why, placement = self._check(pod, requests, claims, st)
            if why:
                reasons[name] = why
                continue
            assert placement is not None
            score = self._score(requests, st, sum(len(v) for v in placement.claims.values()))
            if best is None or score > best[0] + 1e-12:
                best = (score, name, placement)
        return (best[2] if best else None), reasons

    def _check(
        self, pod: dict[str, Any], requests: dict[str, Fraction], claims: list[tuple[str, Any]], st: NodeState
    ) -> tuple[list[str], Placement | None]:
        spec = pod["spec"]
        if st.unschedulable:
            return ["node(s) were unschedulable"], None
        for taint in st.taints:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(spec.get("tolerations"), taint):
                return [f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"], None
        if not node_matches(pod, st.name, st.labels):
            return [_AFFINITY], None
        why = []
        if st.pods + 1 > int(st.alloc.get("pods", 110)):
            why.append("Too many pods")
        for name, amount in sorted(requests.items()):
            if amount and st.used.get(name, Fraction(0)) + amount > st.alloc.get(name, Fraction(0)):
                why.append(f"Insufficient {name}")
        if why:
            return why, None
        devices: dict[str, list[Device]] = {}
        for name, amount in requests.items():
            if name in st.free:
                devices[name] = self._pick_devices(st.free[name], int(amount))
        planned, problem = self._plan_claims(claims, st)
        if problem:
            return [problem], None
        return [], Placement(st, devices, planned)

    @staticmethod
    def _pick_devices(free: list[Device], count: int) -> list[Device]:
        if count <= 0:
            return []
        if free and free[0].replica is not None:
            # time-slicing: spread over GPUs, taking replicas of the least shared GPU first
            by_gpu: Counter[str] = Counter()
            for d in free:
                by_gpu[d.gpu.uuid] += 1
            ordered = sorted(free, key=lambda d: (-by_gpu[d.gpu.uuid], d.gpu.index, d.replica))
            return ordered[:count]
        return free[:count]

    @staticmethod
    def _score(requests: dict[str, Fraction], st: NodeState, dra_count: int) -> float:
        total, weights = 0.0, 0.0
        for name, amount in requests.items():
            alloc = st.alloc.get(name)
            if not alloc:
                continue
            weight = 1.0 if name in ("cpu", "memory") else 2.0
            total += weight * float(min(Fraction(1), (st.used.get(name, Fraction(0)) + amount) / alloc))
            weights += weight
        if dra_count and st.dra_total:
            total += 2.0 * (st.dra_total - len(st.free_dra) + dra_count) / st.dra_total
            weights += 2.0
        return total / weights if weights else 0.0

    # DRA --------------------------------------------------------------------------------------

    def _pod_claims(self, pod: dict[str, Any]) -> list[tuple[str, Any]]:
        """(pod claim name, claim object or an error string) for each pod resource claim."""
        out = []
        ns = pod["metadata"]["namespace"]
        statuses = {
            s.get("name"): s.get("resourceClaimName")
            for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        }
        for rc in pod["spec"].get("resourceClaims") or []:
            claim_name = rc.get("resourceClaimName") or statuses.get(rc.get("name"))
            claim = self.ctx.get(CLAIMS, ns, claim_name) if claim_name else None
            if claim is None:
                out.append((rc.get("name"), f'resourceclaim "{claim_name or rc.get("name")}" not found'))
            else:
                out.append((rc.get("name"), claim))
        return out

    def _plan_claims(
        self, claims: list[tuple[str, Any]], st: NodeState
    ) -> tuple[dict[str, list[tuple[str, Device]]], str | None]:
        planned: dict[str, list[tuple[str, Device]]] = {}
        taken: set[str] = set()
        for _, claim in claims:
            if isinstance(claim, str):
                return {}, claim
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                nodes = {
                    v
                    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
                    for f in term.get("matchFields") or []
                    for v in f.get("values") or []
                }
                if nodes and st.name not in nodes:
                    return {}, "cannot allocate all claims"
                continue
            results: list[tuple[str, Device]] = []
            for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
                body = request.get("exactly") or request
                class_name = body.get("deviceClassName", "")
                device_class = self.ctx.get(DEVICE_CLASSES, "", class_name)
                if device_class is None:
                    return {}, f"device class {class_name} does not exist"
                expressions = [
                    s["cel"]["expression"]
                    for s in (device_class.get("spec") or {}).get("selectors") or []
                    if "cel" in s
                ] + cel.selectors_of(request)
                try:
                    terms = tuple(t for e in expressions for t in cel.compile_expression(e))
                except cel.CelError as exc:
                    return {}, str(exc)
                candidates = [
                    d for d in st.free_dra if d.id not in taken and cel.matches(terms, DRA_DRIVER, d.dra_attributes)
                ]
                if body.get("allocationMode") == "All":
                    count = len(candidates)
                    if not count:
                        return {}, "cannot allocate all claims"
                else:
                    count = int(body.get("count") or 1)
                if len(candidates) < count:
                    return {}, "cannot allocate all claims"
                for d in candidates[:count]:
                    taken.add(d.id)
                    results.append((request.get("name", ""), d))
            planned[claim["metadata"]["name"]] = results
        return planned, None

    # binding ------------------------------------------------------------------------------------

    def _take(self, placement: Placement, pod: dict[str, Any]) -> None:
        st = placement.node
        for k, v in pod_requests(pod).items():
            st.used[k] = st.used.get(k, Fraction(0)) + v
        st.pods += 1
        for resource, devices in placement.devices.items():
            ids = {d.id for d in devices}
            st.free[resource] = [d for d in st.free[resource] if d.id not in ids]
        claimed = {d.id for results in placement.claims.values() for _, d in results}
        st.free_dra = [d for d in st.free_dra if d.id not in claimed]

    def _bind(self, pod: dict[str, Any], placement: Placement, queue: str | None) -> None:
        ctx = self.ctx
        self._take(placement, pod)
        node = placement.node.name
        uid = pod["metadata"]["uid"]
        containers: dict[str, str] = {}
        device_ids: list[str] = []
        spec_containers = pod["spec"].get("containers") or []
        pools = {r: list(ds) for r, ds in placement.devices.items()}
        for c in spec_containers:
            for resource, amount in container_requests(c).items():
                for _ in range(int(amount) if resource in pools else 0):
                    if pools[resource]:
                        d = pools[resource].pop(0)
                        device_ids.append(d.id)
                        containers[d.id] = c.get("name", "")
        claim_containers = {}
        for c in spec_containers:
            for ref in (c.get("resources") or {}).get("claims") or []:
                claim_containers.setdefault(ref.get("name"), c.get("name", ""))
        pod_claim_by_name = {}
        for pod_claim, claim in self._pod_claims(pod):
            if not isinstance(claim, str):
                pod_claim_by_name[claim["metadata"]["name"]] = pod_claim
        for claim in [c for _, c in self._pod_claims(pod) if not isinstance(c, str)]:
            name = claim["metadata"]["name"]
            results = placement.claims.get(name)
            container = claim_containers.get(pod_claim_by_name.get(name)) or (
                spec_containers[0].get("name", "") if spec_containers else ""
            )
            status = dict(claim.get("status") or {})
            if results is not None:
                status["allocation"] = {
                    "devices": {
                        "results": [
                            {"request": req, "driver": DRA_DRIVER, "pool": node, "device": d.dra_name}
                            for req, d in results
                        ]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                        ]
                    },
                }
                for _, d in results:
                    device_ids.append(d.id)
                    containers[d.id] = container
            else:
                for result in status.get("allocation", {}).get("devices", {}).get("results") or []:
                    dev_id = self._dra_device_id(result.get("pool", ""), result.get("device", ""))
                    device_ids.append(dev_id)
                    containers.setdefault(dev_id, container)
            reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
            status["reservedFor"] = reserved + [{"resource": "pods", "name": pod["metadata"]["name"], "uid": uid}]
            ctx.set_status(CLAIMS, claim, status, "sandbox-dra-scheduler")
        self.assignments[uid] = {
            "node": node,
            "devices": device_ids,
            "containers": containers,
            "pod": f"{pod['metadata']['namespace']}/{pod['metadata']['name']}",
        }
        if queue:
            bucket = self.queue_allocated.setdefault(queue, {})
            for k, v in pod_requests(pod).items():
                bucket[k] = bucket.get(k, Fraction(0)) + v
        scheduler = pod["spec"].get("schedulerName") or "default-scheduler"
        bound = ctx.replace(PODS, {**pod, "spec": {**pod["spec"], "nodeName": node}}, scheduler)
        status = dict(bound.get("status") or {})
        status["conditions"] = _pod_condition(status.get("conditions"), "PodScheduled", "True", "", "", ctx.now_iso)
        ctx.set_status(PODS, bound, status, scheduler)
        self.backoff.pop(uid, None)
        ctx.event(
            bound,
            "Normal",
            "Scheduled",
            f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {node}",
            scheduler,
        )

    # failure ------------------------------------------------------------------------------------

    def _fit_error(self, pod: dict[str, Any], reasons: dict[str, list[str]]) -> str:
        n = len(self.nodes)
        histogram: Counter[str] = Counter(r for rs in reasons.values() for r in rs)
        parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
        if pod["spec"].get("schedulerName") == "volcano":
            # Real Volcano says "0/N nodes are unavailable: ..."; the portal reads kube-scheduler's
            # wording, which the brief asks for from both schedulers (minus the preemption part).
            return f"0/{n} nodes are available: " + ", ".join(parts) + "."
        victims = sum(
            1 for rs in reasons.values() if all(r.startswith("Insufficient") or r == "Too many pods" for r in rs)
        )
        preemption = []
        if victims:
            preemption.append(f"{victims} No preemption victims found for incoming pod")
        if n - victims:
            preemption.append(f"{n - victims} Preemption is not helpful for scheduling")
        return (
            f"0/{n} nodes are available: " + ", ".join(parts) + ". preemption: "
            f"0/{n} nodes are available: " + ", ".join(sorted(preemption)) + "."
        )

    def _unschedulable(self, pod: dict[str, Any], message: str) -> None:
        ctx = self.ctx
        uid = pod["metadata"]["uid"]
        last = self.backoff.get(uid)
        if last and last.get("message") == message and ctx.now - last.get("at", 0) < RETRY_SECONDS:
            return
        self.backoff[uid] = {"message": message, "at": ctx.now}
        status = dict(pod.get("status") or {})
        status["conditions"] = _pod_condition(
            status.get("conditions"), "PodScheduled", "False", "Unschedulable", message, ctx.now_iso
        )
        pod = ctx.set_status(PODS, pod, status, pod["spec"].get("schedulerName") or "default-scheduler")
        ctx.event(
            pod,
            "Warning",
            "FailedScheduling",
            message,
            pod["spec"].get("schedulerName") or "default-scheduler",
            aggregate=True,
        )


def _pod_condition(
    conditions: list[dict[str, Any]] | None, type_: str, status: str, reason: str, message: str, now_iso: str
) -> list[dict[str, Any]]:
    out = [c for c in conditions or [] if c.get("type") != type_]
    old = next((c for c in conditions or [] if c.get("type") == type_), None)
    new = {
        "type": type_,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == status else now_iso,
    }
    if reason:
        new["reason"] = reason
    if message:
        new["message"] = message
    return out + [new]


def pod_condition(
    conditions: list[dict[str, Any]] | None, type_: str, status: str, now_iso: str, reason: str = "", message: str = ""
) -> list[dict[str, Any]]:
    return _pod_condition(conditions, type_, status, reason, message, now_iso)
